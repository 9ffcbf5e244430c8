//! The runs the paper reads and the views its checks take of them: one results directory
//! ([`Run`]: cells, summary, resource samples, its throughput column) and one variant of it
//! ([`View`]). Means and intervals come from `summary.csv` when it can answer, so the paper
//! shows the same figures as the report.

use std::path::{Path, PathBuf};

use crate::output::rows::{self, ResourceRow, Row as _, SummaryRow, Table};
use crate::output::summary::{interval, Interval};
use crate::report::labels::is_cell;
use crate::report::{levels, stack_order, Results};

use super::Row;

/// Steady-state throughput (all workers active); preferred wherever the study's "throughput"
/// is compared, because `ok / elapsed` also counts ramp-up and drain.
pub(super) const STEADY_RPS: &str = "throughput_steady_rps";
pub(super) const ELAPSED_RPS: &str = "throughput_rps";

/// One results directory with the files the paper reads.
pub(super) struct Run {
    pub(super) dir: PathBuf,
    pub(super) results: Results,
    /// `summary.csv` (empty when the file is absent).
    pub(super) summary: Table<SummaryRow>,
    /// `resources.csv` rows (empty when the file is absent).
    pub(super) resources: Vec<ResourceRow>,
    /// The throughput column used for this run: steady-state when the run has it.
    pub(super) throughput_col: &'static str,
}

/// A parsed, finite number from a CSV cell; `None` for empty or unparsable cells, so missing
/// figures are never averaged in as zeros.
pub(super) fn fval(row: &Row, col: &str) -> Option<f64> {
    row.number(col)
}

impl Run {
    pub(super) fn load(dir: &Path) -> anyhow::Result<Self> {
        let results = Results::load(dir)?;
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

    pub(super) fn name(&self) -> String {
        self.results.manifest["experiment"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    }

    pub(super) fn stress(&self) -> Vec<&Row> {
        self.results
            .cells
            .iter()
            .filter(|r| r.stage == "stress")
            .collect()
    }

    pub(super) fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in self.stress() {
            if !v.contains(&r.variant) {
                v.push(r.variant.clone());
            }
        }
        v
    }

    /// The stress rows of one variant (all of them for `None`).
    pub(super) fn rows(&self, variant: Option<&str>) -> Vec<&Row> {
        self.stress()
            .into_iter()
            .filter(|r| variant.is_none_or(|v| r.variant == v))
            .collect()
    }

    /// Mean and 95 % interval over repetitions: from `summary.csv` when it holds the column
    /// and can tell variants apart, else computed the same way (Student t) from `cells.csv`.
    pub(super) fn stat(
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

    pub(super) fn summary_stat(
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
    pub(super) fn tput(
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

    /// Server samples of one cell in `resources.csv`: count, first, last and largest RSS.
    pub(super) fn rss_samples(&self, cell_key: &str, role: &str) -> Option<RssSeries> {
        let rss: Vec<f64> = self
            .resources
            .iter()
            .filter(|r| r.cell_key == cell_key && r.role == role)
            .map(|r| r.rss_bytes as f64)
            .collect();
        Some(RssSeries {
            samples: rss.len(),
            first_bytes: *rss.first()?,
            last_bytes: *rss.last()?,
            max_bytes: rss.iter().cloned().fold(f64::MIN, f64::max),
        })
    }

    /// Repetitions the cells hold (a resumed or cut run may differ from the plan), else the
    /// manifest's planned count.
    pub(super) fn repetitions(&self) -> String {
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

pub(super) struct RssSeries {
    pub(super) samples: usize,
    pub(super) first_bytes: f64,
    pub(super) last_bytes: f64,
    pub(super) max_bytes: f64,
}

/// The rows of one variant of one run (or the reference), as a claim check sees them.
pub(super) struct View<'a> {
    pub(super) run: &'a Run,
    pub(super) variant: Option<String>,
    pub(super) rows: Vec<&'a Row>,
}

impl<'a> View<'a> {
    pub(super) fn new(run: &'a Run, variant: Option<&str>) -> Self {
        View {
            run,
            variant: variant.map(str::to_string),
            rows: run.rows(variant),
        }
    }
    pub(super) fn levels(&self, regime: &str) -> Vec<u64> {
        levels(&self.rows, regime)
    }
    pub(super) fn has(&self, stack: &str, regime: &str) -> bool {
        self.rows
            .iter()
            .any(|r| r.stack == stack && r.regime == regime)
    }
    pub(super) fn stat(&self, stack: &str, regime: &str, c: u64, col: &str) -> Option<Interval> {
        self.run
            .stat(self.variant.as_deref(), stack, regime, c, col)
    }
    /// Throughput of one cell in the run's column; a cell without a steady window falls back
    /// to `ok / elapsed_s`, marked by `true`.
    pub(super) fn tput(&self, stack: &str, regime: &str, c: u64) -> Option<(Interval, bool)> {
        self.run.tput(self.variant.as_deref(), stack, regime, c)
    }
    pub(super) fn cells(&self, stack: &str, regime: &str, c: u64) -> Vec<&'a Row> {
        self.rows
            .iter()
            .copied()
            .filter(|r| is_cell(r, stack, regime, c))
            .collect()
    }
    /// Sum of a column over the repetitions of one cell.
    pub(super) fn sum(&self, stack: &str, regime: &str, c: u64, col: &str) -> f64 {
        self.cells(stack, regime, c)
            .iter()
            .filter_map(|r| fval(r, col))
            .sum()
    }
    pub(super) fn stacks(&self) -> Vec<String> {
        stack_order(&self.rows)
    }
}
