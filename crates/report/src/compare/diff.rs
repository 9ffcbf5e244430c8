//! The comparison itself: cells matched across the runs on [`KEY`], each metric's change with
//! Welch's test over the repetitions and its verdict, the regressions beyond a limit, and
//! whether two runs may be compared at all.

use std::collections::BTreeMap;

use serde::Serialize;

use stats::{mean, welch, Welch};

use super::{Metric, Row, KEY, METRICS, MIN_REPETITIONS};
use crate::Results;
use results::rows::Row as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    Worse,
    Better,
    NoSignificantChange,
    /// Fewer than [`MIN_REPETITIONS`] on a side; `true` when both sides had exactly one.
    TooFew {
        one: bool,
    },
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::TooFew { one: true } => "one repetition: no significance",
            Verdict::TooFew { one: false } => "n < 3: no significance",
        }
    }
}

/// One metric of one cell in both runs.
#[derive(Debug, Clone)]
pub struct Change {
    pub metric: &'static Metric,
    /// The `cells.csv` column the values came from.
    pub column: &'static str,
    pub base: Vec<f64>,
    pub new: Vec<f64>,
    pub base_mean: f64,
    pub new_mean: f64,
    /// Relative change of the means in %, `None` when the base mean is 0.
    pub delta_pct: Option<f64>,
    pub test: Option<Welch>,
    pub verdict: Verdict,
}

impl Change {
    /// The change in %, signed so that positive is worse (for the regression limit and sorting).
    pub fn worsening_pct(&self) -> Option<f64> {
        self.delta_pct
            .map(|d| if self.metric.higher_is_better { -d } else { d })
    }
}

/// A cell present in both runs.
#[derive(Debug, Clone)]
pub struct CellChange {
    /// The values of [`KEY`], in order.
    pub key: Vec<String>,
    pub n_base: usize,
    pub n_new: usize,
    pub changes: Vec<Change>,
}

impl CellChange {
    pub fn field(&self, name: &str) -> &str {
        let i = KEY.iter().position(|k| *k == name).expect("a key column");
        &self.key[i]
    }

    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {} c{}",
            self.field("stack"),
            self.field("regime"),
            self.field("concurrency")
        );
        if self.field("stage") != "stress" {
            s = format!("{s} {}", self.field("stage"));
        }
        if self.field("mode") != "closed" {
            s = format!("{s} {}", self.field("mode"));
        }
        if !self.field("rate_rps").is_empty() {
            s = format!("{s} {} req/s", self.field("rate_rps"));
        }
        if self.field("variant") != "default" {
            s = format!("{}: {s}", self.field("variant"));
        }
        s
    }

    pub(super) fn worst(&self) -> Option<f64> {
        self.changes
            .iter()
            .filter(|c| c.verdict == Verdict::Worse)
            .filter_map(Change::worsening_pct)
            .reduce(f64::max)
    }

    pub(super) fn best(&self) -> Option<f64> {
        self.changes
            .iter()
            .filter(|c| c.verdict == Verdict::Better)
            .filter_map(|c| c.worsening_pct().map(|w| -w))
            .reduce(f64::max)
    }
}

fn value(row: &Row, column: &str) -> Option<f64> {
    row.number(column)
}

fn key_of(row: &Row) -> Vec<String> {
    KEY.iter()
        .map(|k| row.text(k).unwrap_or_default())
        .collect()
}

/// Report order: variant, baseline before stress, stacks in registry order, reuse before
/// new-conn, concurrency ascending.
pub(super) fn natural_order(key: &[String]) -> impl Ord {
    let stacks = crate::labels::names();
    let stack = stacks
        .iter()
        .position(|s| *s == key[2])
        .unwrap_or(usize::MAX);
    (
        key[0].clone(),
        key[1] != "baseline",
        stack,
        key[2].clone(),
        key[3] != "reuse",
        key[3].clone(),
        key[4].parse::<u64>().unwrap_or(u64::MAX),
        key[5].clone(),
        // Rates ascending (closed loop, empty, first).
        key[6].parse::<f64>().map_or(0, |r| (r * 1000.0) as u64),
    )
}

fn group(rows: &[Row]) -> BTreeMap<Vec<String>, Vec<&Row>> {
    let mut groups: BTreeMap<Vec<String>, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups.entry(key_of(r)).or_default().push(r);
    }
    groups
}

