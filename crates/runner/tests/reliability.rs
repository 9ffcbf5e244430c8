//! Reliability as a user meets it: interrupt and resume, exhaustion as a result, a port in use.

mod common;

use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn sigint_mid_sweep_then_resume_gives_every_cell_exactly_once() {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let args = [
        "--stacks",
        "h1,h2",
        "--regime",
        "both",
        "--concurrency",
        "2,4",
        "--requests",
        "3000",
        "--baseline-seconds",
        "1",
        "--name",
        "resumable",
    ];
    let child = runner()
        .args(args)
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until a few cells are on disk, then interrupt like Ctrl-C.
    let deadline = Instant::now() + Duration::from_secs(120);
    let dir = loop {
        assert!(Instant::now() < deadline, "no rows appeared");
        if let Ok(entries) = std::fs::read_dir(out.path()) {
            if let Some(dir) = entries.flatten().map(|e| e.path()).next() {
                let cells = dir.join("cells.csv");
                if cells.exists() && read_csv(&cells).len() >= 3 {
                    break dir;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let sent = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "took {:?} to stop",
        sent.elapsed()
    );
    assert_eq!(output.status.code(), Some(130), "{}", output_text(&output));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "interrupted");
    let before = read_csv(&dir.join("cells.csv")).len();
    assert!(before < 12, "the run finished before the interrupt");
    assert_no_server_left(certs.path());

    let output = resume(&dir, certs.path());
    assert!(output.status.success(), "{}", output_text(&output));
    let rows = read_csv(&dir.join("cells.csv"));
    let keys: Vec<_> = rows.iter().map(|r| r["cell_key"].clone()).collect();
    let unique: HashSet<_> = keys.iter().cloned().collect();
    assert_eq!(
        keys.len(),
        unique.len(),
        "a cell was written twice: {keys:?}"
    );
    assert_eq!(keys.len(), 2 * 2 * 2 + 2 * 2, "{keys:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "completed");
    assert_eq!(manifest["cells_done"], 12);
    assert!(dir.join("summary.csv").exists());
}

#[test]
fn resume_refuses_other_settings() {
    let output = runner()
        .args(["--resume", "/nonexistent", "--requests", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--resume"));
}

/// No `runner serve` or `runner load` using this certificate directory is still running.
fn assert_no_server_left(certs: &std::path::Path) {
    std::thread::sleep(Duration::from_millis(300));
    let needle = certs.to_string_lossy().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !((cmdline.contains(" serve ") || cmdline.contains(" load "))
                && cmdline.contains(&needle)),
            "orphaned child: {cmdline}"
        );
    }
}

#[test]
fn a_lowered_open_file_limit_is_classified_not_a_crash() {
    let run = run_ok(&[
        "--stacks",
        "h1,h2",
        "--regime",
        "new-conn",
        "--concurrency",
        "200",
        "--requests",
        "600",
        "--client-nofile",
        "64",
        "--baseline-seconds",
        "0",
        "--warmup-fraction",
        "0",
    ]);
    let rows = run.cells();
    assert_eq!(rows.len(), 2, "the sweep went on after exhaustion");
    for row in &rows {
        assert!(num(row, "fail_fd_exhausted") > 0.0, "{row:?}");
        assert!(num(row, "ok") > 0.0, "{row:?}");
        assert_eq!(num(row, "sent"), 600.0);
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.dir().join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["experiment"]["client_nofile"], 64);
}

#[test]
fn serving_on_a_port_in_use_is_one_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let certs = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["serve", "--stack", "h1", "--listen", &addr])
        .arg("--certs")
        .arg(certs.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&addr) && stderr.contains("in use"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_run_whose_requests_all_fail_says_why_in_the_terminal() {
    // Every answer is an HTTP 500 / gRPC INTERNAL: the run completes, but the terminal must
    // show the class and an example, not only `100.00`.
    let run = run_ok(&[
        "--stacks",
        "h1,grpc",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--baseline-seconds",
        "0",
        "--warmup-fraction",
        "0",
        "--server-fault",
        "status",
    ]);
    let stdout = String::from_utf8_lossy(&run.output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.output.stderr).to_string();
    let failures = read_csv(&run.dir().join("failures.csv"));
    assert_eq!(failures.len(), 2, "{failures:?}");
    for f in &failures {
        assert_eq!(f["class"], "bad_status", "{f:?}");
        assert!(
            stdout.contains(&format!("{}: 20 of 20 requests failed", f["cell_key"])),
            "{stdout}"
        );
        // The example as failures.csv has it, quoted in the terminal (its start: the
        // terminal cuts long messages).
        let example: String = f["example"]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(100)
            .collect();
        assert!(!example.is_empty());
        assert!(
            stdout.contains(&format!("20 × bad_status: {example}")),
            "{example:?} not in {stdout}"
        );
    }
    // The conditions head the table; stderr is not a terminal, so each cell got a line.
    assert!(
        stdout.contains("conditions: server_fault status"),
        "{stdout}"
    );
    // Each cell its line, numbered in the order run (which the run's seed shuffles).
    for key in ["h1/reuse/c2/r1", "grpc/reuse/c2/r1"] {
        assert!(
            stderr.contains(&format!("[1/2] {key}: "))
                || stderr.contains(&format!("[2/2] {key}: ")),
            "{stderr}"
        );
    }
    assert!(stderr.contains("20 failed"), "{stderr}");
    // The warning closes the run, then how to make CI fail on it (no thresholds: exit 0).
    let last: Vec<&str> = stderr.trim_end().lines().rev().take(2).collect();
    assert!(
        last[1].starts_with("warning: 2 of 2 cells had failed requests")
            && last[0].starts_with("note: this run exits 0 despite its failures"),
        "{stderr}"
    );
}

/// The pids of `pid`'s children (every thread's).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// The command line of `pid`, arguments joined by spaces (empty once it is gone).
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether `pid` still runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Issue 40, item 6: an interrupt during the open-loop stall probe (the first second, before
/// any cell) stops the run cleanly: exit 130, a manifest saying "interrupted", and a resume
/// that measures every cell.
#[test]
fn an_interrupt_before_the_first_cell_leaves_a_resumable_run() {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    bench_core::tls::ensure_certs(certs.path()).unwrap();
    let args = [
        "--stacks",
        "h1",
        "--baseline-seconds",
        "0",
        "--regime",
        "reuse",
        "--concurrency",
        "2,4",
        "--requests",
        "200",
        "--rate",
        "100",
        "--repetitions",
        "1",
    ];
    let child = runner()
        .args(args)
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run's manifest is written after its signal handlers are in place and before the
    // stall probe spins for 1 s: interrupt as soon as it is there. (Validation's own trial
    // directory, `.runner-probe-*`, comes and goes earlier, before any handler.)
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_dir(out.path())
        .unwrap()
        .flatten()
        .any(|e| e.path().join("manifest.json").is_file())
    {
        assert!(Instant::now() < deadline, "no manifest appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(130), "{text}");
    let dir = results_dir(out.path());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "interrupted", "{text}");
    let resumed = resume(&dir, certs.path());
    assert!(resumed.status.success(), "{}", output_text(&resumed));
    assert_eq!(read_csv(&dir.join("cells.csv")).len(), 2);
}

/// Issue 40, item 7: the load generator and the server of a runner killed with SIGKILL end
/// by themselves (they follow their parent), instead of sending load for the rest of the cell.
#[test]
fn children_end_when_the_runner_is_killed() {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    bench_core::tls::ensure_certs(certs.path()).unwrap();
    // 3,000 requests at 100/s: a 30 s cell.
    let mut child = runner()
        .args([
            "--stacks",
            "h1",
            "--baseline-seconds",
            "0",
            "--regime",
            "reuse",
            "--concurrency",
            "2",
            "--requests",
            "3000",
            "--rate",
            "100",
            "--repetitions",
            "1",
        ])
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (load, serve) = loop {
        assert!(Instant::now() < deadline, "no load generator started");
        let kids = children_of(child.id());
        let find = |word: &str| kids.iter().copied().find(|k| cmdline(*k).contains(word));
        if let (Some(load), Some(serve)) = (find(" load "), find(" serve ")) {
            break (load, serve);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // Both follow their parent four times a second; give them a generous bound.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(load) || alive(serve) {
        assert!(
            Instant::now() < deadline,
            "outlived the runner: load {} serve {}",
            alive(load),
            alive(serve)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
