//! Labels, orderings and number formats shared by the report page, the paper and the
//! comparison: one definition each, so the documents name and order things alike.

use crate::output::rows::CellRow;
use crate::registry;

/// The stack's label from the registry (its name when the registry does not know it).
pub fn label(stack: &str) -> String {
    registry::find(stack).map_or_else(|| stack.to_string(), |s| s.label().to_string())
}

/// Stacks in registry order, then any unknown ones.
pub fn stack_order(rows: &[&CellRow]) -> Vec<String> {
    let mut names: Vec<String> = registry::names().iter().map(|s| s.to_string()).collect();
    names.retain(|n| rows.iter().any(|r| &r.stack == n));
    for r in rows {
        if !names.contains(&r.stack) {
            names.push(r.stack.clone());
        }
    }
    names
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

use crate::output::rows::Row as _;
