//! gRPC client: unary and streaming calls in gRPC's wire format (length-prefixed protobuf, grpc-status
//! trailers) on an HTTP/2 connection we open ourselves (the `h2-transport` crate's [`H2Conn`], shared with the HTTP/2 stack), so a
//! "new connection" is exactly one new socket and handshake (no channel pool, no reconnects).
//! tonic's client machinery cost twice h2load's CPU per call here (scripts/compare-anchors),
//! which would make the load generator measure itself; the server is tonic's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::{Client, ClientSettings, Connected, Connection, Failure, Reply, WireBytes};
use bytes::Bytes;
use grpc_wire::bulk::BulkCalls;
use grpc_wire::ItemCalls;
use h2_transport::{H2Conn, RequestHead, StreamEvent};

use crate::wire::{check_status, read_stream, unframe};

pub struct GrpcClient {
    connector: TcpConnector,
    https: bool,
    authority: String,
    /// The method each request calls, its body and how its answer is checked.
    calls: ItemCalls,
    /// The bulk workload's calls, instead of the item's.
    bulk: Option<BulkCalls>,
}

impl GrpcClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(GrpcClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            https: settings.tls.is_some(),
            authority: format!("{}:{}", settings.server_name, settings.target.port()),
            calls: ItemCalls::new(settings),
            bulk: BulkCalls::new(settings),
        })
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
                // The method's path and gRPC's two required fields; the answer held to one
                // message (unary answers) or to each message's size (streams).
                head: RequestHead {
                    method: "POST",
                    path: self.calls.path(),
                    fields: &crate::wire::GRPC_FIELDS,
                    keep: crate::wire::KEEP,
                    answer_limit: self.calls.answer_limit(),
                },
                calls: self.calls.clone(),
                bulk: self.bulk,
            }),
            timing,
        })
    }
}

struct GrpcConnection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    head: RequestHead<'static>,
    calls: ItemCalls,
    bulk: Option<BulkCalls>,
}

impl GrpcConnection {
    /// One bulk object: Download's chunks counted as they arrive (the stream's window reopened
    /// as each is counted), or Upload's chunks sent as the windows take them and the count
    /// that comes back checked.
    async fn bulk(&self, bulk: BulkCalls) -> Result<Reply, Failure> {
        let started = Instant::now();
        let head = RequestHead {
            method: "POST",
            path: bulk.path(),
            fields: &crate::wire::GRPC_FIELDS,
            keep: crate::wire::KEEP,
            answer_limit: bulk.answer_limit(),
        };
        let (body, generated) = bulk.body();
        let mut call = self
            .conn
            .open_streamed_with(&head, body, generated, started)
            .await?;
        let mut counter = bulk.counter();
        // An upload's answer: one small message, kept to be read.
        let mut answer = Vec::new();
        loop {
            match call.next().await? {
                StreamEvent::Data { data, status, .. } => {
                    if status != 200 {
                        grpc_wire::check_status(status, None, |_| None)?;
                    }
                    if bulk.upload() {
                        answer.extend_from_slice(&data);
                    } else {
                        counter.feed(&data)?;
                    }
                }
                StreamEvent::End(end) => {
                    check_status(&end)?;
                    let message = if bulk.upload() {
                        Some(unframe(&Bytes::from(answer))?)
                    } else {
                        None
                    };
                    return bulk.reply(&counter, message.as_deref(), end.ttfb, end.total);
                }
            }
        }
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
        let body = self.calls.body(id);
        let answer = read_stream(&self.conn, &self.head, body, started, &mut |data, at| {
            items.data(data, at, on_message)
        })
        .await?;
        check_status(&answer)?;
        items.reply(answer.total)
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
        if let Some(bulk) = self.bulk {
            return self.bulk(bulk).await;
        }
        let id = call.id;
        if self.calls.streamed_answer() {
            return self.streamed(id, on_message).await;
        }
        let answer = self
            .conn
            .exchange(&self.head, Some(self.calls.body(id)), Instant::now())
            .await?;
        check_status(&answer)?;
        let message = unframe(&answer.body)?;
        self.calls
            .unary_reply(id, &message, answer.ttfb, answer.total)
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
