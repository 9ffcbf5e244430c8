//! HTTP/1.1 server: hyper's http1 connection on each accepted (TLS) stream.

use std::sync::Arc;

use bench_core::net::tcp_server;
use bench_core::workload::ServerWorkload;
use bench_core::{BoundServer, ServerSettings};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rest_handler::respond;

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
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}
