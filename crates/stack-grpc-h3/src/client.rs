//! gRPC client over HTTP/3: unary calls in gRPC's wire format (`grpc-wire`) on the suite's
//! HTTP/3 transport (`h3-transport`: a socket and quinn endpoint per connection, full,
//! resumed or 0-RTT handshakes as the settings ask), read and validated as the `grpc` stack's
//! lean client reads them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};
use bench_core::workload::{padding, validate_item};
use bench_core::{
    Call, Client, ClientSettings, Connected, Connection, Failure, FailureClass, GrpcCall,
    PayloadProfile, Reply, WireBytes,
};
use grpc_wire::{check_status, decode_item_view, unframe, ItemStream, GRPC_FIELDS};
use h3_transport::{Answer, H3Transport};

pub struct GrpcH3Client {
    transport: H3Transport,
    payload: PayloadProfile,
    /// The largest message received (`grpc_max_receive_message_bytes`).
    max_message_bytes: u64,
    /// Which method each request calls, and the messages a streaming call streams.
    grpc_call: GrpcCall,
    stream_messages: u32,
    /// What an upload's items carry (the payload profile's padding).
    description: Arc<str>,
    /// `https://{server name}:{port}/bench.v1.ItemService/{method}`.
    uri: http::Uri,
}

impl GrpcH3Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let uri = format!(
            "https://{}:{}{}",
            settings.server_name,
            settings.target.port(),
            grpc_wire::item_call_path(settings.tuning.grpc_call)
        )
        .parse()?;
        Ok(GrpcH3Client {
            transport: H3Transport::new(settings, crate::ALPN)?,
            payload: settings.payload,
            max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
            grpc_call: settings.tuning.grpc_call,
            stream_messages: settings.tuning.stream_messages.max(1),
            description: padding(settings.payload).into(),
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
                max_message_bytes: self.max_message_bytes,
                grpc_call: self.grpc_call,
                stream_messages: self.stream_messages,
                description: self.description.clone(),
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
    max_message_bytes: u64,
    grpc_call: GrpcCall,
    stream_messages: u32,
    description: Arc<str>,
}

/// A unary call's request head: POST to the method's path with gRPC's two required fields.
fn call_head(uri: &http::Uri) -> http::Request<()> {
    let mut builder = http::Request::post(uri.clone());
    for (name, value) in GRPC_FIELDS {
        builder = builder.header(name, value);
    }
    builder.body(()).expect("valid request")
}

/// A streamed answer's body is read only under HTTP 200: any other status fails as that
/// status (a proxy's error page is not a broken gRPC message).
pub(crate) fn not_grpc(status: u16) -> Result<(), Failure> {
    if status == 200 {
        return Ok(());
    }
    check_status(status, None, |_| None)
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

impl GrpcH3Connection {
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
        let limit = BodyLimit::GrpcStream {
            max_message_bytes: self.max_message_bytes,
        };
        let answer = self
            .conn
            .exchange_streamed(
                (call_head(&self.uri), Some(body)),
                started,
                limit,
                &mut |chunk, at, status| {
                    not_grpc(status)?;
                    items.data(chunk, at, on_message)
                },
            )
            .await;
        let total = started.elapsed();
        let answer = answer?;
        answer_status(&answer)?;
        let first_message = items.finish()?;
        Ok(Reply {
            messages: items.times.messages,
            reopened: None,
            ttfb: first_message,
            total,
            body_bytes: items.times.body_bytes,
        })
    }
}

#[async_trait]
impl Connection for GrpcH3Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        self.request_observed(call, &mut |_| {}).await
    }

    async fn request_observed(
        &self,
        call: Call,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let id = call.id;
        if matches!(self.grpc_call, GrpcCall::ServerStream | GrpcCall::Bidi) {
            return self.streamed(id, on_message).await;
        }
        let n = self.stream_messages;
        let body = grpc_wire::item_call_body(self.grpc_call, id, n, &self.description);
        let started = Instant::now();
        let answer = self
            .conn
            .exchange_limited(
                (call_head(&self.uri), Some(body)),
                started,
                BodyLimit::GrpcUnary {
                    max_message_bytes: self.max_message_bytes,
                },
            )
            .await?;
        let total = started.elapsed();
        answer_status(&answer)?;
        let message = unframe(&answer.body)?;
        if self.grpc_call == GrpcCall::ClientStream {
            grpc_wire::check_put_items_reply(&message, id, n)?;
            return Ok(Reply {
                messages: n,
                reopened: None,
                ttfb: answer.ttfb,
                total,
                body_bytes: message.len() as u64,
            });
        }
        let view = decode_item_view(&message).map_err(|e| {
            Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
        })?;
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            messages: 0,
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
