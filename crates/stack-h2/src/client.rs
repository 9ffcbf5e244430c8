//! HTTP/2 client: one h2 connection ([`crate::conn::H2Conn`]) per [`bench_core::Connection`];
//! concurrent requests become concurrent streams.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::{item_path, validate_json_item};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile, Reply,
    WireBytes,
};

use crate::conn::H2Conn;

pub struct H2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    scheme: &'static str,
    authority: String,
}

impl H2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(H2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            scheme: if settings.tls.is_some() {
                "https"
            } else {
                "http"
            },
            authority: format!("{}:{}", settings.server_name, settings.target.port()),
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
            crate::server::STREAM_WINDOW,
            crate::server::CONNECTION_WINDOW,
        )
        .await?;
        Ok(Connected {
            conn: Arc::new(H2Connection {
                conn,
                counters,
                payload: self.payload,
                uri_prefix: format!("{}://{}", self.scheme, self.authority),
            }),
            timing,
        })
    }
}

struct H2Connection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    /// HTTP/2 requests carry an absolute URI.
    uri_prefix: String,
}

#[async_trait]
impl Connection for H2Connection {
    async fn request(&self, id: u64) -> Result<Reply, Failure> {
        let req = http::Request::get(format!("{}{}", self.uri_prefix, item_path(id)))
            .body(())
            .expect("valid request");
        let answer = self.conn.exchange(req, None, Instant::now()).await?;
        if answer.head.status != http::StatusCode::OK {
            return Err(Failure::new(
                FailureClass::BadStatus,
                format!("HTTP status {}", answer.head.status.as_u16()),
            ));
        }
        validate_json_item(&answer.body, id, self.payload)?;
        Ok(Reply {
            ttfb: answer.ttfb,
            total: answer.total,
            body_bytes: answer.body.len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
