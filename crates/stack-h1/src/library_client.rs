//! HTTP/1.1 library client (`client = "library"`): one hyper http1 client connection per
//! [`bench_core::Connection`], driven by its own task as an application runs it; requests on
//! it are serialised, as HTTP/1.1 without pipelining requires.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{ConnDriver, TcpConnector, WireCounters};
use bench_core::workload::item_path;
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile, Phase,
    Reply, WireBytes,
};
use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::http1::SendRequest;
use hyper_client::{classify_hyper, read_rest_item};
use tokio::sync::Mutex;

pub struct HyperH1Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    host: String,
}

impl HyperH1Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(HyperH1Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            host: format!("{}:{}", settings.server_name, settings.target.port()),
        })
    }
}

#[async_trait]
impl Client for HyperH1Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let hyper_client::Opened {
            send,
            driver,
            counters,
            timing,
        } = hyper_client::http1(&self.connector).await?;
        Ok(Connected {
            conn: Arc::new(HyperH1Connection {
                send: Mutex::new(Some(send)),
                driver,
                counters,
                payload: self.payload,
                host: self.host.clone(),
            }),
            timing,
        })
    }
}

struct HyperH1Connection {
    send: Mutex<Option<SendRequest<Empty<Bytes>>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    host: String,
}

#[async_trait]
impl Connection for HyperH1Connection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let mut guard = self.send.lock().await;
        let send = guard
            .as_mut()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        send.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let req = hyper::Request::get(item_path(id))
            .header(hyper::header::HOST, &self.host)
            .body(Empty::new())
            .expect("valid request");
        let started = Instant::now();
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        read_rest_item(resp, started, id, self.payload).await
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
