//! gRPC client: unary calls in gRPC's wire format (length-prefixed protobuf, grpc-status
//! trailers) on an HTTP/2 connection we open ourselves (the `http2-client` crate's [`H2Conn`], shared with the HTTP/2 stack), so a
//! "new connection" is exactly one new socket and handshake (no channel pool, no reconnects).
//! tonic's client machinery cost twice h2load's CPU per call here (scripts/compare-anchors),
//! which would make the load generator measure itself; the server is tonic's.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::validate_item;
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile, Reply,
    WireBytes,
};
use http2_client::{H2Conn, RequestHead};

use crate::pb::GetItemRequest;
use crate::wire::{check_status, frame, unframe};
use grpc_wire::decode_item_view;

pub struct GrpcClient {
    connector: TcpConnector,
    payload: PayloadProfile,
    https: bool,
    authority: String,
    /// Each answer's one message, bounded (`grpc_max_receive_message_bytes`).
    answer_limit: BodyLimit,
}

impl GrpcClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(GrpcClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            https: settings.tls.is_some(),
            authority: format!("{}:{}", settings.server_name, settings.target.port()),
            answer_limit: BodyLimit::GrpcUnary {
                max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
            },
        })
    }
}

/// A unary call's request head: the method's path and gRPC's two required fields.
fn call(answer_limit: BodyLimit) -> RequestHead<'static> {
    RequestHead {
        method: "POST",
        path: crate::GET_ITEM_PATH,
        fields: &crate::wire::GRPC_FIELDS,
        keep: crate::wire::KEEP,
        answer_limit,
    }
}

#[async_trait]
impl Client for GrpcClient {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (conn, counters, timing) =
            crate::wire::open(&self.connector, &self.authority, self.https).await?;
        Ok(Connected {
            conn: Arc::new(GrpcConnection {
                conn,
                counters,
                payload: self.payload,
                head: call(self.answer_limit),
            }),
            timing,
        })
    }
}

struct GrpcConnection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    head: RequestHead<'static>,
}

#[async_trait]
impl Connection for GrpcConnection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let answer = self
            .conn
            .exchange(
                &self.head,
                Some(frame(&GetItemRequest { id })),
                Instant::now(),
            )
            .await?;
        check_status(&answer)?;
        let message = unframe(&answer.body)?;
        let view = decode_item_view(&message).map_err(|e| {
            Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
        })?;
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            reopened: None,
            ttfb: answer.ttfb,
            total: answer.total,
            body_bytes: message.len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
