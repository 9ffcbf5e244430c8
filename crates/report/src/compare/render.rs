//! What `runner compare` writes: `compare.csv`, the terminal table and `compare.html`, whose
//! delta charts are drawn by [`chart`] in each stack's registry colour, as in the report.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use stats::sample_sd;

use super::diff::{natural_order, CellChange, Change, Verdict};
use super::{Metric, METRICS};
use crate::chart::{self, Bar};
use crate::{label, Results};
use results::rows::{self, CompareRow};

fn fmt_value(metric: &Metric, v: f64) -> String {
    format!("{:.*}", metric.decimals, v * metric.scale)
}

/// Writes `compare.csv` (docs/comparing.md): one row per metric of each cell.
pub fn write_csv(path: &Path, cells: &[CellChange]) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for cell in cells {
        for c in &cell.changes {
            out.push(CompareRow {
                variant: cell.field("variant").into(),
                stage: cell.field("stage").into(),
                stack: cell.field("stack").into(),
                regime: cell.field("regime").into(),
                concurrency: cell.field("concurrency").into(),
                mode: cell.field("mode").into(),
                rate_rps: cell.field("rate_rps").parse().ok(),
                metric: c.metric.name.into(),
                column: c.column.into(),
                higher_is_better: c.metric.higher_is_better,
                n_base: c.base.len(),
                n_new: c.new.len(),
                base_mean: c.base_mean,
                new_mean: c.new_mean,
                base_sd: sample_sd(&c.base),
                new_sd: sample_sd(&c.new),
                delta: c.new_mean - c.base_mean,
                delta_pct: c.delta_pct,
                ci95_low: c.test.map(|t| t.ci.0),
                ci95_high: c.test.map(|t| t.ci.1),
                df: c.test.map(|t| t.df).filter(|df| df.is_finite()),
                p_value: c.test.map(|t| t.p),
                verdict: c.verdict.text().into(),
            });
        }
    }
    rows::write(path, &out)
}

/// `-12.3% W`: the relative change and a one-letter verdict.
fn terminal_entry(c: &Change) -> String {
    let mark = match c.verdict {
        Verdict::Worse => " W",
        Verdict::Better => " B",
        Verdict::NoSignificantChange => "  ",
        Verdict::TooFew { .. } => " ?",
    };
    match c.delta_pct {
        Some(d) => format!("{d:+.1}%{mark}"),
        None => format!("n/a{mark}"),
    }
}

