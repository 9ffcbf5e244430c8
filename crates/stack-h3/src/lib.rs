//! REST over HTTP/3 (h3 + quinn, ALPN h3). QUIC always carries TLS 1.3; there is no plaintext.

pub mod client;
pub mod server;

use std::sync::Arc;

use async_trait::async_trait;
use bench_core::{BoundServer, Client, ClientSettings, ServerSettings, Stack};

/// What this stack speaks ([`bench_core::Stack::http_version`]).
pub const HTTP_VERSION: bench_core::HttpVersion = bench_core::HttpVersion::Http3;
/// Its ALPN identifier, from [`HTTP_VERSION`].
pub const ALPN: &[u8] = HTTP_VERSION.alpn_bytes();

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
    fn encoding(&self) -> &'static str {
        "JSON"
    }
    fn supports_zero_rtt(&self) -> bool {
        true
    }
    fn libraries(&self) -> &'static [&'static str] {
        &["quinn", "quinn-proto", "h3", "h3-quinn"]
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        HTTP_VERSION
    }
    fn supports_plaintext(&self) -> bool {
        false
    }
    /// At an edge that terminates QUIC, REST over HTTP/2 (h2c on the edge's loopback): the same API, multiplexed like HTTP/3.
    fn edge_upstream_stack(&self) -> Option<&'static str> {
        Some("h2")
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("quic", h3_transport::quic_settings()),
            ("http", "h3 0.0.8 over h3-quinn; the server reads each request stream to its end before answering, and answers 0-RTT requests at once".into()),
            ("udp", h3_transport::UDP_SETTINGS.into()),
            ("tls", bench_core::tls::tls_settings()),
        ]
    }
    fn bulk(&self) -> bool {
        true
    }
    async fn bind(&self, settings: ServerSettings) -> anyhow::Result<BoundServer> {
        server::bind(settings)
    }
    /// h3 + quinn is a library client; a lean HTTP/3 client is not built.
    fn client_implementations(&self) -> &'static [bench_core::ClientImplementation] {
        &[bench_core::ClientImplementation::Library]
    }
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>> {
        Ok(Arc::new(client::H3Client::new(settings)?))
    }
}
