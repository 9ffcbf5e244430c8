//! gRPC (tonic + prost) over HTTP/2 on TLS 1.3, or over h2c in plaintext.

pub mod client;
pub mod descriptors;
pub mod dynamic;
pub mod library_client;
pub mod server;
mod wire;

use std::sync::Arc;

use anyhow::bail;
use async_trait::async_trait;
use bench_core::{
    BoundServer, Calls, Client, ClientImplementation, ClientSettings, ServerSettings, Stack,
};

/// Code generated from `proto/` (shared with the gRPC-over-HTTP/3 stack through `grpc-wire`).
pub use grpc_wire::{health, pb};

/// What this stack speaks ([`bench_core::Stack::http_version`]).
pub const HTTP_VERSION: bench_core::HttpVersion = bench_core::HttpVersion::Http2;
/// Its ALPN identifier, from [`HTTP_VERSION`].
pub const ALPN: &[u8] = HTTP_VERSION.alpn_bytes();

/// Full method path of the workload's RPC.
pub use grpc_wire::GET_ITEM_PATH;

/// The gRPC stack.
pub struct Grpc;

#[async_trait]
impl Stack for Grpc {
    fn name(&self) -> &'static str {
        "grpc"
    }
    fn description(&self) -> &'static str {
        "gRPC unary (tonic + prost) over HTTP/2 on TLS 1.3"
    }
    fn label(&self) -> &'static str {
        "gRPC"
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
    fn libraries(&self) -> &'static [&'static str] {
        &["tonic", "prost", "hyper", "h2"]
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        HTTP_VERSION
    }
    fn supports_plaintext(&self) -> bool {
        true
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("grpc", "tonic generated service (prost), served by hyper http2 on our TLS 1.3 streams (GetItem; ListItems, PutItems and ChatItems streaming, items produced as flow control takes them); client: lean = unary and streaming calls in gRPC wire format on our HTTP/2 client (h2-transport), library = tonic's generated client on hyper http2 (the row's `client` says which ran)".into()),
            ("http", format!("max_concurrent_streams {}, initial stream window {} B, connection window {} B (client the same), max message 1 MiB", server::MAX_CONCURRENT_STREAMS, server::STREAM_WINDOW, server::CONNECTION_WINDOW)),
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
        let implementation = self.client_implementation(settings.tuning.client);
        Ok(match (&settings.calls, implementation) {
            (Calls::Item, ClientImplementation::Lean) => {
                Arc::new(client::GrpcClient::new(settings)?)
            }
            (Calls::Item, ClientImplementation::Library)
                if settings.tuning.grpc_call.is_streaming() =>
            {
                bail!("the library gRPC client makes unary calls only; a streaming grpc_call needs client = \"lean\"")
            }
            (Calls::Item, ClientImplementation::Library) => {
                Arc::new(library_client::TonicClient::new(settings)?)
            }
            (Calls::Grpc(calls), ClientImplementation::Lean) => {
                Arc::new(dynamic::DynamicClient::new(settings, calls.clone())?)
            }
            (Calls::Grpc(_), ClientImplementation::Library) => {
                bail!("the library gRPC client does not send target calls; use client = \"lean\"")
            }
            (Calls::Rest(_), _) => {
                bail!("the gRPC stack sends [targets.grpc] calls, not [targets.rest] requests")
            }
        })
    }
}
