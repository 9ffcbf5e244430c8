//! Thresholds end to end: a tiny loopback run whose experiment file states pass/fail criteria;
//! the exit status, thresholds.csv and the report's section follow them.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::*;

/// The tiny run: one h1 reuse cell at c = 2, 50 requests, no baseline.
const TINY: [&str; 10] = [
    "--stacks",
    "h1",
    "--regime",
    "reuse",
    "--concurrency",
    "2",
    "--requests",
    "50",
    "--baseline-seconds",
    "0",
];

/// Runs the tiny plan with `thresholds` as the experiment file (plus `extra` flags) in a
/// fresh temporary directory; returns it, the results root and the output.
fn run_with(thresholds: &str, extra: &[&str]) -> (tempfile::TempDir, PathBuf, Output) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(&file, format!("name = \"thresholds\"\n{thresholds}")).unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .args(TINY)
        .args(extra)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    (tmp, out, output)
}

fn thresholds_csv(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("thresholds.csv"))
}

#[test]
fn a_met_threshold_passes_with_exit_zero() {
    let (_tmp, out, output) = run_with(
        "[[thresholds]]\nname = \"ok\"\nstacks = [\"h1\"]\nsuccess_rate = { min = 0.5 }\np99_ms = { max = 60000 }\n",
        &[],
    );
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    let rows = thresholds_csv(&results_dir(&out));
    assert_eq!(rows.len(), 2, "one row per bound of the one cell: {rows:?}");
    for row in &rows {
        assert_eq!(row["threshold"], "ok");
        assert_eq!(row["cell_key"], "h1/reuse/c2/r1");
        assert_eq!(row["pass"], "true", "{row:?}");
    }
    let success = rows.iter().find(|r| r["column"] == "success_rate").unwrap();
    assert_eq!(success["bound"], ">= 0.5");
    assert!(num(success, "value") > 0.5, "{success:?}");
    assert!(text.contains("✓ ok"), "live mark and summary: {text}");
    assert!(text.contains("thresholds: all 2 passed"), "{text}");
}

#[test]
fn a_failed_threshold_exits_99_after_writing_everything() {
    // No request completes in under 1 µs, so this bound cannot be met.
    let limits = "[[thresholds]]\nname = \"impossible\"\nlatency_p50_us = { max = 0.5 }\n";
    let (_tmp, out, output) = run_with(limits, &[]);
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(99), "{text}");
    let dir = results_dir(&out);
    for file in [
        "cells.csv",
        "summary.csv",
        "thresholds.csv",
        "manifest.json",
    ] {
        assert!(dir.join(file).is_file(), "{file} written: {text}");
    }
    assert_eq!(read_csv(&dir.join("cells.csv")).len(), 1);
    let rows = thresholds_csv(&dir);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["pass"], "false");
    assert_eq!(rows[0]["bound"], "<= 0.5");
    assert!(num(&rows[0], "value") >= 1.0, "{:?}", rows[0]);
    assert!(text.contains("✗ impossible"), "{text}");
    assert!(text.contains("thresholds: 1 of 1 failed"), "{text}");

    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let doc = scraper::Html::parse_document(&html);
    let section = scraper::Selector::parse("section#thresholds").unwrap();
    let section = doc.select(&section).next().expect("a Thresholds section");
    let text: String = section.text().collect();
    assert!(text.contains("Thresholds"), "{text}");
    assert!(text.contains("1 of 1 failed"), "{text}");
    assert!(
        text.contains("impossible") && text.contains("FAIL"),
        "{text}"
    );
    assert!(
        text.contains("h1/reuse/c2/r1"),
        "the failing cell is named: {text}"
    );
    // At the top: before the peak summary.
    assert!(html.find("id=\"thresholds\"") < html.find("id=\"peak\""));

    let (_tmp, out, output) = run_with(limits, &["--no-thresholds-exit"]);
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    assert_eq!(thresholds_csv(&results_dir(&out))[0]["pass"], "false");
}

#[test]
fn a_threshold_on_an_unknown_column_is_refused_before_the_run() {
    let (_tmp, out, output) = run_with(
        "\n[[thresholds]]\nstacks = [\"h1\"]\np95 = { max = 25 }\n",
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("exp.toml:5: thresholds[1] (T1): p95: unknown column 'p95'"),
        "file, line, threshold and key: {stderr}"
    );
    assert!(!out.exists(), "nothing written");
}
