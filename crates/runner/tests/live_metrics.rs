//! Live metrics checked by a real Prometheus server (Debian's `prometheus`; skipped with a note
//! when it is missing, unless TBENCH_REQUIRE_PROMETHEUS=1, as scripts/test sets it): it
//! scrapes the runner's `--metrics-listen` endpoint every second during a short run of two
//! paced cells, and its HTTP API then gives every cell's request counters: their last values
//! are cells.csv's `sent` and `ok`, and a value scraped while the cell ran lies strictly
//! between 0 and that. With agents, the runner's own endpoint (scraped here by the test) shows
//! the sum over them, ending at cells.csv's, and their load generators' memory. A non-loopback address without
//! `metrics_listen_public` is bad input.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// Prometheus, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_installed() -> bool {
    Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The body of a GET to the local server at `port`, when it answers 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    // Prometheus's API answers in chunks.
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        loop {
            let (size, after) = rest.split_once("\r\n")?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                return Some(out);
            }
            out.push_str(after.get(..size)?);
            rest = after.get(size + 2..)?;
        }
    }
    Some(body.to_string())
}

/// Starts Prometheus scraping `target` every second, and waits until it has tried once.
fn start_prometheus(dir: &Path, target: u16) -> Prometheus {
    let port = test_servers::free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: tbench\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let prometheus = Prometheus { child, port };
    // Ready, and scraping: Prometheus hands new targets to its scrapers every 5 s, so it
    // has tried the (not yet listening) endpoint once before the run starts.
    let until = Instant::now() + Duration::from_secs(60);
    while !get(port, "/api/v1/targets").is_some_and(|body| {
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        json["data"]["activeTargets"]
            .as_array()
            .and_then(|t| t.first())
            .and_then(|t| t["lastScrape"].as_str())
            .is_some_and(|at| !at.starts_with("0001-"))
    }) {
        assert!(
            Instant::now() < until,
            "prometheus not scraping within 60 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    prometheus
}

/// Each series of the range query `query` (e.g. `m[10m]`): its labels and its values in
/// time order.
type Series = Vec<(BTreeMap<String, String>, Vec<f64>)>;

fn range(prometheus: &Prometheus, query: &str) -> Series {
    let encoded: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(prometheus.port, &format!("/api/v1/query?query={encoded}"))
        .unwrap_or_else(|| panic!("prometheus did not answer {query}"));
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON answer");
    assert_eq!(json["status"], "success", "{body}");
    json["data"]["result"]
        .as_array()
        .expect("a matrix")
        .iter()
        .map(|s| {
            let labels = s["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            let values = s["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v[1].as_str().unwrap().parse::<f64>().unwrap())
                .collect();
            (labels, values)
        })
        .collect()
}

/// The values Prometheus holds of `metric` for the cell `key` (`h1/reuse/c2/r1`).
fn of_cell<'a>(series: &'a Series, key: &str) -> Option<&'a Vec<f64>> {
    series.iter().find_map(|(labels, values)| {
        let of = format!(
            "{}/{}/{}/r{}",
            labels.get("stack")?,
            labels.get("regime")?,
            labels.get("level")?,
            labels.get("repetition")?
        );
        (labels.get("variant")? == "default" && of == key).then_some(values)
    })
}

