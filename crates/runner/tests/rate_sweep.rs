//! A rate sweep (`--rates`): one open-loop cell per offered rate with every column, resumable by
//! its keys; its latency–throughput curve in `curve.csv` (knee column), `report.html` (inline
//! SVG) and `scripts/plot.py`'s figure.

mod common;

use common::*;

/// h1, reuse, 2 workers, two rates; 60 requests a point (≈ 0.3–0.6 s each).
const SWEEP: [&str; 14] = [
    "--stacks",
    "h1",
    "--regime",
    "reuse",
    "--concurrency",
    "2",
    "--requests",
    "60",
    "--baseline-seconds",
    "0",
    "--repetitions",
    "1",
    "--rates",
    "100..200x2",
];

#[test]
fn a_rate_sweep_measures_each_rate_and_draws_its_curve() {
    let run = run_ok(&SWEEP);
    let dir = run.dir();
    // In the order the run's seed gave (kept for the resume below); here in rate order.
    let mut rows = run.cells();
    let run_order: Vec<String> = rows.iter().map(|r| r["cell_key"].clone()).collect();
    rows.sort_by(|a, b| num(a, "rate_rps").total_cmp(&num(b, "rate_rps")));
    let keys: Vec<&str> = rows.iter().map(|r| r["cell_key"].as_str()).collect();
    assert_eq!(keys, ["h1/reuse/c2/q100/r1", "h1/reuse/c2/q200/r1"]);
    for (row, rate) in rows.iter().zip([100.0, 200.0]) {
        assert_eq!(row["mode"], "open");
        assert_eq!(num(row, "rate_rps"), rate);
        assert_eq!(row["pacing"], "spin");
        assert!(num(row, "ok") > 0.0, "{row:?}");
        assert!(
            !row["pacing_lag_p99_us"].is_empty(),
            "open-loop columns: {row:?}"
        );
    }

    // summary.csv keeps the rates apart: a row per rate.
    let summary = read_csv(&dir.join("summary.csv"));
    let rates: Vec<&str> = summary.iter().map(|r| r["rate_rps"].as_str()).collect();
    assert_eq!(rates, ["100", "200"]);

    // The curve: one point per rate, in rate order, means of the cells (one repetition each).
    let curve = read_csv(&dir.join("curve.csv"));
    assert_eq!(curve.len(), 2, "{curve:?}");
    for (point, row) in curve.iter().zip(&rows) {
        assert_eq!(num(point, "offered_rps"), num(row, "rate_rps"));
        assert_eq!(num(point, "latency_p99_us"), num(row, "latency_p99_us"));
        assert!((num(point, "achieved_rps") - num(row, "throughput_rps")).abs() < 0.01);
        assert!(["true", "false"].contains(&point["knee"].as_str()));
    }

    // The report draws it: three charts (p50, p99, p99.9), each point's offered rate in its
    // tooltip, and a table row per point.
    let o = runner().arg("report").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let start = html
        .find("<section id=\"curve\">")
        .expect("a curve section");
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert_eq!(section.matches("<svg").count(), 3, "p50, p99, p99.9");
    for name in [
        "p50 vs throughput",
        "p99 vs throughput",
        "p99.9 vs throughput",
    ] {
        assert!(section.contains(name), "{name}");
    }
    assert!(section.contains("offered 100 req/s") && section.contains("offered 200 req/s"));
    assert!(
        section.contains(chart_colour_of_h1()),
        "h1 in its registry colour"
    );

    // plot.py's figure, when its packages are here.
    let figures = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(&dir)
        .arg("--out")
        .arg(figures.path())
        .output()
        .unwrap();
    if o.status.success() {
        for ext in ["png", "pdf"] {
            let f = figures.path().join(format!("latency_throughput.{ext}"));
            assert!(f.is_file(), "{f:?}: {}", output_text(&o));
        }
    } else if std::env::var("TBENCH_REQUIRE_PYTHON").as_deref() == Ok("1") {
        panic!("plot.py failed: {}", output_text(&o));
    } else {
        eprintln!(
            "note: plot.py did not run ({}); figure not checked",
            output_text(&o)
        );
    }

    // Resume by key: the second point removed as if the run had stopped before it; a resumed run
    // measures it, and only it, again.
    let cells = std::fs::read_to_string(dir.join("cells.csv")).unwrap();
    let kept: Vec<&str> = cells.lines().take(2).collect();
    std::fs::write(dir.join("cells.csv"), format!("{}\n", kept.join("\n"))).unwrap();
    let manifest_path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["status"] = "interrupted".into();
    manifest["cells_done"] = 1.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let o = resume(&dir, run.certs.path());
    assert!(o.status.success(), "{}", output_text(&o));
    let keys: Vec<String> = read_csv(&dir.join("cells.csv"))
        .iter()
        .map(|r| r["cell_key"].clone())
        .collect();
    assert_eq!(keys, run_order);
    assert_eq!(read_csv(&dir.join("curve.csv")).len(), 2);
}

/// HTTP/1.1's colour: the first of the registry's palette.
fn chart_colour_of_h1() -> &'static str {
    report::chart::PALETTE[stacks::names().iter().position(|n| *n == "h1").unwrap()].colour
}

#[test]
fn a_rate_sweep_with_a_rate_or_a_bad_ladder_is_refused_in_one_line() {
    for (extra, want) in [
        (&["--rates", "100,200", "--rate", "50"][..], "--rates"),
        (&["--rates", "200..100x2"][..], "ceiling"),
        (&["--rates", "100..800x1"][..], "factor"),
    ] {
        let o = runner()
            .args([
                "--stacks",
                "h1",
                "--regime",
                "reuse",
                "--baseline-seconds",
                "0",
            ])
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {text}");
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        assert!(text.contains(want), "{extra:?}: {text}");
    }
}