/// The terminal table: one line per cell (changed cells first), the relative change of each
/// metric with its verdict, and a legend.
pub fn terminal_table(cells: &[CellChange]) -> String {
    let width = cells
        .iter()
        .map(|c| c.label().chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut s = format!("{:<width$}  {:>5}", "cell", "reps");
    for m in &METRICS {
        let _ = write!(s, "  {:>10}", m.short);
    }
    s.push('\n');
    for cell in cells {
        let _ = write!(
            s,
            "{:<width$}  {:>5}",
            cell.label(),
            format!("{}/{}", cell.n_base, cell.n_new)
        );
        for m in &METRICS {
            let entry = cell
                .changes
                .iter()
                .find(|c| c.metric.name == m.name)
                .map_or_else(|| "—".to_string(), terminal_entry);
            let _ = write!(s, "  {entry:>10}");
        }
        s.push('\n');
    }
    s.push_str("change of the mean, new vs base; W significantly worse, B significantly better (Welch's t, 95 %), blank: no significant change");
    let too_few: Vec<Verdict> = cells
        .iter()
        .flat_map(|c| c.changes.iter().map(|x| x.verdict))
        .filter(|v| matches!(v, Verdict::TooFew { .. }))
        .collect();
    if !too_few.is_empty() {
        let text = if too_few.iter().all(|v| *v == Verdict::TooFew { one: true }) {
            Verdict::TooFew { one: true }.text()
        } else {
            "fewer than 3 repetitions on a side: no significance"
        };
        let _ = write!(s, "\n? {text} (deltas only)");
    }
    s
}

#[derive(Serialize)]
struct HtmlRow {
    cell: String,
    reps: String,
    metric: String,
    base: String,
    new: String,
    delta_pct: String,
    ci: String,
    p: String,
    verdict: &'static str,
    class: &'static str,
    first: bool,
    span: usize,
}

#[derive(Serialize)]
struct RunInfo {
    dir: String,
    name: String,
    started: String,
    commit: String,
    machine: String,
}

fn run_info(dir: &Path, r: &Results) -> RunInfo {
    let m = &r.manifest;
    let s = |k: &str| m[k].as_str().unwrap_or("unknown").to_string();
    RunInfo {
        dir: dir.display().to_string(),
        name: m["experiment"]["name"].as_str().unwrap_or("?").to_string(),
        started: s("started_utc"),
        commit: s("git_commit").chars().take(12).collect(),
        machine: format!(
            "{}, {} cores, Linux {}",
            s("cpu_model"),
            m["cores"],
            s("kernel")
        ),
    }
}

/// The delta charts: per variant, stage and regime, throughput and p95 by concurrency and stack.
fn charts(cells: &[CellChange]) -> Vec<String> {
    let mut panels: Vec<(String, String, String)> = Vec::new();
    let mut sorted: Vec<&CellChange> = cells.iter().collect();
    sorted.sort_by_key(|c| natural_order(&c.key));
    for c in &sorted {
        let p = (
            c.field("variant").to_string(),
            c.field("stage").to_string(),
            c.field("regime").to_string(),
        );
        if !panels.contains(&p) {
            panels.push(p);
        }
    }
    // Each stack in its registry colour, as in the report (unregistered stacks after them).
    let mut stacks: Vec<String> = Vec::new();
    for c in &sorted {
        if !stacks.iter().any(|s| s == c.field("stack")) {
            stacks.push(c.field("stack").to_string());
        }
    }
    let mut out = Vec::new();
    for (variant, stage, regime) in &panels {
        for metric in ["throughput_rps", "latency_p95_us"] {
            let bars: Vec<Bar> = sorted
                .iter()
                .filter(|c| {
                    c.field("variant") == variant
                        && c.field("stage") == stage
                        && c.field("regime") == regime
                })
                .filter_map(|c| {
                    let ch = c.changes.iter().find(|x| x.metric.name == metric)?;
                    let pct = ch.delta_pct?;
                    let mut series = label(c.field("stack"));
                    if c.field("mode") != "closed" {
                        series = format!("{series} {}", c.field("mode"));
                    }
                    if !c.field("rate_rps").is_empty() {
                        series = format!("{series} {} req/s", c.field("rate_rps"));
                    }
                    Some(Bar {
                        group: c.field("concurrency").to_string(),
                        series,
                        style: chart::palette_index(c.field("stack"), &stacks),
                        pct,
                        ci_pct: ch.test.map(|t| {
                            let k = 100.0 / ch.base_mean.abs();
                            (t.ci.0 * k, t.ci.1 * k)
                        }),
                        significant: matches!(ch.verdict, Verdict::Worse | Verdict::Better),
                    })
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            let what = if metric == "throughput_rps" {
                "Throughput change"
            } else {
                "p95 latency change"
            };
            let mut title = format!("{what} — {regime}");
            if stage != "stress" {
                title = format!("{title}, {stage}");
            }
            if variant != "default" {
                title = format!("{title} ({variant})");
            }
            out.push(chart::delta_chart(&title, &bars));
        }
    }
    out
}

/// The HTML page: runs, warnings, delta charts and the full table.
pub fn html(
    base: (&Path, &Results),
    new: (&Path, &Results),
    cells: &[CellChange],
    warnings: &[String],
) -> anyhow::Result<String> {
    let mut rows = Vec::new();
    for cell in cells {
        for (i, c) in cell.changes.iter().enumerate() {
            let m = c.metric;
            let unit = if m.unit.is_empty() || m.unit == m.short {
                String::new()
            } else {
                format!(" {}", m.unit)
            };
            rows.push(HtmlRow {
                cell: cell.label(),
                reps: format!("{} / {}", cell.n_base, cell.n_new),
                metric: format!("{}{unit}", m.short),
                base: fmt_value(m, c.base_mean),
                new: fmt_value(m, c.new_mean),
                delta_pct: c
                    .delta_pct
                    .map_or_else(|| "—".into(), |d| format!("{d:+.1} %")),
                ci: c.test.map_or_else(
                    || "—".into(),
                    |t| format!("[{}, {}]", fmt_value(m, t.ci.0), fmt_value(m, t.ci.1)),
                ),
                p: c.test.map_or_else(|| "—".into(), |t| format!("{:.3}", t.p)),
                verdict: c.verdict.text(),
                class: match c.verdict {
                    Verdict::Worse => "worse",
                    Verdict::Better => "better",
                    _ => "same",
                },
                first: i == 0,
                span: cell.changes.len(),
            });
        }
    }
    let changed = cells
        .iter()
        .filter(|c| c.worst().is_some() || c.best().is_some())
        .count();
    let tested = cells
        .iter()
        .any(|c| c.changes.iter().any(|x| x.test.is_some()));
    let mut env = minijinja::Environment::new();
    env.add_template("report.css", include_str!("../../templates/report.css"))?;
    env.add_template("compare.html", include_str!("../../templates/compare.html"))?;
    Ok(env
        .get_template("compare.html")?
        .render(minijinja::context! {
            base => run_info(base.0, base.1),
            new => run_info(new.0, new.1),
            warnings => warnings,
            charts => charts(cells),
            rows => rows,
            cells => cells.len(),
            changed => changed,
            tested => tested,
        })?)
}
