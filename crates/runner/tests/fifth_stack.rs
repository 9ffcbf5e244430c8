//! A new stack needs one registry line and no list of names anywhere else: `h1-copy`
//! (HTTP/1.1 under another name, test-only, see `stacks::test_stacks`), the sixth after the
//! five real stacks, runs through the smoke sweep, the summary, the report and the figures,
//! with a style of its own. (`grpc-h3`, the real fifth, has its own test in grpc_h3.rs.)

use std::process::Command;

mod common;

use common::*;
use results::rows::{self, CellRow, SummaryRow};

const FIFTH: &str = "h1-copy";

fn with_test_stacks(mut c: Command) -> Command {
    c.env(stacks::test_stacks::ENV, "1");
    c
}

#[test]
fn a_new_stack_runs_through_sweep_report_and_figures_with_its_own_style() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let smoke = workspace().join("experiments/smoke.toml");
    let output = with_test_stacks(runner())
        .args(["--experiment", smoke.to_str().unwrap(), "--stacks"])
        .arg(format!("h1,{FIFTH}"))
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);

    // The manifest lists it after the five real stacks: its palette position is 5.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let names: Vec<&str> = manifest["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.iter().position(|n| *n == FIFTH), Some(5), "{names:?}");

    let cells = rows::read::<CellRow>(&dir.join("cells.csv")).unwrap().rows;
    let fifth: Vec<&CellRow> = cells.iter().filter(|r| r.stack == FIFTH).collect();
    assert_eq!(fifth.len(), cells.len() / 2, "as many cells as h1");
    assert!(fifth.iter().all(|r| r.ran() && r.ok > 0), "{fifth:?}");
    let summary = rows::read::<SummaryRow>(&dir.join("summary.csv"))
        .unwrap()
        .rows;
    assert!(summary
        .iter()
        .any(|r| r.stack == FIFTH && r.stage == "stress"));

    let report = with_test_stacks(runner())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("HTTP/1.1 copy"),
        "the registry's label is shown"
    );
    let (h1, copy) = (report::chart::style(0), report::chart::style(5));
    assert_ne!(h1, copy);
    assert!(html.contains(&format!("stroke=\"{}\"", h1.colour)));
    assert!(
        html.contains(&format!("stroke=\"{}\"", copy.colour)),
        "the sixth stack's lines have the sixth colour"
    );
    assert!(
        html.contains(&format!("stroke-dasharray=\"{}\"", copy.dash)),
        "and the sixth dash pattern"
    );

    let figures = tmp.path().join("figures");
    let plot = Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(&dir)
        .arg("--out")
        .arg(&figures)
        .output()
        .unwrap();
    assert!(plot.status.success(), "{}", output_text(&plot));
    // matplotlib's C0 (h1, position 0) and C5 (h1-copy, position 5).
    let throughput = figures.join("throughput.png");
    assert!(has_colour(&throughput, [0x1f, 0x77, 0xb4]), "C0 for h1");
    assert!(
        has_colour(&throughput, [0x8c, 0x56, 0x4b]),
        "C5 for h1-copy"
    );
    assert!(
        !has_colour(&throughput, [0xff, 0x7f, 0x0e]),
        "no colour of an absent stack (C1)"
    );
}

/// The crates between the command line and the stacks: none may name a stack, so a new stack
/// needs no line in them. A stack name here is a string literal equal to a registered stack's
/// name, in a file's code (comments and `#[cfg(test)]` modules excluded).
const RUNNER_SIDE: [&str; 7] = [
    "runner",
    "experiment",
    "executors",
    "load",
    "results",
    "report",
    "live-metrics",
];

/// Literals that spell a stack's name but are a third party's vocabulary, each with its reason.
/// A new entry needs the same: a stack's name in the runner's code is a branch on the stack.
const NOT_STACK_NAMES: [(&str, &str, &str); 6] = [
    (
        "executors/src/proxy/config.rs",
        "grpc",
        "nginx's grpc_pass directive and grpc:// scheme",
    ),
    (
        "executors/src/proxy/config.rs",
        "h1",
        "Caddy's name for HTTP/1.1 (protocols)",
    ),
    (
        "executors/src/proxy/config.rs",
        "h2",
        "Caddy's name for HTTP/2 over TLS (protocols)",
    ),
    (
        "executors/src/proxy/config.rs",
        "h3",
        "Caddy's name for HTTP/3 (protocols)",
    ),
    (
        "executors/src/proxy/config.rs",
        "h2c",
        "Caddy's name for cleartext HTTP/2",
    ),
    (
        "report/src/requests.rs",
        "grpc",
        "the settings table [targets.grpc]",
    ),
];

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every double-quoted literal on a line of code (escapes skipped), outside a `//` comment.
fn literals(line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    let mut current: Option<String> = None;
    while let Some(c) = chars.next() {
        match (&mut current, c) {
            (None, '/') if chars.peek() == Some(&'/') => break,
            (None, '"') => current = Some(String::new()),
            (Some(s), '\\') => {
                s.push('\\');
                if let Some(n) = chars.next() {
                    s.push(n);
                }
            }
            (Some(_), '"') => out.push(current.take().unwrap()),
            (Some(s), c) => s.push(c),
            (None, _) => {}
        }
    }
    out
}

#[test]
fn no_runner_side_file_names_a_stack() {
    let names = stacks::names();
    assert!(
        names.contains(&"h1") && names.contains(&"grpc-h3"),
        "{names:?}"
    );
    let crates = workspace().join("crates");
    let (mut found, mut files) = (Vec::new(), 0);
    for krate in RUNNER_SIDE {
        let mut paths = Vec::new();
        rust_files(&crates.join(krate).join("src"), &mut paths);
        for path in paths {
            files += 1;
            let rel = path
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("#[cfg(test)]") {
                    break;
                }
                for lit in literals(line) {
                    let excused = NOT_STACK_NAMES
                        .iter()
                        .any(|(file, name, _)| *file == rel && *name == lit);
                    if names.contains(&lit.as_str()) && !excused {
                        found.push(format!("{rel}:{}: \"{lit}\"", i + 1));
                    }
                }
            }
        }
    }
    assert!(files > 50, "read {files} files");
    assert!(
        found.is_empty(),
        "runner-side code names a stack (the stack should say it: bench_core::Stack):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_stack_name_scan_reads_literals_and_skips_comments() {
    assert_eq!(
        literals(r#"if s == "h3" { "a\"b" } // "h1""#),
        ["h3", r#"a\"b"#]
    );
    assert!(literals(r#"    // "grpc" in a comment"#).is_empty());
}
