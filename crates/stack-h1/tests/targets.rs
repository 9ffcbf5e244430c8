//! The HTTP/1.1 clients (lean and library) sending a REST target's requests to servers we did
//! not write: nginx (chunked SSI answers, a Content-Length file, HEAD, 204) and hypercorn
//! (an ASGI app streaming its answer chunked, POST bodies). Each server skips its test when
//! missing unless `TBENCH_REQUIRE_NGINX=1` / `TBENCH_REQUIRE_HYPERCORN=1`.

use bench_core::ClientImplementation;
use stack_h1::Http1;
use test_servers::hypercorn::Hypercorn;
use test_servers::nginx::Nginx;
use test_servers::rest::{hypercorn_checks, nginx_checks};

const CLIENTS: [ClientImplementation; 2] =
    [ClientImplementation::Lean, ClientImplementation::Library];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_answers_target_requests_over_http1() {
    let certs = tempfile::tempdir().expect("temp dir");
    let Some(nginx) = Nginx::start(certs.path()) else {
        return;
    };
    for client in CLIENTS {
        nginx_checks(&Http1, client, &nginx, certs.path(), "1.1").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypercorn_answers_target_requests_over_http1() {
    let certs = tempfile::tempdir().expect("temp dir");
    let Some(hypercorn) = Hypercorn::start(certs.path()) else {
        return;
    };
    for client in CLIENTS {
        hypercorn_checks(&Http1, client, &hypercorn, certs.path(), "1.1").await;
    }
}
