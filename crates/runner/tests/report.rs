//! The report and the figures, made from the smoke experiment's results as a user would make
//! them, and checked against the CSVs they come from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;

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

/// The mean a table cell shows (its `.v`, without the ± and footnote mark).
fn value(td: scraper::ElementRef) -> String {
    td.select(&sel(".v")).next().map_or_else(|| text(td), text)
}

/// The half-width of the interval a table cell shows, if any.
fn half_width(td: scraper::ElementRef) -> Option<String> {
    td.select(&sel(".ci")).next().map(text)
}

/// The throughput the report compares: steady-state, or `ok / elapsed` where there was no
/// steady window or one too short to stand for the cell (`steady_window_valid`).
fn compared_rps(row: &HashMap<String, String>) -> f64 {
    let valid = row.get("steady_window_valid").map(String::as_str) == Some("true");
    match row.get("throughput_steady_rps").map(String::as_str) {
        Some(v) if !v.is_empty() && valid => v.parse().unwrap(),
        _ => num(row, "throughput_rps"),
    }
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

/// The stack a report's label names, from the registry (smoke.toml runs every stack).
fn stack_of(label: &str) -> &'static str {
    stacks::stacks()
        .into_iter()
        .find(|s| s.label() == label)
        .unwrap_or_else(|| panic!("unknown label {label}"))
        .name()
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
            let cells: Vec<_> = tr.select(&sel("td")).collect();
            // One repetition: single values, no interval.
            assert!(cells.iter().all(|td| half_width(*td).is_none()));
            let tds: Vec<String> = cells.into_iter().map(value).collect();
            let row = find(stack_of(&tds[1]), regime, "stress", c);
            close(&tds[2], num(row, "latency_p50_us") / 1000.0, "median");
            close(&tds[3], num(row, "latency_p95_us") / 1000.0, "p95");
            close(&tds[4], num(row, "latency_p99_us") / 1000.0, "p99");
            close(&tds[5], compared_rps(row), "steady req/s");
            close(&tds[6], num(row, "throughput_rps"), "overall req/s");
            close(
                &tds[7],
                (1.0 - num(row, "success_rate")) * 100.0,
                "failure %",
            );
            let rss = match row["server_rss_hwm_bytes"].as_str() {
                "" => num(row, "server_rss_peak_bytes"),
                hwm => hwm.parse().unwrap(),
            };
            close(&tds[8], rss / 1e6, "server peak RSS");
            match row["server_cpu_pct_mean"].as_str() {
                "" => assert_eq!(tds[9], "—"),
                cpu => close(&tds[9], cpu.parse().unwrap(), "server CPU %"),
            }
            stress_rows += 1;
        }
    }
    assert_eq!(
        stress_rows,
        rows.iter().filter(|r| r["stage"] == "stress").count()
    );

    // Peak summary: the highest concurrency (8 in smoke).
    let stacks = stacks::names().len();
    let cards: Vec<_> = doc.select(&sel("section#peak .card")).collect();
    assert_eq!(cards.len(), 2 * stacks, "one per stack and regime");
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
            compared_rps(row),
            "peak steady req/s",
        );
        close(
            &text(card.select(&sel(".overall-rps")).next().unwrap()),
            num(row, "throughput_rps"),
            "peak overall req/s",
        );
    }
    // One repetition (smoke): no ± anywhere, and the notes say so; throughput is steady-state.
    for section in ["peak", "stress"] {
        let shown: String = doc
            .select(&sel(&format!("section#{section}")))
            .map(text)
            .collect();
        assert!(
            !shown.contains('±'),
            "{section}: no interval for one repetition"
        );
        assert!(
            shown.contains("no confidence interval"),
            "{section}: {shown}"
        );
        assert!(shown.contains("Steady-state"), "{section}: {shown}");
    }

    // Baseline: the mark of "Fastest" marks the stack with the lowest minimum latency.
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
                "{regime}: mark on the wrong row"
            );
            marked += best as usize;
        }
        assert!(marked >= 1);
    }
    // The winner mark is an inline SVG in every marked cell, not an emoji (no font needed).
    assert!(!html.contains('✅'));
    assert!(doc.select(&sel("td.best > svg.mark")).count() >= 2);

    // Failure reasons: one line per stage that failed requests, totals from the CSV; a run
    // without failures says so once instead.
    let failure_rows: Vec<_> = doc.select(&sel("section#failures tr")).skip(1).collect();
    let failed = rows.iter().filter(|r| num(r, "failed") > 0.0).count();
    assert_eq!(failure_rows.len(), failed);
    let no_failures = doc.select(&sel("section#failures .no-failures")).count();
    assert_eq!(no_failures, usize::from(failed == 0));
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
        assert_eq!(svg.select(&sel("polyline")).count(), stacks);
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

