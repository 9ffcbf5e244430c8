//! A newcomer's first look at their own service: a run where every request fails alike stops
//! at once with one line, and `--keep-going` measures it anyway.

mod common;

use common::*;

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn refused_run(
    port: u16,
    requests: &str,
    extra: &[&str],
) -> (tempfile::TempDir, std::process::Output) {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/items/{{{{id}}}}");
    let output = runner()
        .args([
            "--url",
            &url,
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--concurrency",
            "2,4",
        ])
        .args([
            "--requests",
            requests,
            "--baseline-seconds",
            "0",
            "--repetitions",
            "1",
        ])
        .args(extra)
        .arg("--out")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    (tmp, output)
}

#[test]
fn a_cell_whose_first_requests_all_fail_alike_stops_the_run_with_one_line() {
    // Without a warm-up the measured phase stops; with one (5 %: 250 requests) the warm-up
    // does, and the measured phase sends nothing.
    for (warmup, phase) in [("0", "failed"), ("0.05", "warmup_sent")] {
        let (tmp, output) = refused_run(closed_port(), "5000", &["--warmup-fraction", warmup]);
        // 3: stopped early, nothing measurable (README's exit statuses).
        assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
        let err = String::from_utf8_lossy(&output.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("error: stopped at"))
            .unwrap_or_else(|| panic!("one line naming why: {err}"));
        assert!(
            line.contains("first 100 requests all failed alike (connect_refused"),
            "{line}"
        );
        assert!(line.contains("--keep-going"), "{line}");
        let dir = results_dir(&tmp.path().join("results"));
        let cells = read_csv(&dir.join("cells.csv"));
        assert_eq!(cells.len(), 1, "the second level never ran");
        let cell = &cells[0];
        // The first cell run (the seed orders them): the line names it.
        assert!(
            line.contains(&format!("stopped at {}:", cell["cell_key"])),
            "{line}"
        );
        assert!(cell["error"].contains("nothing to measure"), "{cell:?}");
        let sent = num(cell, phase);
        // At least the 100 that stopped it, and fewer than the phase's budget (5,000 measured,
        // 250 warm-up): how many more the workers sent before they saw the stop depends on the
        // machine's load, so it is not bounded tighter.
        let budget = if phase == "failed" { 5000.0 } else { 250.0 };
        assert!(
            sent >= 100.0 && (sent < budget || (phase != "failed" && sent == budget)),
            "what was sent is kept: {phase} {sent}"
        );
        if phase == "failed" {
            assert_eq!(num(cell, "fail_connect_refused"), sent);
        } else {
            assert_eq!(num(cell, "warmup_ok"), 0.0);
            assert_eq!(num(cell, "sent"), 0.0, "the measured phase sent nothing");
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["status"], "interrupted");
    }
}

#[test]
fn keep_going_measures_every_failing_request() {
    let (tmp, output) = refused_run(closed_port(), "150", &["--keep-going"]);
    assert!(output.status.success(), "{}", output_text(&output));
    // Exit 0 with every request failed: the run says how to make CI fail.
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("To make CI fail")
            && err.contains("[[thresholds]]")
            && err.contains("exits 99"),
        "{err}"
    );
    let dir = results_dir(&tmp.path().join("results"));
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 2);
    for cell in &cells {
        assert_eq!(num(cell, "fail_connect_refused"), 150.0, "{cell:?}");
        assert_eq!(cell["error"], "");
    }
}
