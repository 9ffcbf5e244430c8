//! The run's live metrics endpoint (`metrics_listen`, crate `live-metrics`): what the cell
//! loop tells it of a cell, in the endpoint's terms. The endpoint is bound before the run
//! (`app`), the cell loop marks each cell's start and end, the supervisor hands it the load
//! generators' live snapshots and the sampler's readings (an agent adds its load generator's
//! to the snapshots it relays, [`LiveSnapshot::take_reading`]), and the run lingers at its
//! end until one scrape has read the final figures (`metrics_linger_seconds`).

use executors::cell_result::CellResult;
use experiment::plan::Cell;
use live_metrics::CellLabels;
use load::live::LiveSnapshot;

/// A cell's labels: its key's parts (`[variant/]stack/regime/<level>/r<repetition>`).
pub fn labels(cell: &Cell) -> CellLabels {
    let key = cell.key();
    let key = key
        .strip_prefix(&format!("{}/", cell.variant))
        .unwrap_or(&key);
    let regime = cell.regime.to_string();
    let level = key
        .strip_prefix(&format!("{}/{regime}/", cell.stack))
        .and_then(|k| k.strip_suffix(&format!("/r{}", cell.repetition)))
        .unwrap_or(key);
    CellLabels {
        variant: cell.variant.clone(),
        stack: cell.stack.clone(),
        regime,
        level: level.to_string(),
        repetition: cell.repetition,
    }
}

/// The figures a finished cell's counters end at: its row's. `None` for a cell that could not
/// run, whose row has none (its counters keep what they showed).
pub fn last(result: &CellResult) -> Option<LiveSnapshot> {
    (result.error.is_none() || result.hopeless.is_some())
        .then(|| LiveSnapshot::of(&result.measured))
}
