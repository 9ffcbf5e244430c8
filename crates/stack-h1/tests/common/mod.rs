//! Helpers shared by the tests that drive the HTTP/1.1 client against other servers.
#![allow(dead_code)] // each test file uses its own subset

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::{Client, ClientSettings, Connection, Failure, FailureClass, PayloadProfile};

/// How far past its timeout a request may end (scheduling, closing).
pub const SLACK: Duration = Duration::from_millis(300);

/// Plaintext client settings for a loopback server.
pub fn settings(addr: SocketAddr) -> ClientSettings {
    ClientSettings {
        target: addr,
        server_name: bench_core::tls::SERVER_NAME.to_string(),
        tls: None,
        connect_timeout: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(2),
        payload: PayloadProfile::Small,
        tuning: Default::default(),
        calls: Default::default(),
    }
}

pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// Outcomes of a driven run.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: u64,
    pub failed: BTreeMap<FailureClass, u64>,
    /// The last failure's detail per class.
    pub examples: BTreeMap<FailureClass, String>,
    pub slowest: Duration,
    /// Successes whose reply says the client opened a socket for them (timed setup).
    pub reopened: u64,
    /// Bytes the last connection received over all its sockets.
    pub received: u64,
}

impl Tally {
    pub fn failures(&self) -> Vec<(FailureClass, u64)> {
        self.failed.iter().map(|(c, n)| (*c, *n)).collect()
    }

    pub fn example(&self, class: FailureClass) -> &str {
        self.examples.get(&class).map_or("", String::as_str)
    }
}

/// Sends `requests` requests as the runner's reuse worker would, each bounded by `timeout`,
/// pausing `gap` between them; asserts each ended within its bound.
pub async fn drive(client: &dyn Client, requests: u64, timeout: Duration, gap: Duration) -> Tally {
    let mut tally = Tally::default();
    let mut conn: Option<Arc<dyn Connection>> = None;
    for id in 0..requests {
        let started = Instant::now();
        let outcome = async {
            let c = match &conn {
                Some(c) => c.clone(),
                None => {
                    let c = client.connect().await?.conn;
                    conn = Some(c.clone());
                    c
                }
            };
            tokio::time::timeout(timeout, c.request(bench_core::Call::item(id)))
                .await
                .unwrap_or_else(|_| {
                    Err(Failure::new(
                        FailureClass::RequestTimeout,
                        "request timeout",
                    ))
                })
        }
        .await;
        let took = started.elapsed();
        assert!(took <= timeout + SLACK, "request {id} took {took:?}");
        tally.slowest = tally.slowest.max(took);
        match outcome {
            Ok(reply) => {
                assert!(reply.body_bytes > 0 && reply.total >= reply.ttfb);
                tally.ok += 1;
                tally.reopened += u64::from(reply.reopened.is_some());
            }
            Err(f) => {
                *tally.failed.entry(f.class).or_default() += 1;
                tally.examples.insert(f.class, f.detail.clone());
                if f.breaks_connection() {
                    if let Some(c) = conn.take() {
                        c.close().await;
                    }
                }
            }
        }
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    if let Some(c) = conn.take() {
        c.close().await;
        tally.received = c.wire_bytes().received;
    }
    tally
}
