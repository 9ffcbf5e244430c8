//! `runner compare --format markdown`: the comparison as a GitHub-flavoured Markdown table, for
//! a pull-request comment (as hyperfine's `--export-markdown`): one row per cell, changed cells
//! first, each figure's base and new means with the change and the verdict.

use std::fmt::Write as _;

use super::diff::{CellChange, Change, Verdict};
use super::{Metric, METRICS};

/// `|` would end a cell of the table: escaped.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

fn value(metric: &Metric, v: f64) -> String {
    let unit = if metric.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", metric.unit)
    };
    format!("{:.*}{unit}", metric.decimals, v * metric.scale)
}

/// `1.234 → 1.456 ms (+18.0 %, **worse**)`; a significant change in bold.
fn entry(c: &Change) -> String {
    let delta = c
        .delta_pct
        .map_or_else(|| "n/a".to_string(), |d| format!("{d:+.1} %"));
    let verdict = match c.verdict {
        Verdict::Worse => "**worse**".to_string(),
        Verdict::Better => "**better**".to_string(),
        Verdict::NoSignificantChange => "no sig. change".to_string(),
        Verdict::TooFew { .. } => "n < 3".to_string(),
    };
    let base = value(c.metric, c.base_mean);
    let new = value(c.metric, c.new_mean);
    // The unit once, after the new value.
    let base = base
        .strip_suffix(&format!(" {}", c.metric.unit))
        .filter(|_| !c.metric.unit.is_empty())
        .unwrap_or(&base)
        .to_string();
    format!("{base} → {new} ({delta}, {verdict})")
}

/// The Markdown table of `cells` (already in report order), with a heading naming the runs,
/// a legend, and the count of significant changes first so that a reviewer sees the outcome
/// before the table.
pub fn table(base: &str, new: &str, cells: &[CellChange], warnings: &[String]) -> String {
    let worse = cells
        .iter()
        .flat_map(|c| &c.changes)
        .filter(|c| c.verdict == Verdict::Worse)
        .count();
    let better = cells
        .iter()
        .flat_map(|c| &c.changes)
        .filter(|c| c.verdict == Verdict::Better)
        .count();
    let mut s = format!(
        "### Benchmark comparison\n\nBase `{}`, new `{}`: {} cells compared; {worse} figures significantly worse, {better} significantly better (Welch's t, 95 %).\n\n",
        escape(base),
        escape(new),
        cells.len()
    );
    for w in warnings {
        let _ = writeln!(s, "> **Warning:** {}", escape(w));
    }
    if !warnings.is_empty() {
        s.push('\n');
    }
    // Only the figures some cell has.
    let shown: Vec<&Metric> = METRICS
        .iter()
        .filter(|m| {
            cells
                .iter()
                .any(|c| c.changes.iter().any(|x| x.metric.name == m.name))
        })
        .collect();
    s.push_str("| cell | reps (base/new) |");
    for m in &shown {
        let _ = write!(s, " {} |", escape(m.short));
    }
    s.push_str("\n|:---|---:|");
    for _ in &shown {
        s.push_str("---:|");
    }
    s.push('\n');
    for cell in cells {
        let _ = write!(
            s,
            "| {} | {}/{} |",
            escape(&cell.label()),
            cell.n_base,
            cell.n_new
        );
        for m in &shown {
            let text = cell
                .changes
                .iter()
                .find(|c| c.metric.name == m.name)
                .map_or_else(|| "—".to_string(), entry);
            let _ = write!(s, " {} |", escape(&text));
        }
        s.push('\n');
    }
    s.push_str("\nEach entry: base mean → new mean (change of the mean, verdict). `n < 3`: fewer than 3 repetitions on a side, deltas only.\n");
    s
}
