//! The one check of a results directory that every reader (report, compare, merge, the
//! study) and `--resume` make before trusting it: a manifest that reads, row files whose
//! rows all have their header's shape, one header per file, one row per cell in `cells.csv`,
//! no more cells than the manifest counts, and no row of a cell that `cells.csv` lacks. Each
//! problem is one line naming the file and what to do.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::output::rows::{
    AgentRow, CellRow, FailureRow, LatencyRow, RequestRow, ResourceRow, Row,
};
use crate::output::{hlog, Manifest, REQUESTS_FILE};

/// Who reads the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A report, comparison, merge or the study: rows from older runners (fewer columns)
    /// are fine, a cell's leftover rows without its `cells.csv` row are not.
    Read,
    /// `--resume`, which appends rows: every header must be exactly this runner's, and rows
    /// of a cell whose write was cut off are dropped ([`prune_unfinished`]) before measuring.
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
fn records(text: &str) -> impl Iterator<Item = &str> {
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
/// length of the whole rows returned (`Some` only then), for [`prune_unfinished`] to cut the
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

/// What the check found: the manifest and the keys of the cells in `cells.csv`.
pub struct Checked {
    pub manifest: Manifest,
    pub cells: HashSet<String>,
    /// Per other row file, the keys of cells it has rows of that `cells.csv` lacks: leftovers
    /// of a cell whose write was cut off (refused for [`Purpose::Read`]).
    pub unfinished: BTreeMap<&'static str, HashSet<String>>,
    /// Row files whose last row was cut off (no line end; refused for [`Purpose::Read`]),
    /// with the length of their whole rows.
    pub cut: BTreeMap<&'static str, u64>,
}

/// Checks the results directory `dir` for `purpose`; the error is one line.
pub fn check(dir: &Path, purpose: Purpose) -> Result<Checked, String> {
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
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes).map_err(|e| {
        format!(
            "{}: not a run manifest ({e}): the file is truncated or was changed; run the experiment again",
            manifest_path.display()
        )
    })?;
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
    let slack = usize::from(manifest.status == "running");
    if cells.len() > manifest.cells_done + slack {
        return Err(format!(
            "{}: {} cells, but manifest.json counts {} finished: rows of another run were added; measure each run into its own folder",
            dir.join("cells.csv").display(),
            cells.len(),
            manifest.cells_done
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

/// Drops what a cell whose write was cut off left behind (rows in the other row files, its
/// histogram logs), so that measuring it again leaves it once; returns one line per file
/// changed. Files are rewritten in place (only ever shorter), under the run's lock.
pub fn prune_unfinished(dir: &Path, checked: &Checked) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    for (name, whole) in &checked.cut {
        let path = dir.join(name);
        let bytes = std::fs::read(&path)?;
        let whole = usize::try_from(*whole)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        if whole == 0 {
            // The header itself was cut off: the file gets the whole header this runner writes
            // (the run's writer, already open, counts the file as having one).
            let columns = ROW_FILES.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
            let mut header = csv::Writer::from_writer(Vec::new());
            header.write_record(columns.unwrap_or_default())?;
            replace(&path, &header.into_inner()?)?;
        } else {
            replace(&path, &bytes[..whole])?;
        }
        notes.push(format!(
            "{name}: dropped its last row, cut off while it was written ({} bytes)",
            bytes.len() - whole
        ));
    }
    for (name, keys) in &checked.unfinished {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)?;
        let mut kept = String::with_capacity(text.len());
        let mut dropped = 0usize;
        let mut lines = records(&text);
        kept.push_str(lines.next().unwrap_or_default());
        for line in lines {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(line.as_bytes());
            let key = reader
                .records()
                .next()
                .and_then(Result::ok)
                .and_then(|r| r.get(0).map(String::from))
                .unwrap_or_default();
            if keys.contains(&key) {
                dropped += 1;
            } else {
                kept.push_str(line);
            }
        }
        replace(&path, kept.as_bytes())?;
        notes.push(format!(
            "{name}: dropped {dropped} rows of {} cell(s) whose write was cut off",
            keys.len()
        ));
    }
    let logs = dir.join(hlog::DIR);
    if let Ok(entries) = std::fs::read_dir(&logs) {
        let wanted: HashSet<String> = checked.cells.iter().map(|k| hlog::stem(k)).collect();
        let mut removed = 0usize;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // `<stem>.hlog` or `<stem>.agent-<i>.hlog` ([`hlog::file_name`]); a `.tmp` never.
            let stem = match name.rfind(".agent-") {
                Some(at) => Some(&name[..at]),
                None => name.strip_suffix(".hlog"),
            };
            let finished = name.ends_with(".hlog") && stem.is_some_and(|s| wanted.contains(s));
            if !finished {
                std::fs::remove_file(entry.path())?;
                removed += 1;
            }
        }
        if removed > 0 {
            notes.push(format!(
                "{}: removed {removed} logs of cells whose write was cut off",
                hlog::DIR
            ));
        }
    }
    Ok(notes)
}

/// Rewrites `path` in place with `bytes` (no longer than it was): the same file, so a writer
/// that already has it open appends after the kept rows.
fn replace(path: &PathBuf, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::{Seek, Write};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.rewind()?;
    file.write_all(bytes)
        .and_then(|()| file.set_len(bytes.len() as u64))
        .and_then(|()| file.sync_data())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A folder a resume accepts: a committed run's manifest, and one row of cell `h1/a` in
    /// cells.csv, latency.csv and failures.csv (fields empty but the key).
    fn resumable_copy() -> (tempfile::TempDir, PathBuf) {
        let from = committed_runs()
            .into_iter()
            .find(|d| check(d, Purpose::Read).is_ok_and(|c| c.manifest.cells_done > 1))
            .expect("a committed run");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(from.join("manifest.json"), dir.join("manifest.json")).unwrap();
        for (name, columns) in ROW_FILES.iter().take(3) {
            let mut row = vec![String::new(); columns.len()];
            row[0] = "h1/a".into();
            let text = format!("{}\n{}\n", columns.join(","), row.join(","));
            std::fs::write(dir.join(name), text).unwrap();
        }
        (tmp, dir)
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

    /// A failure message with a line end (quoted in its field) of a cell whose write was cut
    /// off is dropped whole; a kept one stays byte for byte.
    #[test]
    fn a_resume_drops_a_cut_off_cells_rows_with_quoted_line_ends_whole() {
        let (_tmp, dir) = resumable_copy();
        let failures = dir.join("failures.csv");
        let before = std::fs::read_to_string(&failures).unwrap();
        let row = |key: &str, message: &str| {
            let mut fields = vec![key.to_string(), format!("\"{message}\"")];
            fields.resize(FailureRow::COLUMNS.len(), String::new());
            format!("{}\n", fields.join(","))
        };
        let kept = row("h1/a", "kept\nacross lines");
        let orphan = row("cut/off", "first line\nnot,a,key\nthird");
        std::fs::write(&failures, format!("{before}{kept}{orphan}")).unwrap();
        let checked = check(&dir, Purpose::Resume).unwrap();
        assert_eq!(
            checked.unfinished.get("failures.csv"),
            Some(&HashSet::from(["cut/off".to_string()]))
        );
        prune_unfinished(&dir, &checked).unwrap();
        assert_eq!(
            std::fs::read_to_string(&failures).unwrap(),
            format!("{before}{kept}")
        );
        check(&dir, Purpose::Read).unwrap();
    }

    /// A last row without its line end: readers refuse it naming `--resume`; a resume accepts
    /// the folder and cuts the file back to its whole rows, even when the cut row stopped
    /// inside a quoted field after a line end.
    #[test]
    fn a_resume_cuts_a_last_row_without_its_line_end() {
        let (_tmp, dir) = resumable_copy();
        let latency = dir.join("latency.csv");
        let failures = dir.join("failures.csv");
        let latency_before = std::fs::read(&latency).unwrap();
        let failures_before = std::fs::read(&failures).unwrap();
        let mut cut = latency_before.clone();
        cut.extend_from_slice(b"h1/some/cell,12");
        std::fs::write(&latency, &cut).unwrap();
        let mut cut = failures_before.clone();
        cut.extend_from_slice(b"h1/some/cell,\"a message\nwith");
        std::fs::write(&failures, &cut).unwrap();
        let err = check(&dir, Purpose::Read).err().expect("refused");
        assert!(err.contains("cut off") && err.contains("--resume"), "{err}");
        let checked = check(&dir, Purpose::Resume).expect("a resume takes the folder");
        assert_eq!(
            checked.cut.keys().copied().collect::<Vec<_>>(),
            ["failures.csv", "latency.csv"]
        );
        let notes = prune_unfinished(&dir, &checked).unwrap();
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("latency.csv: dropped its last row")),
            "{notes:?}"
        );
        assert_eq!(std::fs::read(&latency).unwrap(), latency_before);
        assert_eq!(std::fs::read(&failures).unwrap(), failures_before);
        check(&dir, Purpose::Read).unwrap();
        // A header cut off (the file's first write stopped short): the whole header back.
        std::fs::write(&failures, "cell_key,cla").unwrap();
        let checked = check(&dir, Purpose::Resume).unwrap();
        prune_unfinished(&dir, &checked).unwrap();
        assert_eq!(
            std::fs::read_to_string(&failures).unwrap(),
            format!("{}\n", FailureRow::COLUMNS.join(","))
        );
    }

    #[test]
    fn every_committed_run_passes_the_readers_check() {
        let runs = committed_runs();
        assert!(runs.len() > 10, "found {} committed runs", runs.len());
        for dir in runs {
            let checked = check(&dir, Purpose::Read).unwrap_or_else(|e| panic!("{e}"));
            assert!(!checked.cells.is_empty(), "{}", dir.display());
        }
    }
}
