//! The HTTP/2 clients (lean and library) sending a REST target's requests to servers we did
//! not write: nginx (SSI answers, a file with a content-length, HEAD, 204) and hypercorn (an
//! ASGI app streaming its answer in several DATA frames, POST bodies). Each server skips its
//! test when missing unless `TBENCH_REQUIRE_NGINX=1` / `TBENCH_REQUIRE_HYPERCORN=1`.

use bench_core::ClientImplementation;
use stack_h2::Http2;
use test_servers::hypercorn::Hypercorn;
use test_servers::nginx::Nginx;
use test_servers::rest::{hypercorn_checks, nginx_checks};

const CLIENTS: [ClientImplementation; 2] =
    [ClientImplementation::Lean, ClientImplementation::Library];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_answers_target_requests_over_http2() {
    let certs = tempfile::tempdir().expect("temp dir");
    let Some(nginx) = Nginx::start(certs.path()) else {
        return;
    };
    for client in CLIENTS {
        nginx_checks(&Http2, client, &nginx, certs.path(), "2").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypercorn_answers_target_requests_over_http2() {
    let certs = tempfile::tempdir().expect("temp dir");
    let Some(hypercorn) = Hypercorn::start(certs.path()) else {
        return;
    };
    for client in CLIENTS {
        hypercorn_checks(&Http2, client, &hypercorn, certs.path(), "2").await;
    }
}
