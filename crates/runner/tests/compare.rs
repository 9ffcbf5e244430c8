//! `runner compare`: two committed runs in which only HTTP/2 was slowed, two real runs on
//! loopback with tiny counts, the second against servers that answer 10 ms late, and runs
//! that cannot be compared.

use std::path::Path;
use std::process::Output;

mod common;

use common::{output_text, read_csv, run_ok, runner, Run};

/// Five repetitions, not three: a loaded machine can make one base repetition of a 50 ms cell
/// an outlier, and with three a single outlier leaves Welch's test about two degrees of freedom.
const TINY: [&str; 12] = [
    "--stacks",
    "h1,h2",
    "--regime",
    "reuse",
    "--concurrency",
    "2",
    "--requests",
    "200",
    "--repetitions",
    "5",
    "--baseline-seconds",
    "0",
];

fn tiny(extra: &[&str]) -> Run {
    let mut args: Vec<&str> = TINY.to_vec();
    args.extend_from_slice(extra);
    run_ok(&args)
}

fn compare(base: &Path, new: &Path, extra: &[&str]) -> Output {
    runner()
        .arg("compare")
        .arg(base)
        .arg(new)
        .args(extra)
        .output()
        .unwrap()
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compare")
        .join(name)
}

/// tests/data/compare: `base.toml` and `slower-h2.toml` (h2 with a 5 ms service time) run
/// once each, 3 repetitions; only HTTP/2 changed, so only HTTP/2 may be significant.
#[test]
fn committed_runs_show_the_slowed_stack_and_only_it() {
    let out = tempfile::tempdir().unwrap();
    let o = compare(
        &fixture("base"),
        &fixture("slower-h2"),
        &["--out", out.path().to_str().unwrap()],
    );
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let rows = read_csv(&out.path().join("compare.csv"));
    let verdict = |stack: &str, metric: &str| {
        rows.iter()
            .find(|r| r["stack"] == stack && r["metric"] == metric)
            .unwrap_or_else(|| panic!("{stack} {metric}: {text}"))["verdict"]
            .clone()
    };
    for metric in ["throughput_rps", "latency_p50_us", "latency_p95_us"] {
        assert_eq!(verdict("h2", metric), "worse", "{metric}: {text}");
        assert_eq!(
            verdict("h1", metric),
            "no significant change",
            "{metric}: {text}"
        );
    }
    // The slowed cell comes first in the terminal table.
    let first = text.lines().nth(1).unwrap_or_default();
    assert!(first.starts_with("h2: h2 reuse c2"), "{text}");
}

