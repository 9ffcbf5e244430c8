//! Measurement fidelity, end to end through the real binary: injected delays show up where they
//! should, open loop exposes what closed loop hides, repetitions aggregate, wire bytes add up.

mod common;

use std::collections::HashMap;

use common::*;

/// The CPU test needs a core to itself: it takes this for writing, every other run of this
/// file for reading, so that it never shares the machine with another test's load.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs the runner with `args` (no baseline, no warm-up) and returns its cells.
fn run(args: &[&str]) -> (Run, Vec<HashMap<String, String>>) {
    let _shared = MACHINE.read().unwrap_or_else(|e| e.into_inner());
    run_alone(args)
}

fn run_alone(args: &[&str]) -> (Run, Vec<HashMap<String, String>>) {
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
    assert_eq!(rows.len(), stacks::names().len());
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
    let (a, closed) = run(&common);
    let mut open_args = common.to_vec();
    open_args.extend(["--rate", "500"]);
    let (b, open) = run(&open_args);
    // Only the open-loop run probed the machine's own stalls (the floor under pacing lag).
    let probe = |out: &Run| {
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.dir().join("manifest.json")).unwrap())
                .unwrap();
        manifest["environment"]["stall_probe"].clone()
    };
    assert!(probe(&a).is_null(), "closed loop: {}", probe(&a));
    assert!(
        probe(&b)["probe_ms"].as_u64().is_some_and(|ms| ms >= 1000),
        "open loop: {}",
        probe(&b)
    );
    // The report sets the cells' pacing lag beside that floor.
    let report = runner().arg("report").arg(b.dir()).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let page = std::fs::read_to_string(b.dir().join("report.html")).unwrap();
    assert!(
        page.contains("Open loop: pacing lag p99") && page.contains("a perfectly punctual pacer"),
        "no pacing floor note in the report"
    );
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
    // Interleaved: repetition 1 of both stacks before repetition 2 of either (the stacks'
    // order within a repetition is the run's seed's).
    for (i, pair) in rows.chunks(2).enumerate() {
        let rep = (i + 1).to_string();
        assert!(pair.iter().all(|r| r["repetition"] == rep), "{rows:?}");
        let mut stacks: Vec<&str> = pair.iter().map(|r| r["stack"].as_str()).collect();
        stacks.sort();
        assert_eq!(stacks, ["h1", "h2"]);
    }
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

/// A server kept busy on its one thread for the whole phase reads as one core, even in a
/// phase of a few hundred milliseconds: CPU is divided by the phase, from the scheduler's
/// nanosecond count, not by the sampler's window in 10 ms ticks (which read 75 % here).
#[test]
fn a_busy_server_reads_as_one_core_and_reports_its_kernel_peak_rss() {
    let _alone = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    let (_out, rows) = run_alone(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "4",
        "--requests",
        "150",
        "--server-threads",
        "1",
        "--service-cpu-us",
        "2000",
    ]);
    let row = &rows[0];
    let elapsed = num(row, "elapsed_s");
    assert!(elapsed < 1.0, "meant as a short cell, took {elapsed} s");
    let cpu = num(row, "server_cpu_pct_mean");
    assert!(
        (90.0..=110.0).contains(&cpu),
        "server CPU {cpu} % for a server busy all {elapsed} s"
    );
    // The kernel's high-water mark bounds every sample from above.
    let hwm = num(row, "server_rss_hwm_bytes");
    assert!(hwm >= num(row, "server_rss_peak_bytes"), "{row:?}");
    assert!(num(row, "client_rss_hwm_bytes") > 0.0);
}

