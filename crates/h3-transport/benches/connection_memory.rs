//! Bytes the HTTP/3 client holds per connection, from the allocator's count (requested bytes
//! live, allocator-independent), so that a regression in the load generator's memory per
//! connection shows as a number rather than in a timed test.
//!
//! The server runs in a child process (this binary again, `H3_MEMORY_BENCH_SERVE` set), so the
//! count is the client's alone. For each endpoint mode the client opens N connections to it
//! over loopback, each with one request answered, and the bench prints the live bytes per
//! connection:
//!
//! - `open`: N connections open, each after one exchange;
//! - `closing`: all N closed by the client; for per-connection endpoints, counted once every
//!   closing has released quinn's state and is held by its socket alone (the count says how
//!   many were still holding then: a period is 3 PTO, ≈ 80 ms on loopback);
//! - `after`: once every closing period has ended (`settle`): what stays per connection.
//!
//! `cargo bench -p h3-transport --bench connection_memory` uses N = 500 (the new-conn cell of
//! the load generator); run as a test (`cargo test --all-targets`) N = 16, and it checks
//! only structure: nothing of quinn's receive buffer (32 × 1,472 B per endpoint) stays per
//! connection after the closing periods end, and every per-connection closing was held by its
//! socket alone.

use std::alloc::System;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::testkit::client_settings;
use bench_core::{PayloadProfile, QuicEndpoint};
use futures::StreamExt;
use h3_transport::H3Transport;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SERVE: &str = "H3_MEMORY_BENCH_SERVE";

/// Connections opened at once.
const OPENING_AT_ONCE: usize = 32;

/// quinn's receive buffer per endpoint: 32 datagrams (quinn-udp's batch) of 1,472 B.
const QUINN_RECV_BUFFER: i64 = 32 * 1472;

