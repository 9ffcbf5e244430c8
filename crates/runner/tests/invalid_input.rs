//! Bad input gets one clear line naming the problem, exit status 2, and no results directory.

mod common;

use common::*;

/// Runs the runner with `args` (and `--out` pointing into a fresh directory) and checks the
/// failure shape; returns the error line.
fn rejected(args: &[&str], toml: Option<&str>, expect: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let mut cmd = runner();
    cmd.args(args).arg("--out").arg(&out);
    if let Some(toml) = toml {
        let file = tmp.path().join("exp.toml");
        std::fs::write(&file, toml).unwrap();
        cmd.arg("--experiment").arg(&file);
    }
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{args:?} {toml:?}: {stderr}");
    assert!(
        stderr.contains(expect),
        "{args:?} {toml:?}: expected '{expect}' in: {stderr}"
    );
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "one line expected: {stderr}"
    );
    assert!(!out.exists(), "{args:?}: a results directory was created");
    stderr
}

#[test]
fn invalid_experiments_and_flags_are_rejected_before_anything_runs() {
    rejected(
        &[],
        Some("concurency = [10]\n"),
        "unknown field `concurency`",
    );
    let e = rejected(
        &[],
        Some("name = \"x\"\nrepetitions = \"three\"\n"),
        "exp.toml:2:15",
    );
    assert!(
        e.contains("repetitions") && e.contains("expected u32"),
        "{e}"
    );
    rejected(&[], Some("stacks = [\"h4\"]\n"), "unknown stack 'h4'");
    rejected(
        &[],
        Some("stacks = [\"h1\", \"h1\"]\n"),
        "'h1' is listed twice",
    );
    rejected(&[], Some("concurrency = []\n"), "concurrency");
    rejected(&[], Some("concurrency = [10, 10]\n"), "10 is listed twice");
    rejected(&[], Some("concurrency = [0]\n"), "0 is outside");
    rejected(&[], Some("concurrency = [-5]\n"), "exp.toml:1:16");
    rejected(&[], Some("requests_new_conn = 0\n"), "requests_new_conn");
    rejected(&[], Some("repetitions = 0\n"), "repetitions");
    rejected(&[], Some("payload = \"huge\"\n"), "payload");
    rejected(&[], Some("regimes = [\"sometimes\"]\n"), "sometimes");
    rejected(&[], Some("warmup_fraction = 1.5\n"), "warmup_fraction");
    rejected(&[], Some("plaintext = true\n"), "h3 have no plaintext form");
    rejected(
        &["--regime", "new-conn", "--connections", "4"],
        None,
        "connections",
    );
    rejected(&["--timeout=0"], None, "--timeout");
    rejected(
        &["--handshake", "zero-rtt", "--stacks", "h1"],
        None,
        "zero-rtt is not offered by h1",
    );
}

#[test]
fn unreadable_file_and_unwritable_results_directory_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.toml");
    let output = runner().arg("--experiment").arg(&missing).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("nope.toml") && stderr.contains("cannot read"),
        "{stderr}"
    );

    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let output = runner()
        .arg("--out")
        .arg(file.join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr.contains("not a directory"), "{stderr}");
}

#[test]
fn check_validates_shipped_experiments() {
    for name in [
        "smoke",
        "paper-reuse",
        "paper-new-conn",
        "claims/c1-grpc-reuse",
        "claims/c2-collapse",
        "claims/c3-h3-success",
        "claims/c4-h3-cap",
        "claims/c5-quic-rss",
    ] {
        let output = runner()
            .arg("check")
            .arg(workspace().join(format!("experiments/{name}.toml")))
            .output()
            .unwrap();
        assert!(output.status.success(), "{name}: {}", output_text(&output));
    }
}

#[test]
fn bad_flag_is_a_usage_error() {
    let output = runner().args(["--regime", "sometimes"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("sometimes"));
}
