//! REST over HTTP/2 on TLS 1.3 (ALPN h2), or h2c with prior knowledge in plaintext: hyper's
//! server, and the lean client of the `h2-transport` crate or hyper's client.

pub mod client;
pub mod library_client;
pub mod server;

use std::sync::Arc;

use async_trait::async_trait;
use bench_core::{
    BoundServer, Client, ClientImplementation, ClientSettings, ServerSettings, Stack,
};

/// What this stack speaks ([`bench_core::Stack::http_version`]).
pub const HTTP_VERSION: bench_core::HttpVersion = bench_core::HttpVersion::Http2;
/// Its ALPN identifier, from [`HTTP_VERSION`].
pub const ALPN: &[u8] = HTTP_VERSION.alpn_bytes();

/// The HTTP/2 stack.
pub struct Http2;

#[async_trait]
impl Stack for Http2 {
    fn name(&self) -> &'static str {
        "h2"
    }
    fn description(&self) -> &'static str {
        "REST over HTTP/2 (hyper) on TLS 1.3"
    }
    fn label(&self) -> &'static str {
        "HTTP/2"
    }
    fn encoding(&self) -> &'static str {
        "JSON"
    }
    fn libraries(&self) -> &'static [&'static str] {
        &["hyper", "h2"]
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        HTTP_VERSION
    }
    fn supports_plaintext(&self) -> bool {
        true
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("http", format!("hyper http2, max_concurrent_streams {}, initial stream window {} B, connection window {} B (client the same)", server::MAX_CONCURRENT_STREAMS, server::STREAM_WINDOW, server::CONNECTION_WINDOW)),
            ("tcp", "TCP_NODELAY on both sides; accept in one task, TLS handshake per connection task".into()),
            ("tls", bench_core::tls::tls_settings()),
        ]
    }
    fn bulk(&self) -> bool {
        true
    }
    async fn bind(&self, settings: ServerSettings) -> anyhow::Result<BoundServer> {
        server::bind(settings)
    }
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>> {
        Ok(match self.client_implementation(settings.tuning.client) {
            ClientImplementation::Lean => Arc::new(client::H2Client::new(settings)?),
            ClientImplementation::Library => {
                Arc::new(library_client::HyperH2Client::new(settings)?)
            }
        })
    }
}
