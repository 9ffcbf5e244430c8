//! The runs the paper reads and the views its checks take of them: one results directory
//! ([`Run`]: cells, summary, resource samples, its throughput column) and one variant of it
//! ([`View`]). Means and intervals come from `summary.csv` when it can answer, so the paper
//! shows the same figures as the report.

use std::path::{Path, PathBuf};

use results::labels::{is_cell, levels};
use results::rows::{self, ResourceRow, Row as _, SummaryRow, Table};
use results::Results;
use stats::{interval, Interval};

use crate::stacks::order as stack_order;
use results::rows::CellRow as Row;

/// Steady-state throughput (all workers active); preferred wherever the study's "throughput"
/// is compared, because `ok / elapsed` also counts ramp-up and drain.
pub(crate) const STEADY_RPS: &str = "throughput_steady_rps";
pub(crate) const ELAPSED_RPS: &str = "throughput_rps";

/// One results directory with the files the paper reads.
pub(crate) struct Run {
    pub(crate) dir: PathBuf,
    pub(crate) results: Results,
    /// `summary.csv` (empty when the file is absent).
    pub(crate) summary: Table<SummaryRow>,
    /// `resources.csv` rows (empty when the file is absent).
    pub(crate) resources: Vec<ResourceRow>,
    /// The throughput column used for this run: steady-state when the run has it.
    pub(crate) throughput_col: &'static str,
}

/// A parsed, finite number from a CSV cell; `None` for empty or unparsable cells, so missing
/// figures are never averaged in as zeros.
pub(crate) fn fval(row: &Row, col: &str) -> Option<f64> {
    row.number(col)
}

impl Run {
    pub(crate) fn load(dir: &Path) -> anyhow::Result<Self> {
        let results = Results::load(dir)?;
        crate::stacks::learn(&results.manifest);
        let throughput_col = if results
            .cells
            .iter()
            .any(|r| r.stage == "stress" && fval(r, STEADY_RPS).is_some())
        {
            STEADY_RPS
        } else {
            ELAPSED_RPS
        };
        Ok(Run {
            dir: dir.to_path_buf(),
            // Older runs wrote no resources or summary: empty then.
            summary: rows::read_if_present(&dir.join("summary.csv"))?,
            resources: rows::read_if_present(&dir.join("resources.csv"))?.rows,
            results,
            throughput_col,
        })
    }

    pub(crate) fn name(&self) -> String {
        self.results.manifest["experiment"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    }

    pub(crate) fn stress(&self) -> Vec<&Row> {
        self.results
            .cells
            .iter()
            .filter(|r| r.stage == "stress")
            .collect()
    }

    pub(crate) fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in self.stress() {
            if !v.contains(&r.variant) {
                v.push(r.variant.clone());
            }
        }
        v
    }

    /// The stress rows of one variant (all of them for `None`).
    pub(crate) fn rows(&self, variant: Option<&str>) -> Vec<&Row> {
        self.stress()
            .into_iter()
            .filter(|r| variant.is_none_or(|v| r.variant == v))
            .collect()
    }

    /// Mean and 95 % interval over repetitions: from `summary.csv` when it holds the column
    /// and can tell variants apart, else computed the same way (Student t) from `cells.csv`.
    pub(crate) fn stat(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
        col: &str,
    ) -> Option<Interval> {
        let group = || {
            self.rows(variant)
                .into_iter()
                .filter(move |r| is_cell(r, stack, regime, c))
        };
        // A steady rate from a window too short to stand for the cell is no figure
        // (`CellRow::steady_valid`): `tput` then falls back to `ok / elapsed`.
        if col == STEADY_RPS && !group().all(|r| r.steady_valid()) {
            return None;
        }
        if let Some(iv) = self.summary_stat(variant, stack, regime, c, col) {
            return Some(iv);
        }
        let values: Vec<f64> = group().filter_map(|r| fval(r, col)).collect();
        (!values.is_empty()).then(|| interval(&values))
    }

    pub(crate) fn summary_stat(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
        col: &str,
    ) -> Option<Interval> {
        self.summary.rows.first()?;
        let mean_col = format!("{col}_mean");
        if !self.summary.has(&mean_col) {
            return None;
        }
        let by_variant = self.summary.has("variant");
        if !by_variant && self.variants().len() > 1 {
            // This summary.csv pools the variants; it cannot answer for one of them.
            return None;
        }
        let row = self.summary.rows.iter().find(|r| {
            r.stage == "stress"
                && r.stack == stack
                && r.regime == regime
                && r.concurrency as u64 == c
                && (!by_variant || variant.is_none_or(|v| r.variant == v))
        })?;
        let mean = row.number(&mean_col)?;
        let n = row.repetitions;
        let ci = match (
            row.number(&format!("{col}_ci95_low")),
            row.number(&format!("{col}_ci95_high")),
        ) {
            (Some(lo), Some(hi)) if n >= 2 => Some((lo, hi)),
            _ => None,
        };
        Some(Interval {
            n,
            mean,
            sd: row.number(&format!("{col}_sd")).filter(|_| n >= 2),
            ci,
        })
    }

