//! HTTP/2 client: one h2 connection ([`crate::conn::H2Conn`]) per [`bench_core::Connection`];
//! concurrent requests become concurrent streams.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{TcpConnector, WireCounters};
use bench_core::workload::{item_path, rest_reply};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, PayloadProfile, Reply, WireBytes,
};

use crate::conn::H2Conn;

pub struct H2Client {
    connector: TcpConnector,
    payload: PayloadProfile,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
}

impl H2Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(H2Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            scheme: if settings.tls.is_some() {
                http::uri::Scheme::HTTPS
            } else {
                http::uri::Scheme::HTTP
            },
            authority: format!("{}:{}", settings.server_name, settings.target.port()).parse()?,
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
                scheme: self.scheme.clone(),
                authority: self.authority.clone(),
            }),
            timing,
        })
    }
}

struct H2Connection {
    conn: H2Conn,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    /// HTTP/2 requests carry an absolute URI; its scheme and authority are parsed once.
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
}

#[async_trait]
impl Connection for H2Connection {
    async fn request(&self, id: u64) -> Result<Reply, Failure> {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(item_path(id).try_into().expect("valid path"));
        let req = http::Request::get(http::Uri::from_parts(uri).expect("valid URI"))
            .body(())
            .expect("valid request");
        let answer = self.conn.exchange(req, None, Instant::now()).await?;
        rest_reply(
            answer.head.status.as_u16(),
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