#[test]
fn a_delayed_server_is_a_significant_regression() {
    let base = tiny(&[]);
    let slow = tiny(&["--server-fault", "delay-10ms"]);
    let out = tempfile::tempdir().unwrap();
    let o = compare(
        &base.dir(),
        &slow.dir(),
        &["--out", out.path().to_str().unwrap()],
    );
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        !text.contains("differ in"),
        "same machine and commit: {text}"
    );
    let rows = read_csv(&out.path().join("compare.csv"));
    let verdict = |stack: &str, metric: &str| {
        let r = rows
            .iter()
            .find(|r| r["stack"] == stack && r["metric"] == metric)
            .unwrap_or_else(|| panic!("{stack} {metric} missing: {text}"));
        (r["verdict"].clone(), r["delta_pct"].parse::<f64>().unwrap())
    };
    for stack in ["h1", "h2"] {
        // 10 ms per request against a sub-millisecond loopback round trip: large enough that a
        // base repetition starved of CPU on a busy machine does not hide it.
        let (v, d) = verdict(stack, "latency_p50_us");
        assert_eq!(v, "worse", "{stack} p50 {d:+.1} %: {text}");
        assert!(d > 100.0, "{stack} p50 {d:+.1} %");
        let (v, d) = verdict(stack, "throughput_rps");
        assert_eq!(v, "worse", "{stack} throughput {d:+.1} %: {text}");
        assert!(d < -30.0, "{stack} throughput {d:+.1} %");
    }
    for r in &rows {
        assert_eq!((&r["n_base"][..], &r["n_new"][..]), ("5", "5"));
        let (lo, hi): (f64, f64) = (
            r["ci95_low"].parse().unwrap(),
            r["ci95_high"].parse().unwrap(),
        );
        assert!(lo <= hi, "{r:?}");
    }
    // The terminal table marks both cells worse, and the page has a delta chart per metric.
    let table: Vec<&str> = text.lines().filter(|l| l.contains(" reuse c2")).collect();
    assert_eq!(table.len(), 2, "{text}");
    assert!(table.iter().all(|l| l.contains(" W")), "{text}");
    let html = std::fs::read_to_string(out.path().join("compare.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2, "throughput and p95 charts");
    assert!(html.contains("Throughput change") && html.contains("p95 latency change"));
    assert!(html.contains(r#"class="verdict worse""#));

    // The same pair with a 10 % regression limit: everything written, then exit 1.
    let default_out = slow.dir().join("compare");
    let o = compare(&base.dir(), &slow.dir(), &["--fail-on-regression", "10"]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("regression: "),
        "{}",
        output_text(&o)
    );
    assert!(default_out.join("compare.csv").is_file());
    assert!(default_out.join("compare.html").is_file());

    // Reversed, the delayed run is the base: an improvement, which no limit fails on.
    let o = compare(
        &slow.dir(),
        &base.dir(),
        &[
            "--fail-on-regression",
            "10",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let rows = read_csv(&out.path().join("compare.csv"));
    assert!(rows
        .iter()
        .any(|r| r["metric"] == "latency_p50_us" && r["verdict"] == "better"));

    // A different payload makes the comparison meaningless: one line, exit 2, nothing written.
    let big = run_ok(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "50",
        "--repetitions",
        "1",
        "--baseline-seconds",
        "0",
        "--payload",
        "4k",
    ]);
    let refused_out = tempfile::tempdir().unwrap();
    let o = compare(
        &base.dir(),
        &big.dir(),
        &["--out", refused_out.path().join("x").to_str().unwrap()],
    );
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.contains("payload"), "{text}");
    assert!(!refused_out.path().join("x").exists());
}

#[test]
fn one_repetition_gives_deltas_without_significance() {
    let one = |extra: &[&str]| {
        let mut args = vec![
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--concurrency",
            "2",
            "--requests",
            "100",
            "--repetitions",
            "1",
            "--baseline-seconds",
            "0",
        ];
        args.extend_from_slice(extra);
        run_ok(&args)
    };
    let (base, new) = (one(&[]), one(&["--server-fault", "delay-5ms"]));
    let o = compare(&base.dir(), &new.dir(), &["--fail-on-regression", "10"]);
    let text = output_text(&o);
    // Not significant, so no regression either, however large the delta.
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("one repetition: no significance"), "{text}");
    let rows = read_csv(&new.dir().join("compare").join("compare.csv"));
    let p50 = rows
        .iter()
        .find(|r| r["metric"] == "latency_p50_us")
        .expect("p50 row");
    assert_eq!(p50["verdict"], "one repetition: no significance");
    assert!(p50["delta_pct"].parse::<f64>().unwrap() > 100.0, "{p50:?}");
    assert_eq!(p50["ci95_low"], "", "no interval from one repetition");
}

#[test]
fn runs_with_different_regimes_or_nothing_in_common_are_refused() {
    let small = |stack: &str, regime: &str| {
        run_ok(&[
            "--stacks",
            stack,
            "--regime",
            regime,
            "--concurrency",
            "2",
            "--requests",
            "50",
            "--repetitions",
            "1",
            "--baseline-seconds",
            "0",
        ])
    };
    let reuse = small("h1", "reuse");
    for (other, why) in [
        (small("h2", "reuse"), "no cell in common"),
        (small("h1", "new-conn"), "different regimes"),
    ] {
        let o = compare(&reuse.dir(), &other.dir(), &[]);
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        assert!(text.contains(why), "{text}");
        assert!(!other.dir().join("compare").exists());
    }
    // Not a results directory at all.
    let o = compare(&reuse.dir(), Path::new("/nonexistent"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
}

/// `--format markdown`: stdout is only a Markdown table a pull-request comment renders (every
/// row as wide as the header), the slowed stack's row first and marked worse, HTTP/1.1's not;
/// the paths written go to stderr.
#[test]
fn markdown_format_prints_a_table_for_a_pull_request_comment() {
    let out = tempfile::tempdir().unwrap();
    let o = compare(
        &fixture("base"),
        &fixture("slower-h2"),
        &[
            "--format",
            "markdown",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let md = String::from_utf8(o.stdout.clone()).unwrap();
    let stderr = String::from_utf8(o.stderr.clone()).unwrap();
    assert!(stderr.contains("compare.csv"), "{stderr}");
    assert!(
        !md.contains("compare.csv"),
        "stdout is the table alone: {md}"
    );
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert!(table.len() >= 4, "header, alignment and two cells: {md}");
    // Columns: pipes not escaped with a backslash.
    let columns = |l: &str| l.matches('|').count() - l.matches("\\|").count();
    assert!(
        table.iter().all(|l| columns(l) == columns(table[0])),
        "{md}"
    );
    assert!(table[1].starts_with("|:---|"), "{md}");
    assert!(
        table[0].contains("p95") && table[0].contains("req/s"),
        "{md}"
    );
    let h2 = table[2];
    assert!(h2.contains("h2 reuse c2"), "changed cell first: {md}");
    assert!(h2.contains("**worse**") && h2.contains(" → "), "{md}");
    let h1 = table
        .iter()
        .find(|l| l.contains("h1 reuse c2"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(!h1.contains("**worse**"), "{md}");
    assert!(md.contains("significantly worse"), "{md}");
    // The files are written as with the terminal format.
    assert!(out.path().join("compare.csv").is_file());
    assert!(out.path().join("compare.html").is_file());
}
