//! HTTP/2 server: hyper's http2 connection on each accepted (TLS) stream.

use std::sync::Arc;

use bench_core::net::tcp_server;
use bench_core::workload::ServerWorkload;
use bench_core::{BoundServer, ServerSettings};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rest_handler::respond;

/// Streams one connection may carry at once, the same on every multiplexed stack (HTTP/3's
/// quinn preallocates per permitted stream, so the common limit stays modest).
pub const MAX_CONCURRENT_STREAMS: u32 = 128;
/// Flow-control windows, larger than HTTP/2's 64 KiB default so a 64 KiB answer never waits for
/// a WINDOW_UPDATE; set on both sides.
pub const STREAM_WINDOW: u32 = 1 << 20;
pub const CONNECTION_WINDOW: u32 = 4 << 20;

pub fn bind(settings: ServerSettings) -> anyhow::Result<BoundServer> {
    let workload = Arc::new(ServerWorkload::new(
        settings.payload,
        settings.fault,
        settings.service_time,
    ));
    tcp_server(&settings, crate::ALPN, move |stream| {
        let workload = workload.clone();
        async move {
            let service = service_fn(move |req| respond(workload.clone(), req));
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}
