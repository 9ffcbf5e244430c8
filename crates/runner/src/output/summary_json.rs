//! `summary.json`: the run for a pipeline to read (as oha's and k6's JSON summaries): its
//! cells (every `cells.csv` row, numbers as numbers), the thresholds checked, the verdict and,
//! after `runner capacity`, the capacity found. `docs/summary.schema.json` is its JSON Schema
//! and a test validates real output against it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use crate::output::thresholds::Outcome;
use crate::output::Manifest;
use results::rows::{self, CellRow, Row};

pub const FILE_NAME: &str = "summary.json";

/// Bumped when a field changes meaning or goes away (adding one does not).
pub const SCHEMA_VERSION: u32 = 1;

/// The verdict a pipeline branches on.
#[derive(Debug, Serialize)]
pub struct Verdict {
    /// `pass` (every threshold passed), `fail` (some failed) or `no_thresholds`.
    pub result: &'static str,
    pub thresholds_checked: usize,
    pub thresholds_failed: usize,
    pub cells: usize,
    /// Cells that could not run (their `error` column).
    pub cells_failed: usize,
    /// The run finished every planned cell (`manifest.json`'s status is `completed`).
    pub complete: bool,
}

/// One threshold check of one cell, as `thresholds.csv` has it.
#[derive(Debug, Serialize)]
pub struct ThresholdCheck {
    pub threshold: String,
    pub cell_key: String,
    /// The request mix entry a per-name threshold checked; absent for the cell's figures.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub request: String,
    pub column: String,
    pub value: Option<f64>,
    pub bound: String,
    pub pass: bool,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: Option<String>,
    pub experiment: String,
    pub status: String,
    pub started_utc: String,
    pub finished_utc: Option<String>,
    pub git_commit: String,
    pub verdict: Verdict,
    pub thresholds: Vec<ThresholdCheck>,
    pub cells: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Present after `runner capacity`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::output::capacity::Record>,
}

/// A `cells.csv` row as a JSON object: the same column names; numeric columns as numbers,
/// flags as booleans, text as strings, empty as `null`.
pub fn cell_object(row: &CellRow) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let serde_json::Value::Object(mut map) = serde_json::to_value(row)? else {
        anyhow::bail!("a cell row serializes to an object");
    };
    for column in CellRow::COLUMNS {
        if CellRow::numeric(column) != Some(true) {
            continue;
        }
        // Float columns are written with fixed decimals, as text: read back as numbers.
        if let Some(value) = map.get_mut(*column) {
            if value.is_string() {
                *value = row
                    .number(column)
                    .and_then(serde_json::Number::from_f64)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number);
            }
        }
    }
    Ok(map)
}

/// The summary of the run in `dir`: its manifest and every row of its `cells.csv` (a resumed
/// run's earlier cells too), with the thresholds' outcomes and the capacity found, if any.
pub fn build(
    dir: &Path,
    checked: &[Outcome],
    capacity: Option<crate::output::capacity::Record>,
) -> anyhow::Result<Summary> {
    let manifest = Manifest::read(dir)?;
    let cells = rows::read_if_present::<CellRow>(&dir.join("cells.csv"))?.rows;
    let thresholds_failed = checked.iter().filter(|o| !o.pass).count();
    let verdict = Verdict {
        result: match (checked.is_empty(), thresholds_failed) {
            (true, _) => "no_thresholds",
            (false, 0) => "pass",
            (false, _) => "fail",
        },
        thresholds_checked: checked.len(),
        thresholds_failed,
        cells: cells.len(),
        cells_failed: cells.iter().filter(|c| !c.ran()).count(),
        complete: manifest.status == "completed",
    };
    Ok(Summary {
        schema_version: SCHEMA_VERSION,
        run_id: manifest.run_id,
        experiment: manifest.experiment.name.clone(),
        status: manifest.status,
        started_utc: manifest.started_utc,
        finished_utc: manifest.finished_utc,
        git_commit: manifest.git_commit,
        verdict,
        thresholds: checked
            .iter()
            .map(|o| ThresholdCheck {
                threshold: o.threshold.clone(),
                cell_key: o.cell_key.clone(),
                request: o.request.clone(),
                column: o.column.clone(),
                value: o.value,
                bound: o.bound.clone(),
                pass: o.pass,
            })
            .collect(),
        cells: cells
            .iter()
            .map(cell_object)
            .collect::<anyhow::Result<_>>()?,
        capacity,
    })
}

/// Writes `dir/summary.json` (whole, through a temporary file) and returns its path.
pub fn write(
    dir: &Path,
    checked: &[Outcome],
    capacity: Option<crate::output::capacity::Record>,
) -> anyhow::Result<PathBuf> {
    let summary = build(dir, checked, capacity)?;
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&summary)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_object_has_every_column_with_numbers_as_numbers() {
        let row = CellRow {
            cell_key: "h1/reuse/c1/r1".into(),
            success_rate: 0.5,
            latency_p99_us: 1234,
            rate_rps: Some(250.5),
            cut_short: true,
            ..CellRow::default()
        };
        let obj = cell_object(&row).unwrap();
        assert_eq!(obj.len(), CellRow::COLUMNS.len());
        assert_eq!(obj["success_rate"], serde_json::json!(0.5));
        assert_eq!(obj["latency_p99_us"], serde_json::json!(1234));
        assert_eq!(obj["rate_rps"], serde_json::json!(250.5));
        assert_eq!(obj["cut_short"], serde_json::json!(true));
        assert_eq!(obj["cell_key"], serde_json::json!("h1/reuse/c1/r1"));
        assert_eq!(obj["error"], serde_json::Value::Null);
    }
}
