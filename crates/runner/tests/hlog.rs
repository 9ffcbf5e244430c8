//! The `.hlog` files (HdrHistogram interval logs) a run writes per cell, read back by a second
//! implementation (the Python `hdrhistogram` package, module `hdrh`; skipped with a note when
//! python3 or the package is missing, unless TBENCH_REQUIRE_HDRHISTOGRAM=1), and
//! `runner merge` of two runs checked against histograms added independently here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

mod common;

use base64::Engine as _;
use common::*;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use load::measurements::LatencySummary;
use results::hlog;

const SMOKE: [&str; 10] = [
    "--stacks",
    "h1",
    "--regime",
    "reuse",
    "--concurrency",
    "2",
    "--requests",
    "200",
    "--baseline-seconds",
    "0",
];

/// The quantiles of cells.csv's `*_p*_us` columns.
const REPORTED: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
    (0.999, "p999"),
];

fn smoke() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| run_ok(&SMOKE))
}

/// python3 with `hdrh` importable; `None` after a note when missing (a failure when
/// TBENCH_REQUIRE_HDRHISTOGRAM=1).
fn python_with_hdrh() -> Option<String> {
    const REQUIRE: &str = "TBENCH_REQUIRE_HDRHISTOGRAM";
    const HINT: &str = "pip install -r scripts/requirements.txt (hdrhistogram)";
    let Some(python) = test_servers::find_binary(&["python3"], "--version") else {
        test_servers::skip("python3", REQUIRE, HINT);
        return None;
    };
    let importable = Command::new(&python)
        .args(["-c", "import hdrh.histogram, hdrh.log"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        test_servers::skip("the Python hdrhistogram package", REQUIRE, HINT);
        return None;
    }
    Some(python)
}

/// What `tests/data/hlog_summary.py` decoded from `files`.
fn python_summary(python: &str, files: &[PathBuf], extra: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hlog_summary.py");
    let out = Command::new(python)
        .arg(script)
        .args(extra)
        .args(files)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn int(v: &serde_json::Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an integer"))
}

fn quantile_list() -> Vec<f64> {
    let mut qs: Vec<f64> = results::rows::CDF_QUANTILES.to_vec();
    qs.extend(REPORTED.iter().map(|(q, _)| *q));
    qs
}

fn quantile_arg() -> String {
    quantile_list()
        .iter()
        .map(|q| format!("{q:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Decodes an interval log with the hdrhistogram crate alone (not the runner's reader): the
/// histograms by tag, each a fresh 3-digit auto-resizing histogram with every interval added.
fn decode_independently(path: &Path) -> HashMap<String, Histogram<u64>> {
    let bytes = std::fs::read(path).unwrap();
    let mut out: HashMap<String, Histogram<u64>> = HashMap::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(i) = entry.expect("a valid interval log") else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(i.encoded_histogram())
            .unwrap();
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .unwrap();
        let tag = i.tag().expect("tagged").as_str().to_string();
        let sum = out.entry(tag).or_insert_with(|| {
            let mut h = Histogram::new_with_bounds(1, 2, 3).unwrap();
            h.auto(true);
            h
        });
        sum.add(&h).unwrap();
    }
    out
}

fn assert_summary_is_row(s: &LatencySummary, row: &HashMap<String, String>, prefix: &str) {
    let col = |name: &str| num(row, &format!("{prefix}_{name}_us"));
    assert_eq!(s.min as f64, col("min"), "{prefix} min");
    assert_eq!(s.p50 as f64, col("p50"), "{prefix} p50");
    assert_eq!(s.p90 as f64, col("p90"), "{prefix} p90");
    assert_eq!(s.p95 as f64, col("p95"), "{prefix} p95");
    assert_eq!(s.p99 as f64, col("p99"), "{prefix} p99");
    assert_eq!(s.p999 as f64, col("p999"), "{prefix} p999");
    assert_eq!(s.max as f64, col("max"), "{prefix} max");
    assert!((s.mean - col("mean")).abs() <= 0.05 + 1e-9, "{prefix} mean");
}

#[test]
fn every_cell_writes_an_hlog_that_python_hdrhistogram_reads_with_the_same_percentiles() {
    let run = smoke();
    let dir = run.dir();
    let cells = run.cells();
    assert!(!cells.is_empty());
    let mut files = Vec::new();
    for row in &cells {
        let key = &row["cell_key"];
        assert_eq!(row["error"], "", "{key}");
        assert_eq!(row["agents"], "1", "{key}");
        let path = dir
            .join("hlog")
            .join(format!("{}.hlog", key.replace('/', "_")));
        assert_eq!(path, hlog::path(&dir, key));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(text.contains("values in microseconds"), "{text}");
        assert!(text.contains("#[StartTime: "), "{text}");
        for tag in ["latency", "ttfb", "connect", "handshake"] {
            assert!(
                text.contains(&format!("\nTag={tag},0.000,")),
                "{tag}: {text}"
            );
        }
        assert!(!text.contains("Tag=pacing_lag"), "closed loop: {text}");

        // The runner's own reader: the histograms behind the row, and the phase's window.
        let logged = hlog::read(&path).unwrap();
        assert_eq!(logged.latency.len() as f64, num(row, "ok"), "{key}");
        assert_eq!(
            num(row, "ok"),
            200.0,
            "{key}: the smoke run's budget, all ok"
        );
        assert_summary_is_row(&LatencySummary::of(&logged.latency), row, "latency");
        assert_summary_is_row(&LatencySummary::of(&logged.ttfb), row, "ttfb");
        assert_summary_is_row(&LatencySummary::of(&logged.connect), row, "connect");
        assert_summary_is_row(&LatencySummary::of(&logged.handshake), row, "handshake");
        let window = logged.window.expect("one interval");
        assert!((window.start_unix_s - num(row, "measured_start_unix_s")).abs() < 0.0011);
        assert!((window.duration_s - num(row, "elapsed_s")).abs() < 0.0011);
        files.push(path);
    }

    let Some(python) = python_with_hdrh() else {
        return;
    };
    let decoded = python_summary(&python, &files, &["--quantiles", &quantile_arg()]);
    let latency_csv = read_csv(&dir.join("latency.csv"));
    for (row, path) in cells.iter().zip(&files) {
        let key = &row["cell_key"];
        let file = &decoded[path.file_name().unwrap().to_str().unwrap()];
        for prefix in ["latency", "ttfb", "connect", "handshake"] {
            let h = &file[prefix];
            let col = |name: &str| num(row, &format!("{prefix}_{name}_us"));
            let what = format!("{key} {prefix}");
            let n = int(&h["count"]);
            assert!(n > 0, "{what}");
            assert_eq!(int(&h["min"]) as f64, col("min"), "{what}");
            assert_eq!(int(&h["max"]) as f64, col("max"), "{what}");
            let mean = h["mean"].as_f64().unwrap();
            assert!((mean - col("mean")).abs() <= 0.05 + 1e-9, "{what}: {mean}");
            for (q, name) in REPORTED {
                // Same rank, same value: the two libraries decode the same histogram.
                let ranked = int(&h["rank"][format!("{q:?}")]);
                assert_eq!(ranked as f64, col(name), "{what} {name}");
                // hdrh's own percentile rounds q·n to the nearest rank; where q·n is an
                // integer both libraries pick the same rank.
                if (q * n as f64).fract() == 0.0 {
                    let native = int(&h["native"][format!("{q:?}")]);
                    assert_eq!(native as f64, col(name), "{what} {name} (hdrh's own)");
                }
            }
            if prefix == "latency" {
                assert_eq!(n as f64, num(row, "ok"), "{what}");
                for p in ["p50", "p90", "p99"] {
                    let q = REPORTED.iter().find(|(_, n)| *n == p).unwrap().0;
                    assert_eq!(
                        int(&h["native"][format!("{q:?}")]) as f64,
                        col(p),
                        "{what}: hdrh's own {p} of 200 requests"
                    );
                }
                for point in latency_csv.iter().filter(|r| &r["cell_key"] == key) {
                    let q: f64 = point["quantile"].parse().unwrap();
                    assert_eq!(
                        int(&h["rank"][format!("{q:?}")]) as f64,
                        num(point, "latency_us"),
                        "{what}: latency.csv at {q}"
                    );
                }
            }
        }
        let start = file["latency"]["start"].as_f64().unwrap();
        assert!((start - num(row, "measured_start_unix_s")).abs() < 0.0011);
        let length = file["latency"]["length"].as_f64().unwrap();
        assert!((length - num(row, "elapsed_s")).abs() < 0.0011);
    }
}

fn merge(args: &[&Path], out: &Path) -> std::process::Output {
    runner()
        .arg("merge")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("runner runs")
}

/// Exit 2 with one line on stderr and nothing written.
fn assert_refused(out: &std::process::Output, target: &Path, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(out));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(says), "expected '{says}': {stderr}");
    assert!(!target.exists(), "nothing written");
}

#[test]
fn merge_of_two_runs_adds_histograms_exactly_and_sums_the_counts() {
    let a = smoke();
    let b = run_ok(&SMOKE);
    let (a_dir, b_dir) = (a.dir(), b.dir());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("merged");
    let merged = merge(&[&a_dir, &b_dir], &out);
    assert!(merged.status.success(), "{}", output_text(&merged));
    let stderr = String::from_utf8_lossy(&merged.stderr);
    // The two runs ran one after the other: their windows are apart, and the merge says so.
    assert!(stderr.contains("do not all overlap"), "{stderr}");

    let rows = |d: &Path| read_csv(&d.join("cells.csv"));
    let (a_rows, b_rows, m_rows) = (rows(&a_dir), rows(&b_dir), rows(&out));
    assert_eq!(m_rows.len(), a_rows.len());
    let latency_csv = read_csv(&out.join("latency.csv"));
    for m in &m_rows {
        let key = &m["cell_key"];
        let ra = a_rows.iter().find(|r| &r["cell_key"] == key).unwrap();
        let rb = b_rows.iter().find(|r| &r["cell_key"] == key).unwrap();
        assert_eq!(m["agents"], "2", "{key}");
        for column in [
            "sent",
            "ok",
            "failed",
            "fail_conn_reset",
            "connections_attempted",
            "connections_established",
        ] {
            assert_eq!(
                num(m, column),
                num(ra, column) + num(rb, column),
                "{key} {column}"
            );
        }
        for column in ["stack", "regime", "concurrency", "requests", "payload"] {
            assert_eq!(m[column], ra[column], "{key} {column}");
        }
        // Throughput: ok over the union of the two measured windows (here disjoint).
        let (sa, sb) = (
            num(ra, "measured_start_unix_s"),
            num(rb, "measured_start_unix_s"),
        );
        assert_eq!(num(m, "measured_start_unix_s"), sa.min(sb), "{key}");
        let union = num(ra, "elapsed_s") + num(rb, "elapsed_s");
        assert!((num(m, "elapsed_s") - union).abs() < 2e-6, "{key}");
        let rps = num(m, "ok") / num(m, "elapsed_s");
        assert!(
            (num(m, "throughput_rps") - rps).abs() <= 1e-3 + rps * 1e-4,
            "{key}"
        );
        assert_eq!(m["throughput_steady_rps"], "", "{key}");
        assert_eq!(
            m["server_rss_peak_bytes"], "",
            "{key}: per host, not merged"
        );

        // p99 and the rest from the two inputs' logs, added here with the hdrhistogram crate.
        let mut sums = decode_independently(&hlog::path(&a_dir, key));
        for (tag, h) in decode_independently(&hlog::path(&b_dir, key)) {
            sums.get_mut(&tag).unwrap().add(&h).unwrap();
        }
        let latency = &sums["latency"];
        assert_eq!(latency.len() as f64, num(m, "ok"), "{key}");
        assert_eq!(
            latency.value_at_quantile(0.99) as f64,
            num(m, "latency_p99_us"),
            "{key}: merged p99"
        );
        for tag in ["latency", "ttfb", "connect", "handshake"] {
            assert_summary_is_row(&LatencySummary::of(&sums[tag]), m, tag);
        }
        let points: Vec<_> = latency_csv
            .iter()
            .filter(|r| &r["cell_key"] == key)
            .collect();
        assert_eq!(points.len(), results::rows::CDF_QUANTILES.len());
        for p in points {
            let q: f64 = p["quantile"].parse().unwrap();
            assert_eq!(
                latency.value_at_quantile(q) as f64,
                num(p, "latency_us"),
                "{key} at {q}"
            );
        }
        // The merged log holds the sum.
        let logged = hlog::read(&hlog::path(&out, key)).unwrap();
        assert_eq!(
            LatencySummary::of(&logged.latency),
            LatencySummary::of(latency)
        );
        assert_eq!(logged.latency.len(), latency.len());
    }
    assert!(out.join("failures.csv").is_file());
    assert!(out.join("summary.csv").is_file());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let from = manifest["merged_from"].as_array().expect("merged_from");
    assert_eq!(from.len(), 2);
    assert_eq!(from[0]["dir"], a_dir.display().to_string());
    assert_eq!(from[1]["dir"], b_dir.display().to_string());
    // A merged directory is a results directory: the report reads it.
    let report = runner().arg("report").arg(&out).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));

    // The same p99 from hdrh adding the two inputs' logs (a second implementation).
    if let Some(python) = python_with_hdrh() {
        for m in &m_rows {
            let key = &m["cell_key"];
            let files = [hlog::path(&a_dir, key), hlog::path(&b_dir, key)];
            let decoded = python_summary(&python, &files, &["--sum"]);
            let sum = &decoded["sum"]["latency"];
            assert_eq!(int(&sum["count"]) as f64, num(m, "ok"), "{key}");
            assert_eq!(
                int(&sum["rank"]["0.99"]) as f64,
                num(m, "latency_p99_us"),
                "{key}: hdrh's sum, p99"
            );
            assert_eq!(int(&sum["max"]) as f64, num(m, "latency_max_us"), "{key}");
        }
    }

    // Refused, one line, exit 2, nothing written: a directory that holds no results...
    let empty = tempfile::tempdir().unwrap();
    let target = tmp.path().join("refused");
    let out = merge(&[empty.path(), &a_dir], &target);
    assert_refused(&out, &target, "is not a results directory");
    // ...one input alone...
    let out = merge(&[&a_dir], &target);
    assert_refused(&out, &target, "at least two");
    // ...a run twice (here inside the merged directory too)...
    let out = merge(&[&a_dir, &tmp.path().join("merged")], &target);
    assert_refused(&out, &target, "would count twice");
    // ...and runs of another experiment (a request budget of 100, not 200).
    let other = tmp.path().join("other");
    copy_dir(&a_dir, &other);
    let path = other.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["experiment"]["requests_reuse"] = serde_json::json!(100);
    manifest["started_utc"] = serde_json::json!("2026-01-01T00:00:00+00:00");
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let out = merge(&[&a_dir, &other], &target);
    assert_refused(&out, &target, "not the same experiment");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}
