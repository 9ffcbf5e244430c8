//! The results directory: what a run writes and every reader reads. Its rows and columns
//! ([`rows`], one typed row per CSV file, the header derived from the fields), the records of
//! its manifest ([`manifest`]), the histogram logs ([`hlog`]), the one check every reader and
//! `--resume` run before trusting
//! a directory ([`folder`]), a whole run as the readers take it ([`Results`]), the labels and
//! orders the documents share ([`labels`], from the stacks the manifest records), the memory
//! fits ([`memory`]), the files derived from `cells.csv` (`summary.csv`, `curve.csv` and
//! `memory.csv`: [`summary::write`]) and the exit statuses every command ends with ([`exit`]).
//! docs/results-schema.md describes the files; the runner writes them, the report, the
//! comparison and the study (crate `study`) read them through this crate alone.

pub mod curve;
pub mod exit;
pub mod folder;
pub mod hlog;
pub mod labels;
pub mod manifest;
pub mod memory;
pub mod rows;
pub mod summary;

use std::path::Path;

use anyhow::{bail, Context};

use labels::Stacks;
use rows::{CellRow, FailureRow, SummaryRow, Table};

/// A results directory as the reports read it: the cells that ran, `summary.csv` (empty when
/// absent), `failures.csv` and the manifest.
pub struct Results {
    pub cells: Vec<CellRow>,
    /// The header of `cells.csv` (older runs lack newer columns).
    pub cell_columns: Vec<String>,
    pub summary: Table<SummaryRow>,
    pub failures: Vec<FailureRow>,
    pub manifest: serde_json::Value,
}

impl Results {
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let cells_path = dir.join("cells.csv");
        if !cells_path.is_file() || !dir.join("manifest.json").is_file() {
            bail!(
                "{} is not a results directory (needs cells.csv and manifest.json)",
                dir.display()
            );
        }
        let checked = folder::check::<serde_json::Value>(dir, folder::Purpose::Read)
            .map_err(anyhow::Error::msg)?;
        if checked.cells.is_empty() {
            bail!(
                "{}: no cell finished (cells.csv has no rows; the run is '{}'): resume it with `runner --resume {}` or run it again",
                dir.display(),
                checked.manifest["status"].as_str().unwrap_or("?"),
                dir.display()
            );
        }
        const NEEDED: [&str; 8] = [
            "cell_key",
            "variant",
            "stage",
            "stack",
            "regime",
            "concurrency",
            "repetition",
            "success_rate",
        ];
        let columns: Vec<String> = csv::Reader::from_path(&cells_path)
            .with_context(|| format!("cannot read {}", cells_path.display()))?
            .headers()?
            .iter()
            .map(String::from)
            .collect();
        if let Some(missing) = NEEDED.iter().find(|c| !columns.iter().any(|h| h == *c)) {
            bail!("{} has no '{missing}' column: it was written by an older runner; run the experiment again", cells_path.display());
        }
        let all = rows::read::<CellRow>(&cells_path)?;
        let manifest = serde_json::from_slice(&std::fs::read(dir.join("manifest.json"))?)
            .context("manifest.json is not valid JSON")?;
        Ok(Results {
            cells: all.rows.into_iter().filter(CellRow::ran).collect(),
            cell_columns: all.columns,
            summary: rows::read_if_present(&dir.join("summary.csv"))?,
            failures: rows::read_if_present(&dir.join("failures.csv"))?.rows,
            manifest,
        })
    }

    /// The stacks the run recorded, to label and order them.
    pub fn stacks(&self) -> Stacks {
        Stacks::of(&self.manifest)
    }
}
