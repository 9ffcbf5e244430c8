//! REST client over HTTP/3, on the suite's HTTP/3 transport (`h3-transport`: a socket and
//! quinn endpoint per connection, so "a new connection" is a new socket and a full QUIC
//! handshake, as on the TCP stacks).
//!
//! A REST target's request is rendered per call (method, `https://{authority}{path}`, its
//! headers and body) and its answer judged by the target's rules. Every answer is read to
//! the end of its stream: all DATA frames, then trailers if any (their content is not used).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::bulk::{self, Direction, Pieces};
use bench_core::limits::{BodyLimit, ResponseLimits};
use bench_core::user_service::{RenderedRequest, RestCalls};
use bench_core::workload::{item_path, rest_reply};
use bench_core::BulkObject;
use bench_core::{
    Call, Calls, Client, ClientSettings, Connected, Connection, Failure, FailureClass,
    PayloadProfile, Reply, WireBytes,
};
use bytes::Bytes;
use h3_transport::{H3Transport, Outgoing};

pub struct H3Client {
    transport: H3Transport,
    payload: PayloadProfile,
    calls: Calls,
    uri_prefix: String,
    bulk: Option<BulkObject>,
    answer_limit: BodyLimit,
}

impl H3Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        if settings.tls.is_none() {
            anyhow::bail!("HTTP/3 has no plaintext form: QUIC always runs TLS 1.3");
        }
        let uri_prefix = match &settings.calls {
            Calls::Item => format!(
                "https://{}:{}",
                settings.server_name,
                settings.target.port()
            ),
            Calls::Rest(calls) if !calls.endpoint.https => anyhow::bail!(
                "HTTP/3 has no plaintext form: the REST target's URL must be https://"
            ),
            Calls::Rest(calls) => format!("https://{}", calls.endpoint.authority),
            Calls::Grpc(_) => anyhow::bail!(
                "the HTTP/3 stack sends REST requests; a gRPC target needs a gRPC stack"
            ),
        };
        Ok(H3Client {
            transport: H3Transport::new(settings, crate::ALPN)?,
            payload: settings.payload,
            calls: settings.calls.clone(),
            uri_prefix,
            bulk: settings.tuning.bulk,
            answer_limit: BodyLimit::Bytes(
                ResponseLimits::from_tuning(&settings.tuning).max_body_bytes,
            ),
        })
    }
}

#[async_trait]
impl Client for H3Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (conn, timing) = self.transport.open().await?;
        Ok(Connected {
            conn: Arc::new(H3Connection {
                conn,
                payload: self.payload,
                calls: self.calls.clone(),
                uri_prefix: self.uri_prefix.clone(),
                bulk: self.bulk,
                answer_limit: self.answer_limit,
            }),
            timing,
        })
    }

    async fn settle(&self, bound: Duration) {
        self.transport.settle(bound).await;
    }
}

struct H3Connection {
    conn: h3_transport::H3Connection,
    payload: PayloadProfile,
    calls: Calls,
    uri_prefix: String,
    /// The bulk workload's object, moved by every request instead of the item.
    bulk: Option<BulkObject>,
    answer_limit: BodyLimit,
}

impl H3Connection {
    /// One bulk object: a download counted as QUIC hands it over, never held (the stream's
    /// window reopens as it is read); an upload sent piece by piece as flow control takes it.
    async fn bulk_request(&self, object: BulkObject) -> Result<Reply, Failure> {
        let upload = object.direction == Direction::Upload;
        let mut builder = http::Request::builder()
            .method(object.rest_method())
            .uri(format!("{}{}", self.uri_prefix, object.rest_path()));
        if upload {
            builder = builder.header(http::header::CONTENT_LENGTH, object.bytes);
        }
        let req = builder.body(()).expect("valid request");
        let generated = upload
            .then(|| Box::new(Pieces::new(object.bytes, bulk::CHUNK_BYTES)) as bulk::Generated);
        let mut received = 0u64;
        let mut answer = Vec::new();
        let started = Instant::now();
        let end = self
            .conn
            .exchange_generated(
                (req, None),
                generated,
                started,
                self.answer_limit,
                &mut |chunk, _, _| {
                    received += chunk.len() as u64;
                    if upload && answer.len() < 64 {
                        answer.extend_from_slice(&chunk[..chunk.len().min(64)]);
                    }
                    Ok(())
                },
            )
            .await?;
        let total = started.elapsed();
        bulk::reply(object, end.status, &answer, received, end.ttfb, total)
    }

    /// A target's request for `call`, or a failure if the rendering is not valid HTTP.
    fn target_request(&self, calls: &RestCalls, call: &Call) -> Result<Outgoing, Failure> {
        let mut rendered = RenderedRequest::default();
        calls.render(call, &mut rendered);
        let mut builder = http::Request::builder()
            .method(calls.method(&rendered))
            .uri(format!("{}{}", self.uri_prefix, rendered.path));
        for (name, value) in calls.headers(&rendered) {
            builder = builder.header(name, value);
        }
        let body = if calls.has_body(&rendered) {
            builder = builder.header(http::header::CONTENT_LENGTH, rendered.body().len());
            Some(Bytes::copy_from_slice(rendered.body()))
        } else {
            None
        };
        let req = builder.body(()).map_err(|e| {
            Failure::new(
                FailureClass::Other,
                format!("the rendered request is not valid HTTP: {e}"),
            )
        })?;
        Ok((req, body))
    }
}

#[async_trait]
impl Connection for H3Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        if let (Some(object), Calls::Item) = (self.bulk, &self.calls) {
            return self.bulk_request(object).await;
        }
        let outgoing = match &self.calls {
            Calls::Rest(calls) => self.target_request(calls, &call)?,
            _ => (
                http::Request::get(format!("{}{}", self.uri_prefix, item_path(call.id)))
                    .body(())
                    .expect("valid request"),
                None,
            ),
        };
        let started = Instant::now();
        let answer = self.conn.exchange(outgoing, started).await?;
        let total = started.elapsed();
        match &self.calls {
            Calls::Rest(calls) => {
                calls.judge(&call, answer.status, &answer.body, answer.ttfb, total)
            }
            _ => rest_reply(
                answer.status,
                &answer.body,
                call.id,
                self.payload,
                answer.ttfb,
                total,
            ),
        }
    }

    fn wire_bytes(&self) -> WireBytes {
        self.conn.wire_bytes()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
