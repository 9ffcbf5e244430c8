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
        "unknown key `concurency`: did you mean `concurrency`?",
    );
    // Not the list of every key.
    let e = rejected(
        &[],
        Some("payload_size = 3\n"),
        "unknown key `payload_size`",
    );
    assert!(!e.contains("expected one of"), "{e}");
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
        &["--host-namespaces", "sweep"],
        None,
        "--host-namespaces: applies to the hosts executor",
    );
    rejected(
        &[],
        Some("[[variants]]\nname = \"a\"\nhost_namespaces = \"cell\"\n"),
        "applies to the hosts executor",
    );
    rejected(
        &[],
        Some("quic_endpoint = \"pooled\"\n"),
        "unknown variant `pooled`",
    );
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
    rejected(
        &["--grpc-call", "server-stream", "--stacks", "grpc,h2"],
        None,
        "--grpc-call: server-stream is a gRPC method of the item service; h2 make no gRPC calls",
    );
    rejected(
        &[
            "--grpc-call",
            "bidi",
            "--stacks",
            "grpc",
            "--client",
            "library",
        ],
        None,
        "the library gRPC clients make unary calls only",
    );
    rejected(
        &[],
        Some("grpc_call = \"stream\"\n"),
        "unknown variant `stream`",
    );
    rejected(
        &[],
        Some("stream_messages = 0\n"),
        "stream_messages: must be 1 to 100,000",
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
        "claims/soak-quic-rss",
        "grpc-h3",
        "scale",
        "client-impl",
        "h3-new-conn",
        "h3-operator",
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

#[test]
fn bad_service_times_are_rejected() {
    rejected(
        &["--service-time", "normal:2ms"],
        None,
        "unknown service time distribution 'normal'",
    );
    rejected(
        &[],
        Some("service_time = \"exp:0ms\"\n"),
        "must be positive",
    );
    let e = rejected(&[], Some("service_time = \"fixed:2\"\n"), "needs a unit");
    assert!(e.contains("service_time"), "{e}");
    rejected(&["--service-cpu-us", "61000000"], None, "--service-cpu-us");
    rejected(
        &[],
        Some("[[variants]]\nname = \"slow\"\nservice_time = \"2ms\"\n"),
        "variant 'slow'",
    );
    // The server's own flag is parsed by clap: a usage error, also status 2.
    let output = runner()
        .args(["serve", "--stack", "h1", "--service-time", "exp:-1ms"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", output_text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("exp:-1ms"),
        "{}",
        output_text(&output)
    );
}

#[test]
fn semantic_errors_name_the_file_and_line_or_the_flag() {
    let e = rejected(
        &[],
        Some("name = \"typo\"\nrepetitions = 1\nstacks = [\"http2\"]\n"),
        "exp.toml:3:1: stacks: unknown stack 'http2' (expected one of h1, h2, h3, grpc, grpc-h3)",
    );
    assert!(!e.contains("experiment 'typo'"), "{e}");
    // Inside a variant: the variant's own line, and the variant named.
    rejected(
        &[],
        Some("concurrency = [2]\n\n[[variants]]\nname = \"fast\"\n\n[[variants]]\nname = \"slow\"\nconcurrency = [0]\n"),
        "exp.toml:8:1: variant 'slow': concurrency: 0 is outside",
    );
    // A flag overrides the file, so the flag is named, not a line.
    let e = rejected(
        &["--stacks", "http2"],
        Some("stacks = [\"h1\"]\n"),
        "--stacks: unknown stack 'http2'",
    );
    assert!(!e.contains("exp.toml:1"), "{e}");
    // A key that belongs to the whole run may not differ between variants.
    rejected(
        &[],
        Some("[[variants]]\nname = \"a\"\n  repetitions = 3\n"),
        "exp.toml:3:3: variant 'a': repetitions: applies to the whole run",
    );
    // A contradiction between keys: the line of the key at fault.
    rejected(
        &[],
        Some("regimes = [\"new-conn\"]\nconnections = 4\n"),
        "exp.toml:2:1: connections: only applies to the reuse regime",
    );
}

#[test]
fn a_results_directory_that_cannot_be_created_is_invalid_input() {
    // access(2) tells root that /proc is writable; only mkdir shows it is not.
    let output = runner().args(["--out", "/proc/nope"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/proc/nope"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn check_takes_run_flags_after_the_subcommand() {
    let smoke = workspace().join("experiments/smoke.toml");
    let cells = |args: &[&str]| {
        let output = runner().args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            output_text(&output)
        );
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let n: usize = text
            .split_once(" ok (")
            .and_then(|(_, rest)| rest.split_once(' '))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("no cell count in {text}"));
        n
    };
    let file = smoke.to_str().unwrap();
    // smoke (every registered stack) × 2 regimes × (2 levels + 1 baseline) cells; h1 alone 6.
    assert_eq!(cells(&["check", file]), 6 * stacks::names().len());
    assert_eq!(cells(&["check", file, "--stacks", "h1"]), 6);
    assert_eq!(cells(&["--stacks", "h1", "check", file]), 6);
    assert_eq!(
        cells(&["--stacks", "h1", "check", file, "--regime", "reuse"]),
        3
    );
    let output = runner()
        .args(["check", file, "--stacks", "http2"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--stacks: unknown stack 'http2'"),
        "{}",
        output_text(&output)
    );
}

#[test]
fn check_prints_an_estimated_duration() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    // 4 baselines of 10 s, and 4 new-conn cells of 1,000 requests each.
    std::fs::write(
        &file,
        "stacks = [\"h1\", \"h2\", \"h3\", \"grpc\"]\nregimes = [\"new-conn\"]\nconcurrency = [10]\nrequests_new_conn = 1000\nwarmup_fraction = 0.0\n",
    )
    .unwrap();
    let output = runner().arg("check").arg(&file).output().unwrap();
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("8 cells"), "{text}");
    assert!(text.contains("estimated duration"), "{text}");
    assert!(text.contains("4 baselines 40 s"), "{text}");
    assert!(
        text.contains("req/s new-conn"),
        "the assumption is stated: {text}"
    );
    // A longer baseline lengthens the estimate by exactly the added time.
    let output = runner()
        .arg("check")
        .arg(&file)
        .args(["--baseline-seconds", "30"])
        .output()
        .unwrap();
    assert!(
        output_text(&output).contains("4 baselines 2 min 0 s"),
        "{}",
        output_text(&output)
    );
}

#[test]
fn bad_targets_are_rejected_before_anything_is_sent() {
    rejected(
        &["--stacks", "h1"],
        Some("[targets.rest]\nurl = \"https://127.0.0.1:9/items/{{message}}\"\n"),
        "targets.rest.url: {{message}} numbers the messages of a gRPC client stream",
    );
    let rest = "[targets.rest]\nurl = \"https://127.0.0.1:9/items/{{id}}\"\n";
    rejected(
        &["--stacks", "h1,grpc"],
        Some(rest),
        "stack 'grpc' sends to [targets.grpc], which the experiment does not give",
    );
    // gRPC over HTTP/3, named for a plaintext (h2c) target: QUIC has no plaintext form.
    rejected(
        &["--stacks", "grpc-h3"],
        Some("[targets.grpc]\naddress = \"http://127.0.0.1:9\"\nmethod = \"a.B/C\"\nreflection = true\n"),
        "stack 'grpc-h3' needs TLS: its target must be https://",
    );
    rejected(
        &[],
        Some("[targets.rest]\nurl = \"ftp://x\"\n"),
        "targets.rest.url 'ftp://x': must start with https:// or http://",
    );
    rejected(
        &[],
        Some(&format!(
            "{rest}headers = {{ authorization = \"{{{{env.TBENCH_SURELY_UNSET}}}}\" }}\n"
        )),
        "environment variable TBENCH_SURELY_UNSET is not set",
    );
    rejected(
        &[],
        Some(&format!("{rest}expect_json = [\"name\"]\n")),
        "targets.rest.expect_json: 'name' is not a JSON pointer",
    );
    rejected(
        &["--server-fault", "status"],
        Some(rest),
        "--server-fault: cannot be used with [targets]",
    );
    rejected(
        &[],
        Some(&format!("{rest}[targets.grpc]\naddress = \"http://127.0.0.1:9\"\nmethod = \"a.B/C\"\nproto = [\"missing.proto\"]\n")),
        "targets.grpc.proto: no file",
    );
    let feed =
        "[targets.grpc]\naddress = \"http://127.0.0.1:9\"\nmethod = \"a.B/C\"\nreflection = true\n";
    rejected(
        &["--stacks", "grpc"],
        Some(&format!("{feed}duration_ms = 0\n")),
        "targets.grpc.duration_ms: must be 1 to 3600000 (an hour), got 0",
    );
    // A call the client would end only after the timeout has failed it.
    rejected(
        &["--stacks", "grpc", "--request-timeout-ms", "2000"],
        Some(&format!("{feed}duration_ms = 2000\n")),
        "targets.grpc.duration_ms = 2000 is not shorter than request_timeout_ms = 2000",
    );
    rejected(
        &["--stacks", "grpc"],
        Some(&format!("{feed}check_messages = \"first\"\n")),
        "unknown variant `first`, expected `every` or `last`",
    );
    rejected(
        &["--grpc-method", "a.B/C"],
        None,
        "--grpc and --grpc-method go together",
    );
    rejected(
        &["--target-pid", "1"],
        None,
        "--target-pid names the process",
    );
    rejected(
        &["--target", "127.0.0.1:9"],
        Some(rest),
        "give one or the other",
    );
}
