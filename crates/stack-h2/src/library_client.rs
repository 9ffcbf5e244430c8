//! HTTP/2 library client (`client = "library"`): one hyper http2 client connection per
//! [`bench_core::Connection`], driven by its own task as an application runs it; concurrent
//! requests become concurrent streams, handed to that task over hyper's channel.

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
use hyper::client::conn::http2::SendRequest;
use hyper_client::{classify_hyper, read_rest_item};

pub struct HyperH2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    /// HTTP/2 requests carry an absolute URI: scheme and authority, then the path.
    uri_prefix: String,
}

impl HyperH2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let scheme = if settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(HyperH2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            uri_prefix: format!(
                "{scheme}://{}:{}",
                settings.server_name,
                settings.target.port()
            ),
        })
    }
}

#[async_trait]
impl Client for HyperH2Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let hyper_client::Opened {
            send,
            driver,
            counters,
            timing,
        } = hyper_client::http2(
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
                uri_prefix: self.uri_prefix.clone(),
            }),
            timing,
        })
    }
}

struct HyperH2Connection {
    send: std::sync::Mutex<Option<SendRequest<Empty<Bytes>>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    uri_prefix: String,
}

#[async_trait]
impl Connection for HyperH2Connection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let mut send = self
            .send
            .lock()
            .expect("sender lock")
            .clone()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        send.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let req = hyper::Request::get(format!("{}{}", self.uri_prefix, item_path(id)))
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
        // With the last sender gone, hyper sends GOAWAY and closes the socket.
        self.send.lock().expect("sender lock").take();
        self.driver.finish(std::time::Duration::from_secs(1)).await;
    }
}