#[test]
fn prometheus_scrapes_every_cells_counters_during_the_run_and_ends_at_cells_csv() {
    if !prometheus_installed() {
        test_servers::skip(
            "prometheus",
            "TBENCH_REQUIRE_PROMETHEUS",
            "apt-get install prometheus",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = test_servers::free_port();
    let prometheus = start_prometheus(tmp.path(), endpoint);
    // Two cells, each 3,000 requests paced at 1,000/s: 3 s apiece, scraped about three times
    // while it runs.
    let listen = format!("127.0.0.1:{endpoint}");
    let run = run_ok(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2,4",
        "--requests",
        "3000",
        "--rate",
        "1000",
        "--baseline-seconds",
        "0",
        "--metrics-listen",
        &listen,
        "--metrics-linger-seconds",
        "60",
    ]);
    let text = output_text(&run.output);
    assert!(
        text.contains(&format!("metrics: http://{listen}/metrics")),
        "{text}"
    );
    assert!(!text.contains("no scrape read the final figures"), "{text}");
    let cells = run.cells();
    assert_eq!(cells.len(), 2);

    // The run ended after a scrape read its final figures; Prometheus may take a moment to
    // make that scrape queryable.
    let until = Instant::now() + Duration::from_secs(30);
    let (sent, ok) = loop {
        let sent = range(&prometheus, "tbench_requests_sent_total[10m]");
        let ok = range(&prometheus, "tbench_requests_ok_total[10m]");
        let complete = cells.iter().all(|row| {
            let key = &row["cell_key"];
            of_cell(&sent, key).and_then(|v| v.last()) == Some(&num(row, "sent"))
                && of_cell(&ok, key).and_then(|v| v.last()) == Some(&num(row, "ok"))
        });
        if complete || Instant::now() > until {
            break (sent, ok);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for row in &cells {
        let key = &row["cell_key"];
        for (what, series, column) in [("sent", &sent, "sent"), ("ok", &ok, "ok")] {
            let values = of_cell(series, key)
                .unwrap_or_else(|| panic!("{key}: no {what} series in {series:?}"));
            eprintln!("{key} {what}, as scraped: {values:?}");
            let last = num(row, column);
            assert_eq!(last, 3000.0, "{key}: cells.csv {column}");
            assert_eq!(values.last(), Some(&last), "{key} {what}: {values:?}");
            assert!(
                values.windows(2).all(|w| w[0] <= w[1]),
                "{key} {what} went down: {values:?}"
            );
            assert!(
                values.iter().any(|v| *v > 0.0 && *v < last),
                "{key} {what}: no value scraped mid-run in {values:?}"
            );
        }
    }
    let finished = range(&prometheus, "tbench_cells_finished_total[10m]");
    assert_eq!(finished.len(), 1, "{finished:?}");
    assert_eq!(finished[0].1.last(), Some(&2.0), "{finished:?}");
}

#[test]
fn a_non_loopback_address_needs_metrics_listen_public() {
    let out = tempfile::tempdir().unwrap();
    let mut args = ONE_TINY_CELL.to_vec();
    args.extend(["--stacks", "h1", "--metrics-listen", "0.0.0.0:0"]);
    let refused = runner()
        .args(&args)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    let text = output_text(&refused);
    assert!(
        text.contains("metrics_listen")
            && text.contains("0.0.0.0:0 is not a loopback address")
            && text.contains("--metrics-listen-public"),
        "{text}"
    );
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing made"
    );

    let garbled = runner()
        .args(["--stacks", "h1", "--metrics-listen", "localhost:9464"])
        .output()
        .unwrap();
    assert_eq!(garbled.status.code(), Some(2), "{}", output_text(&garbled));
    assert!(
        output_text(&garbled).contains("is not a port or an IP address"),
        "{}",
        output_text(&garbled)
    );
}

const TOKEN: &str = "live-metrics-test-token-0123456789";

/// The value of the sample of `metric` whose line holds `with`, in an exposition.
fn sample(text: &str, metric: &str, with: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{metric}{{")) && l.contains(with))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn with_agents_the_runners_endpoint_shows_their_sum() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let agents = [Agent::start(&certs, TOKEN), Agent::start(&certs, TOKEN)];
    let list = format!("{},{}", agents[0].addr, agents[1].addr);
    let port = test_servers::free_port();
    // The test is the scraper: every 100 ms until the run is over.
    let over = Arc::new(AtomicBool::new(false));
    let scraper = {
        let over = over.clone();
        std::thread::spawn(move || {
            let mut scrapes = Vec::new();
            while !over.load(Ordering::SeqCst) {
                if let Some(text) = get(port, "/metrics") {
                    scrapes.push(text);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            scrapes
        })
    };
    let out = tmp.path().join("results");
    let output = runner()
        .args([
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--baseline-seconds",
            "0",
            "--concurrency",
            "4",
            "--requests",
            "2000",
            "--rate",
            "1000",
            "--agents",
            &list,
            "--metrics-listen",
            &port.to_string(),
            "--metrics-linger-seconds",
            "60",
            "--certs",
        ])
        .arg(&certs)
        .arg("--out")
        .arg(&out)
        .env("TBENCH_AGENT_TOKEN", TOKEN)
        .output()
        .unwrap();
    over.store(true, Ordering::SeqCst);
    let scrapes = scraper.join().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    assert!(
        !output_text(&output).contains("no scrape read the final figures"),
        "{}",
        output_text(&output)
    );
    let cells = read_csv(&results_dir(&out).join("cells.csv"));
    assert_eq!((cells.len(), num(&cells[0], "agents")), (1, 2.0));
    let cell = "level=\"c4\",repetition=\"1\"}";
    for (metric, column) in [
        ("tbench_requests_sent_total", "sent"),
        ("tbench_requests_ok_total", "ok"),
        ("tbench_wire_received_bytes_total", "wire_received_bytes"),
        ("tbench_latency_seconds_count", "ok"),
    ] {
        let values: Vec<f64> = scrapes
            .iter()
            .filter_map(|text| sample(text, metric, cell))
            .collect();
        let last = num(&cells[0], column);
        assert_eq!(values.last(), Some(&last), "{metric}: {values:?}");
        assert!(
            values.windows(2).all(|w| w[0] <= w[1]),
            "{metric} went down: {values:?}"
        );
        assert!(
            values.iter().any(|v| *v > 0.0 && *v < last),
            "{metric}: nothing mid-run in {values:?}"
        );
    }
    // The gauge adds the agents' up (2 workers each) and goes with the cell.
    let in_flight: Vec<f64> = scrapes
        .iter()
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("tbench_requests_in_flight "))
                .map(|v| v.parse().unwrap())
        })
        .collect();
    assert!(
        !in_flight.is_empty() && in_flight.iter().all(|n| *n <= 4.0),
        "{in_flight:?}"
    );
    // The agents sample their load generators and send the readings along: summed, more
    // than one process's worth of memory.
    let rss: Vec<f64> = scrapes
        .iter()
        .filter_map(|text| sample(text, "tbench_process_resident_memory_bytes", "\"client\""))
        .collect();
    assert!(rss.iter().any(|b| *b > 2e6), "{rss:?}");
    assert!(!scrapes
        .last()
        .unwrap()
        .contains("tbench_requests_in_flight"));
}

#[test]
fn a_resumed_run_may_serve_live_metrics_and_nothing_else_changes() {
    let run = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    let port = test_servers::free_port().to_string();
    let resumed = runner()
        .arg("--resume")
        .arg(run.dir())
        .arg("--certs")
        .arg(run.certs.path())
        .args(["--metrics-listen", &port, "--metrics-linger-seconds", "0"])
        .output()
        .unwrap();
    let text = output_text(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(
        text.contains(&format!("metrics: http://127.0.0.1:{port}/metrics")),
        "{text}"
    );
    let public = runner()
        .arg("--resume")
        .arg(run.dir())
        .args(["--metrics-listen", "0.0.0.0:1"])
        .output()
        .unwrap();
    assert_eq!(public.status.code(), Some(2), "{}", output_text(&public));
    assert!(output_text(&public).contains("not a loopback address"));
    let other = runner()
        .arg("--resume")
        .arg(run.dir())
        .args(["--metrics-listen", &port, "--requests", "5"])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2), "{}", output_text(&other));
    assert!(output_text(&other).contains("give no other run flags"));
}