/// Bytes the program has allocated and not freed.
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn main() {
    bench_core::tls::install_crypto_provider();
    if let Ok(certs) = std::env::var(SERVE) {
        serve(certs.as_ref());
        return;
    }
    let bench = std::env::args().any(|a| a == "--bench");
    let n: usize = if bench { 500 } else { 16 };
    let certs = tempfile::tempdir().expect("temp dir");
    bench_core::tls::ensure_certs(certs.path()).expect("certificates");
    let mut server = std::process::Command::new(std::env::current_exe().expect("own path"))
        .env(SERVE, certs.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("server process");
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("server's port");
    let addr: SocketAddr = line.trim().parse().expect("server's address");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for mode in [QuicEndpoint::PerConnection, QuicEndpoint::Shared] {
        let mut settings = client_settings(addr, certs.path(), false, PayloadProfile::Small);
        settings.tuning.quic_endpoint = mode;
        settings.handshake_timeout = Duration::from_secs(30);
        let m = rt.block_on(measure(settings, n));
        let per = |bytes: i64| bytes / n as i64;
        let name = format!("h3_connection_memory/{}", mode.as_str());
        println!(
            "{name}/open: {} B per open connection (N = {n})",
            per(m.open)
        );
        match m.closing_holding {
            Some(holding) => println!(
                "{name}/closing: {} B per closing connection, its socket alone holding ({holding} of {n} still in their closing period when counted)",
                m.closing / holding.max(1) as i64
            ),
            None => println!(
                "{name}/closing: {} B per closing connection, quinn's endpoint holding",
                per(m.closing)
            ),
        }
        println!(
            "{name}/after: {} B per connection once every closing period has ended",
            per(m.after)
        );
        if mode == QuicEndpoint::PerConnection {
            assert_eq!(m.by_quinn, 0, "closings left to quinn");
        }
        assert!(
            per(m.after) < QUINN_RECV_BUFFER,
            "{name}: {} B per connection stay after the closing periods ended",
            per(m.after)
        );
    }
    drop(server.stdin.take());
    let _ = server.wait();
}

/// Live bytes above the baseline at each stage.
struct Measured {
    open: i64,
    closing: i64,
    /// Per-connection endpoints: how many were in their closing period when `closing` was
    /// counted.
    closing_holding: Option<u64>,
    after: i64,
    by_quinn: u64,
}

async fn measure(settings: bench_core::ClientSettings, n: usize) -> Measured {
    let client = Arc::new(H3Transport::new(&settings, b"h3").expect("client"));
    let shared = client.shares_endpoint();
    let authority = format!("https://localhost:{}", settings.target.port());
    let open_n = |n: usize| {
        let (client, authority) = (client.clone(), authority.clone());
        async move {
            let opens = (0..n).map(|i| {
                let (client, authority) = (client.clone(), authority.clone());
                tokio::spawn(async move {
                    let (conn, _) = client.open().await.expect("connect");
                    let request = http::Request::get(format!("{authority}/item/{i}"))
                        .body(())
                        .expect("request");
                    let answer = conn
                        .exchange((request, None), Instant::now())
                        .await
                        .expect("exchange");
                    assert_eq!(answer.status, 200);
                    drop(answer);
                    conn
                })
            });
            // A few dozen handshakes at a time: all N at once overflow the server socket's
            // buffer, and a lost Initial waits out quinn's PTO.
            let opened: Vec<_> = futures::stream::iter(opens)
                .buffer_unordered(OPENING_AT_ONCE)
                .collect()
                .await;
            opened
                .into_iter()
                .map(|open| open.expect("open task"))
                .collect::<Vec<_>>()
        }
    };
    // Warm-up: the runtime's, rustls' and quinn's one-time state, grown to its size for N.
    let conns = open_n(n).await;
    close_all(&conns).await;
    drop(conns);
    client.settle(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let base = live();
    let conns = open_n(n).await;
    let open = live() - base;
    let released_before = client.closing_counts().released;
    close_all(&conns).await;
    drop(conns);
    let mut closing_holding = None;
    if !shared {
        let bound = Instant::now() + Duration::from_secs(10);
        loop {
            let c = client.closing_counts();
            if c.released - released_before >= n as u64 || c.by_quinn > 0 {
                break;
            }
            assert!(Instant::now() < bound, "closings not released: {c:?}");
            tokio::task::yield_now().await;
        }
    }
    let closing = live() - base;
    if !shared {
        closing_holding = Some(client.closing_counts().holding);
    }
    client.settle(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    Measured {
        open,
        closing,
        closing_holding,
        after: live() - base,
        by_quinn: client.closing_counts().by_quinn,
    }
}

/// Closes every connection at once (the client closes first).
async fn close_all(conns: &[h3_transport::H3Connection]) {
    futures::future::join_all(conns.iter().map(|c| c.close())).await;
}

/// The server: h3-transport's, answering every request with a small 200, until stdin closes.
fn serve(certs: &std::path::Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let paths = bench_core::tls::ensure_certs(certs).expect("certificates");
        let identity = bench_core::tls::ServerIdentity::load(&paths).expect("identity");
        let bound = h3_transport::server::bind(
            bench_core::ServerSettings {
                listen: "127.0.0.1:0".parse().expect("address"),
                tls: Some(Arc::new(identity)),
                payload: PayloadProfile::Small,
                fault: None,
                backlog: 1024,
                tuning: Default::default(),
                service_time: Default::default(),
            },
            b"h3",
            |request: h3_transport::server::Request| async move {
                let Ok((_, mut stream)) = request.resolve_request().await else {
                    return;
                };
                while let Ok(Some(_)) = stream.recv_data().await {}
                let head = http::Response::builder()
                    .status(200)
                    .body(())
                    .expect("head");
                if stream.send_response(head).await.is_ok() {
                    let _ = stream.send_data(bytes::Bytes::from_static(b"{}")).await;
                    let _ = stream.finish().await;
                }
            },
        )
        .expect("bind");
        println!("{}", bound.local_addr);
        std::io::stdout().flush().expect("stdout");
        tokio::spawn(bound.serving);
        // Until the parent closes stdin (or goes).
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).unwrap_or(0) > 0 {}
        })
        .await
        .expect("stdin");
    });
}
