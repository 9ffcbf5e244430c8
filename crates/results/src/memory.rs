//! `memory.csv`: memory per open connection, a result of the run's cells (refreshed with
//! `summary.csv`). The study compared absolute RSS at one point (C5); an ordinary
//! least-squares slope of RSS against open connections is the figure a reader can carry to
//! their own scale, and its intercept is the process's fixed cost. One fit per (variant,
//! stack, regime, role) over all repetitions and levels of a run's stress cells; and how the
//! reports and the paper show a fit ([`describe`], [`slope_shown`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use stats::{ols, Fit};

use crate::rows::{self, CellRow, MemoryRow, Row};

/// Fewer distinct levels cannot tell a slope from noise around two points ([`stats::ols`]).
pub use stats::MIN_LEVELS;

/// One `memory.csv` row.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFit {
    pub variant: String,
    pub stack: String,
    pub regime: String,
    /// `server` or `client` (the load generator).
    pub role: String,
    /// The RSS column fitted: `{role}_rss_hwm_bytes` when every cell has it, else the sampled
    /// `{role}_rss_peak_bytes` (never a mix of the two within one fit).
    pub rss_column: String,
    /// RSS in bytes against open connections: the slope is bytes per connection, the
    /// intercept bytes.
    pub fit: Fit,
}

/// Open connections of a stress cell. Reuse: the `connections` column when > 0 (a pool smaller
/// than the workers), else one per worker. New-conn: the workers, each holding at most one
/// connection at a time, so this is the in-flight connection count (fitted separately from
/// reuse, never pooled with it).
pub fn open_connections(row: &CellRow) -> f64 {
    if row.regime == "reuse" && row.connections > 0 {
        row.connections as f64
    } else {
        row.concurrency as f64
    }
}

/// Every fit the stress cells allow, in (variant, stack, regime, role) order; groups with
/// fewer than [`MIN_LEVELS`] levels are left out.
pub fn fits<'a>(cells: impl IntoIterator<Item = &'a CellRow>) -> Vec<MemoryFit> {
    type Key = (String, String, String, String);
    let mut groups: BTreeMap<Key, Vec<&CellRow>> = BTreeMap::new();
    for row in cells {
        if row.stage != "stress" || !row.ran() {
            continue;
        }
        for role in ["server", "client"] {
            let key = (
                row.variant.clone(),
                row.stack.clone(),
                row.regime.clone(),
                role.into(),
            );
            groups.entry(key).or_default().push(row);
        }
    }
    let mut out = Vec::new();
    for ((variant, stack, regime, role), rows) in groups {
        let hwm = format!("{role}_rss_hwm_bytes");
        let peak = format!("{role}_rss_peak_bytes");
        let column = if rows.iter().all(|r| r.number(&hwm).is_some()) {
            hwm
        } else {
            peak
        };
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((open_connections(r), r.number(&column)?)))
            .collect();
        if let Some(fit) = ols(&points) {
            out.push(MemoryFit {
                variant,
                stack,
                regime,
                role,
                rss_column: column,
                fit,
            });
        }
    }
    out
}

/// Writes `memory.csv` in `dir` from its `cells.csv` (header only when nothing can be fitted,
/// so a reader can tell "no fit" from "not computed").
pub fn write(dir: &Path) -> anyhow::Result<()> {
    let cells = dir.join("cells.csv");
    if !cells.exists() {
        return Ok(());
    }
    let table = rows::read::<CellRow>(&cells)?;
    let out: Vec<MemoryRow> = fits(&table.rows)
        .into_iter()
        .map(|m| MemoryRow {
            slope_kb_per_conn: m.fit.slope / 1e3,
            slope_kb_ci95_low: m.fit.slope_ci95.0 / 1e3,
            slope_kb_ci95_high: m.fit.slope_ci95.1 / 1e3,
            intercept_mb: m.fit.intercept / 1e6,
            r_squared: m.fit.r_squared,
            n: m.fit.n,
            levels: m.fit.levels,
            variant: m.variant,
            stack: m.stack,
            regime: m.regime,
            role: m.role,
            rss_column: m.rss_column,
        })
        .collect();
    let tmp = dir.join("memory.csv.tmp");
    rows::write(&tmp, &out)?;
    std::fs::rename(&tmp, dir.join("memory.csv")).context("cannot write memory.csv")?;
    Ok(())
}

/// A fit as the reports show it: `slope [low, high]` KB per connection, intercept in MB.
pub fn describe(f: &Fit) -> (String, String) {
    (
        format!(
            "{:.1} [{:.1}, {:.1}]",
            f.slope / 1e3,
            f.slope_ci95.0 / 1e3,
            f.slope_ci95.1 / 1e3
        ),
        format!("{:.1}", f.intercept / 1e6),
    )
}

/// What a fit's 95 % interval says about memory per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// The interval lies above 0: a per-connection cost, shown with its interval.
    Growth,
    /// The interval includes 0: the cells cannot tell a per-connection cost from noise.
    Unresolved,
    /// The interval lies below 0: RSS fell as connections rose, which no per-connection cost
    /// explains (allocator reuse, another process's effect, or a service that freed memory).
    Falling,
}

pub fn resolved(f: &Fit) -> Resolved {
    let (lo, hi) = f.slope_ci95;
    if lo > 0.0 {
        Resolved::Growth
    } else if hi < 0.0 {
        Resolved::Falling
    } else {
        Resolved::Unresolved
    }
}

/// The slope as the report's table shows it: `slope [low, high]` KB per connection when the
/// interval lies above 0, else what the interval says instead of a per-connection figure
/// that would read as negative memory (`memory.csv` keeps the fitted numbers).
pub fn slope_shown(f: &Fit) -> String {
    match resolved(f) {
        Resolved::Growth => describe(f).0,
        Resolved::Unresolved => format!(
            "not resolved: 95 % CI spans 0 (± {:.1} KB)",
            (f.slope_ci95.1 - f.slope_ci95.0) / 2e3
        ),
        Resolved::Falling => "none: RSS fell as connections rose".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::CellRow;

    #[test]
    fn fewer_than_three_levels_give_no_fit() {
        let row = |c: u32, rss: u64| CellRow {
            stage: "stress".into(),
            variant: "default".into(),
            stack: "h3".into(),
            regime: "reuse".into(),
            concurrency: c,
            server_rss_peak_bytes: Some(rss),
            ..CellRow::default()
        };
        let two = [row(10, 1000), row(20, 2000)];
        assert!(fits(&two).is_empty());
        let three = [row(10, 1000), row(20, 2000), row(40, 4000)];
        let got: Vec<MemoryFit> = fits(&three)
            .into_iter()
            .filter(|m| m.role == "server")
            .collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].rss_column, "server_rss_peak_bytes");
        assert!((got[0].fit.slope - 100.0).abs() < 1e-9);
    }
}
