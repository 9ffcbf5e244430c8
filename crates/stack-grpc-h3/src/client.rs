//! gRPC client over HTTP/3: unary and streaming calls in gRPC's wire format (`grpc-wire`) on the suite's
//! HTTP/3 transport (`h3-transport`: a socket and quinn endpoint per connection, full,
//! resumed or 0-RTT handshakes as the settings ask), read and validated as the `grpc` stack's
//! lean client reads them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::{Call, Client, ClientSettings, Connected, Connection, Failure, Reply, WireBytes};
use grpc_wire::bulk::BulkCalls;
use grpc_wire::{check_status, unframe, ItemCalls, GRPC_FIELDS};
use h3_transport::{Answer, H3Transport};

pub struct GrpcH3Client {
    transport: H3Transport,
    /// The method each request calls, its body and how its answer is checked.
    calls: ItemCalls,
    /// `https://{server name}:{port}/bench.v1.ItemService/{method}`.
    uri: http::Uri,
    /// The bulk workload's calls, instead of the item's, and their URI.
    bulk: Option<(BulkCalls, http::Uri)>,
}

impl GrpcH3Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let calls = ItemCalls::new(settings);
        let uri = format!(
            "https://{}:{}{}",
            settings.server_name,
            settings.target.port(),
            calls.path()
        )
        .parse()?;
        let bulk = match BulkCalls::new(settings) {
            Some(b) => Some((
                b,
                format!(
                    "https://{}:{}{}",
                    settings.server_name,
                    settings.target.port(),
                    b.path()
                )
                .parse()?,
            )),
            None => None,
        };
        Ok(GrpcH3Client {
            transport: H3Transport::new(settings, crate::ALPN)?,
            calls,
            uri,
            bulk,
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
                uri: self.uri.clone(),
                calls: self.calls.clone(),
                bulk: self.bulk.clone(),
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
    uri: http::Uri,
    calls: ItemCalls,
    bulk: Option<(BulkCalls, http::Uri)>,
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
    /// One bulk object: Download's chunks counted as QUIC hands them over, or Upload's chunks
    /// sent as flow control takes them and the count that comes back checked.
    async fn bulk(&self, bulk: BulkCalls, uri: &http::Uri) -> Result<Reply, Failure> {
        let started = Instant::now();
        let (body, generated) = bulk.body();
        let mut counter = bulk.counter();
        let mut answer = Vec::new();
        let upload = bulk.upload();
        let end = self
            .conn
            .exchange_generated(
                (call_head(uri), body),
                generated,
                started,
                bulk.answer_limit(),
                &mut |chunk, _, status| {
                    not_grpc(status)?;
                    if upload {
                        answer.extend_from_slice(chunk);
                        Ok(())
                    } else {
                        counter.feed(chunk)
                    }
                },
            )
            .await;
        let total = started.elapsed();
        let end = end?;
        answer_status(&end)?;
        let message = if upload {
            Some(unframe(&bytes::Bytes::from(answer))?)
        } else {
            None
        };
        bulk.reply(&counter, message.as_deref(), end.ttfb, total)
    }

    /// A server-streaming or bidi call: the answer's items read and checked as they arrive,
    /// each gap between two told to `on_message`.
    async fn streamed(
        &self,
        id: u64,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let started = Instant::now();
        let mut items = self.calls.stream(id, started);
        let answer = self
            .conn
            .exchange_streamed(
                (call_head(&self.uri), Some(self.calls.body(id))),
                started,
                self.calls.answer_limit(),
                &mut |chunk, at, status| {
                    not_grpc(status)?;
                    items.data(chunk, at, on_message)
                },
            )
            .await;
        let total = started.elapsed();
        answer_status(&answer?)?;
        items.reply(total)
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
        if let Some((bulk, uri)) = &self.bulk {
            return self.bulk(*bulk, uri).await;
        }
        let id = call.id;
        if self.calls.streamed_answer() {
            return self.streamed(id, on_message).await;
        }
        let started = Instant::now();
        let answer = self
            .conn
            .exchange_limited(
                (call_head(&self.uri), Some(self.calls.body(id))),
                started,
                self.calls.answer_limit(),
            )
            .await?;
        let total = started.elapsed();
        answer_status(&answer)?;
        let message = unframe(&answer.body)?;
        self.calls.unary_reply(id, &message, answer.ttfb, total)
    }

    fn wire_bytes(&self) -> WireBytes {
        self.conn.wire_bytes()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
