//! Measurement fidelity, end to end through the real binary: injected delays show up where they
//! should, open loop exposes what closed loop hides, repetitions aggregate, wire bytes add up.

mod common;

use std::collections::HashMap;

use common::*;

/// Runs the runner with `args` (no baseline, no warm-up) and returns its cells.
fn run(args: &[&str]) -> (Run, Vec<HashMap<String, String>>) {
    let mut all = args.to_vec();
    all.extend(["--baseline-seconds", "0", "--warmup-fraction", "0"]);
    let run = run_ok(&all);
    let rows = run.cells();
    (run, rows)
}

#[test]
fn a_fixed_server_delay_sets_the_median_on_every_stack() {
    let (_out, rows) = run(&[
        "--server-fault",
        "delay-50ms",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "20",
    ]);
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let p50 = num(row, "latency_p50_us");
        // At least the delay; at most the delay plus a loopback request of a debug build on a
        // shared two-core machine (a few ms) with generous room for scheduling noise.
        assert!(
            p50 >= 50_000.0,
            "{}: p50 {p50} µs below the 50 ms delay",
            row["stack"]
        );
        assert!(
            p50 <= 75_000.0,
            "{}: p50 {p50} µs far above the 50 ms delay",
            row["stack"]
        );
        assert!(num(row, "ttfb_p50_us") >= 50_000.0, "{}", row["stack"]);
    }
}

#[test]
fn open_loop_shows_a_stall_that_closed_loop_hides() {
    // One 300 ms stall of the whole server at request 667 of 1,000 (fraction 0.0015).
    let common = [
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "4",
        "--requests",
        "1000",
        "--server-fault",
        "stall-300ms:0.0015",
    ];
    let (_a, closed) = run(&common);
    let mut open_args = common.to_vec();
    open_args.extend(["--rate", "500"]);
    let (_b, open) = run(&open_args);
    let (closed, open) = (&closed[0], &open[0]);
    assert_eq!(closed["mode"], "closed");
    assert_eq!(open["mode"], "open");
    // Closed loop: only the 4 requests in flight wait out the stall: 0.4 % of samples.
    assert!(
        num(closed, "latency_max_us") >= 250_000.0,
        "the stall happened: {closed:?}"
    );
    assert!(
        num(closed, "latency_p99_us") < 150_000.0,
        "closed p99 {}",
        num(closed, "latency_p99_us")
    );
    assert_eq!(num(closed, "late"), 0.0);
    // Open loop: the ≈150 requests due during the stall are all late and slow.
    assert!(
        num(open, "latency_p99_us") >= 200_000.0,
        "open p99 {}",
        num(open, "latency_p99_us")
    );
    assert!(num(open, "late") > 0.0, "{open:?}");
    assert_eq!(num(open, "ok"), 1000.0);
}

#[test]
fn repetitions_are_aggregated_with_confidence_intervals() {
    let (out, rows) = run(&[
        "--stacks",
        "h1,h2",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "200",
        "--repetitions",
        "3",
    ]);
    assert_eq!(rows.len(), 6);
    // Interleaved: repetition 1 of both stacks before repetition 2 of either.
    let order: Vec<_> = rows
        .iter()
        .map(|r| format!("{}{}", r["stack"], r["repetition"]))
        .collect();
    assert_eq!(order, ["h11", "h21", "h12", "h22", "h13", "h23"]);
    let summary = read_csv(&out.dir().join("summary.csv"));
    assert_eq!(summary.len(), 2);
    for s in &summary {
        assert_eq!(num(s, "repetitions"), 3.0);
        let values: Vec<f64> = rows
            .iter()
            .filter(|r| r["stack"] == s["stack"])
            .map(|r| num(r, "throughput_rps"))
            .collect();
        let mean = values.iter().sum::<f64>() / 3.0;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((num(s, "throughput_rps_mean") - mean).abs() <= mean * 1e-6);
        assert!((num(s, "throughput_rps_sd") - sd).abs() <= sd * 1e-4 + 1e-6);
        let (lo, hi) = (
            num(s, "throughput_rps_ci95_low"),
            num(s, "throughput_rps_ci95_high"),
        );
        assert!(lo <= mean && mean <= hi);
        let half = 4.303 * sd / 3f64.sqrt();
        assert!((hi - mean - half).abs() <= half * 1e-4 + 1e-6);
        // With t(2) = 4.303 the interval is wider than the spread of three runs.
        for v in values {
            assert!(lo <= v && v <= hi, "{v} outside [{lo}, {hi}]");
        }
    }
}

#[test]
fn wire_bytes_cover_the_payload_and_grow_with_it() {
    let mut per_request: HashMap<(String, String), f64> = HashMap::new();
    for payload in ["small", "64k"] {
        let (_out, rows) = run(&[
            "--regime",
            "reuse",
            "--concurrency",
            "1",
            "--requests",
            "20",
            "--payload",
            payload,
        ]);
        for row in rows {
            let received = num(&row, "wire_received_bytes_per_request");
            let padding = if payload == "small" { 134.0 } else { 65_414.0 };
            assert!(
                received >= padding,
                "{} {payload}: {received} B per request",
                row["stack"]
            );
            per_request.insert((row["stack"].clone(), payload.to_string()), received);
        }
    }
    for stack in ["h1", "h2", "h3", "grpc"] {
        let small = per_request[&(stack.to_string(), "small".to_string())];
        let large = per_request[&(stack.to_string(), "64k".to_string())];
        assert!(large > small * 50.0, "{stack}: {small} → {large}");
    }
}
