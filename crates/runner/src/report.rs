//! `runner report RESULTS_DIR`: one self-contained HTML file shaped like seed 000's report —
//! peak-load summary, single-user baseline, stress table, failure reasons by stage, charts and
//! notes — computed from the results directory alone.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bench_core::FailureClass;
use serde::Serialize;

use crate::chart::{line_chart, Series};
use crate::registry;

pub type Row = HashMap<String, String>;

/// The rows of `cells.csv` (those that ran) and the run's manifest.
pub struct Results {
    pub cells: Vec<Row>,
    pub failures: Vec<Row>,
    pub manifest: serde_json::Value,
}

fn read_rows(path: &Path) -> anyhow::Result<Vec<Row>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let headers = reader.headers()?.clone();
    reader
        .records()
        .map(|r| {
            let r = r.with_context(|| format!("malformed row in {}", path.display()))?;
            Ok(headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect())
        })
        .collect()
}

impl Results {
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let cells_path = dir.join("cells.csv");
        if !cells_path.is_file() || !dir.join("manifest.json").is_file() {
            bail!(
                "{} is not a results directory (needs cells.csv and manifest.json)",
                dir.display()
            );
        }
        let all = read_rows(&cells_path)?;
        const NEEDED: [&str; 8] = [
            "cell_key",
            "variant",
            "stage",
            "stack",
            "regime",
            "concurrency",
            "repetition",
            "success_rate",
        ];
        if let Some(first) = all.first() {
            if let Some(missing) = NEEDED.iter().find(|c| !first.contains_key(**c)) {
                bail!("{} has no '{missing}' column: it was written by an older runner; run the experiment again", cells_path.display());
            }
        }
        let cells: Vec<Row> = all
            .into_iter()
            .filter(|r| r.get("error").is_none_or(|e| e.is_empty()))
            .collect();
        let failures_path = dir.join("failures.csv");
        let failures = if failures_path.is_file() {
            read_rows(&failures_path)?
        } else {
            Vec::new()
        };
        let manifest = serde_json::from_slice(&std::fs::read(dir.join("manifest.json"))?)
            .context("manifest.json is not valid JSON")?;
        Ok(Results {
            cells,
            failures,
            manifest,
        })
    }
}

pub fn num(row: &Row, key: &str) -> f64 {
    row.get(key).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

pub fn label(stack: &str) -> String {
    registry::find(stack).map_or_else(|| stack.to_string(), |s| s.label().to_string())
}

/// Stacks in registry order, then any unknown ones.
pub fn stack_order(rows: &[&Row]) -> Vec<String> {
    let mut names: Vec<String> = registry::names().iter().map(|s| s.to_string()).collect();
    names.retain(|n| rows.iter().any(|r| &r["stack"] == n));
    for r in rows {
        if !names.contains(&r["stack"]) {
            names.push(r["stack"].clone());
        }
    }
    names
}

pub fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

#[derive(Serialize)]
struct Peak {
    regime: String,
    concurrency: u64,
    stacks: Vec<PeakStack>,
}

#[derive(Serialize)]
struct PeakStack {
    label: String,
    p50_ms: String,
    p99_ms: String,
    rps: String,
    fail_pct: String,
}

#[derive(Serialize)]
struct BaselineTable {
    regime: String,
    seconds: String,
    rows: Vec<BaselineRow>,
}

#[derive(Serialize)]
struct Cell {
    value: String,
    best: bool,
}

#[derive(Serialize)]
struct BaselineRow {
    label: String,
    cells: Vec<Cell>,
}

#[derive(Serialize)]
struct StressLevel {
    concurrency: u64,
    rows: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct StressTable {
    regime: String,
    levels: Vec<StressLevel>,
}

#[derive(Serialize)]
struct FailureStage {
    stage: String,
    total: u64,
    counts: Vec<u64>,
    examples: String,
}

#[derive(Serialize)]
struct Chart {
    svg: String,
}

/// Percentage of failed requests in a row.
fn fail_pct(row: &Row) -> f64 {
    (1.0 - num(row, "success_rate")) * 100.0
}

fn stage_label(row: &Row) -> String {
    match row["stage"].as_str() {
        "baseline" => format!(
            "{} {} baseline (1 user)",
            label(&row["stack"]),
            row["regime"]
        ),
        _ => format!(
            "{} {} {} users (rep {})",
            label(&row["stack"]),
            row["regime"],
            row["concurrency"],
            row["repetition"]
        ),
    }
}

pub fn regimes(rows: &[&Row]) -> Vec<String> {
    let mut r: Vec<String> = rows.iter().map(|r| r["regime"].clone()).collect();
    r.sort();
    r.dedup();
    r.reverse(); // reuse before new-conn, as the study presents them
    r
}

/// Mean of a column over the repetitions of (stack, regime, concurrency) in `rows`.
pub fn mean_of(
    rows: &[&Row],
    stack: &str,
    regime: &str,
    concurrency: u64,
    col: &str,
) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r["stack"] == stack
                && r["regime"] == regime
                && num(r, "concurrency") as u64 == concurrency
        })
        .map(|r| num(r, col))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub fn levels(rows: &[&Row], regime: &str) -> Vec<u64> {
    let mut c: Vec<u64> = rows
        .iter()
        .filter(|r| r["regime"] == regime)
        .map(|r| num(r, "concurrency") as u64)
        .collect();
    c.sort();
    c.dedup();
    c
}

