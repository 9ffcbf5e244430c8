//! A weighted request mix (`[[targets.rest.requests]]`) end to end against hypercorn over
//! HTTP/1.1, HTTP/2 and HTTP/3: the names each request sent are the seeded draw's (so every
//! stack sent the same sequence), their counts match the weights within sampling error, and
//! latency.csv and failures.csv break the cell down per name. Skipped with a note when hypercorn is missing, unless
//! TBENCH_REQUIRE_HYPERCORN requires it (CI).

mod common;

use bench_core::user_service::RequestMix;
use common::*;
use test_servers::hypercorn::Hypercorn;
use test_servers::rest::Recorder;

const REQUESTS: u64 = 600;
const SEED: u64 = 5;
/// (name, weight) as in the experiment file below.
const MIX: [(&str, u32); 3] = [("get", 6), ("create", 3), ("missing", 1)];

/// Runs the experiment file text `exp` (written into `tmp`), asserting success; the results
/// directory.
fn run_experiment(tmp: &std::path::Path, exp: &str) -> std::path::PathBuf {
    let file = tmp.join("exp.toml");
    std::fs::write(&file, exp).unwrap();
    let out = tmp.join("results");
    // The mixes below measure a request that fails by design: the probe would refuse them.
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--no-probe")
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runner runs");
    assert!(output.status.success(), "{}", output_text(&output));
    results_dir(&out)
}

