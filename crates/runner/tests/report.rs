//! The report and the figures, made from the smoke experiment's results as a user would make
//! them, and checked against the CSVs they come from.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use scraper::{Html, Selector};

/// One smoke run shared by the tests in this file.
fn smoke() -> &'static Path {
    static RUN: OnceLock<(Run, PathBuf)> = OnceLock::new();
    let smoke = workspace().join("experiments/smoke.toml");
    &RUN.get_or_init(|| {
        let run = run_ok(&["--experiment", smoke.to_str().unwrap()]);
        let dir = run.dir();
        (run, dir)
    })
    .1
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn text(e: scraper::ElementRef) -> String {
    e.text().collect::<String>().trim().to_string()
}

/// The report shows `html`, the CSV has `csv_value`: equal up to the report's rounding.
fn close(html: &str, csv_value: f64, what: &str) {
    let shown: f64 = html
        .parse()
        .unwrap_or_else(|_| panic!("{what}: '{html}' is not a number"));
    let decimals = html.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9;
    assert!(
        (shown - csv_value).abs() <= half_unit,
        "{what}: report {shown}, CSV {csv_value}"
    );
}

const LABELS: [(&str, &str); 4] = [
    ("h1", "HTTP/1.1"),
    ("h2", "HTTP/2"),
    ("h3", "HTTP/3"),
    ("grpc", "gRPC"),
];

fn stack_of(label: &str) -> &'static str {
    LABELS
        .iter()
        .find(|(_, l)| *l == label)
        .unwrap_or_else(|| panic!("unknown label {label}"))
        .0
}

