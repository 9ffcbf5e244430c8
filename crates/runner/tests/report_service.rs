//! The report of someone else's service (issue 40, item 16), made as a user would make it:
//! the runner measures a grpcio service it did not start with a mix of a unary call and a
//! 5-message server stream, 7:3, at three levels, and `runner report` writes its page. Each
//! figure is shown right or left out with the reason: messages per streaming call (not
//! averaged with the unary calls as calls of 0), the streaming section with the gaps, no
//! memory section without server sampling (a note says why), a header naming only the
//! targets that ran, and a failure-rate chart whose axis is in the percent its label says.
//! Skipped with a note when grpcio is missing, unless TBENCH_REQUIRE_GRPCIO requires it (CI).

use std::path::PathBuf;
use std::sync::OnceLock;

mod common;

use common::*;
use scraper::{Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn text(e: scraper::ElementRef) -> String {
    e.text().collect::<String>().trim().to_string()
}

/// The measured run, kept while the tests run.
struct Measured {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    html: String,
}

/// The run shared by the tests in this file, with its report; `None` when grpcio is missing.
fn measured() -> Option<&'static Measured> {
    static RUN: OnceLock<Option<Measured>> = OnceLock::new();
    RUN.get_or_init(run).as_ref()
}

fn run() -> Option<Measured> {
    let tmp = tempfile::tempdir().unwrap();
    let grpc = test_servers::grpcio::Grpcio::start(None, false)?;
    let proto = test_servers::grpcio::fixtures().join("catalog.proto");
    // The REST target is configured but its stacks are not run: the report must not name it.
    let exp = format!(
        r#"
stacks = ["grpc"]
regimes = ["reuse"]
concurrency = [1, 2, 4]
requests_reuse = 60
warmup_fraction = 0.0
baseline_seconds = 0

[targets.ids]
from = 1
to = 50
seed = 11

[targets.rest]
url = "http://127.0.0.1:9/items/{{{{id}}}}"

[targets.grpc]
address = "http://127.0.0.1:{port}"
proto = ["{proto}"]

[[targets.grpc.calls]]
name = "get"
weight = 7
method = "shop.v1.Catalog/GetItem"
request = '{{"id": {{{{id}}}}}}'

# grpcio's WatchItems streams items id … id + 4: five messages a call.
[[targets.grpc.calls]]
name = "watch"
weight = 3
method = "shop.v1.Catalog/WatchItems"
request = '{{"id": {{{{id}}}}}}'
"#,
        port = grpc.port,
        proto = proto.display(),
    );
    let file = tmp.path().join("exp.toml");
    std::fs::write(&file, exp).unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runner runs");
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    Some(Measured {
        _tmp: tmp,
        dir,
        html,
    })
}

/// cells.csv: messages per streaming call is 5 in every cell, averaged over the streaming
/// calls only (the watch calls of requests.csv), not 5 × 3/10 over every call.
#[test]
fn messages_per_call_are_averaged_over_the_streaming_calls_only() {
    let Some(m) = measured() else { return };
    let cells = read_csv(&m.dir.join("cells.csv"));
    assert_eq!(cells.len(), 3, "{cells:?}");
    let requests = read_csv(&m.dir.join("requests.csv"));
    for c in &cells {
        assert_eq!(num(c, "failed"), 0.0, "{c:?}");
        assert_eq!(num(c, "messages_per_call_mean"), 5.0, "{c:?}");
        let watch = requests
            .iter()
            .find(|r| r["cell_key"] == c["cell_key"] && r["request"] == "watch")
            .unwrap_or_else(|| panic!("no watch row for {}", c["cell_key"]));
        let streamed = num(c, "streamed_ok");
        assert_eq!(streamed, num(watch, "ok"), "{c:?}");
        assert!(streamed > 0.0 && streamed < num(c, "ok"), "a mix: {c:?}");
        let per_s = num(c, "messages_per_s");
        let expected = 5.0 * streamed / num(c, "elapsed_s");
        assert!((per_s - expected).abs() <= 1e-3 + 1e-4 * expected, "{c:?}");
    }
}

/// The report's streaming section: one row per level, the streaming calls, 5.00 messages
/// per streaming call and the gaps in ms.
#[test]
fn the_report_shows_the_streamed_messages_and_their_gaps() {
    let Some(m) = measured() else { return };
    let cells = read_csv(&m.dir.join("cells.csv"));
    let doc = Html::parse_document(&m.html);
    let rows: Vec<Vec<String>> = doc
        .select(&sel("section#streaming tr[data-stack]"))
        .map(|tr| tr.select(&sel("td")).map(text).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{}", m.html);
    for (row, c) in rows.iter().zip([1, 2, 4]) {
        assert_eq!(row[3], c.to_string(), "{row:?}");
        let cell = cells
            .iter()
            .find(|r| num(r, "concurrency") == c as f64)
            .unwrap();
        assert_eq!(row[4], cell["streamed_ok"], "{row:?}");
        assert_eq!(row[5], "5.00", "{row:?}");
        for gap in &row[7..11] {
            assert!(gap.parse::<f64>().is_ok(), "a gap in ms: {row:?}");
        }
    }
}

/// Memory per open connection: the service's server is not sampled, so there is no
/// section (the load generator's fits are not the service's memory) and a note says why.
#[test]
fn memory_per_connection_is_left_out_with_the_reason() {
    let Some(m) = measured() else { return };
    let doc = Html::parse_document(&m.html);
    assert_eq!(doc.select(&sel("section#memory")).count(), 0, "{}", m.html);
    let notes: Vec<String> = doc.select(&sel("section#notes .note")).map(text).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("Memory per open connection is left out")
                && n.contains("--target-pid")),
        "{notes:?}"
    );
}

/// The header names what ran: the gRPC target, not the REST one whose stacks did not run.
#[test]
fn the_header_names_only_the_targets_that_ran() {
    let Some(m) = measured() else { return };
    let doc = Html::parse_document(&m.html);
    let service: String = doc.select(&sel("#service")).map(text).collect();
    assert!(service.contains("grpc (grpc)"), "{service}");
    assert!(
        !service.contains("rest") && !service.contains("()"),
        "{service}"
    );
}

/// The failure-rate chart: nothing failed, and its axis runs 0–100 in percent, as labelled.
#[test]
fn the_failure_rate_axis_is_in_the_percent_its_label_says() {
    let Some(m) = measured() else { return };
    let doc = Html::parse_document(&m.html);
    let chart = doc
        .select(&sel("section#charts svg"))
        .find(|svg| {
            svg.select(&sel("title"))
                .next()
                .is_some_and(|t| text(t).starts_with("Failure rate"))
        })
        .expect("a failure-rate chart");
    let labels: Vec<String> = chart.select(&sel("text")).map(text).collect();
    assert!(
        labels.contains(&"requests failed (%)".to_string()),
        "{labels:?}"
    );
    let ticks: Vec<&str> = labels
        .iter()
        .filter(|l| l.ends_with(" %"))
        .map(String::as_str)
        .collect();
    assert_eq!(ticks.first(), Some(&"0 %"), "{labels:?}");
    assert_eq!(ticks.last(), Some(&"100 %"), "{labels:?}");
}