/// One metric over a cell's repetitions in both runs: the primary column when every
/// repetition of both runs has it (so both sides measure the same thing), else the fallback.
/// A steady rate counts as had only from a long enough window ([`CellRow::steady_valid`](results::rows::CellRow::steady_valid)).
fn change(metric: &'static Metric, base: &[&Row], new: &[&Row]) -> Option<Change> {
    let all = |rows: &[&Row], c: &str| {
        rows.iter()
            .all(|r| value(r, c).is_some() && (c != "throughput_steady_rps" || r.steady_valid()))
    };
    let column = if all(base, metric.column) && all(new, metric.column) {
        metric.column
    } else {
        metric.fallback.unwrap_or(metric.column)
    };
    let values =
        |rows: &[&Row]| -> Vec<f64> { rows.iter().filter_map(|r| value(r, column)).collect() };
    let (b, n) = (values(base), values(new));
    if b.is_empty() || n.is_empty() {
        return None;
    }
    let (base_mean, new_mean) = (mean(&b), mean(&n));
    let delta_pct = (base_mean != 0.0).then(|| (new_mean - base_mean) / base_mean.abs() * 100.0);
    let enough = b.len() >= MIN_REPETITIONS && n.len() >= MIN_REPETITIONS;
    let test = if enough { welch(&b, &n) } else { None };
    let verdict = match test {
        None => Verdict::TooFew {
            one: b.len() == 1 && n.len() == 1,
        },
        Some(w) if !w.significant() => Verdict::NoSignificantChange,
        Some(w) if (w.diff > 0.0) == metric.higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
    };
    Some(Change {
        metric,
        column,
        base: b,
        new: n,
        base_mean,
        new_mean,
        delta_pct,
        test,
        verdict,
    })
}

/// Every cell present in both runs (rows of `cells.csv` that ran), changed cells first: those
/// with a significant worsening (largest first), then improvements, then the rest in report
/// order.
pub fn compare(base: &[Row], new: &[Row]) -> Vec<CellChange> {
    let (b, n) = (group(base), group(new));
    let mut cells: Vec<CellChange> = b
        .iter()
        .filter_map(|(key, base_rows)| {
            let new_rows = n.get(key)?;
            Some(CellChange {
                key: key.clone(),
                n_base: base_rows.len(),
                n_new: new_rows.len(),
                changes: METRICS
                    .iter()
                    .filter_map(|m| change(m, base_rows, new_rows))
                    .collect(),
            })
        })
        .collect();
    cells.sort_by(|x, y| {
        let rank = |c: &CellChange| match (c.worst(), c.best()) {
            (Some(w), _) => (0, -w),
            (None, Some(b)) => (1, -b),
            (None, None) => (2, 0.0),
        };
        let (rx, ry) = (rank(x), rank(y));
        rx.0.cmp(&ry.0)
            .then(rx.1.total_cmp(&ry.1))
            .then_with(|| natural_order(&x.key).cmp(&natural_order(&y.key)))
    });
    cells
}

