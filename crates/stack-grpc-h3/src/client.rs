//! gRPC client over HTTP/3: unary calls in gRPC's wire format (`grpc-wire`) on the suite's
//! HTTP/3 transport (`h3-transport`: a socket and quinn endpoint per connection, full,
//! resumed or 0-RTT handshakes as the settings ask), read and validated as the `grpc` stack's
//! lean client reads them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::workload::validate_item;
use bench_core::{
    Call, Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile,
    Reply, WireBytes,
};
use grpc_wire::pb::GetItemRequest;
use grpc_wire::{check_status, decode_item_view, frame, unframe, GRPC_FIELDS};
use h3_transport::{Answer, H3Transport};

pub struct GrpcH3Client {
    transport: H3Transport,
    payload: PayloadProfile,
    /// `https://{server name}:{port}/bench.v1.ItemService/GetItem`.
    uri: http::Uri,
}

impl GrpcH3Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let uri = format!(
            "https://{}:{}{}",
            settings.server_name,
            settings.target.port(),
            grpc_wire::GET_ITEM_PATH
        )
        .parse()?;
        Ok(GrpcH3Client {
            transport: H3Transport::new(settings, crate::ALPN)?,
            payload: settings.payload,
            uri,
        })
    }
}

#[async_trait]
impl Client for GrpcH3Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (conn, timing) = self.transport.open().await?;
        Ok(Connected {
            conn: Arc::new(GrpcH3Connection {
                conn,
                payload: self.payload,
                uri: self.uri.clone(),
            }),
            timing,
        })
    }

    async fn settle(&self, bound: Duration) {
        self.transport.settle(bound).await;
    }
}

struct GrpcH3Connection {
    conn: h3_transport::H3Connection,
    payload: PayloadProfile,
    uri: http::Uri,
}

/// A unary call's request head: POST to the method's path with gRPC's two required fields.
fn call_head(uri: &http::Uri) -> http::Request<()> {
    let mut builder = http::Request::post(uri.clone());
    for (name, value) in GRPC_FIELDS {
        builder = builder.header(name, value);
    }
    builder.body(()).expect("valid request")
}

/// The answer's status, from its trailers or, in a trailers-only answer, its head.
pub(crate) fn answer_status(answer: &Answer) -> Result<(), Failure> {
    let field = |name: &str| {
        answer
            .trailers
            .as_ref()
            .and_then(|t| t.get(name))
            .or_else(|| answer.headers.get(name))
            .map(|v| v.as_bytes())
    };
    check_status(
        answer.status,
        answer.headers.get("content-type").map(|v| v.as_bytes()),
        field,
    )
}

#[async_trait]
impl Connection for GrpcH3Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        let id = call.id;
        let started = Instant::now();
        let answer = self
            .conn
            .exchange(
                (call_head(&self.uri), Some(frame(&GetItemRequest { id }))),
                started,
            )
            .await?;
        let total = started.elapsed();
        answer_status(&answer)?;
        let message = unframe(&answer.body)?;
        let view = decode_item_view(&message).map_err(|e| {
            Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
        })?;
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            reopened: None,
            ttfb: answer.ttfb,
            total,
            body_bytes: message.len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.conn.wire_bytes()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