fn notes(results: &Results, stress: &[&Row]) -> Vec<String> {
    let m = &results.manifest["experiment"];
    let mut notes = Vec::new();
    let tls = if m["plaintext"].as_bool() == Some(true) {
        "plaintext (no TLS)"
    } else {
        "TLS 1.3 (ECDSA P-256, full handshakes unless noted)"
    };
    notes.push(format!(
        "Every stack ran over {tls} against a server on the same machine (loopback, {} cores, pinning: {}): unlike seed 000, REST and gRPC take the same network path with the same TLS, so the differences below are protocol and implementation costs.",
        results.manifest["cores"], results.manifest["pinning"].as_str().unwrap_or("none")
    ));
    // Body size per wire encoding, from the stacks' own description of their encoding.
    let mut by_encoding: Vec<(&'static str, Vec<String>, Vec<f64>)> = Vec::new();
    for r in stress.iter().filter(|r| num(r, "ok") > 0.0) {
        let Some(stack) = registry::find(&r["stack"]) else {
            continue;
        };
        let i = match by_encoding.iter().position(|e| e.0 == stack.encoding()) {
            Some(i) => i,
            None => {
                by_encoding.push((stack.encoding(), Vec::new(), Vec::new()));
                by_encoding.len() - 1
            }
        };
        if !by_encoding[i].1.contains(&stack.label().to_string()) {
            by_encoding[i].1.push(stack.label().to_string());
        }
        by_encoding[i].2.push(num(r, "body_bytes_per_ok"));
    }
    by_encoding.sort_by_key(|e| if e.0 == "JSON" { 0 } else { 1 });
    if by_encoding.len() >= 2 {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let base = mean(&by_encoding[0].2);
        let parts: Vec<String> = by_encoding
            .iter()
            .map(|(enc, stacks, v)| {
                format!(
                    "{enc} bodies {:.0} B ({}), {:.2}× {}",
                    mean(v),
                    stacks.join(", "),
                    mean(v) / base,
                    by_encoding[0].0
                )
            })
            .collect();
        notes.push(format!(
            "Payload profile {}: {} (seed 000 saw gRPC payloads ≈ 2.4× larger than its JSON; its services returned different data).",
            m["payload"].as_str().unwrap_or("?"),
            parts.join("; ")
        ));
    }
    let regs = regimes(stress);
    for regime in &regs {
        let top = levels(stress, regime).last().copied().unwrap_or(0);
        let wire: Vec<String> = stack_order(stress)
            .iter()
            .filter_map(|s| {
                let rx = mean_of(stress, s, regime, top, "wire_received_bytes_per_request")?;
                let tx = mean_of(stress, s, regime, top, "wire_sent_bytes_per_request")?;
                Some(format!(
                    "{} {:.0} B sent / {:.0} B received",
                    label(s),
                    tx,
                    rx
                ))
            })
            .collect();
        if !wire.is_empty() {
            notes.push(format!("Wire bytes per request at the socket ({regime}, {top} users; TCP payload incl. TLS and HTTP/2 framing, UDP payload for QUIC, handshakes included in new-conn): {}.", wire.join("; ")));
        }
    }
    if regs.len() == 2 {
        let common: Vec<u64> = levels(stress, "reuse")
            .into_iter()
            .filter(|c| levels(stress, "new-conn").contains(c))
            .collect();
        if let Some(c) = common.last() {
            let parts: Vec<String> = stack_order(stress)
                .iter()
                .filter_map(|s| {
                    let reuse = mean_of(stress, s, "reuse", *c, "throughput_rps")?;
                    let fresh = mean_of(stress, s, "new-conn", *c, "throughput_rps")?;
                    Some(format!(
                        "{} {:.0} → {:.0} req/s ({:.1}×)",
                        label(s),
                        reuse,
                        fresh,
                        reuse / fresh.max(1e-9)
                    ))
                })
                .collect();
            notes.push(format!(
                "Cost of a connection per request at {c} users (reuse → new-conn): {}.",
                parts.join("; ")
            ));
        }
    }
    let failed: f64 = stress.iter().map(|r| num(r, "failed")).sum();
    if failed == 0.0 {
        notes.push("No request failed in any stress stage: the collapse the study reports did not occur under these conditions.".into());
    } else {
        let mut by_class: BTreeMap<&str, f64> = BTreeMap::new();
        for class in FailureClass::ALL {
            let n: f64 = stress
                .iter()
                .map(|r| num(r, &format!("fail_{}", class.as_str())))
                .sum();
            if n > 0.0 {
                by_class.insert(class.as_str(), n);
            }
        }
        let parts: Vec<String> = by_class
            .iter()
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect();
        notes.push(format!(
            "{failed:.0} requests failed across the stress stages: {}.",
            parts.join(", ")
        ));
    }
    notes
}

/// Renders `report.html` into the results directory and returns its path.
pub fn write(dir: &Path) -> anyhow::Result<PathBuf> {
    let results = Results::load(dir)?;
    let baseline: Vec<&Row> = results
        .cells
        .iter()
        .filter(|r| r["stage"] == "baseline")
        .collect();
    let stress: Vec<&Row> = results
        .cells
        .iter()
        .filter(|r| r["stage"] == "stress")
        .collect();
    if stress.is_empty() && baseline.is_empty() {
        bail!("{} has no measured cells to report", dir.display());
    }
    let stacks = stack_order(&results.cells.iter().collect::<Vec<_>>());

    let peaks: Vec<Peak> = regimes(&stress)
        .iter()
        .map(|regime| {
            let top = levels(&stress, regime).last().copied().unwrap_or(0);
            Peak {
                regime: regime.clone(),
                concurrency: top,
                stacks: stacks
                    .iter()
                    .filter_map(|s| {
                        Some(PeakStack {
                            label: label(s),
                            p50_ms: ms(mean_of(&stress, s, regime, top, "latency_p50_us")?),
                            p99_ms: ms(mean_of(&stress, s, regime, top, "latency_p99_us")?),
                            rps: format!(
                                "{:.1}",
                                mean_of(&stress, s, regime, top, "throughput_rps")?
                            ),
                            fail_pct: format!(
                                "{:.2}",
                                (1.0 - mean_of(&stress, s, regime, top, "success_rate")?) * 100.0
                            ),
                        })
                    })
                    .collect(),
            }
        })
        .collect();

    const BASE_COLS: [(&str, bool); 8] = [
        ("latency_min_us", false),
        ("latency_mean_us", false),
        ("latency_p50_us", false),
        ("latency_p95_us", false),
        ("latency_p99_us", false),
        ("latency_max_us", false),
        ("sent", true),
        ("fail_pct", false),
    ];
    let baselines: Vec<BaselineTable> = regimes(&baseline)
        .iter()
        .map(|regime| {
            let rows: Vec<&Row> = stacks
                .iter()
                .filter_map(|s| {
                    baseline
                        .iter()
                        .find(|r| &r["stack"] == s && &r["regime"] == regime)
                        .copied()
                })
                .collect();
            let value = |r: &Row, col: &str| {
                if col == "fail_pct" {
                    fail_pct(r)
                } else {
                    num(r, col)
                }
            };
            let best: Vec<f64> = BASE_COLS
                .iter()
                .map(|(col, higher)| {
                    let vals = rows.iter().map(|r| value(r, col));
                    if *higher {
                        vals.fold(f64::MIN, f64::max)
                    } else {
                        vals.fold(f64::MAX, f64::min)
                    }
                })
                .collect();
            BaselineTable {
                regime: regime.clone(),
                seconds: rows
                    .first()
                    .map(|r| r["duration_s"].clone())
                    .unwrap_or_default(),
                rows: rows
                    .iter()
                    .map(|r| BaselineRow {
                        label: label(&r["stack"]),
                        cells: BASE_COLS
                            .iter()
                            .enumerate()
                            .map(|(i, (col, _))| {
                                let v = value(r, col);
                                Cell {
                                    value: match *col {
                                        "sent" => format!("{v:.0}"),
                                        "fail_pct" => format!("{v:.2}"),
                                        _ => ms(v),
                                    },
                                    best: rows.len() > 1 && v == best[i],
                                }
                            })
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect();

    let stress_tables: Vec<StressTable> = regimes(&stress)
        .iter()
        .map(|regime| StressTable {
            regime: regime.clone(),
            levels: levels(&stress, regime)
                .into_iter()
                .map(|c| StressLevel {
                    concurrency: c,
                    rows: stacks
                        .iter()
                        .filter_map(|s| {
                            let m = |col| mean_of(&stress, s, regime, c, col);
                            Some(vec![
                                label(s),
                                ms(m("latency_p50_us")?),
                                ms(m("latency_p95_us")?),
                                ms(m("latency_p99_us")?),
                                format!("{:.1}", m("throughput_rps")?),
                                format!("{:.2}", (1.0 - m("success_rate")?) * 100.0),
                                format!("{:.1}", m("server_rss_peak_bytes")? / 1e6),
                                format!("{:.1}", m("server_cpu_pct_mean")?),
                            ])
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();

    // Only the classes that occurred anywhere get a column (all 13 are in cells.csv).
    let seen: Vec<FailureClass> = FailureClass::ALL
        .into_iter()
        .filter(|c| {
            results
                .cells
                .iter()
                .any(|r| num(r, &format!("fail_{}", c.as_str())) > 0.0)
        })
        .collect();
    let failure_stages: Vec<FailureStage> = results
        .cells
        .iter()
        .map(|r| {
            let key = &r["cell_key"];
            let examples: Vec<String> = results
                .failures
                .iter()
                .filter(|f| &f["cell_key"] == key)
                .map(|f| format!("{}: {}", f["class"], f["example"]))
                .collect();
            FailureStage {
                stage: stage_label(r),
                total: num(r, "failed") as u64,
                counts: seen
                    .iter()
                    .map(|c| num(r, &format!("fail_{}", c.as_str())) as u64)
                    .collect(),
                examples: examples.join(" · "),
            }
        })
        .collect();

    let mut charts = Vec::new();
    for regime in regimes(&stress) {
        for (col, title, unit, scale) in [
            (
                "latency_p95_us",
                "\"Slow\" latency (1-in-20, p95)",
                "ms",
                1e-3,
            ),
            ("throughput_rps", "Requests per second", "req/s", 1.0),
            (
                "success_rate",
                "Failure rate under load",
                "% failed",
                -100.0,
            ),
        ] {
            let series: Vec<Series> = stacks
                .iter()
                .map(|s| Series {
                    label: label(s),
                    points: levels(&stress, &regime)
                        .into_iter()
                        .filter_map(|c| {
                            let v = mean_of(&stress, s, &regime, c, col)?;
                            let y = if scale < 0.0 {
                                (1.0 - v) * -scale
                            } else {
                                v * scale
                            };
                            Some((c as f64, y))
                        })
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            charts.push(Chart {
                svg: line_chart(
                    &format!("{title} — {regime}"),
                    "concurrent users",
                    unit,
                    &series,
                    true,
                ),
            });
        }
    }

    let mut env = minijinja::Environment::new();
    env.add_template("report.html", include_str!("../templates/report.html"))?;
    let html = env
        .get_template("report.html")?
        .render(minijinja::context! {
            manifest => &results.manifest,
            peaks => peaks,
            baselines => baselines,
            stress_tables => stress_tables,
            failure_classes => seen.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            failure_stages => failure_stages,
            charts => charts,
            notes => notes(&results, &stress),
        })?;
    let path = dir.join("report.html");
    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
