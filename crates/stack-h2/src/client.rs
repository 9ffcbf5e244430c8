//! HTTP/2 client: one [`http2_client::H2Conn`] per [`bench_core::Connection`]; concurrent
//! requests become concurrent streams.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::{item_path, rest_reply};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, PayloadProfile, Reply, WireBytes,
};

use http2_client::{H2Conn, RequestHead};

pub struct H2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    https: bool,
    authority: String,
}

impl H2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(H2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            https: settings.tls.is_some(),
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
            }),
            timing,
        })
    }
}

struct H2Connection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
}

#[async_trait]
impl Connection for H2Connection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let path = item_path(id);
        let head = RequestHead {
            method: "GET",
            path: &path,
            fields: &[],
            keep: &[],
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
