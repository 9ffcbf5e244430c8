//! gRPC client: unary calls in gRPC's wire format (length-prefixed protobuf, grpc-status
//! trailers) on an HTTP/2 connection we open ourselves (the `http2-client` crate's [`H2Conn`], shared with the HTTP/2 stack), so a
//! "new connection" is exactly one new socket and handshake (no channel pool, no reconnects).
//! tonic's client machinery cost twice h2load's CPU per call here (scripts/compare-anchors),
//! which would make the load generator measure itself; the server is tonic's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::{padding, validate_item};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, GrpcCall, PayloadProfile,
    Reply, WireBytes,
};
use grpc_wire::ItemStream;
use http2_client::{H2Conn, RequestHead, StreamEvent};

use crate::pb::GetItemRequest;
use crate::wire::{check_status, frame, unframe};
use grpc_wire::decode_item_view;

pub struct GrpcClient {
    connector: TcpConnector,
    payload: PayloadProfile,
    https: bool,
    authority: String,
    /// The largest message received (`grpc_max_receive_message_bytes`).
    max_message_bytes: u64,
    /// Which method each request calls, and the messages a streaming call streams.
    grpc_call: GrpcCall,
    stream_messages: u32,
    /// What an upload's items carry (the payload profile's padding).
    description: Arc<str>,
}

impl GrpcClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(GrpcClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            https: settings.tls.is_some(),
            authority: format!("{}:{}", settings.server_name, settings.target.port()),
            max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
            grpc_call: settings.tuning.grpc_call,
            stream_messages: settings.tuning.stream_messages.max(1),
            description: padding(settings.payload).into(),
        })
    }
}

/// A call's request head: the method's path and gRPC's two required fields; the answer held
/// to one message (unary answers) or to each message's size (streaming answers).
fn call(grpc_call: GrpcCall, max_message_bytes: u64) -> RequestHead<'static> {
    let streamed_answer = matches!(grpc_call, GrpcCall::ServerStream | GrpcCall::Bidi);
    RequestHead {
        method: "POST",
        path: grpc_wire::item_call_path(grpc_call),
        fields: &crate::wire::GRPC_FIELDS,
        keep: crate::wire::KEEP,
        answer_limit: if streamed_answer {
            BodyLimit::GrpcStream { max_message_bytes }
        } else {
            BodyLimit::GrpcUnary { max_message_bytes }
        },
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
                head: call(self.grpc_call, self.max_message_bytes),
                grpc_call: self.grpc_call,
                stream_messages: self.stream_messages,
                max_message_bytes: self.max_message_bytes,
                description: self.description.clone(),
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
    grpc_call: GrpcCall,
    stream_messages: u32,
    max_message_bytes: u64,
    description: Arc<str>,
}

impl GrpcConnection {
    /// A server-streaming or bidi call: the answer's items read and checked as they arrive,
    /// each gap between two told to `on_message`.
    async fn streamed(
        &self,
        id: u64,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let started = Instant::now();
        let n = self.stream_messages;
        let body = grpc_wire::item_call_body(self.grpc_call, id, n, &self.description);
        let mut items = ItemStream::new(id, n, self.payload, self.max_message_bytes, started);
        let mut call = self
            .conn
            .open_streamed(&self.head, Some(body), started)
            .await?;
        let answer = loop {
            match call.next().await? {
                StreamEvent::Data { data, at, status } => {
                    if status != 200 {
                        // Not a gRPC answer: its status says why, not its body.
                        grpc_wire::check_status(status, None, |_| None)?;
                    }
                    items.data(&data, at, on_message)?;
                }
                StreamEvent::End(answer) => break answer,
            }
        };
        check_status(&answer)?;
        let first_message = items.finish()?;
        Ok(Reply {
            messages: items.times.messages,
            reopened: None,
            ttfb: first_message,
            total: answer.total,
            body_bytes: items.times.body_bytes,
        })
    }

    /// A client-streaming call: `stream_messages` items uploaded, the count checked.
    async fn upload(&self, id: u64) -> Result<Reply, Failure> {
        let n = self.stream_messages;
        let body = grpc_wire::item_call_body(self.grpc_call, id, n, &self.description);
        let answer = self
            .conn
            .exchange(&self.head, Some(body), Instant::now())
            .await?;
        check_status(&answer)?;
        let message = unframe(&answer.body)?;
        grpc_wire::check_put_items_reply(&message, id, n)?;
        Ok(Reply {
            messages: n,
            reopened: None,
            ttfb: answer.ttfb,
            total: answer.total,
            body_bytes: message.len() as u64,
        })
    }
}

#[async_trait]
impl Connection for GrpcConnection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        self.request_observed(call, &mut |_| {}).await
    }

    async fn request_observed(
        &self,
        call: bench_core::Call,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        match self.grpc_call {
            GrpcCall::Unary => {}
            GrpcCall::ServerStream | GrpcCall::Bidi => {
                return self.streamed(call.id, on_message).await
            }
            GrpcCall::ClientStream => return self.upload(call.id).await,
        }
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
            messages: 0,
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
