//! REST over HTTP/3 (h3 + quinn, ALPN h3). QUIC always carries TLS 1.3; there is no plaintext.
#![forbid(unsafe_code)]

pub mod client;
pub mod server;
mod tuning;
mod udp;

use std::sync::Arc;

use async_trait::async_trait;
use bench_core::{BoundServer, Client, ClientSettings, ServerSettings, Stack, Transport};

/// ALPN for HTTP/3.
pub const ALPN: &[u8] = b"h3";

/// The HTTP/3 stack.
pub struct Http3;

#[async_trait]
impl Stack for Http3 {
    fn name(&self) -> &'static str {
        "h3"
    }
    fn description(&self) -> &'static str {
        "REST over HTTP/3 (h3 + quinn) on QUIC"
    }
    fn label(&self) -> &'static str {
        "HTTP/3"
    }
    fn alpn(&self) -> &'static [u8] {
        ALPN
    }
    fn transport(&self) -> Transport {
        Transport::Udp
    }
    fn supports_plaintext(&self) -> bool {
        false
    }
    fn multiplexed(&self) -> bool {
        true
    }
    async fn bind(&self, settings: ServerSettings) -> anyhow::Result<BoundServer> {
        server::bind(settings)
    }
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>> {
        Ok(Arc::new(client::H3Client::new(settings)?))
    }
}