/// A copy of `results/reference` (one repetition, written before steady-state throughput and
/// VmHWM existed) in a temporary directory, without its summary and report.
#[test]
fn a_run_without_failures_says_so_once_and_lists_no_stage() {
    let dir = reference_copy();
    let doc = render(dir.path());
    let section: String = doc
        .select(&sel("section#failures"))
        .map(|s| s.text().collect::<String>())
        .collect();
    assert_eq!(
        section.matches("No failures in any stage.").count(),
        1,
        "{section}"
    );
    assert_eq!(
        doc.select(&sel("section#failures tr")).count(),
        0,
        "{section}"
    );
}

fn reference_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["failures.csv", "manifest.json"] {
        std::fs::copy(
            workspace().join("results/reference").join(name),
            tmp.path().join(name),
        )
        .unwrap();
    }
    // The committed reference has five repetitions and the newer columns: keep its first
    // repetition and drop those columns, so the copy is the one-repetition run of an older
    // version that these tests describe.
    const NEWER: [&str; 4] = [
        "throughput_steady_rps",
        "steady_s",
        "server_rss_hwm_bytes",
        "client_rss_hwm_bytes",
    ];
    let source = workspace().join("results/reference/cells.csv");
    let header: Vec<String> = csv::Reader::from_path(&source)
        .unwrap()
        .headers()
        .unwrap()
        .iter()
        .filter(|h| !NEWER.contains(h))
        .map(String::from)
        .collect();
    let rows: Vec<_> = read_csv(&source)
        .into_iter()
        .filter(|r| r["repetition"] == "1")
        .collect();
    write_csv(&tmp.path().join("cells.csv"), &header, &rows);
    tmp
}

fn write_csv(path: &Path, header: &[String], rows: &[HashMap<String, String>]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    w.write_record(header).unwrap();
    for r in rows {
        w.write_record(header.iter().map(|h| r.get(h).map_or("", String::as_str)))
            .unwrap();
    }
    w.flush().unwrap();
}

fn render(dir: &Path) -> Html {
    let output = runner().arg("report").arg(dir).output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    Html::parse_document(&std::fs::read_to_string(dir.join("report.html")).unwrap())
}