/// Significant worsenings larger than `limit_pct` %, as `cell metric +x.x %` lines.
pub fn regressions(cells: &[CellChange], limit_pct: f64) -> Vec<String> {
    cells
        .iter()
        .flat_map(|cell| {
            cell.changes
                .iter()
                .filter(|c| c.verdict == Verdict::Worse)
                .filter_map(move |c| {
                    let w = c.worsening_pct()?;
                    (w > limit_pct).then(|| {
                        format!(
                            "{} {}: {:+.1} % ({:.1} % worse)",
                            cell.label(),
                            c.metric.name,
                            c.delta_pct.unwrap_or(0.0),
                            w
                        )
                    })
                })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Whether two runs may be compared.

/// A string field of the manifest's experiment, `""` when absent.
fn exp_field(m: &serde_json::Value, key: &str) -> String {
    match &m["experiment"][key] {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn regime_set(m: &serde_json::Value) -> Vec<String> {
    let mut r: Vec<String> = m["experiment"]["regimes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    r.sort();
    r.dedup();
    r
}

/// `Err(one line)` when the workloads differ so that a per-cell comparison means nothing
/// (payload, regime set, request budget per regime, or no cell in common); otherwise the
/// warnings about the machine and the code, one line each.
pub fn check_compatible(base: &Results, new: &Results) -> Result<Vec<String>, String> {
    let (mb, mn) = (&base.manifest, &new.manifest);
    let (pb, pn) = (exp_field(mb, "payload"), exp_field(mn, "payload"));
    if pb != pn {
        return Err(format!(
            "the runs used different payloads ({pb} vs {pn}): comparison refused"
        ));
    }
    let (rb, rn) = (regime_set(mb), regime_set(mn));
    if rb != rn {
        return Err(format!(
            "the runs measured different regimes ({} vs {}): comparison refused",
            rb.join(","),
            rn.join(",")
        ));
    }
    for (regime, key) in [
        ("reuse", "requests_reuse"),
        ("new-conn", "requests_new_conn"),
    ] {
        let (b, n) = (exp_field(mb, key), exp_field(mn, key));
        if rb.iter().any(|r| r == regime) && b != n {
            return Err(format!(
                "the runs had different request budgets for {regime} ({b} vs {n} requests per cell): comparison refused"
            ));
        }
    }
    let (db, dn) = (
        exp_field(mb, "duration_seconds"),
        exp_field(mn, "duration_seconds"),
    );
    if db != dn {
        let shown = |d: &str| {
            if d.is_empty() {
                "request budget".to_string()
            } else {
                format!("{d} s")
            }
        };
        return Err(format!(
            "the runs had different cell durations ({} vs {}): comparison refused",
            shown(&db),
            shown(&dn)
        ));
    }
    // Variants may set their own payload or budget: check the cells themselves as well.
    let (gb, gn) = (group(&base.cells), group(&new.cells));
    let mut common = 0;
    for (key, rows) in &gb {
        let Some(other) = gn.get(key) else { continue };
        common += 1;
        for column in ["payload", "requests", "duration_s"] {
            let (x, y) = (
                rows[0].text(column).unwrap_or_default(),
                other[0].text(column).unwrap_or_default(),
            );
            if x != y {
                return Err(format!(
                    "cell {} differs in {column} ({x} vs {y}): comparison refused",
                    key.join("/")
                ));
            }
        }
    }
    if common == 0 {
        return Err(
            "the runs have no cell in common (variant, stage, stack, regime, concurrency, mode, rate): nothing to compare"
                .into(),
        );
    }
    let mut warnings = Vec::new();
    let text = |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or("unknown").to_string();
    for (key, what) in [
        ("cpu_model", "CPU models"),
        ("kernel", "kernels"),
        ("git_commit", "commits"),
    ] {
        let (b, n) = (text(mb, key), text(mn, key));
        if b != n {
            warnings.push(format!(
                "the runs differ in {what} ({b} vs {n}): differences may come from that"
            ));
        }
    }
    if mb["cores"] != mn["cores"] {
        warnings.push(format!(
            "the runs had different core counts ({} vs {})",
            mb["cores"], mn["cores"]
        ));
    }
    for (m, which) in [(mb, "base"), (mn, "new")] {
        if text(m, "git_commit").ends_with("-dirty") {
            warnings.push(format!(
                "the {which} run was built from uncommitted changes: its code is not its commit"
            ));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::render::terminal_table;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn row(stack: &str, rep: u32, rps: f64, p50: f64, steady: Option<f64>) -> Row {
        Row {
            variant: "default".into(),
            stage: "stress".into(),
            stack: stack.into(),
            regime: "reuse".into(),
            concurrency: 2,
            mode: "closed".into(),
            success_rate: 1.0,
            repetition: rep,
            throughput_rps: rps,
            throughput_steady_rps: steady,
            steady_window_valid: steady.map(|_| true),
            latency_p50_us: p50 as u64,
            server_rss_peak_bytes: Some(20_000_000),
            ..Row::default()
        }
    }

    /// A rate sweep's points are compared rate by rate, never pooled.
    #[test]
    fn a_rate_sweeps_points_are_matched_rate_by_rate() {
        let at = |rate: f64, p50: f64| Row {
            mode: "open".into(),
            rate_rps: Some(rate),
            ..row("h1", 1, rate, p50, None)
        };
        let base = [at(100.0, 1000.0), at(200.0, 1000.0)];
        let new = [at(100.0, 1000.0), at(200.0, 5000.0)];
        let cells = compare(&base, &new);
        assert_eq!(cells.len(), 2);
        let p50 = |rate: &str| {
            let cell = cells.iter().find(|c| c.field("rate_rps") == rate).unwrap();
            assert!(cell.label().ends_with(&format!("open {rate} req/s")));
            cell.changes
                .iter()
                .find(|c| c.metric.name == "latency_p50_us")
                .unwrap()
                .delta_pct
        };
        assert_eq!(p50("100"), Some(0.0));
        assert_eq!(p50("200"), Some(400.0));
    }

    fn find<'a>(cells: &'a [CellChange], stack: &str, metric: &str) -> &'a Change {
        cells
            .iter()
            .find(|c| c.field("stack") == stack)
            .unwrap()
            .changes
            .iter()
            .find(|c| c.metric.name == metric)
            .unwrap()
    }

    #[test]
    fn verdicts_follow_each_metrics_direction() {
        let base = vec![
            row("h1", 1, 1000.0, 400.0, Some(1010.0)),
            row("h1", 2, 1020.0, 410.0, Some(1030.0)),
            row("h1", 3, 990.0, 405.0, Some(995.0)),
            row("h2", 1, 800.0, 700.0, Some(810.0)),
            row("h2", 2, 810.0, 690.0, Some(805.0)),
            row("h2", 3, 790.0, 710.0, Some(800.0)),
        ];
        let new = vec![
            // h1 slower: lower throughput and higher latency, both worse.
            row("h1", 1, 300.0, 7000.0, Some(301.0)),
            row("h1", 2, 310.0, 7100.0, Some(305.0)),
            row("h1", 3, 290.0, 6900.0, Some(299.0)),
            // h2 faster: both better. Its third repetition has no steady window, so both
            // sides fall back to throughput_rps.
            row("h2", 1, 1600.0, 350.0, Some(1610.0)),
            row("h2", 2, 1610.0, 345.0, Some(1605.0)),
            row("h2", 3, 1590.0, 355.0, None),
        ];
        let cells = compare(&base, &new);
        assert_eq!(cells.len(), 2);
        // Worsened cells first.
        assert_eq!(cells[0].field("stack"), "h1");
        assert_eq!(find(&cells, "h1", "throughput_rps").verdict, Verdict::Worse);
        assert_eq!(find(&cells, "h1", "latency_p50_us").verdict, Verdict::Worse);
        assert_eq!(
            find(&cells, "h2", "throughput_rps").verdict,
            Verdict::Better
        );
        assert_eq!(
            find(&cells, "h2", "latency_p50_us").verdict,
            Verdict::Better
        );
        assert_eq!(
            find(&cells, "h1", "throughput_rps").column,
            "throughput_steady_rps"
        );
        let h2 = find(&cells, "h2", "throughput_rps");
        assert_eq!(h2.column, "throughput_rps");
        assert!(close(h2.delta_pct.unwrap(), 100.0, 1e-9));
        // Same success rate everywhere; RSS falls back to the sampled peak.
        assert_eq!(
            find(&cells, "h1", "success_rate").verdict,
            Verdict::NoSignificantChange
        );
        assert_eq!(
            find(&cells, "h1", "server_rss_bytes").column,
            "server_rss_peak_bytes"
        );
        // Metrics without values on either side are left out, not shown as zero.
        static EMPTY: Metric = Metric {
            name: "steal",
            column: "steal_pct",
            fallback: None,
            higher_is_better: false,
            short: "steal",
            unit: "%",
            scale: 1.0,
            decimals: 1,
        };
        let rows: Vec<&Row> = base.iter().collect();
        assert!(change(&EMPTY, &rows, &rows).is_none());
        // h1: throughput −70 %, p50 +1,600 %: over a 10 % limit, not over a 2,000 % one.
        let r = regressions(&cells, 10.0);
        assert!(r
            .iter()
            .any(|l| l.contains("h1") && l.contains("throughput_rps")));
        assert!(r.iter().all(|l| !l.contains("h2")));
        assert!(regressions(&cells, 2000.0).is_empty());
        // The table puts h1 first and marks it.
        let table = terminal_table(&cells);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[1].starts_with("h1") && lines[1].contains(" W"),
            "{table}"
        );
        assert!(
            lines[2].starts_with("h2") && lines[2].contains(" B"),
            "{table}"
        );
    }

    #[test]
    fn identical_runs_show_no_significant_change() {
        let rows: Vec<Row> = (1..=3)
            .map(|i| row("h1", i, 1000.0 + i as f64, 400.0 + i as f64, None))
            .collect();
        let cells = compare(&rows, &rows);
        assert!(cells[0]
            .changes
            .iter()
            .all(|c| c.verdict == Verdict::NoSignificantChange));
        assert!(regressions(&cells, 0.0).is_empty());
    }

    #[test]
    fn fewer_than_three_repetitions_give_deltas_only() {
        let one = compare(
            &[row("h1", 1, 1000.0, 400.0, None)],
            &[row("h1", 1, 100.0, 4000.0, None)],
        );
        let c = find(&one, "h1", "latency_p50_us");
        assert_eq!(c.verdict, Verdict::TooFew { one: true });
        assert_eq!(c.verdict.text(), "one repetition: no significance");
        assert!(close(c.delta_pct.unwrap(), 900.0, 1e-9));
        assert!(c.test.is_none());
        assert!(regressions(&one, 0.0).is_empty());
        assert!(terminal_table(&one).contains("one repetition: no significance"));
        let two: Vec<Row> = (1..=2).map(|i| row("h1", i, 1000.0, 400.0, None)).collect();
        let c = compare(&two, &two);
        assert_eq!(
            find(&c, "h1", "latency_p50_us").verdict.text(),
            "n < 3: no significance"
        );
    }
}
