//! The endpoint over real TCP: what it answers, that it lingers for one last scrape, and that
//! the values a scraper reads while a load phase runs (the engine's own, against a fake
//! client) never go down and end equal to the phase's measurements.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bench_core::{
    Call, Client, ConnectTiming, Connected, Connection, Failure, FailureClass, Reply, WireBytes,
};
use live_metrics::{CellLabels, Endpoint};
use load::engine::{self, LoadSpec, Pool, Progress};
use load::live::LiveSnapshot;
use load::{Pacing, Regime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The whole answer to one request.
async fn ask(addr: SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

async fn scrape(addr: SocketAddr) -> String {
    let answer = ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    body.to_string()
}

/// Every sample of the exposition, by its line's name and labels.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_string(), value.parse().unwrap())
        })
        .collect()
}

fn labels() -> CellLabels {
    CellLabels {
        variant: "default".into(),
        stack: "h1".into(),
        regime: "reuse".into(),
        level: "c8".into(),
        repetition: 1,
    }
}

#[tokio::test]
async fn it_answers_metrics_and_nothing_else_and_lingers_for_a_last_scrape() {
    let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = endpoint.addr();
    endpoint.board().begin_cell(labels());
    let body = scrape(addr).await;
    assert!(body.contains("# TYPE tbench_requests_sent_total counter\n"));
    assert!(body.contains(
        "tbench_requests_sent_total{variant=\"default\",stack=\"h1\",regime=\"reuse\",level=\"c8\",repetition=\"1\"} 0\n"
    ));
    let query = ask(addr, "GET /metrics?x=1 HTTP/1.1\r\n\r\n").await;
    assert!(query.starts_with("HTTP/1.1 200 OK\r\n"));
    let head = ask(addr, "HEAD /metrics HTTP/1.1\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"));
    let missing = ask(addr, "GET /other HTTP/1.1\r\n\r\n").await;
    assert!(
        missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{missing}"
    );
    let post = ask(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
    assert!(
        post.starts_with("HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"),
        "{post}"
    );
    let garbage = ask(addr, "\u{1}\u{2}\r\n\r\n").await;
    assert!(
        garbage.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{garbage}"
    );

    // Nobody scrapes: the linger ends at its bound, saying so.
    endpoint.board().end_cell(None);
    assert!(!endpoint.linger(Duration::from_millis(50)).await);
    // A scrape after the run's end is the final one, and ends the linger.
    let lingering = tokio::spawn(async move {
        let served = endpoint.linger(Duration::from_secs(30)).await;
        (served, endpoint)
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let last = scrape(addr).await;
    assert!(last.contains("tbench_cells_finished_total 1\n"));
    let (served, _endpoint) = lingering.await.unwrap();
    assert!(served);
}

/// Answers after a short wait; 100 bytes out and 1,000 back per request; every seventh
/// request is a bad status.
struct Fake;

struct FakeConn {
    requests: AtomicU64,
}

#[async_trait]
impl Client for Fake {
    async fn connect(&self) -> Result<Connected, Failure> {
        Ok(Connected {
            conn: Arc::new(FakeConn {
                requests: AtomicU64::new(0),
            }),
            timing: ConnectTiming::default(),
        })
    }
}

#[async_trait]
impl Connection for FakeConn {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        tokio::time::sleep(Duration::from_micros(200 + call.seq % 3 * 500)).await;
        self.requests.fetch_add(1, Ordering::SeqCst);
        if call.seq % 7 == 6 {
            return Err(Failure::new(FailureClass::BadStatus, "503"));
        }
        Ok(Reply::default())
    }
    fn wire_bytes(&self) -> WireBytes {
        let n = self.requests.load(Ordering::SeqCst);
        WireBytes {
            sent: 100 * n,
            received: 1_000 * n,
        }
    }
    async fn close(&self) {}
}

/// What a scraper compares: every counter of the cell, by series.
fn counters(text: &str) -> BTreeMap<String, f64> {
    samples(text)
        .into_iter()
        .filter(|(series, _)| {
            series.contains("_total{")
                || series.starts_with("tbench_latency_seconds_bucket{")
                || series.starts_with("tbench_latency_seconds_count{")
                || series.starts_with("tbench_latency_seconds_sum{")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_values_never_go_down_and_end_at_the_cells_measurements() {
    let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = endpoint.addr();
    let board = endpoint.board().clone();
    board.begin_cell(labels());
    let spec = LoadSpec {
        regime: Regime::Reuse,
        concurrency: 8,
        requests: 2_000,
        connections: 0,
        request_timeout: Duration::from_secs(5),
        connect_bound: Duration::from_secs(5),
        max_duration: Duration::from_secs(60),
        ends_by_time: false,
        min_duration: Duration::ZERO,
        first_id: 0,
        rate: None,
        pacing: Pacing::Timer,
        ids: None,
        seq_base: 0,
        mix: None,
        stop_after_identical_failures: 0,
    };
    let progress = Arc::new(Progress::for_spec(&spec));
    let pool = Pool::for_spec(&spec);
    let client: Arc<dyn Client> = Arc::new(Fake);
    pool.open_all(client.clone(), &spec).await;
    // The load child's ticker, faster: a snapshot to the board every 5 ms.
    let ticker = {
        let (progress, board) = (progress.clone(), board.clone());
        tokio::spawn(async move {
            loop {
                if let Some(s) = progress.live_snapshot() {
                    board.progress(0, 1, s);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut scrapes = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                scrapes.push(counters(&scrape(addr).await));
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            scrapes
        })
    };
    let result = engine::run(client, spec, pool, progress).await;
    ticker.abort();
    let measured = result.measurements;
    board.end_cell(Some(LiveSnapshot::of(&measured)));
    stop.store(true, Ordering::SeqCst);
    let mut scrapes = scraper.await.unwrap();
    let last = counters(&scrape(addr).await);
    scrapes.push(last.clone());

    // Every counter, scrape after scrape, never went down.
    for pair in scrapes.windows(2) {
        for (series, value) in &pair[0] {
            let next = pair[1].get(series).copied().unwrap_or(f64::NAN);
            assert!(*value <= next, "{series}: {value} then {next}");
        }
    }
    let series = |name: &str| {
        format!(
            "{name}{{variant=\"default\",stack=\"h1\",regime=\"reuse\",level=\"c8\",repetition=\"1\"}}"
        )
    };
    assert_eq!(
        last[&series("tbench_requests_sent_total")],
        measured.sent as f64
    );
    assert_eq!(
        last[&series("tbench_requests_ok_total")],
        measured.ok as f64
    );
    assert_eq!(
        last[&series("tbench_wire_received_bytes_total")],
        measured.wire.received as f64
    );
    assert_eq!(
        last[&series("tbench_latency_seconds_count")],
        measured.ok as f64
    );
    assert_eq!((measured.sent, measured.wire.received), (2_000, 2_000_000));
    // Some scrape saw the phase half-way.
    assert!(
        scrapes.iter().any(|s| {
            let sent = s[&series("tbench_requests_sent_total")];
            sent > 0.0 && sent < 2_000.0
        }),
        "{} scrapes, none mid-phase",
        scrapes.len()
    );
    let bad = "tbench_requests_failed_total{variant=\"default\",stack=\"h1\",regime=\"reuse\",level=\"c8\",repetition=\"1\",class=\"bad_status\"}";
    assert_eq!(
        last[bad],
        measured.failures[FailureClass::BadStatus.index()] as f64
    );
    let sum = last[&series("tbench_latency_seconds_sum")];
    let mean_s = measured.latency.mean() / 1e6;
    assert!(
        (sum / measured.ok as f64 - mean_s).abs() < 1e-6,
        "{sum} over {} vs {mean_s}",
        measured.ok
    );
}