fn notes_of(doc: &Html, section: &str) -> String {
    doc.select(&sel(&format!("section#{section} .table-note")))
        .map(text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn report_shows_a_confidence_interval_for_two_repetitions() {
    let tmp = reference_copy();
    let dir = tmp.path();
    let mut header: Vec<String> = {
        let mut r = csv::Reader::from_path(dir.join("cells.csv")).unwrap();
        r.headers().unwrap().iter().map(String::from).collect()
    };
    for c in [
        "throughput_steady_rps",
        "steady_s",
        "steady_window_valid",
        "server_rss_hwm_bytes",
    ] {
        if !header.iter().any(|h| h == c) {
            header.push(c.into());
        }
    }
    // A second repetition of every stress cell, 10 % apart; steady-state throughput 5 % above
    // the overall one, VmHWM 1 MB above the sampled peak.
    let set = |r: &mut HashMap<String, String>, k: &str, v: f64| {
        r.insert(k.into(), format!("{v}"));
    };
    let mut rows = Vec::new();
    for r in read_csv(&dir.join("cells.csv")) {
        if r["stage"] != "stress" {
            rows.push(r);
            continue;
        }
        for (rep, k) in [(1, 1.0), (2, 1.1)] {
            let mut r = r.clone();
            r.insert("repetition".into(), rep.to_string());
            let key = r["cell_key"].replace("/r1", &format!("/r{rep}"));
            r.insert("cell_key".into(), key);
            for c in [
                "throughput_rps",
                "latency_p50_us",
                "latency_p95_us",
                "latency_p99_us",
            ] {
                // Latencies are whole microseconds in cells.csv (typed as integers).
                let v = num(&r, c) * k;
                set(&mut r, c, if c == "throughput_rps" { v } else { v.round() });
            }
            let rps = num(&r, "throughput_rps");
            set(&mut r, "throughput_steady_rps", rps * 1.05);
            let elapsed = num(&r, "elapsed_s");
            set(&mut r, "steady_s", elapsed * 0.9);
            // The window is made up: say it stands for the cell (its counts are the fixture's).
            r.insert("steady_window_valid".into(), "true".into());
            let rss = num(&r, "server_rss_peak_bytes");
            set(&mut r, "server_rss_hwm_bytes", rss + 1e6);
            // h3 reuse at 10 users: no steady window in the second repetition, no VmHWM, no
            // CPU figure: the overall throughput (†), the sampled peak (‡), "—".
            if r["stack"] == "h3" && r["regime"] == "reuse" && r["concurrency"] == "10" {
                if rep == 2 {
                    r.insert("throughput_steady_rps".into(), String::new());
                    r.insert("steady_window_valid".into(), String::new());
                }
                r.insert("server_rss_hwm_bytes".into(), String::new());
                r.insert("server_cpu_pct_mean".into(), String::new());
            }
            rows.push(r);
        }
    }
    write_csv(&dir.join("cells.csv"), &header, &rows);
    results::summary::write(dir).unwrap();
    let summary = read_csv(&dir.join("summary.csv"));
    let doc = render(dir);

    let group = |stack: &str, regime: &str, c: &str| {
        summary
            .iter()
            .find(|r| {
                r["stage"] == "stress"
                    && r["stack"] == stack
                    && r["regime"] == regime
                    && r["concurrency"] == c
            })
            .unwrap_or_else(|| panic!("no summary row {stack} {regime} {c}"))
    };
    let half = |row: &HashMap<String, String>, f: &str| {
        (num(row, &format!("{f}_ci95_high")) - num(row, &format!("{f}_ci95_low"))) / 2.0
    };
    let mut checked = 0;
    for table in doc.select(&sel("section#stress table")) {
        let regime = table.value().attr("data-regime").unwrap();
        for tr in table.select(&sel("tr[data-concurrency]")) {
            let c = tr.value().attr("data-concurrency").unwrap();
            let tds: Vec<_> = tr.select(&sel("td")).collect();
            let stack = stack_of(&text(tds[1]));
            let g = group(stack, regime, c);
            assert_eq!(g["repetitions"], "2");
            // Every figure is "mean ± half-width" from summary.csv.
            close(
                &value(tds[2]),
                num(g, "latency_p50_us_mean") / 1e3,
                "median",
            );
            let ci = half_width(tds[2]).expect("median has an interval");
            close(&ci, half(g, "latency_p50_us") / 1e3, "median ±");
            assert!(text(tds[2]).contains(" ± "), "{}", text(tds[2]));
            close(
                &half_width(tds[4]).unwrap(),
                half(g, "latency_p99_us") / 1e3,
                "p99 ±",
            );
            let odd = stack == "h3" && regime == "reuse" && c == "10";
            let (rps, rss) = if odd {
                ("throughput_rps", "server_rss_peak_bytes")
            } else {
                ("throughput_steady_rps", "server_rss_hwm_bytes")
            };
            close(
                &value(tds[5]),
                num(g, &format!("{rps}_mean")),
                "steady req/s",
            );
            close(&half_width(tds[5]).unwrap(), half(g, rps), "steady req/s ±");
            assert_eq!(text(tds[5]).ends_with('†'), odd, "{}", text(tds[5]));
            close(
                &value(tds[6]),
                num(g, "throughput_rps_mean"),
                "overall req/s",
            );
            close(
                &half_width(tds[6]).unwrap(),
                half(g, "throughput_rps"),
                "overall ±",
            );
            close(&value(tds[8]), num(g, &format!("{rss}_mean")) / 1e6, "RSS");
            assert_eq!(text(tds[8]).ends_with('‡'), odd, "{}", text(tds[8]));
            assert_eq!(value(tds[9]) == "—", odd, "CPU: {}", value(tds[9]));
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        rows.iter().filter(|r| r["stage"] == "stress").count() / 2
    );
    let notes = notes_of(&doc, "stress");
    for expected in [
        "Student-t 95 % confidence interval of the mean over n = 2 repetitions",
        "each against a fresh server, interleaved",
        "Steady-state throughput",
        "† no steady-state figure",
        "‡ the largest sampled reading",
        "VmHWM",
    ] {
        assert!(notes.contains(expected), "'{expected}' not in {notes}");
    }
    assert!(!notes.contains("no confidence interval"));

    // Peak summary: the same intervals.
    let cards: Vec<_> = doc.select(&sel("section#peak .card")).collect();
    assert!(!cards.is_empty());
    for card in cards {
        let shown = text(card);
        assert!(
            shown.contains("Steady-state requests per second"),
            "{shown}"
        );
        assert!(shown.matches(" ± ").count() >= 4, "{shown}");
    }
    assert!(notes_of(&doc, "peak").contains("over n = 2 repetitions"));
}

#[test]
fn report_of_one_repetition_has_no_interval_and_falls_back_without_steady_state() {
    let tmp = reference_copy();
    let doc = render(tmp.path());
    for section in ["peak", "stress"] {
        let shown: String = doc
            .select(&sel(&format!("section#{section}")))
            .map(text)
            .collect();
        assert!(!shown.contains('±'), "{section} shows an interval: {shown}");
        let notes = notes_of(&doc, section);
        assert!(notes.contains("One repetition per cell"), "{notes}");
        assert!(notes.contains("no confidence interval"), "{notes}");
        // The reference predates steady-state throughput: every row falls back, marked.
        assert!(notes.contains("† no steady-state figure"), "{notes}");
    }
    let header = text(doc.select(&sel("section#stress tr")).next().unwrap());
    assert!(
        header.contains("Steady-state throughput (req/s)"),
        "{header}"
    );
    assert!(header.contains("Overall, ok / elapsed (req/s)"), "{header}");
    for tr in doc.select(&sel("section#stress tr[data-concurrency]")) {
        let tds: Vec<_> = tr.select(&sel("td")).collect();
        assert!(text(tds[5]).ends_with('†'));
        assert_eq!(value(tds[5]), value(tds[6]));
        assert!(text(tds[8]).ends_with('‡'), "no VmHWM in the reference");
    }
}

#[test]
fn report_shows_memory_per_connection_without_hwm() {
    // The copy has no VmHWM column: the fits fall back to the sampled peak.
    let dir = reference_copy();
    let doc = render(dir.path());
    let rows: Vec<String> = doc
        .select(&sel("section#memory tr"))
        .skip(1)
        .map(text)
        .collect();
    assert!(!rows.is_empty(), "a memory section with fits");
    let h3 = rows
        .iter()
        .find(|r| r.contains("HTTP/3") && r.contains("reuse") && r.contains("server"))
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert!(
        h3.contains("server_rss_peak_bytes") && h3.contains('['),
        "{h3}"
    );
}

/// A slope whose 95 % interval includes 0, or lies below it, is not a memory per connection:
/// the table says so instead of printing a negative number of KB per connection, and a note
/// explains why.
#[test]
fn report_says_when_a_memory_slope_is_not_resolved_instead_of_a_negative_figure() {
    let dir = reference_copy();
    let path = dir.path().join("cells.csv");
    let header: Vec<String> = csv::Reader::from_path(&path)
        .unwrap()
        .headers()
        .unwrap()
        .iter()
        .map(String::from)
        .collect();
    let mut rows = read_csv(&path);
    for r in rows
        .iter_mut()
        .filter(|r| r["stage"] == "stress" && r["regime"] == "reuse")
    {
        let c: f64 = r["concurrency"].parse().unwrap();
        let rss = match r["stack"].as_str() {
            // Noise around a flat line: no slope the cells can tell from 0.
            "h1" => {
                20e6 + match c as u64 {
                    10 | 100 => 3e6,
                    50 | 200 => -3e6,
                    _ => 0.0,
                }
            }
            // RSS falling exactly as connections rise: a slope wholly below 0.
            "h2" => 50e6 - 20_000.0 * c,
            _ => continue,
        };
        r.insert("server_rss_peak_bytes".into(), format!("{rss:.0}"));
    }
    write_csv(&path, &header, &rows);
    let doc = render(dir.path());
    let row_of = |label: &str| -> String {
        doc.select(&sel("section#memory tr"))
            .map(text)
            .find(|r| r.contains(label) && r.contains("reuse") && r.contains("server"))
            .unwrap_or_else(|| panic!("no {label} reuse server row"))
    };
    for (label, says) in [
        ("HTTP/1.1", "not resolved: 95 % CI spans 0"),
        ("HTTP/2", "none: RSS fell as connections rose"),
    ] {
        let row = row_of(label);
        assert!(row.contains(says), "{row}");
        assert!(!row.contains("[-") && !row.contains(" -"), "{row}");
    }
    let notes = notes_of(&doc, "memory");
    assert!(
        notes.contains("Not resolved: the slope's 95 % interval includes 0")
            && notes.contains("None: RSS fell as connections rose"),
        "{notes}"
    );
    // A slope that is resolved keeps its figure and interval.
    let h3 = row_of("HTTP/3");
    assert!(h3.contains('['), "{h3}");
}
