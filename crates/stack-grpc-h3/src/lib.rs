//! gRPC unary calls over HTTP/3 (h3 + quinn) on QUIC: the study's title, "gRPC over QUIC".
//! The same service and wire format as the `grpc` stack (`grpc-wire`), on the same HTTP/3
//! transport as the `h3` stack (`h3-transport`). QUIC always carries TLS 1.3.

pub mod client;
pub mod dynamic;
pub mod library_client;
pub mod server;

use std::sync::Arc;

use anyhow::bail;
use async_trait::async_trait;
use bench_core::{
    BoundServer, Calls, Client, ClientImplementation, ClientSettings, ServerSettings, Stack,
};

/// What this stack speaks ([`bench_core::Stack::http_version`]).
pub const HTTP_VERSION: bench_core::HttpVersion = bench_core::HttpVersion::Http3;
/// Its ALPN identifier, from [`HTTP_VERSION`].
pub const ALPN: &[u8] = HTTP_VERSION.alpn_bytes();

/// The gRPC-over-HTTP/3 stack.
pub struct GrpcH3;

#[async_trait]
impl Stack for GrpcH3 {
    fn name(&self) -> &'static str {
        "grpc-h3"
    }
    fn description(&self) -> &'static str {
        "gRPC unary (prost) over HTTP/3 (h3 + quinn) on QUIC"
    }
    fn label(&self) -> &'static str {
        "gRPC/HTTP/3"
    }
    fn api(&self) -> bench_core::Api {
        bench_core::Api::Grpc
    }
    fn encoding(&self) -> &'static str {
        "protobuf"
    }
    fn grpc_calls(&self) -> &'static [bench_core::GrpcCall] {
        &bench_core::GrpcCall::ALL
    }
    fn supports_zero_rtt(&self) -> bool {
        true
    }
    fn libraries(&self) -> &'static [&'static str] {
        &[
            "prost",
            "quinn",
            "quinn-proto",
            "h3",
            "h3-quinn",
            "tonic",
            "tonic-h3",
            "h3-util",
        ]
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        HTTP_VERSION
    }
    fn supports_plaintext(&self) -> bool {
        false
    }
    /// At an edge that terminates QUIC, gRPC over HTTP/2 (h2c on the edge's loopback), the tonic server.
    fn edge_upstream_stack(&self) -> Option<&'static str> {
        Some("grpc")
    }
    /// Most gRPC services serve HTTP/2 only: `[targets.grpc]` goes over HTTP/3 when
    /// `stacks` names this stack.
    fn targets_by_default(&self) -> bool {
        false
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("grpc", format!("bench.v1.ItemService (GetItem; ListItems, PutItems and ChatItems streaming, answered item by item as QUIC flow control allows, the requests read first) and grpc.health.v1.Health/Check in gRPC's HTTP mapping (POST, application/grpc, te: trailers, length-prefixed messages of at most {} B, grpc-status in trailers or a trailers-only answer), answered by the suite's own handler on h3; client: lean = the same calls on the suite's HTTP/3 transport, library = tonic's generated client on tonic-h3's channel (h3-util over h3-quinn) on a QUIC connection the client opens (the row's `client` says which ran)", grpc_wire::MAX_MESSAGE_BYTES)),
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
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>> {
        let implementation = self.client_implementation(settings.tuning.client);
        match &settings.calls {
            Calls::Item if implementation == ClientImplementation::Lean => {
                Ok(Arc::new(client::GrpcH3Client::new(settings)?))
            }
            Calls::Item if settings.tuning.grpc_call.is_streaming() => {
                bail!("the library gRPC client makes unary calls only; a streaming grpc_call needs client = \"lean\"")
            }
            Calls::Item => Ok(Arc::new(library_client::TonicH3Client::new(settings)?)),
            Calls::Grpc(calls) if implementation == ClientImplementation::Lean => Ok(Arc::new(
                dynamic::DynamicH3Client::new(settings, calls.clone())?,
            )),
            Calls::Grpc(_) => {
                bail!("the library gRPC client does not send target calls; use client = \"lean\"")
            }
            Calls::Rest(_) => {
                bail!("the gRPC-over-HTTP/3 stack sends gRPC calls, not [targets.rest] requests")
            }
        }
    }
}
