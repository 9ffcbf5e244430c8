//! HTTP/1.1 client: one hyper http1 connection per [`bench_core::Connection`]; requests on it
//! are serialised, as HTTP/1.1 without pipelining requires.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{ConnDriver, TcpConnector, WireCounters};
use bench_core::workload::item_path;
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, PayloadProfile, Phase, Reply, WireBytes,
};
use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::Mutex;

use crate::hyper_rest::{classify_hyper, read_item};

pub struct H1Client {
    connector: TcpConnector,
    payload: PayloadProfile,
}

impl H1Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(H1Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
        })
    }
}

#[async_trait]
impl Client for H1Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (stream, timing, closer) = self.connector.connect().await?;
        let counters = stream.counters();
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| classify_hyper(Phase::Handshake, &e))?;
        let driver = ConnDriver::spawn_tcp(conn, closer);
        Ok(Connected {
            conn: Arc::new(H1Connection {
                send: Mutex::new(Some(send)),
                driver,
                counters,
                payload: self.payload,
            }),
            timing,
        })
    }
}

struct H1Connection {
    send: Mutex<Option<SendRequest<Empty<Bytes>>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
}

#[async_trait]
impl Connection for H1Connection {
    async fn request(&self, id: u64) -> Result<Reply, Failure> {
        let mut guard = self.send.lock().await;
        let send = guard.as_mut().ok_or_else(|| {
            Failure::new(
                bench_core::FailureClass::ConnReset,
                "connection already closed",
            )
        })?;
        send.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let req = hyper::Request::get(item_path(id))
            .header(hyper::header::HOST, bench_core::tls::SERVER_NAME)
            .body(Empty::new())
            .expect("valid request");
        let started = Instant::now();
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        read_item(resp, started, id, self.payload).await
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        // Dropping the sender lets hyper shut the connection down (TLS close_notify, FIN).
        self.send.lock().await.take();
        self.driver.finish(std::time::Duration::from_secs(1)).await;
    }
}
