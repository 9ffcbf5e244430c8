//! REST over HTTP/1.1 (hyper 1) on TLS 1.3 or plaintext TCP.

pub mod client;
pub mod library_client;
pub mod response;
pub mod server;

use std::sync::Arc;

use async_trait::async_trait;
use bench_core::{
    BoundServer, Client, ClientImplementation, ClientSettings, ServerSettings, Stack,
};

/// What this stack speaks ([`bench_core::Stack::http_version`]).
pub const HTTP_VERSION: bench_core::HttpVersion = bench_core::HttpVersion::Http1;
/// Its ALPN identifier, from [`HTTP_VERSION`].
pub const ALPN: &[u8] = HTTP_VERSION.alpn_bytes();

/// The HTTP/1.1 stack.
pub struct Http1;

#[async_trait]
impl Stack for Http1 {
    fn name(&self) -> &'static str {
        "h1"
    }
    fn description(&self) -> &'static str {
        "REST over HTTP/1.1 (hyper) on TLS 1.3"
    }
    fn label(&self) -> &'static str {
        "HTTP/1.1"
    }
    fn encoding(&self) -> &'static str {
        "JSON"
    }
    fn libraries(&self) -> &'static [&'static str] {
        &["hyper"]
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        HTTP_VERSION
    }
    fn supports_plaintext(&self) -> bool {
        true
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("http", "hyper http1, keep-alive on, no pipelining".into()),
            (
                "tcp",
                "TCP_NODELAY on both sides; accept in one task, TLS handshake per connection task"
                    .into(),
            ),
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
            ClientImplementation::Lean => Arc::new(client::H1Client::new(settings)?),
            ClientImplementation::Library => {
                Arc::new(library_client::HyperH1Client::new(settings)?)
            }
        })
    }
}