    /// Throughput of a cell in the run's column, falling back (marked `true`) to
    /// `ok / elapsed_s` for a cell that had no steady window or one too short.
    pub(crate) fn tput(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
    ) -> Option<(Interval, bool)> {
        match self.stat(variant, stack, regime, c, self.throughput_col) {
            Some(iv) => Some((iv, false)),
            None => self
                .stat(variant, stack, regime, c, ELAPSED_RPS)
                .map(|iv| (iv, self.throughput_col != ELAPSED_RPS)),
        }
    }

    /// Both throughput figures of a cell, whatever the run's column: the steady-state rate
    /// (mean over repetitions, with whether every repetition's window was long enough,
    /// [`results::rows::CellRow::steady_valid`]) and `ok / elapsed_s`.
    pub(crate) fn both_rates(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
    ) -> BothRates {
        let cells: Vec<&Row> = self
            .rows(variant)
            .into_iter()
            .filter(|r| is_cell(r, stack, regime, c))
            .collect();
        let steady: Vec<f64> = cells.iter().filter_map(|r| fval(r, STEADY_RPS)).collect();
        BothRates {
            steady: (!steady.is_empty() && steady.len() == cells.len())
                .then(|| (stats::mean(&steady), cells.iter().all(|r| r.steady_valid()))),
            elapsed: self
                .stat(variant, stack, regime, c, ELAPSED_RPS)
                .map(|iv| iv.mean),
        }
    }

    /// Repetitions the cells hold (a resumed or cut run may differ from the plan), else the
    /// manifest's planned count.
    pub(crate) fn repetitions(&self) -> String {
        let mut reps: Vec<String> = self
            .stress()
            .iter()
            .map(|r| r.repetition.to_string())
            .collect();
        reps.sort();
        reps.dedup();
        match reps.len() {
            0 => self.results.manifest["experiment"]["repetitions"]
                .as_u64()
                .map_or_else(|| "?".into(), |n| n.to_string()),
            n => n.to_string(),
        }
    }
}

/// A cell's steady-state rate (mean, window valid in every repetition) and `ok / elapsed`
/// rate (mean), req/s; see [`Run::both_rates`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BothRates {
    pub(crate) steady: Option<(f64, bool)>,
    pub(crate) elapsed: Option<f64>,
}

/// The rows of one variant of one run (or the reference), as a claim check sees them.
pub(crate) struct View<'a> {
    pub(crate) run: &'a Run,
    pub(crate) variant: Option<String>,
    pub(crate) rows: Vec<&'a Row>,
}

impl<'a> View<'a> {
    pub(crate) fn new(run: &'a Run, variant: Option<&str>) -> Self {
        View {
            run,
            variant: variant.map(str::to_string),
            rows: run.rows(variant),
        }
    }
    pub(crate) fn levels(&self, regime: &str) -> Vec<u64> {
        levels(&self.rows, regime)
    }
    pub(crate) fn has(&self, stack: &str, regime: &str) -> bool {
        self.rows
            .iter()
            .any(|r| r.stack == stack && r.regime == regime)
    }
    pub(crate) fn stat(&self, stack: &str, regime: &str, c: u64, col: &str) -> Option<Interval> {
        self.run
            .stat(self.variant.as_deref(), stack, regime, c, col)
    }
    /// Throughput of one cell in the run's column; a cell without a steady window falls back
    /// to `ok / elapsed_s`, marked by `true`.
    pub(crate) fn tput(&self, stack: &str, regime: &str, c: u64) -> Option<(Interval, bool)> {
        self.run.tput(self.variant.as_deref(), stack, regime, c)
    }
    pub(crate) fn both_rates(&self, stack: &str, regime: &str, c: u64) -> BothRates {
        self.run
            .both_rates(self.variant.as_deref(), stack, regime, c)
    }
    pub(crate) fn cells(&self, stack: &str, regime: &str, c: u64) -> Vec<&'a Row> {
        self.rows
            .iter()
            .copied()
            .filter(|r| is_cell(r, stack, regime, c))
            .collect()
    }
    /// Sum of a column over the repetitions of one cell.
    pub(crate) fn sum(&self, stack: &str, regime: &str, c: u64, col: &str) -> f64 {
        self.cells(stack, regime, c)
            .iter()
            .filter_map(|r| fval(r, col))
            .sum()
    }
    pub(crate) fn stacks(&self) -> Vec<String> {
        stack_order(&self.rows)
    }
}