#[test]
fn a_three_request_mix_is_sent_by_weight_and_reported_per_name() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let Some(rest) = Hypercorn::start(tmp.path()) else {
        return;
    };
    let exp = format!(
        r#"
stacks = ["h1", "h2", "h3"]
regimes = ["reuse"]
concurrency = [4]
requests_reuse = {REQUESTS}
warmup_fraction = 0.0
baseline_seconds = 0

[targets.ids]
from = 1
to = 50
seed = {SEED}

[targets.rest]
url = "https://localhost:{port}"
ca = "{ca}"
headers = {{ accept = "application/json" }}

[[targets.rest.requests]]
name = "get"
weight = 6
path = "/items/{{{{id}}}}"
expect_json = ["/id", "/name"]

[[targets.rest.requests]]
name = "create"
weight = 3
method = "POST"
path = "/items/{{{{id}}}}"
headers = {{ "content-type" = "application/json" }}
body = '{{"id": {{{{id}}}}, "name": "n{{{{seq}}}}"}}'
expect_json = ["/path_id"]

# The service has no such path: every one of these fails, as bad_status 404.
[[targets.rest.requests]]
name = "missing"
weight = 1
path = "/nothing/here"

# Per-name thresholds: each reads its names' rows of requests.csv, not the cell's figures
# (the cell's success is 90 %, which would fail the first and pass the second).
[[thresholds]]
name = "reads-and-writes-succeed"
requests = ["get", "create"]
success_rate = {{ min = 1 }}

[[thresholds]]
name = "missing-always-fails"
requests = ["missing"]
success_rate = {{ max = 0 }}
"#,
        port = rest.addr().port(),
        ca = certs.ca_cert().display(),
    );
    // Issue 40, item 11: before the load, one real request per mix entry, judged by its own
    // checks, one line each; the failing entry refuses the run (exit 2, no folder), and
    // `check --probe` says the same.
    let file = tmp.path().join("probed.toml");
    std::fs::write(&file, &exp).unwrap();
    let refused = tmp.path().join("refused");
    let o = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--out")
        .arg(&refused)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    for (name, says) in [
        ("'get'", ": ok in "),
        ("'create'", ": ok in "),
        ("'missing'", ": FAILED: bad_status: HTTP status 404"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with("probe: rest via h1 ") && l.contains(name))
            .unwrap_or_else(|| panic!("a line for {name}: {text}"));
        assert!(line.contains(says), "{line}");
    }
    assert!(
        text.contains("--no-probe"),
        "names the way to measure it anyway: {text}"
    );
    assert!(!refused.exists(), "nothing measured: {text}");
    let o = runner()
        .arg("check")
        .arg(&file)
        .arg("--probe")
        .output()
        .unwrap();
    let checked = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{checked}");
    assert!(
        checked.contains("'missing': FAILED: bad_status"),
        "{checked}"
    );
    let probed = rest.seen().len();
    assert_eq!(probed, 6, "one request per name, twice: {:?}", rest.seen());
    let dir = run_experiment(tmp.path(), &exp);

    // The draw the runner made is the pure function of (seed, seq): compute it here.
    let mix = RequestMix::new(SEED, &MIX, "test").unwrap();
    let mut expected = [0u64; 3];
    for seq in 0..REQUESTS {
        expected[mix.pick(seq)] += 1;
    }
    // And those counts are the weights' within sampling error (5 binomial sd).
    for (i, &n) in expected.iter().enumerate() {
        let p = mix.share(i);
        let sd = (REQUESTS as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (n as f64 - p * REQUESTS as f64).abs() < 5.0 * sd,
            "{}: {n} of {REQUESTS}",
            MIX[i].0
        );
    }

    // What the server saw, per stack: exactly those counts, by method and path.
    // The run's requests, after the probes' (three above, one per name, and three more
    // from check --probe).
    let seen = rest.seen().split_off(probed);
    for version in ["1.1", "2", "3"] {
        let of_version: Vec<_> = seen.iter().filter(|s| s.http_version == version).collect();
        let get = of_version
            .iter()
            .filter(|s| s.method == "GET" && s.path.starts_with("/items/"))
            .count() as u64;
        let create = of_version
            .iter()
            .filter(|s| s.method == "POST" && s.path.starts_with("/items/"))
            .count() as u64;
        let missing = of_version
            .iter()
            .filter(|s| s.path == "/nothing/here")
            .count() as u64;
        assert_eq!(
            [get, create, missing],
            expected,
            "HTTP/{version}: requests per name"
        );
        assert!(of_version.iter().filter(|s| s.method == "POST").all(|s| s
            .body
            .as_deref()
            .is_some_and(|b| b.contains("\"name\": \"n"))));
    }

    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 3);
    let requests = read_csv(&dir.join("requests.csv"));
    let failures = read_csv(&dir.join("failures.csv"));
    let latency = read_csv(&dir.join("latency.csv"));
    for c in &cells {
        let key = &c["cell_key"];
        assert_eq!(num(c, "ok"), (expected[0] + expected[1]) as f64, "{key}");
        assert_eq!(num(c, "fail_bad_status"), expected[2] as f64, "{key}");
        // failures.csv: the cell's row (request empty) and the same failures under the
        // name that caused them; no other name failed.
        let rows: Vec<_> = failures.iter().filter(|f| &f["cell_key"] == key).collect();
        let named: Vec<_> = rows.iter().filter(|f| !f["request"].is_empty()).collect();
        assert_eq!(named.len(), 1, "{key}: {rows:?}");
        assert_eq!(
            (
                named[0]["request"].as_str(),
                named[0]["class"].as_str(),
                named[0]["code"].as_str(),
                num(named[0], "count")
            ),
            ("missing", "bad_status", "404", expected[2] as f64),
            "{key}"
        );
        let cell_total: f64 = rows
            .iter()
            .filter(|f| f["request"].is_empty())
            .map(|f| num(f, "count"))
            .sum();
        assert_eq!(cell_total, expected[2] as f64, "{key}");
        // latency.csv: the cell's distribution and one per name that had successes, the
        // same quantiles each.
        let quantiles = |request: &str| -> Vec<f64> {
            latency
                .iter()
                .filter(|r| &r["cell_key"] == key && r["request"] == request)
                .map(|r| num(r, "latency_us"))
                .collect()
        };
        let all = quantiles("");
        assert!(all.len() >= 10, "{key}: {all:?}");
        for name in ["get", "create"] {
            let points = quantiles(name);
            assert_eq!(points.len(), all.len(), "{key} {name}");
            assert!(points.windows(2).all(|w| w[0] <= w[1]), "{key} {name}");
            // A name's slowest success is one of the cell's.
            assert!(points.last() <= all.last(), "{key} {name}");
        }
        assert!(
            quantiles("missing").is_empty(),
            "no successes, no latency rows"
        );
        let p95 = |request: &str| {
            latency
                .iter()
                .find(|r| {
                    &r["cell_key"] == key && r["request"] == request && r["quantile"] == "0.95"
                })
                .map_or(0.0, |r| num(r, "latency_us"))
        };
        // requests.csv: one row per name, its counts the draw's, adding up to the cell's.
        let named_rows: Vec<_> = requests.iter().filter(|r| &r["cell_key"] == key).collect();
        let by_name: Vec<(&str, f64, f64)> = named_rows
            .iter()
            .map(|r| (r["request"].as_str(), num(r, "sent"), num(r, "ok")))
            .collect();
        assert_eq!(
            by_name,
            [
                ("get", expected[0] as f64, expected[0] as f64),
                ("create", expected[1] as f64, expected[1] as f64),
                ("missing", expected[2] as f64, 0.0),
            ],
            "{key}"
        );
        assert_eq!(
            named_rows.iter().map(|r| num(r, "sent")).sum::<f64>(),
            num(c, "sent"),
            "{key}"
        );
        // The name's p95 in requests.csv is its latency.csv quantile.
        let get_row = named_rows[0];
        assert_eq!(
            num(get_row, "latency_p95_us"),
            latency
                .iter()
                .find(|r| &r["cell_key"] == key && r["request"] == "get" && r["quantile"] == "0.95")
                .map_or(-1.0, |r| num(r, "latency_us")),
            "{key}"
        );
        // For the closing note: counts per name and p95 per name, as measured.
        eprintln!(
            "{key}: sent get/create/missing = {expected:?} (weights 6/3/1 of {REQUESTS}); p95 us: all {}, get {}, create {}",
            p95(""),
            p95("get"),
            p95("create")
        );
    }

    // thresholds.csv: one row per bound, cell and name, read from that name's figures.
    let checks = read_csv(&dir.join("thresholds.csv"));
    assert_eq!(checks.len(), 3 * 3, "{checks:?}");
    for check in &checks {
        let (request, value) = (check["request"].as_str(), num(check, "value"));
        let want = if request == "missing" { 0.0 } else { 1.0 };
        assert_eq!(value, want, "{check:?}");
        assert_eq!(check["pass"], "true", "{check:?}");
    }
    assert_eq!(
        checks.iter().filter(|c| c["request"] == "missing").count(),
        3
    );

    // The report's "Request mix" table: one row per name and stack, with the weight's share.
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let section = html
        .split("<section id=\"requests\">")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("a Request mix section");
    assert_eq!(section.matches("<tr><td>").count(), 3 * 3, "{section}");
    assert!(section.contains("<td>get</td>"), "{section}");
    assert!(
        section.contains("(60.0 %)"),
        "get's weight share: {section}"
    );
    assert!(
        !section.contains(" †</td>"),
        "shares within sampling error: {section}"
    );
}

