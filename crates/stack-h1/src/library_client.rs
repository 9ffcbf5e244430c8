//! HTTP/1.1 library client (`client = "library"`): one hyper http1 client connection per
//! [`bench_core::Connection`], driven by its own task as an application runs it; requests on
//! it are serialised, as HTTP/1.1 without pipelining requires. A REST target's requests are
//! built with hyper's request builder and judged by the target's rules.

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
use hyper::client::conn::http1::SendRequest;
use library_client::{classify_hyper, read_rest_answer, read_rest_item, target_request};
use tokio::sync::Mutex;

pub struct HyperH1Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    calls: Calls,
    host: String,
}

impl HyperH1Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let host = match &settings.calls {
            Calls::Item => format!("{}:{}", settings.server_name, settings.target.port()),
            Calls::Rest(calls) => calls.endpoint.authority.clone(),
            Calls::Grpc(_) => anyhow::bail!(
                "the HTTP/1.1 stack sends REST requests; a gRPC target needs the grpc stack"
            ),
        };
        Ok(HyperH1Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            calls: settings.calls.clone(),
            host,
        })
    }
}

#[async_trait]
impl Client for HyperH1Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let library_client::Opened {
            send,
            driver,
            counters,
            timing,
        } = library_client::http1(&self.connector).await?;
        Ok(Connected {
            conn: Arc::new(HyperH1Connection {
                send: Mutex::new(Some((send, RenderedRequest::default()))),
                driver,
                counters,
                payload: self.payload,
                calls: self.calls.clone(),
                host: self.host.clone(),
            }),
            timing,
        })
    }
}

struct HyperH1Connection {
    /// The sender and the buffers a target's request is rendered into, reused.
    send: Mutex<Option<(SendRequest<Full<Bytes>>, RenderedRequest)>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    calls: Calls,
    host: String,
}

#[async_trait]
impl Connection for HyperH1Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        let mut guard = self.send.lock().await;
        let (send, rendered) = guard
            .as_mut()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        send.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let req = match &self.calls {
            Calls::Rest(calls) => {
                calls.render(&call, rendered);
                target_request(calls, rendered, &rendered.path, Some(&self.host))?
            }
            _ => hyper::Request::get(item_path(call.id))
                .header(hyper::header::HOST, &self.host)
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
        // Dropping the sender lets hyper shut the connection down (close_notify, FIN).
        self.send.lock().await.take();
        self.driver.finish(std::time::Duration::from_secs(1)).await;
    }
}
