//! Calls to a user's own gRPC service (`Calls::Grpc`) over HTTP/3: the methods prepared by
//! `grpc-targets` as the `grpc` stack prepares them (one, or a mix's) (descriptors from `.proto` files or from the
//! server's reflection service, asked here over HTTP/3; request encoded from the JSON
//! template; answer checked for the expected fields), sent as a unary call on the suite's
//! HTTP/3 transport like the item client's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use async_trait::async_trait;
use bench_core::user_service::grpc::GrpcMethod;
use bench_core::user_service::GrpcCalls;
use bench_core::{Call, Client, ClientSettings, Connected, Connection, Failure, Reply, WireBytes};
use bytes::Bytes;
use grpc_targets::Methods;
use grpc_wire::{unframe, GRPC_FIELDS};
use h3_transport::{H3Connection, H3Transport};
use prost_reflect::DescriptorPool;

use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};

use crate::client::answer_status;

/// A client of a target's methods over HTTP/3; its connections share the prepared methods.
pub struct DynamicH3Client {
    transport: H3Transport,
    methods: Arc<Methods>,
    /// Each method's URI, in the order of [`GrpcCalls::methods`].
    uris: Arc<Vec<http::Uri>>,
    /// The largest message received (`grpc_max_receive_message_bytes`).
    max_message_bytes: u64,
}

impl DynamicH3Client {
    /// Resolves the descriptors (`.proto` files, or the server's reflection over HTTP/3) and
    /// prepares the method; any problem with the target is an error naming the setting.
    pub fn new(settings: &ClientSettings, calls: Arc<GrpcCalls>) -> anyhow::Result<Self> {
        check_scheme(settings, &calls)?;
        let pool = resolve(&calls, settings)?;
        Self::with_pool(settings, calls, &pool)
    }

    /// As [`DynamicH3Client::new`], with descriptors already at hand.
    pub fn with_pool(
        settings: &ClientSettings,
        calls: Arc<GrpcCalls>,
        pool: &DescriptorPool,
    ) -> anyhow::Result<Self> {
        check_scheme(settings, &calls)?;
        Ok(DynamicH3Client {
            transport: H3Transport::new(settings, crate::ALPN)
                .map_err(|e| anyhow!("targets.grpc: {e:#}"))?,
            uris: Arc::new(
                calls
                    .methods
                    .iter()
                    .map(|m| method_uri(&calls, m))
                    .collect::<anyhow::Result<_>>()?,
            ),
            methods: Arc::new(Methods::prepare(calls, pool)?),
            max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
        })
    }
}

/// HTTP/3 runs on QUIC, which always carries TLS 1.3: an `http://` (h2c) address cannot be
/// reached over it. The runner leaves this stack out of such a run; a mismatch is a bug.
fn check_scheme(settings: &ClientSettings, calls: &GrpcCalls) -> anyhow::Result<()> {
    if !calls.endpoint.https || settings.tls.is_none() {
        anyhow::bail!(
            "targets.grpc.address is http:// (h2c): gRPC over HTTP/3 needs https:// (QUIC always runs TLS 1.3)"
        );
    }
    Ok(())
}

/// The descriptor pool `calls` names ([`grpc_targets::resolve`]), reflection over HTTP/3 on
/// one connection of the suite's transport.
fn resolve(calls: &GrpcCalls, settings: &ClientSettings) -> anyhow::Result<DescriptorPool> {
    let mut reflection = settings.clone();
    // One full handshake: reflection is not measured, and a resumption needs a ticket.
    if let Some(tls) = reflection.tls.as_mut() {
        tls.variant = bench_core::HandshakeVariant::Full;
    }
    let authority = calls.endpoint.authority.clone();
    grpc_targets::resolve(calls, settings, move || async move {
        let transport = H3Transport::new(&reflection, crate::ALPN)
            .map_err(|e| anyhow!("reflection: cannot prepare the connection: {e:#}"))?;
        let (conn, _) = transport
            .open()
            .await
            .map_err(|f| anyhow!("reflection: cannot connect to {authority}: {f}"))?;
        Ok(Reflection {
            conn,
            authority,
            _transport: transport,
        })
    })
}

/// An HTTP/3 connection as reflection uses it (its transport kept for the closing period).
struct Reflection {
    conn: H3Connection,
    authority: String,
    _transport: H3Transport,
}

