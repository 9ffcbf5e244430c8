//! The one check of a results directory that every reader (report, compare, merge, the
//! study) and `--resume` make before trusting it: a manifest that reads, row files whose
//! rows all have their header's shape, one header per file, one row per cell in `cells.csv`,
//! no more cells than the manifest counts, and no row of a cell that `cells.csv` lacks. Each
//! problem is one line naming the file and what to do.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::rows::{AgentRow, CellRow, FailureRow, LatencyRow, RequestRow, ResourceRow, Row};

/// The file of a request mix's per-name rows ([`RequestRow`]).
pub const REQUESTS_FILE: &str = "requests.csv";

/// The file of the experiment's thresholds, judged per cell (`ThresholdRow`).
pub const THRESHOLDS_FILE: &str = "thresholds.csv";

/// Who reads the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A report, comparison, merge or the study: rows from older runners (fewer columns)
    /// are fine, a cell's leftover rows without its `cells.csv` row are not.
    Read,
    /// `--resume`, which appends rows: every header must be exactly this runner's, and rows
    /// of a cell whose write was cut off are dropped (the runner's `prune_unfinished`) before
    /// measuring.
    Resume,
}

/// The CSV files a run appends rows to, with the columns this runner writes.
pub const ROW_FILES: [(&str, &[&str]); 6] = [
    ("cells.csv", CellRow::COLUMNS),
    ("failures.csv", FailureRow::COLUMNS),
    ("latency.csv", LatencyRow::COLUMNS),
    ("resources.csv", ResourceRow::COLUMNS),
    ("agents.csv", AgentRow::COLUMNS),
    (REQUESTS_FILE, RequestRow::COLUMNS),
];

/// A row file as read for the check: its header and the first field (`cell_key`) of each row.
struct RowFile {
    header: Vec<String>,
    keys: Vec<String>,
}

/// The CSV records of `text`, each with its line end (the last one without, when cut off): a
/// record ends at a line end outside quotes, so a quoted field may hold line ends.
pub fn records(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = record_end(rest.as_bytes()).unwrap_or(rest.len());
        let (record, tail) = rest.split_at(end);
        rest = tail;
        Some(record)
    })
}

/// The end (after its line end) of the first CSV record of `bytes`, `None` when no line end
/// outside quotes ends it. A doubled quote inside a quoted field toggles twice.
fn record_end(bytes: &[u8]) -> Option<usize> {
    let mut quoted = false;
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// The length of `bytes`' whole records: up to the last line end outside quotes.
fn whole_len(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(end) = record_end(&bytes[at..]) {
        at += end;
    }
    at
}

/// Reads `name` in `dir` (`None` when absent or empty), refusing a second header line and a
/// row whose field count differs from the header's. A last row without its line end (the run
/// stopped while writing it) is refused for readers; for a resume it is left out and the
/// length of the whole rows returned (`Some` only then), for the runner's `prune_unfinished` to cut the
/// file to.
fn read_row_file(
    dir: &Path,
    name: &str,
    purpose: Purpose,
) -> Result<(Option<RowFile>, Option<u64>), String> {
    let path = dir.join(name);
    let Ok(mut bytes) = std::fs::read(&path) else {
        return Ok((None, None));
    };
    let shown = path.display();
    let whole = whole_len(&bytes);
    let cut = (whole < bytes.len()).then_some(whole as u64);
    if cut.is_some() {
        if purpose == Purpose::Read {
            return Err(format!(
                "{shown}: its last row is cut off (no line end): the run stopped while writing it; `runner --resume {}` repairs the folder",
                dir.display()
            ));
        }
        bytes.truncate(whole);
    }
    if bytes.is_empty() {
        return Ok((None, cut));
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes.as_slice());
    let mut records = reader.records();
    let header: Vec<String> = match records.next() {
        Some(Ok(h)) => h.iter().map(String::from).collect(),
        Some(Err(e)) => return Err(format!("{shown}: unreadable header: {e}")),
        None => return Ok((None, cut)),
    };
    let mut keys = Vec::new();
    for (i, record) in records.enumerate() {
        let line = i + 2;
        let record = record.map_err(|e| format!("{shown}: line {line} is not CSV: {e}"))?;
        let fields: Vec<&str> = record.iter().collect();
        if fields == header.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(format!(
                "{shown}: a second header line at line {line}: rows of more than one run; results of different runs cannot be read as one; measure each again into its own folder"
            ));
        }
        if fields.len() != header.len() {
            return Err(format!(
                "{shown}: line {line} has {} fields under a header of {}: the file was changed or holds rows of another run; measure again into a new folder",
                fields.len(),
                header.len()
            ));
        }
        keys.push(fields.first().copied().unwrap_or_default().to_string());
    }
    Ok((Some(RowFile { header, keys }), cut))
}

/// What the check found: the manifest (read as `M`: the runner's typed manifest, or any view
/// of it a reader needs) and the keys of the cells in `cells.csv`.
pub struct Checked<M> {
    pub manifest: M,
    pub cells: HashSet<String>,
    /// Per other row file, the keys of cells it has rows of that `cells.csv` lacks: leftovers
    /// of a cell whose write was cut off (refused for [`Purpose::Read`]).
    pub unfinished: BTreeMap<&'static str, HashSet<String>>,
    /// Row files whose last row was cut off (no line end; refused for [`Purpose::Read`]),
    /// with the length of their whole rows.
    pub cut: BTreeMap<&'static str, u64>,
}

