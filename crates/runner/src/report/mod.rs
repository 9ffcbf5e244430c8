//! The HTML report of a results directory (`runner report`, the seed-000-shaped page in
//! [`page`]) and the comparison of two runs ([`compare`]). Both read a run through
//! [`Results`]: typed rows and the manifest; so does the study's paper (crate `study`).

pub mod chart;
pub mod chart_curve;
pub mod compare;
pub mod labels;
pub mod memory;
pub mod page;
pub mod path;
pub mod requests;
pub mod service;
pub mod streaming;

use std::path::Path;

use anyhow::{bail, Context};

use crate::output::rows::{self, CellRow, FailureRow, SummaryRow, Table};

pub use labels::{label, levels, mean_of, ms, regimes, stack_order};
pub use page::write;

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
        let checked = crate::output::folder::check(dir, crate::output::folder::Purpose::Read)
            .map_err(anyhow::Error::msg)?;
        if checked.cells.is_empty() {
            bail!(
                "{}: no cell finished (cells.csv has no rows; the run is '{}'): resume it with `runner --resume {}` or run it again",
                dir.display(),
                checked.manifest.status,
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
}
