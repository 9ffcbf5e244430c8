//! The smoke experiment end to end through the real binary, checked against the schema.

mod common;

use common::*;

const FAILURE_CLASSES: [&str; 13] = [
    "connect_refused",
    "connect_timeout",
    "addr_unavailable",
    "fd_exhausted",
    "conn_reset",
    "tls_failed",
    "handshake_timeout",
    "quic_idle_timeout",
    "request_timeout",
    "bad_status",
    "bad_body",
    "missing_data",
    "other",
];

#[test]
fn smoke_experiment_writes_every_cell_with_consistent_figures() {
    let smoke = workspace().join("experiments/smoke.toml");
    let run = run_ok(&["--experiment", smoke.to_str().unwrap()]);
    let text = output_text(&run.output);
    assert!(
        text.contains("median ms") && text.contains("req/s"),
        "summary table missing: {text}"
    );
    let dir = run.dir();
    let rows = read_csv(&dir.join("cells.csv"));
    let mut keys: Vec<_> = rows.iter().map(|r| r["cell_key"].clone()).collect();
    keys.sort();
    // smoke.toml names no stacks: every registered stack runs.
    let stacks = stacks::names();
    let mut expected = Vec::new();
    for stack in &stacks {
        for regime in ["new-conn", "reuse"] {
            expected.push(format!("{stack}/{regime}/baseline/r1"));
            for c in [2, 8] {
                expected.push(format!("{stack}/{regime}/c{c}/r1"));
            }
        }
    }
    expected.sort();
    assert_eq!(keys, expected);
    for row in &rows {
        let key = &row["cell_key"];
        let sent = num(row, "sent");
        let ok = num(row, "ok");
        let failed: f64 = FAILURE_CLASSES
            .iter()
            .map(|c| num(row, &format!("fail_{c}")))
            .sum();
        assert_eq!(ok + failed, sent, "{key}: ok + failures != sent");
        assert_eq!(failed, num(row, "failed"), "{key}");
        if row["stage"] == "baseline" {
            // One user for a fixed time (smoke: 1 s), as seed 000's baseline stage.
            assert_eq!(num(row, "concurrency"), 1.0, "{key}");
            assert_eq!(row["requests"], "", "{key}");
            assert_eq!(num(row, "duration_s"), 1.0, "{key}");
            let elapsed = num(row, "elapsed_s");
            assert!((0.9..3.0).contains(&elapsed), "{key}: {elapsed}");
            assert!(sent >= 5.0, "{key}: only {sent} requests in a second");
        } else {
            assert_eq!(row["stage"], "stress", "{key}");
            assert_eq!(sent, num(row, "requests"), "{key}: budget not spent");
            assert_eq!(
                num(row, "warmup_sent"),
                (num(row, "requests") * 0.1).round(),
                "{key}"
            );
        }
        assert_eq!(ok, sent, "{key}: failures on a healthy loopback server");
        let order = ["min", "p50", "p90", "p95", "p99", "p999", "max"];
        for pair in order.windows(2) {
            let (a, b) = (
                num(row, &format!("latency_{}_us", pair[0])),
                num(row, &format!("latency_{}_us", pair[1])),
            );
            assert!(a <= b, "{key}: latency {} {a} > {} {b}", pair[0], pair[1]);
        }
        assert!(num(row, "latency_min_us") > 0.0, "{key}");
        let throughput = num(row, "throughput_rps");
        let expected = ok / num(row, "elapsed_s");
        assert!(
            (throughput - expected).abs() <= expected * 1e-3 + 1e-3,
            "{key}: {throughput} vs {expected}"
        );
        assert!(num(row, "server_rss_peak_bytes") > 0.0, "{key}");
        assert!(num(row, "client_rss_peak_bytes") > 0.0, "{key}");
        // The kernel counts CPU time in 10 ms ticks, and a 400-request cell of an optimised
        // build can end within one: only cells that last a while must show CPU.
        if num(row, "elapsed_s") >= 0.2 {
            assert!(
                num(row, "server_cpu_s") > 0.0 && num(row, "client_cpu_s") > 0.0,
                "{key}: CPU not measured"
            );
        }
        // At least the item's padding (134 B in the small profile) must cross the wire.
        assert!(
            num(row, "wire_received_bytes_per_request") >= 134.0,
            "{key}"
        );
        if row["regime"] == "new-conn" {
            assert_eq!(
                num(row, "connections_established"),
                sent,
                "{key}: one connection per request"
            );
            assert!(num(row, "handshake_p50_us") > 0.0, "{key}");
            assert!(
                num(row, "latency_p50_us") >= num(row, "handshake_p50_us"),
                "{key}: latency includes the handshake"
            );
        } else {
            assert_eq!(
                num(row, "connections_established"),
                num(row, "concurrency"),
                "{key}: one connection per worker"
            );
        }
    }
    for stack in &stacks {
        let of = |column: &str| -> f64 {
            rows.iter()
                .filter(|r| r["stack"] == *stack)
                .map(|r| num(r, column))
                .sum()
        };
        assert!(of("server_cpu_s") > 0.0, "{stack}: server CPU not measured");
        assert!(of("client_cpu_s") > 0.0, "{stack}: client CPU not measured");
    }
    let resources = read_csv(&dir.join("resources.csv"));

    assert!(resources.iter().any(|r| r["role"] == "server"));
    assert!(resources.iter().any(|r| r["role"] == "client"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "completed");
    assert_eq!(manifest["cells_done"], 6 * stacks.len());
    assert_eq!(manifest["experiment"]["name"], "smoke");
    assert!(manifest["crate_versions"]["quinn"].is_string());
}

/// A busy-polling load generator (its pollers never sleep) still measures every request,
/// and stops by itself when the cell ends; the manifest says it polled.
#[test]
fn busy_polling_load_generator_measures_every_request_and_stops() {
    let run = run_ok(&[
        "--stacks",
        "h2,grpc",
        "--regime",
        "reuse",
        "--concurrency",
        "4",
        "--requests",
        "300",
        "--baseline-seconds",
        "0",
        "--client-threads",
        "1",
        "--busy-poll",
        "--max-cell-seconds",
        "20",
    ]);
    let rows = run.cells();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(num(row, "ok"), 300.0, "{}", row["cell_key"]);
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.dir().join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["experiment"]["busy_poll"], true);
}