#[async_trait]
impl grpc_targets::Unary for Reflection {
    async fn call(&self, path: &str, body: Bytes) -> Result<Result<Bytes, Failure>, Failure> {
        let uri = format!("https://{}{path}", self.authority)
            .parse()
            .map_err(|e| {
                Failure::new(bench_core::FailureClass::Other, format!("reflection: {e}"))
            })?;
        let head = request_head(&uri, &[])?;
        // The answer to one request: a file's descriptors, in one message.
        let limit = BodyLimit::GrpcUnary {
            max_message_bytes: bench_core::limits::DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
        };
        let answer = self
            .conn
            .exchange_limited((head, Some(body)), Instant::now(), limit)
            .await?;
        Ok(answer_status(&answer).map(|()| answer.body))
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}

/// A method's URI, `https://{authority}/{package.Service}/{Method}`.
fn method_uri(calls: &GrpcCalls, method: &GrpcMethod) -> anyhow::Result<http::Uri> {
    format!("https://{}{}", calls.endpoint.authority, method.path)
        .parse()
        .map_err(|e| {
            anyhow!(
                "{}: '{}{}' is not a URI: {e}",
                method.key,
                calls.endpoint.authority,
                method.path
            )
        })
}

/// A unary call's request head: POST to `uri` with gRPC's two fields and the call's metadata.
fn request_head(uri: &http::Uri, metadata: &[(&str, &str)]) -> Result<http::Request<()>, Failure> {
    let mut builder = http::Request::post(uri.clone());
    for &(name, value) in GRPC_FIELDS.iter().chain(metadata) {
        builder = builder.header(name, value);
    }
    builder.body(()).map_err(|e| {
        Failure::new(
            bench_core::FailureClass::Other,
            format!("targets.grpc: the call's head is not valid HTTP: {e}"),
        )
        .with_code("request_encoding")
    })
}

#[async_trait]
impl Client for DynamicH3Client {
    fn notes(&self) -> Vec<String> {
        self.methods.notes()
    }

    async fn connect(&self) -> Result<Connected, Failure> {
        let (conn, timing) = self.transport.open().await?;
        Ok(Connected {
            conn: Arc::new(DynamicH3Connection {
                conn,
                methods: self.methods.clone(),
                uris: self.uris.clone(),
                max_message_bytes: self.max_message_bytes,
            }),
            timing,
        })
    }

    async fn settle(&self, bound: Duration) {
        self.transport.settle(bound).await;
    }
}

struct DynamicH3Connection {
    conn: H3Connection,
    methods: Arc<Methods>,
    uris: Arc<Vec<http::Uri>>,
    max_message_bytes: u64,
}

#[async_trait]
impl Connection for DynamicH3Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        self.request_observed(call, &mut |_| {}).await
    }

    async fn request_observed(
        &self,
        call: Call,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let method = self.methods.for_call(&call);
        let spec = method.spec();
        let mut scratch = method.take_scratch();
        let body = match method.encode(&call, &mut scratch) {
            Ok(body) => body,
            Err(f) => {
                method.put_scratch(scratch);
                return Err(f);
            }
        };
        spec.render_metadata(&call, &mut scratch.metadata);
        let metadata: Vec<(&str, &str)> = spec
            .metadata_keys()
            .zip(scratch.metadata.iter().map(String::as_str))
            .collect();
        let head = request_head(&self.uris[method.index()], &metadata);
        drop(metadata);
        method.put_scratch(scratch);
        let started = Instant::now();
        let max_message_bytes = self.max_message_bytes;
        if method.server_streaming() {
            let mut stream = method.answer_stream(max_message_bytes, started);
            let head = head?;
            let mut on_data = |chunk: &[u8], at, status| {
                crate::client::not_grpc(status)?;
                stream.data(chunk, at, on_message)
            };
            let read = self.conn.exchange_streamed(
                (head, Some(body)),
                started,
                BodyLimit::GrpcStream { max_message_bytes },
                &mut on_data,
            );
            let answer = method.read_for_duration(started, read).await;
            let total = started.elapsed();
            let Some(answer) = answer else {
                // The call's duration_ms is over: dropping the read stopped its stream (quinn
                // sends STOP_SENDING); the messages whole by then count.
                return stream.cut(total);
            };
            let answer = answer?;
            answer_status(&answer)?;
            return stream.reply(answer.ttfb, total);
        }
        let answer = self
            .conn
            .exchange_limited(
                (head?, Some(body)),
                started,
                BodyLimit::GrpcUnary { max_message_bytes },
            )
            .await?;
        let total = started.elapsed();
        answer_status(&answer)?;
        let message = unframe(&answer.body)?;
        let body_bytes = message.len() as u64;
        method.check(message)?;
        Ok(Reply {
            messages: method.request_messages(),
            reopened: None,
            streamed: method.client_streaming(),
            ttfb: answer.ttfb,
            total,
            body_bytes,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.conn.wire_bytes()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
