//! Calls to a user's own gRPC service (`Calls::Grpc`) over HTTP/2: the methods prepared by
//! `grpc-targets` (one, or a mix's, each request making the call its `seq` draws) (request encoded from the JSON template, answer checked for the expected
//! fields), sent as a unary call on our HTTP/2 client like the item client's. Everything that
//! can be wrong with the target is found before measuring.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use async_trait::async_trait;
use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::user_service::GrpcCalls;
use bench_core::{Call, Client, ClientSettings, Connected, Connection, Failure, Reply, WireBytes};
use grpc_targets::Methods;
use h2_transport::{H2Conn, RequestHead};
use prost_reflect::DescriptorPool;

use crate::wire::{self, check_status, read_stream, unframe, GRPC_FIELDS, KEEP};

/// A client of a target's methods; its connections share the prepared methods.
pub struct DynamicClient {
    connector: TcpConnector,
    methods: Arc<Methods>,
    /// The largest message received (`grpc_max_receive_message_bytes`).
    max_message_bytes: u64,
}

impl DynamicClient {
    /// Resolves the descriptors (`.proto` files or the server's reflection) and prepares the
    /// method; any problem with the target is an error naming the setting at fault.
    pub fn new(settings: &ClientSettings, calls: Arc<GrpcCalls>) -> anyhow::Result<Self> {
        check_scheme(settings, &calls)?;
        let pool = crate::descriptors::resolve(&calls, settings)?;
        Self::with_pool(settings, calls, &pool)
    }

    /// As [`DynamicClient::new`], with descriptors already at hand.
    pub fn with_pool(
        settings: &ClientSettings,
        calls: Arc<GrpcCalls>,
        pool: &DescriptorPool,
    ) -> anyhow::Result<Self> {
        check_scheme(settings, &calls)?;
        Ok(DynamicClient {
            connector: TcpConnector::new(settings, crate::ALPN)
                .map_err(|e| anyhow!("targets.grpc: {e:#}"))?,
            methods: Arc::new(Methods::prepare(calls, pool)?),
            max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
        })
    }
}

/// `https://` needs the client's TLS settings and `http://` their absence: the runner derives
/// both from the address, so a mismatch is a bug, not a measurement.
fn check_scheme(settings: &ClientSettings, calls: &GrpcCalls) -> anyhow::Result<()> {
    match (calls.endpoint.https, settings.tls.is_some()) {
        (true, false) => {
            bail!("targets.grpc.address is https:// but the client has no TLS settings")
        }
        (false, true) => {
            bail!("targets.grpc.address is http:// (h2c) but the client was given TLS settings")
        }
        _ => Ok(()),
    }
}

#[async_trait]
impl Client for DynamicClient {
    fn notes(&self) -> Vec<String> {
        self.methods.notes()
    }

    async fn connect(&self) -> Result<Connected, Failure> {
        let endpoint = &self.methods.calls().endpoint;
        let (conn, counters, timing) =
            wire::open(&self.connector, &endpoint.authority, endpoint.https).await?;
        Ok(Connected {
            conn: Arc::new(DynamicConnection {
                conn,
                counters,
                methods: self.methods.clone(),
                max_message_bytes: self.max_message_bytes,
            }),
            timing,
        })
    }
}

struct DynamicConnection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    methods: Arc<Methods>,
    max_message_bytes: u64,
}

#[async_trait]
impl Connection for DynamicConnection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        self.request_observed(call, &mut |_| {}).await
    }

    async fn request_observed(
        &self,
        call: Call,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let method = self.methods.for_call(&call);
        let mut scratch = method.take_scratch();
        let body = match method.encode(&call, &mut scratch) {
            Ok(body) => body,
            Err(f) => {
                method.put_scratch(scratch);
                return Err(f);
            }
        };
        method.spec().render_metadata(&call, &mut scratch.metadata);
        let max_message_bytes = self.max_message_bytes;
        let started = Instant::now();
        let mut stream = method
            .server_streaming()
            .then(|| method.answer_stream(max_message_bytes, started));
        let answer = {
            // Borrowed from the scratch buffers, so they live for this exchange only.
            let mut with_metadata = Vec::new();
            if !scratch.metadata.is_empty() {
                with_metadata.reserve(GRPC_FIELDS.len() + scratch.metadata.len());
                with_metadata.extend_from_slice(&GRPC_FIELDS);
                with_metadata.extend(
                    method
                        .spec()
                        .metadata_keys()
                        .zip(scratch.metadata.iter().map(String::as_str)),
                );
            }
            let head = RequestHead {
                method: "POST",
                path: &method.spec().path,
                fields: if with_metadata.is_empty() {
                    &GRPC_FIELDS
                } else {
                    &with_metadata
                },
                keep: KEEP,
                answer_limit: match stream {
                    Some(_) => BodyLimit::GrpcStream { max_message_bytes },
                    None => BodyLimit::GrpcUnary { max_message_bytes },
                },
            };
            match stream.as_mut() {
                None => Some(self.conn.exchange(&head, Some(body), started).await),
                Some(stream) => {
                    let mut on_data = |data: &[u8], at| stream.data(data, at, on_message);
                    let read = read_stream(&self.conn, &head, body, started, &mut on_data);
                    method.read_for_duration(started, read).await
                }
            }
        };
        method.put_scratch(scratch);
        let Some(answer) = answer else {
            // The call's duration_ms is over: its stream was cancelled, its messages count.
            let mut stream = stream.expect("only a streamed answer has a duration");
            return stream.cut(started.elapsed());
        };
        let answer = answer?;
        check_status(&answer)?;
        if let Some(mut stream) = stream {
            return stream.reply(answer.ttfb, answer.total);
        }
        let message = unframe(&answer.body)?;
        let body_bytes = message.len() as u64;
        method.check(message)?;
        Ok(Reply {
            messages: method.request_messages(),
            reopened: None,
            streamed: method.client_streaming(),
            ttfb: answer.ttfb,
            total: answer.total,
            body_bytes,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
