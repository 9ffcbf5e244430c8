//! HTTP/2 library client (`client = "library"`): one hyper http2 client connection per
//! [`bench_core::Connection`], driven by its own task as an application runs it; concurrent
//! requests become concurrent streams, handed to that task over hyper's channel. A REST
//! target's requests are built with hyper's request builder and judged by the target's rules.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{ConnDriver, TcpConnector, WireCounters};
use bench_core::user_service::RenderedRequest;
use bench_core::workload::item_path;
use bench_core::{
    Call, Calls, Client, ClientSettings, Connected, Connection, Failure, FailureClass,
    PayloadProfile, Phase, Reply, WireBytes,
};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2::SendRequest;
use library_client::{classify_hyper, read_rest_answer, read_rest_item, target_request};

pub struct HyperH2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    calls: Calls,
    /// HTTP/2 requests carry an absolute URI: scheme and authority, then the path.
    uri_prefix: String,
}

impl HyperH2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let uri_prefix = match &settings.calls {
            Calls::Item => format!(
                "{}://{}:{}",
                if settings.tls.is_some() {
                    "https"
                } else {
                    "http"
                },
                settings.server_name,
                settings.target.port()
            ),
            Calls::Rest(calls) => format!(
                "{}://{}",
                if calls.endpoint.https {
                    "https"
                } else {
                    "http"
                },
                calls.endpoint.authority
            ),
            Calls::Grpc(_) => anyhow::bail!(
                "the HTTP/2 REST stack sends REST requests; a gRPC target needs the grpc stack"
            ),
        };
        Ok(HyperH2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            calls: settings.calls.clone(),
            uri_prefix,
        })
    }
}

#[async_trait]
impl Client for HyperH2Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let library_client::Opened {
            send,
            driver,
            counters,
            timing,
        } = library_client::http2(
            &self.connector,
            crate::server::STREAM_WINDOW,
            crate::server::CONNECTION_WINDOW,
        )
        .await?;
        Ok(Connected {
            conn: Arc::new(HyperH2Connection {
                send: std::sync::Mutex::new(Some(send)),
                driver,
                counters,
                payload: self.payload,
                calls: self.calls.clone(),
                uri_prefix: self.uri_prefix.clone(),
            }),
            timing,
        })
    }
}

struct HyperH2Connection {
    send: std::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    calls: Calls,
    uri_prefix: String,
}

#[async_trait]
impl Connection for HyperH2Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        let mut send = self
            .send
            .lock()
            .expect("sender lock")
            .clone()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        send.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let req = match &self.calls {
            Calls::Rest(calls) => {
                let mut rendered = RenderedRequest::default();
                calls.render(&call, &mut rendered);
                let uri = format!("{}{}", self.uri_prefix, rendered.path);
                target_request(calls, &rendered, &uri, None)?
            }
            _ => hyper::Request::get(format!("{}{}", self.uri_prefix, item_path(call.id)))
                .body(Full::new(Bytes::new()))
                .expect("valid request"),
        };
        let started = Instant::now();
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        match &self.calls {
            Calls::Rest(calls) => {
                let answer = read_rest_answer(resp, started).await?;
                calls.judge(
                    &call,
                    answer.status,
                    &answer.body,
                    answer.ttfb,
                    answer.total,
                )
            }
            _ => read_rest_item(resp, started, call.id, self.payload).await,
        }
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        // With the last sender gone, hyper sends GOAWAY and closes the socket.
        self.send.lock().expect("sender lock").take();
        self.driver.finish(std::time::Duration::from_secs(1)).await;
    }
}
