//! The stacks the paper names, as the runs it reads recorded them (each manifest's `stacks`,
//! in the order the runner's registry listed them): labels and order come from the runs,
//! never from a list of the study's own (only [`crate::claims`] names stacks, as data).

use std::sync::{Mutex, PoisonError};

use results::labels::Stacks;
use results::rows::CellRow;

/// Every stack of the runs read so far, in the order first seen.
static SEEN: Mutex<Option<Stacks>> = Mutex::new(None);

/// Learns the stacks a run's manifest records.
pub(crate) fn learn(manifest: &serde_json::Value) {
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    seen.get_or_insert_with(Stacks::default)
        .extend(Stacks::of(manifest));
}

fn seen() -> Stacks {
    SEEN.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default()
}

/// The stack's label as the runs recorded it (its name when no run did).
pub(crate) fn label(stack: &str) -> String {
    seen().label(stack)
}

/// The stacks of `rows` in the runs' order, then any unknown ones.
pub(crate) fn order(rows: &[&CellRow]) -> Vec<String> {
    seen().order(rows)
}

/// Learns the stacks of the committed reference run (for tests that build rows by hand).
#[cfg(test)]
pub(crate) fn learn_committed() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../results/reference/manifest.json");
    learn(&serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap());
}
