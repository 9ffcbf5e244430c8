//! HTTP/2 client: one [`h2_transport::H2Conn`] per [`bench_core::Connection`]; concurrent
//! requests become concurrent streams. A REST target's requests are rendered per call and
//! judged by the target's rules.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use bench_core::limits::{BodyLimit, ResponseLimits};
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::user_service::{RenderedRequest, RestCalls};
use bench_core::workload::{item_path, rest_reply};
use bench_core::{
    Call, Calls, Client, ClientSettings, Connected, Connection, Failure, PayloadProfile, Reply,
    WireBytes,
};
use bytes::Bytes;

use bench_core::bulk::{self, Direction, Pieces};
use bench_core::BulkObject;
use h2_transport::{H2Conn, RequestHead, StreamEvent};

pub struct H2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    calls: Calls,
    https: bool,
    authority: String,
    /// Each answer's body bound (`response_body_max_bytes`).
    answer_limit: BodyLimit,
    bulk: Option<BulkObject>,
}

impl H2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let (https, authority) = match &settings.calls {
            Calls::Item => (
                settings.tls.is_some(),
                format!("{}:{}", settings.server_name, settings.target.port()),
            ),
            Calls::Rest(calls) => (calls.endpoint.https, calls.endpoint.authority.clone()),
            Calls::Grpc(_) => anyhow::bail!(
                "the HTTP/2 REST stack sends REST requests; a gRPC target needs the grpc stack"
            ),
        };
        Ok(H2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            calls: settings.calls.clone(),
            https,
            authority,
            answer_limit: BodyLimit::Bytes(
                ResponseLimits::from_tuning(&settings.tuning).max_body_bytes,
            ),
            bulk: settings.tuning.bulk,
        })
    }
}

#[async_trait]
impl Client for H2Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (stream, timing, closer) = self.connector.connect().await?;
        let counters = stream.counters();
        let conn = H2Conn::open(
            stream,
            closer,
            &self.authority,
            self.https,
            crate::server::STREAM_WINDOW,
            crate::server::CONNECTION_WINDOW,
        );
        Ok(Connected {
            conn: Arc::new(H2Connection {
                conn,
                counters,
                payload: self.payload,
                calls: self.calls.clone(),
                scratch: Mutex::new(Vec::new()),
                answer_limit: self.answer_limit,
                bulk: self.bulk,
            }),
            timing,
        })
    }
}

struct H2Connection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    calls: Calls,
    /// Render buffers of finished requests, reused by the next ones (several requests may be
    /// in flight at once).
    scratch: Mutex<Vec<Scratch>>,
    answer_limit: BodyLimit,
    /// The bulk workload's object, moved by every request instead of the item.
    bulk: Option<BulkObject>,
}

/// One target request's buffers.
#[derive(Default)]
struct Scratch {
    rendered: RenderedRequest,
    content_length: String,
}

impl H2Connection {
    /// One bulk object: a download read as it arrives and counted, never held (the stream's
    /// window reopens as each piece is counted); an upload sent as the windows take it.
    async fn bulk_request(&self, object: BulkObject) -> Result<Reply, Failure> {
        let started = Instant::now();
        let path = object.rest_path();
        let length = object.bytes.to_string();
        let upload = object.direction == Direction::Upload;
        let upload_fields = [("content-length", length.as_str())];
        let fields: &[(&str, &str)] = if upload { &upload_fields } else { &[] };
        let head = RequestHead {
            method: object.rest_method(),
            path: &path,
            fields,
            keep: &[],
            answer_limit: self.answer_limit,
        };
        let generated = upload
            .then(|| Box::new(Pieces::new(object.bytes, bulk::CHUNK_BYTES)) as bulk::Generated);
        let mut call = self
            .conn
            .open_streamed_with(&head, None, generated, started)
            .await?;
        let mut received = 0u64;
        // An upload's answer is its count: a few bytes, kept to be read.
        let mut answer = Vec::new();
        loop {
            match call.next().await? {
                StreamEvent::Data { data, .. } => {
                    received += data.len() as u64;
                    if upload && answer.len() < 64 {
                        answer.extend_from_slice(&data[..data.len().min(64)]);
                    }
                }
                StreamEvent::End(end) => {
                    return bulk::reply(object, end.status, &answer, received, end.ttfb, end.total)
                }
            }
        }
    }

    async fn target_request(&self, calls: &RestCalls, call: Call) -> Result<Reply, Failure> {
        let mut scratch = self
            .scratch
            .lock()
            .expect("scratch lock")
            .pop()
            .unwrap_or_default();
        calls.render(&call, &mut scratch.rendered);
        let rendered = &scratch.rendered;
        let body = calls.has_body(rendered).then(|| {
            use std::fmt::Write;
            scratch.content_length.clear();
            write!(scratch.content_length, "{}", rendered.body().len()).expect("to a String");
            Bytes::copy_from_slice(rendered.body())
        });
        let mut fields: Vec<(&str, &str)> = calls.headers(rendered).collect();
        if body.is_some() {
            fields.push(("content-length", &scratch.content_length));
        }
        let head = RequestHead {
            method: calls.method(rendered),
            path: &rendered.path,
            fields: &fields,
            keep: &[],
            answer_limit: self.answer_limit,
        };
        let answer = self.conn.exchange(&head, body, Instant::now()).await;
        drop(fields);
        self.scratch.lock().expect("scratch lock").push(scratch);
        let answer = answer?;
        calls.judge(
            &call,
            answer.status,
            &answer.body,
            answer.ttfb,
            answer.total,
        )
    }
}

#[async_trait]
impl Connection for H2Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        if let Calls::Rest(calls) = &self.calls {
            return self.target_request(calls, call).await;
        }
        if let Some(object) = self.bulk {
            return self.bulk_request(object).await;
        }
        let id = call.id;
        let path = item_path(id);
        let head = RequestHead {
            method: "GET",
            path: &path,
            fields: &[],
            keep: &[],
            answer_limit: self.answer_limit,
        };
        let answer = self.conn.exchange(&head, None, Instant::now()).await?;
        rest_reply(
            answer.status,
            &answer.body,
            id,
            self.payload,
            answer.ttfb,
            answer.total,
        )
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