/// What the check itself reads of any manifest.
#[derive(Deserialize)]
struct Progress {
    /// "running", "completed" or "interrupted".
    status: String,
    cells_done: usize,
}

/// Checks the results directory `dir` for `purpose`, reading its manifest as `M`; the error is
/// one line.
pub fn check<M: DeserializeOwned>(dir: &Path, purpose: Purpose) -> Result<Checked<M>, String> {
    let shown = dir.display();
    if !dir.is_dir() {
        return Err(format!("{shown} is not a directory"));
    }
    let manifest_path = dir.join("manifest.json");
    let manifest_bytes = std::fs::read(&manifest_path).map_err(|_| {
        format!("{shown} is not a results directory: it has no manifest.json (a run writes it before its first cell)")
    })?;
    if manifest_bytes.is_empty() {
        return Err(format!(
            "{}: empty (0 bytes): the run stopped before it started; run the experiment again",
            manifest_path.display()
        ));
    }
    let not_a_manifest = |e: serde_json::Error| {
        format!(
            "{}: not a run manifest ({e}): the file is truncated or was changed; run the experiment again",
            manifest_path.display()
        )
    };
    let manifest: M = serde_json::from_slice(&manifest_bytes).map_err(not_a_manifest)?;
    let progress: Progress = serde_json::from_slice(&manifest_bytes).map_err(not_a_manifest)?;
    let mut files = BTreeMap::new();
    let mut cut = BTreeMap::new();
    for (name, columns) in ROW_FILES {
        let (file, whole) = read_row_file(dir, name, purpose)?;
        if let Some(whole) = whole {
            cut.insert(name, whole);
        }
        let Some(file) = file else {
            continue;
        };
        if purpose == Purpose::Resume && file.header != columns {
            let missing: Vec<&str> = columns
                .iter()
                .filter(|c| !file.header.iter().any(|h| h == *c))
                .copied()
                .collect();
            let extra: Vec<&str> = file
                .header
                .iter()
                .filter(|h| !columns.contains(&h.as_str()))
                .map(String::as_str)
                .collect();
            return Err(format!(
                "{}: its columns are not the ones this runner writes (missing: {}; not ours: {}): it was changed or written by another version, and resumed rows would not fit it; run the experiment again into a new folder",
                dir.join(name).display(),
                if missing.is_empty() { "none".to_string() } else { missing.join(", ") },
                if extra.is_empty() { "none".to_string() } else { extra.join(", ") },
            ));
        }
        if file.header.first().map(String::as_str) != Some("cell_key") {
            return Err(format!(
                "{}: its first column is not cell_key: not a file this runner wrote",
                dir.join(name).display()
            ));
        }
        files.insert(name, file);
    }
    let cell_keys = files.get("cells.csv").map_or(&[][..], |f| &f.keys[..]);
    let mut cells = HashSet::new();
    for key in cell_keys {
        if !cells.insert(key.clone()) {
            return Err(format!(
                "{}: cell {key} has more than one row: the folder holds rows of more than one run; measure each run into its own folder",
                dir.join("cells.csv").display()
            ));
        }
    }
    // A run writes a cell's row, then the manifest: while it runs the rows may be one ahead.
    let slack = usize::from(progress.status == "running");
    if cells.len() > progress.cells_done + slack {
        return Err(format!(
            "{}: {} cells, but manifest.json counts {} finished: rows of another run were added; measure each run into its own folder",
            dir.join("cells.csv").display(),
            cells.len(),
            progress.cells_done
        ));
    }
    let mut unfinished = BTreeMap::new();
    for (name, file) in &files {
        if *name == "cells.csv" {
            continue;
        }
        let orphans: HashSet<String> = file
            .keys
            .iter()
            .filter(|k| !cells.contains(*k))
            .cloned()
            .collect();
        if orphans.is_empty() {
            continue;
        }
        if purpose == Purpose::Read {
            let mut some: Vec<&String> = orphans.iter().collect();
            some.sort();
            return Err(format!(
                "{}: rows of cell {} which cells.csv does not have: that cell's write was cut off; `runner --resume {shown}` repairs the folder",
                dir.join(name).display(),
                some[0]
            ));
        }
        unfinished.insert(*name, orphans);
    }
    Ok(Checked {
        manifest,
        cells,
        unfinished,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Every results directory committed under results/ (found by its manifest).
    fn committed_runs() -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if path.join("manifest.json").is_file() && path.join("cells.csv").is_file() {
                        out.push(path.clone());
                    }
                    walk(&path, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results"),
            &mut out,
        );
        out
    }

    #[test]
    fn records_end_at_line_ends_outside_quotes() {
        let text = "k,v\na,\"x\ny\"\"z\"\nb,2\nc,\"cut\n";
        let got: Vec<&str> = records(text).collect();
        assert_eq!(got, ["k,v\n", "a,\"x\ny\"\"z\"\n", "b,2\n", "c,\"cut\n"]);
        assert_eq!(whole_len(text.as_bytes()), text.len() - "c,\"cut\n".len());
        assert_eq!(whole_len(b"k,v\na,1"), 4);
        assert_eq!(whole_len(b"k,v\n"), 4);
    }

    #[test]
    fn every_committed_run_passes_the_readers_check() {
        let runs = committed_runs();
        assert!(runs.len() > 10, "found {} committed runs", runs.len());
        for dir in runs {
            let checked =
                check::<serde_json::Value>(&dir, Purpose::Read).unwrap_or_else(|e| panic!("{e}"));
            assert!(!checked.cells.is_empty(), "{}", dir.display());
        }
    }
}
