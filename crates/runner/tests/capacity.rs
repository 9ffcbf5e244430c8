//! `runner capacity` end to end with tiny budgets: against a server whose capacity physics
//! bounds (one thread, 5 ms of CPU per request: at most 200 req/s), the search brackets it,
//! names who limited it, stays within its budget, and writes its probes as cells and its result
//! into `summary.json`, valid against the schema. Bad flags and an unconfirmed search of another
//! host are refused before anything is sent.

mod common;

use common::*;

/// The search of the test: a ladder 50, 100, 200, 400, 800 req/s (400 cannot pass: twice what
/// the server can do), 20 % resolution, two confirmations, probes of ≥ 1 s.
const SEARCH: [&str; 22] = [
    "--slo-p99-ms",
    "50",
    "--slo-success-pct",
    "99",
    "--start-rps",
    "50",
    "--ceiling-rps",
    "800",
    "--resolution-pct",
    "20",
    "--confirmations",
    "2",
    "--tail-samples",
    "2",
    "--probe-seconds",
    "1",
    "--budget-requests",
    "20000",
    "--budget-seconds",
    "240",
    "--stacks",
    "h1",
];

#[test]
fn the_search_brackets_a_capacity_that_physics_bounds_within_its_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let o = runner()
        .arg("capacity")
        .args(SEARCH)
        .args([
            "--regime",
            "reuse",
            "--concurrency",
            "16",
            "--server-threads",
            "1",
            "--service-cpu-us",
            "5000",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("capacity:\n  h1 reuse c16: "), "{text}");
    let dir = results_dir(&out);
    let path = dir.join("summary.json");
    valid_against_summary_schema(&path);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let capacity = &summary["capacity"];
    assert_eq!(capacity["settings"]["confirmations"], 2);
    let searches = capacity["searches"].as_array().unwrap();
    assert_eq!(searches.len(), 1);
    let s = &searches[0];
    let rate = |v: &serde_json::Value| v.as_f64();
    let (lo, hi) = (rate(&s["interval_rps"][0]), rate(&s["interval_rps"][1]));
    // One handler thread busy 5 ms a request serves at most 200 req/s; a 1 s probe above that
    // queues: at 400 req/s the last requests wait ≈ 0.5 s, far past 50 ms. So a probe at or
    // below 400 failed, and whatever passed is at most 200 plus what 1 s of backlog hides
    // (p99 ≤ 50 ms: ≈ 10 req/s).
    let hi = hi.unwrap_or_else(|| panic!("no probe failed: {s:#}"));
    assert!(hi <= 400.0, "{s:#}");
    if let Some(lo) = lo {
        assert!(lo < hi && lo <= 215.0, "[{lo}, {hi}]: {s:#}");
        assert_eq!(s["capacity_rps"].as_f64(), Some(lo));
    }
    let outcome = s["outcome"].as_str().unwrap();
    assert!(
        ["found", "instrument_limit", "below_start"].contains(&outcome),
        "{outcome}: {s:#}"
    );
    // Who limited it is named, and an instrument limit says why and points past it.
    let limited_by = s["limited_by"].as_str().unwrap();
    let failing = s["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["offered_rps"].as_f64() == Some(hi) && p["slo_met"] == false)
        .collect::<Vec<_>>();
    assert!(!failing.is_empty());
    let instrument = failing
        .iter()
        .any(|p| !p["instrument_limits"].as_array().unwrap().is_empty());
    assert_eq!(limited_by == "instrument", instrument, "{s:#}");
    if outcome == "instrument_limit" {
        assert!(s["note"].as_str().unwrap().contains("agents"), "{s:#}");
    }
    if outcome == "found" {
        assert!(hi <= lo.unwrap() * 1.2 + 1.0, "narrowed to 20 %: {s:#}");
    }

    // Every probe is a cell of the run, and the budget held.
    let cells = read_csv(&dir.join("cells.csv"));
    let probes = s["probes"].as_array().unwrap();
    assert_eq!(probes.len(), cells.len());
    for (p, c) in probes.iter().zip(&cells) {
        assert_eq!(p["cell_key"].as_str(), Some(c["cell_key"].as_str()));
        assert_eq!(c["mode"], "open");
        assert_eq!(num(c, "rate_rps"), p["offered_rps"].as_f64().unwrap());
        assert!(c["cell_key"].contains("/q"), "{}", c["cell_key"]);
    }
    let spent = s["requests_spent"].as_u64().unwrap();
    let sent: f64 = cells
        .iter()
        .map(|c| num(c, "sent") + num(c, "warmup_sent"))
        .sum();
    assert_eq!(spent as f64, sent);
    assert!(spent <= 20_000, "{spent}");
    assert_eq!(summary["cells"].as_array().unwrap().len(), cells.len());
}

#[test]
fn a_spent_budget_stops_the_search_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    // Room for one probe of 200 requests (+ 5 % warm-up), not two.
    let mut args: Vec<&str> = SEARCH.to_vec();
    let i = args.iter().position(|a| *a == "--budget-requests").unwrap();
    args[i + 1] = "300";
    let o = runner()
        .arg("capacity")
        .args(&args)
        .args(["--regime", "reuse", "--concurrency", "4"])
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let dir = results_dir(&out);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    valid_against_summary_schema(&dir.join("summary.json"));
    let s = &summary["capacity"]["searches"][0];
    assert_eq!(s["outcome"], "budget_exhausted", "{s:#}");
    assert!(s["requests_spent"].as_u64().unwrap() <= 300, "{s:#}");
    assert_eq!(read_csv(&dir.join("cells.csv")).len(), 1);

    // Its directory cannot be resumed as a plan: the search chose its cells.
    let o = runner().arg("--resume").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not resumable"), "{err}");
    assert_eq!(read_csv(&dir.join("cells.csv")).len(), 1);
}

#[test]
fn bad_flags_and_an_unconfirmed_search_of_another_host_are_refused_before_sending() {
    for (extra, want) in [
        (&["--slo-p99-ms", "0"][..], "--slo-p99-ms"),
        (&["--slo-p99-ms", "5", "--factor", "1"][..], "--factor"),
        (
            &[
                "--slo-p99-ms",
                "5",
                "--start-rps",
                "10",
                "--ceiling-rps",
                "5",
            ][..],
            "--ceiling-rps",
        ),
        (&["--slo-p99-ms", "5", "--rate", "100"][..], "--rate"),
        (&["--slo-p99-ms", "5", "--duration", "5s"][..], "--duration"),
    ] {
        let o = runner()
            .arg("capacity")
            .args(extra)
            .args(["--stacks", "h1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    // A service on another host: its address and the planned maximum are printed, and without
    // --yes (and no terminal) nothing is sent.
    let tmp = tempfile::tempdir().unwrap();
    let o = runner()
        .arg("capacity")
        .args([
            "--slo-p99-ms",
            "5",
            "--url",
            "https://198.18.0.1:9/item/{{id}}",
        ])
        .arg("--out")
        .arg(tmp.path().join("results"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("198.18.0.1:9"), "{text}");
    assert!(text.contains("up to 200000 req/s"), "{text}");
    assert!(text.contains("--yes"), "{text}");
    assert!(!tmp.path().join("results").exists(), "nothing ran");
}