#[test]
fn a_bad_mix_is_one_line_naming_the_entry_and_exit_2() {
    let head = "stacks = [\"h1\"]\n[targets.rest]\nurl = \"https://127.0.0.1:9\"\n";
    for (entries, expect) in [
        (
            "[[targets.rest.requests]]\nname = \"a\"\npath = \"/a\"\n[[targets.rest.requests]]\nname = \"a\"\npath = \"/b\"\n",
            "'a' is used twice",
        ),
        (
            "[[targets.rest.requests]]\nname = \"a\"\nweight = 0\npath = \"/a\"\n",
            "targets.rest.requests.a.weight",
        ),
        (
            "[[targets.rest.requests]]\nname = \"a\"\npath = \"/{{nope}}\"\n",
            "targets.rest.requests.a.path",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("exp.toml");
        std::fs::write(&file, format!("{head}{entries}")).unwrap();
        let out = tmp.path().join("results");
        let output = runner()
            .arg("--experiment")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{entries}: {stderr}");
        assert!(stderr.contains(expect), "{entries}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "no results directory for bad input");
    }
}

/// A two-call gRPC mix (`[[targets.grpc.calls]]`) against grpcio: every request makes the
/// call the seeded draw gives its seq, so the cell's successes are exactly the draws of the
/// call whose expectation holds and its failures exactly those of the call whose expectation
/// cannot (grpcio never sets `note`), each failure under that call's name. Skipped with a
/// note when grpcio is missing, unless TBENCH_REQUIRE_GRPCIO requires it (CI).
#[test]
fn a_grpc_mix_makes_each_call_by_weight_and_reports_it_by_name() {
    const CALLS: u64 = 400;
    const GRPC_MIX: [(&str, u32); 2] = [("get", 3), ("noted", 1)];
    let tmp = tempfile::tempdir().unwrap();
    let Some(grpc) = test_servers::grpcio::Grpcio::start(None, false) else {
        return;
    };
    let proto = test_servers::grpcio::fixtures().join("catalog.proto");
    let exp = format!(
        r#"
stacks = ["grpc"]
regimes = ["reuse"]
concurrency = [4]
requests_reuse = {CALLS}
warmup_fraction = 0.0
baseline_seconds = 0

[targets.ids]
from = 1
to = 50
seed = {SEED}

[targets.grpc]
address = "http://127.0.0.1:{port}"
proto = ["{proto}"]
metadata = {{ "x-suite" = "mix" }}

[[targets.grpc.calls]]
name = "get"
weight = 3
method = "shop.v1.Catalog/GetItem"
request = '{{"id": {{{{id}}}}}}'
expect_fields = ["owner"]

# grpcio's Item never has a note: every one of these fails, as missing_data on `note`.
[[targets.grpc.calls]]
name = "noted"
method = "shop.v1.Catalog/GetItem"
request = '{{"id": {{{{id}}}}}}'
expect_values = {{ note = "!= ''" }}
"#,
        port = grpc.port,
        proto = proto.display(),
    );
    let dir = run_experiment(tmp.path(), &exp);

    let mix = RequestMix::new(SEED, &GRPC_MIX, "test").unwrap();
    let mut expected = [0u64; 2];
    for seq in 0..CALLS {
        expected[mix.pick(seq)] += 1;
    }
    assert!(expected.iter().all(|&n| n > 0), "{expected:?}");
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 1);
    let c = &cells[0];
    assert_eq!(num(c, "ok"), expected[0] as f64, "{c:?}");
    assert_eq!(num(c, "fail_missing_data"), expected[1] as f64, "{c:?}");
    let failures = read_csv(&dir.join("failures.csv"));
    let named: Vec<_> = failures
        .iter()
        .filter(|f| !f["request"].is_empty())
        .collect();
    assert_eq!(named.len(), 1, "{failures:?}");
    assert_eq!(
        (
            named[0]["request"].as_str(),
            named[0]["class"].as_str(),
            named[0]["code"].as_str(),
            num(named[0], "count")
        ),
        ("noted", "missing_data", "note", expected[1] as f64)
    );
    let latency = read_csv(&dir.join("latency.csv"));
    let points = |request: &str| latency.iter().filter(|r| r["request"] == request).count();
    assert!(
        points("") >= 10 && points("get") == points(""),
        "{latency:?}"
    );
    assert_eq!(points("noted"), 0, "no successes, no latency rows");
}