#[test]
fn html_report_has_every_section_with_the_csv_numbers() {
    let dir = smoke();
    let output = runner().arg("report").arg(dir).output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        !html.contains("http://")
            || html.matches("http://").count()
                == html.matches("http://www.w3.org/2000/svg").count(),
        "the report must not fetch anything"
    );
    let doc = Html::parse_document(&html);
    for id in ["peak", "baseline", "stress", "failures", "charts", "notes"] {
        assert!(
            doc.select(&sel(&format!("section#{id}"))).next().is_some(),
            "section {id} missing"
        );
    }
    let rows = read_csv(&dir.join("cells.csv"));
    let find = |stack: &str, regime: &str, stage: &str, c: &str| -> &HashMap<String, String> {
        rows.iter()
            .find(|r| {
                r["stack"] == stack
                    && r["regime"] == regime
                    && r["stage"] == stage
                    && (stage == "baseline" || r["concurrency"] == c)
            })
            .unwrap_or_else(|| panic!("no row {stack} {regime} {stage} {c}"))
    };

    // Stress tables: every row's numbers are the CSV's.
    let mut stress_rows = 0;
    for table in doc.select(&sel("section#stress table")) {
        let regime = table.value().attr("data-regime").unwrap();
        for tr in table.select(&sel("tr[data-concurrency]")) {
            let c = tr.value().attr("data-concurrency").unwrap();
            let tds: Vec<String> = tr.select(&sel("td")).map(text).collect();
            let row = find(stack_of(&tds[1]), regime, "stress", c);
            close(&tds[2], num(row, "latency_p50_us") / 1000.0, "median");
            close(&tds[3], num(row, "latency_p95_us") / 1000.0, "p95");
            close(&tds[4], num(row, "latency_p99_us") / 1000.0, "p99");
            close(&tds[5], num(row, "throughput_rps"), "req/s");
            close(
                &tds[6],
                (1.0 - num(row, "success_rate")) * 100.0,
                "failure %",
            );
            stress_rows += 1;
        }
    }
    assert_eq!(
        stress_rows,
        rows.iter().filter(|r| r["stage"] == "stress").count()
    );

    // Peak summary: the highest concurrency (8 in smoke).
    let cards: Vec<_> = doc.select(&sel("section#peak .card")).collect();
    assert_eq!(cards.len(), 8);
    for card in cards {
        let row = find(
            stack_of(card.value().attr("data-stack").unwrap()),
            card.value().attr("data-regime").unwrap(),
            "stress",
            "8",
        );
        close(
            &text(card.select(&sel(".p50")).next().unwrap()),
            num(row, "latency_p50_us") / 1000.0,
            "peak p50",
        );
        close(
            &text(card.select(&sel(".p99")).next().unwrap()),
            num(row, "latency_p99_us") / 1000.0,
            "peak p99",
        );
        close(
            &text(card.select(&sel(".rps")).next().unwrap()),
            num(row, "throughput_rps"),
            "peak req/s",
        );
    }

    // Baseline: the ✅ of "Fastest" marks the stack with the lowest minimum latency.
    for table in doc.select(&sel("section#baseline table")) {
        let regime = table.value().attr("data-regime").unwrap();
        let base: Vec<_> = rows
            .iter()
            .filter(|r| r["stage"] == "baseline" && r["regime"] == regime)
            .collect();
        let fastest = base
            .iter()
            .map(|r| num(r, "latency_min_us"))
            .fold(f64::MAX, f64::min);
        let mut marked = 0;
        for tr in table.select(&sel("tr")).skip(1) {
            let tds: Vec<_> = tr.select(&sel("td")).collect();
            let row = find(stack_of(&text(tds[0])), regime, "baseline", "");
            close(
                &text(tds[1]),
                num(row, "latency_min_us") / 1000.0,
                "fastest",
            );
            close(&text(tds[7]), num(row, "sent"), "total reqs");
            let best = tds[1]
                .value()
                .has_class("best", scraper::CaseSensitivity::CaseSensitive);
            assert_eq!(
                best,
                num(row, "latency_min_us") == fastest,
                "{regime}: ✅ on the wrong row"
            );
            marked += best as usize;
        }
        assert!(marked >= 1);
    }
    assert!(html.contains(".best::after { content: \" ✅\"; }"));

    // Failure reasons: one line per stage, totals from the CSV.
    let failure_rows: Vec<_> = doc.select(&sel("section#failures tr")).skip(1).collect();
    assert_eq!(failure_rows.len(), rows.len());
    let total: f64 = failure_rows
        .iter()
        .map(|tr| {
            text(tr.select(&sel("td")).nth(1).unwrap())
                .parse::<f64>()
                .unwrap()
        })
        .sum();
    assert_eq!(total, rows.iter().map(|r| num(r, "failed")).sum::<f64>());

    // Charts: p95, req/s and failure rate per regime, one line per stack.
    let charts: Vec<_> = doc.select(&sel("section#charts svg")).collect();
    assert_eq!(charts.len(), 6);
    for svg in charts {
        assert_eq!(svg.select(&sel("polyline")).count(), 4);
    }

    // Notes computed from the data: the protobuf/JSON body-size ratio.
    let body = |stack: &str| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r["stage"] == "stress" && r["stack"] == stack)
            .map(|r| num(r, "body_bytes_per_ok"))
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let ratio = format!("{:.2}×", body("grpc") / body("h1"));
    let notes: String = doc.select(&sel("section#notes .note")).map(text).collect();
    assert!(
        notes.contains(&ratio),
        "expected ratio {ratio} in notes: {notes}"
    );
}

#[test]
fn plot_script_writes_every_figure_as_png_and_pdf() {
    let dir = smoke();
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(dir)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    for name in [
        "throughput",
        "latency_p95",
        "success_rate",
        "server_resources",
        "latency_cdf",
        "new_conn_breakdown",
    ] {
        let png = std::fs::read(out.path().join(format!("{name}.png")))
            .unwrap_or_else(|_| panic!("{name}.png missing"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png is not a PNG");
        assert!(png.len() > 15_000, "{name}.png is only {} bytes", png.len());
        let pdf = std::fs::read(out.path().join(format!("{name}.pdf")))
            .unwrap_or_else(|_| panic!("{name}.pdf missing"));
        assert!(pdf.starts_with(b"%PDF-"), "{name}.pdf is not a PDF");
        assert!(pdf.len() > 5_000, "{name}.pdf is only {} bytes", pdf.len());
    }
}

#[test]
fn plot_script_and_report_reject_a_directory_that_is_not_results() {
    let empty = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a results directory"));
    let output = runner().arg("report").arg(empty.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a results directory"));
}
