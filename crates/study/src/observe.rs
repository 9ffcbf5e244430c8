//! The engine's observations read from results directories: each condition of the plan
//! ("experiment/variant") is one variant of one claim run, in every session at the data commit.
//! Which columns hold a quantity is the plan's ([`crate::plan::Source`]); nothing here names a
//! quantity, a claim or a stack.

use std::collections::BTreeMap;

use stats::Counts;

use results::hlog;
use results::labels::is_cell;
use results::rows::Row as _;

use crate::engine::{Cell, Data, Observed, PercentileSession};
use crate::plan::{Plan, Quantity, QuantityKind};
use crate::run::Run;
use results::rows::CellRow as Row;

/// The claim runs of every session, by experiment name, in session order.
pub(crate) struct ClaimData<'a> {
    plan: &'a Plan,
    runs: BTreeMap<String, Vec<&'a Run>>,
}

impl<'a> ClaimData<'a> {
    /// `sessions[i]` holds session i's claim runs (the paper's own first).
    pub(crate) fn new(plan: &'a Plan, sessions: &'a [Vec<Run>]) -> Self {
        let mut runs: BTreeMap<String, Vec<&'a Run>> = BTreeMap::new();
        for session in sessions {
            for run in session {
                runs.entry(run.name()).or_default().push(run);
            }
        }
        ClaimData { plan, runs }
    }

    /// Each experiment's run in the first session, by name.
    pub(crate) fn first_runs(&self) -> impl Iterator<Item = (&String, &'a Run)> {
        self.runs.iter().filter_map(|(k, v)| Some((k, *v.first()?)))
    }

    /// The number of sessions the data holds (the most any experiment has).
    pub(crate) fn sessions(&self) -> usize {
        self.runs.values().map(Vec::len).max().unwrap_or(0)
    }

    /// The run of a condition in each session, and the variant.
    pub(crate) fn condition<'c>(&self, condition: &'c str) -> Option<(&[&'a Run], &'c str)> {
        let (experiment, variant) = condition.split_once('/')?;
        Some((self.runs.get(experiment)?.as_slice(), variant))
    }

    /// The stress rows of a cell in each session, each session's in repetition order.
    pub(crate) fn rows(&self, cell: &Cell) -> Option<Vec<Vec<&'a Row>>> {
        let (runs, variant) = self.condition(&cell.condition)?;
        let sessions: Vec<Vec<&Row>> = runs
            .iter()
            .map(|run| {
                let mut rows: Vec<&Row> = run
                    .rows(Some(variant))
                    .into_iter()
                    .filter(|r| is_cell(r, &cell.stack, &cell.regime, cell.workers))
                    .collect();
                rows.sort_by_key(|r| r.repetition);
                rows
            })
            .collect();
        sessions.iter().any(|s| !s.is_empty()).then_some(sessions)
    }

    fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.plan.quantities.get(name)
    }

    /// The merged histogram's percentile of one session's rows; `None` when a log is missing.
    fn pooled_percentile(run: &Run, rows: &[&Row], tag: &str, q: &Quantity) -> Option<f64> {
        let mut merged: Option<hdrhistogram::Histogram<u64>> = None;
        for r in rows {
            let logged = hlog::read(&hlog::path(&run.dir, &r.cell_key)).ok()?;
            let h = logged.get(tag)?;
            match &mut merged {
                None => merged = Some(h.clone()),
                Some(m) => m.add(h).ok()?,
            }
        }
        let m = merged.filter(|m| !m.is_empty())?;
        let p = q.percentile? / 100.0;
        Some(m.value_at_quantile(p) as f64 * q.source.scale.unwrap_or(1.0))
    }
}

impl Data for ClaimData<'_> {
    fn levels(&self, condition: &str, stack: &str, regime: &str) -> Vec<u64> {
        let Some((runs, variant)) = self.condition(condition) else {
            return Vec::new();
        };
        let mut levels: Vec<u64> = runs
            .iter()
            .flat_map(|run| run.rows(Some(variant)))
            .filter(|r| r.stack == stack && r.regime == regime)
            .map(|r| r.concurrency as u64)
            .collect();
        levels.sort_unstable();
        levels.dedup();
        levels
    }

    fn observe(&self, cell: &Cell, quantity: &str) -> Option<Observed> {
        let q = self.quantity(quantity)?;
        let sessions = self.rows(cell)?;
        let src = &q.source;
        let scale = src.scale.unwrap_or(1.0);
        let value = |r: &Row| -> Option<f64> {
            let v = r.number(src.value.as_deref()?)?;
            let per = match &src.per {
                Some(col) => r.number(col).filter(|x| *x > 0.0)?,
                None => 1.0,
            };
            Some(v / per * scale)
        };
        Some(match q.kind {
            QuantityKind::Proportion => Observed::Proportion(
                sessions
                    .iter()
                    .map(|rows| {
                        rows.iter()
                            .map(|r| Counts {
                                k: r.number(src.count.as_deref().unwrap_or("")).unwrap_or(0.0)
                                    as u64,
                                n: r.number(src.of.as_deref().unwrap_or("")).unwrap_or(0.0) as u64,
                            })
                            .collect()
                    })
                    .collect(),
            ),
            QuantityKind::Mean => Observed::Mean(
                sessions
                    .iter()
                    .map(|rows| rows.iter().filter_map(|r| value(r)).collect())
                    .collect(),
            ),
            QuantityKind::Percentile => {
                let (runs, _) = self.condition(&cell.condition)?;
                let tag = src.histogram.as_deref()?;
                let mut out = Vec::new();
                for (run, rows) in runs.iter().zip(&sessions) {
                    if rows.is_empty() {
                        continue;
                    }
                    out.push(PercentileSession {
                        pooled: Self::pooled_percentile(run, rows, tag, q)?,
                        repetitions: rows.iter().filter_map(|r| value(r)).collect(),
                    });
                }
                Observed::Percentile(out)
            }
        })
    }

    fn attempts(&self, cell: &Cell) -> Option<Vec<Vec<u64>>> {
        let of = &self.plan.budgets.column;
        Some(
            self.rows(cell)?
                .iter()
                .map(|rows| {
                    rows.iter()
                        .map(|r| r.number(of).unwrap_or(0.0) as u64)
                        .collect()
                })
                .collect(),
        )
    }
}