#[test]
fn killed_server_is_recorded_and_the_sweep_goes_on() {
    let rows = kill_during_first_cell("h1,h2", "new-conn", "200000", "serve", 1500);
    let killed = &rows[0];
    assert_eq!(killed["stack"], "h1");
    assert!(
        killed["server_exit"].contains('9') || killed["server_exit"].contains("KILL"),
        "{killed:?}"
    );
    assert!(num(killed, "ok") > 0.0);
    assert!(num(killed, "fail_connect_refused") > 0.0, "{killed:?}");
    let next = &rows[1];
    assert_eq!(next["stack"], "h2");
    assert!(num(next, "ok") > 0.0);
    assert_eq!(next["server_exit"], "");
}

#[test]
fn killed_load_generator_fails_its_cell_only() {
    let rows = kill_during_first_cell("h2,h1", "reuse", "2000000", "load", 1000);
    let killed = &rows[0];
    assert_eq!(killed["stack"], "h2");
    assert!(
        killed["error"].contains("load generator exited"),
        "{killed:?}"
    );
    assert_eq!(num(killed, "ok"), 0.0, "{killed:?}");
    let next = &rows[1];
    assert_eq!(next["stack"], "h1");
    assert_eq!(next["error"], "");
    assert!(num(next, "ok") > 0.0);
    assert!(num(next, "client_rss_peak_bytes") > 0.0);
    assert_ne!(
        next["client_rss_peak_bytes"], killed["client_rss_peak_bytes"],
        "the next cell's client is a process of its own"
    );
}

/// Runs two 4-worker cells (each bounded at 4 s rather than by its large request budget),
/// SIGKILLs the runner's `command` child (`serve` or `load`) `after_ms` into the first, and
/// returns the rows of a run that must still have succeeded.
fn kill_during_first_cell(
    stacks: &str,
    regime: &str,
    requests: &str,
    command: &str,
    after_ms: u64,
) -> Vec<std::collections::HashMap<String, String>> {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let child = runner()
        .args(["--stacks", stacks, "--regime", regime, "--concurrency", "4"])
        .args(["--requests", requests, "--max-cell-seconds", "4"])
        .args(["--warmup-fraction", "0", "--baseline-seconds", "0"])
        // The stack named first must be the cell killed: the planned order, not a shuffle.
        .args(["--cell-order", "fixed"])
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let victim = wait_for_child(child.id(), command);
    std::thread::sleep(std::time::Duration::from_millis(after_ms));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let rows = read_csv(&results_dir(out.path()).join("cells.csv"));
    assert_eq!(rows.len(), 2);
    rows
}

/// The pid of the runner's child whose command is `runner <command> …`, once it exists.
fn wait_for_child(runner_pid: u32, command: &str) -> u32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{runner_pid}/task")) {
            for task in tasks.flatten() {
                let children =
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
                for pid in children.split_whitespace() {
                    let cmdline =
                        std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    if cmdline.split('\0').nth(1) == Some(command) {
                        return pid.parse().unwrap();
                    }
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the runner never started a `{command}` child");
}
