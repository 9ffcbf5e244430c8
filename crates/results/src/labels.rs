//! Labels, orderings and number formats shared by the report page, the paper and the
//! comparison: one definition each, so the documents name and order things alike. A stack's
//! label and place come from the stacks a run's manifest records ([`Stacks`]), not from a list
//! of the readers' own.

use crate::manifest::StackInfo;
use crate::rows::{CellRow, Row as _};

/// The stacks as a run recorded them (the manifest's `stacks`, in registry order): how the
/// readers name and order them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stacks(Vec<StackInfo>);

impl Stacks {
    pub fn new(stacks: Vec<StackInfo>) -> Stacks {
        Stacks(stacks)
    }

    /// The stacks `manifest` records.
    pub fn of(manifest: &serde_json::Value) -> Stacks {
        Stacks(StackInfo::of(manifest))
    }

    /// Adds the stacks of `other` this list lacks, after its own.
    pub fn extend(&mut self, other: Stacks) {
        for s in other.0 {
            if !self.knows(&s.name) {
                self.0.push(s);
            }
        }
    }

    /// Whether the list has a stack of this name.
    pub fn knows(&self, stack: &str) -> bool {
        self.0.iter().any(|s| s.name == stack)
    }

    /// The names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|s| s.name.as_str()).collect()
    }

    /// The stack's label (its name when the list does not have it).
    pub fn label(&self, stack: &str) -> String {
        self.0
            .iter()
            .find(|s| s.name == stack)
            .map_or_else(|| stack.to_string(), |s| s.label.clone())
    }

    /// The stacks of `rows` in this list's order, then any unknown ones.
    pub fn order(&self, rows: &[&CellRow]) -> Vec<String> {
        let mut names: Vec<String> = self.0.iter().map(|s| s.name.clone()).collect();
        names.retain(|n| rows.iter().any(|r| &r.stack == n));
        for r in rows {
            if !names.contains(&r.stack) {
                names.push(r.stack.clone());
            }
        }
        names
    }
}

/// Microseconds as milliseconds with three decimals.
pub fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// The regimes of `rows`, reuse before new-conn, as the study presents them.
pub fn regimes(rows: &[&CellRow]) -> Vec<String> {
    let mut r: Vec<String> = rows.iter().map(|r| r.regime.clone()).collect();
    r.sort();
    r.dedup();
    r.reverse();
    r
}

/// The rows of one (stack, regime, concurrency) cell, all its repetitions.
pub fn is_cell(r: &CellRow, stack: &str, regime: &str, concurrency: u64) -> bool {
    r.stack == stack && r.regime == regime && r.concurrency as u64 == concurrency
}

/// Mean of a column over the repetitions of (stack, regime, concurrency) in `rows` (an empty
/// value counts as 0, as the page's notes always read it).
pub fn mean_of(
    rows: &[&CellRow],
    stack: &str,
    regime: &str,
    concurrency: u64,
    col: &str,
) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| is_cell(r, stack, regime, concurrency))
        .map(|r| r.number(col).unwrap_or(0.0))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The concurrency levels of one regime, ascending.
pub fn levels(rows: &[&CellRow], regime: &str) -> Vec<u64> {
    let mut c: Vec<u64> = rows
        .iter()
        .filter(|r| r.regime == regime)
        .map(|r| r.concurrency as u64)
        .collect();
    c.sort();
    c.dedup();
    c
}