/// `--duration` cells end by their time, as planned: not cut short, and their duration is
/// in `duration_s`; a cell too fast for `--min-cell-seconds` runs its whole budget again, a
/// whole number of times, and says so.
#[test]
fn time_bounds_are_reported_as_planned() {
    let (_out, rows) = run(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--duration",
        "1s",
    ]);
    let row = &rows[0];
    assert_eq!(row["cut_short"], "false", "{row:?}");
    assert_eq!(row["duration_s"], "1");
    assert!(num(row, "elapsed_s") >= 1.0);

    let (_out, rows) = run(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--min-cell-seconds",
        "0.5",
    ]);
    let row = &rows[0];
    assert_eq!(row["extended"], "true", "{row:?}");
    assert_eq!(row["cut_short"], "false");
    assert!(num(row, "elapsed_s") >= 0.5);
    let repeats = num(row, "budget_repeats");
    assert!(repeats >= 2.0, "{row:?}");
    assert_eq!(num(row, "sent"), 20.0 * repeats, "{row:?}");
    assert_eq!(row["min_cell_seconds"], "0.5");
}

/// Steady-state throughput counts only the window in which every worker was busy, so it
/// obeys Little's law for a closed loop: 4 workers / mean latency (20 ms of service time
/// each). ok / elapsed also counts the drain, where fewer than 4 are in flight. One
/// repetition leaves sd and the interval empty, not 0.
#[test]
fn steady_throughput_excludes_ramp_and_drain() {
    let (out, rows) = run(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "4",
        "--requests",
        "60",
        "--service-time",
        "fixed:20ms",
    ]);
    let row = &rows[0];
    let steady = num(row, "throughput_steady_rps");
    let steady_s = num(row, "steady_s");
    assert!(
        steady_s > 0.0 && steady_s <= num(row, "elapsed_s"),
        "{row:?}"
    );
    let little = 4.0 / (num(row, "latency_mean_us") / 1e6);
    assert!(
        (steady / little - 1.0).abs() < 0.1,
        "steady {steady} req/s, Little's law {little} req/s"
    );
    assert!(
        steady <= 4.0 / 0.020 * 1.01,
        "faster than the service time allows"
    );
    let summary = read_csv(&out.dir().join("summary.csv"));
    assert_eq!(summary[0]["repetitions"], "1");
    assert_eq!(summary[0]["throughput_rps_sd"], "");
    assert_eq!(summary[0]["throughput_rps_ci95_low"], "");
}

/// Open loop counts latency from the due time, so the generator's own lateness would count
/// as the server's: spin pacing sends within microseconds of the due time, where tokio's
/// 1 ms timer alone sends about a millisecond late, and the lag is reported apart from
/// latency. Ratios in one run, not absolute times.
#[test]
fn precise_pacing_keeps_the_generators_lateness_out_of_latency() {
    // Pacing is about when a worker runs: the comparison needs the machine to itself (the
    // other tests of this file start servers and load generators on the same two cores).
    let _alone = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    let mut by_pacing = HashMap::new();
    for pacing in ["spin", "timer"] {
        let (_out, rows) = run_alone(&[
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--concurrency",
            "2",
            "--requests",
            "200",
            "--rate",
            "400",
            "--pacing",
            pacing,
        ]);
        let row = rows.into_iter().next().unwrap();
        assert_eq!(row["pacing"], pacing);
        // A worker is free for nearly every request (400 req/s, answers in well under a
        // millisecond); a few late ones are the machine descheduling the load generator.
        assert!(
            num(&row, "late") <= 10.0,
            "{pacing}: {} of 200 late: no worker was free",
            row["late"]
        );
        by_pacing.insert(pacing, row);
    }
    let (spin, timer) = (&by_pacing["spin"], &by_pacing["timer"]);
    let lag = |r: &HashMap<String, String>| num(r, "pacing_lag_p50_us");
    assert!(
        lag(spin) * 5.0 < lag(timer),
        "pacing lag p50: spin {} µs, timer {} µs",
        lag(spin),
        lag(timer)
    );
    // What the timer's lag adds to latency, spin pacing does not.
    let latency = |r: &HashMap<String, String>| num(r, "latency_p50_us");
    assert!(
        latency(spin) + lag(timer) / 2.0 < latency(timer),
        "latency p50: spin {} µs, timer {} µs",
        latency(spin),
        latency(timer)
    );
    assert!(num(spin, "pacing_lag_max_us") >= lag(spin));
}
