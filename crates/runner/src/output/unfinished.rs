//! Repairs a results directory for `--resume`: what a cell whose write was cut off left
//! behind (found by the readers' check, `results::folder::check`) is dropped before measuring.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use results::folder::{self, Checked};
use results::hlog;

/// Drops what a cell whose write was cut off left behind (rows in the other row files, its
/// histogram logs), so that measuring it again leaves it once; returns one line per file
/// changed. Files are rewritten in place (only ever shorter), under the run's lock.
pub fn prune_unfinished<M>(dir: &Path, checked: &Checked<M>) -> anyhow::Result<Vec<String>> {
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
            let columns = folder::ROW_FILES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| *c);
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
        let mut lines = folder::records(&text);
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
    use crate::output::Manifest;
    use results::folder::{check, Purpose};
    use results::rows::{FailureRow, Row as _};

    /// A folder a resume accepts: a committed run's manifest, and one row of cell `h1/a` in
    /// cells.csv, latency.csv and failures.csv (fields empty but the key).
    fn resumable_copy() -> (tempfile::TempDir, PathBuf) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/reference");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(from.join("manifest.json"), dir.join("manifest.json")).unwrap();
        for (name, columns) in folder::ROW_FILES.iter().take(3) {
            let mut row = vec![String::new(); columns.len()];
            row[0] = "h1/a".into();
            let text = format!("{}\n{}\n", columns.join(","), row.join(","));
            std::fs::write(dir.join(name), text).unwrap();
        }
        (tmp, dir)
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
        let checked = check::<Manifest>(&dir, Purpose::Resume).unwrap();
        assert_eq!(
            checked.unfinished.get("failures.csv"),
            Some(&HashSet::from(["cut/off".to_string()]))
        );
        prune_unfinished(&dir, &checked).unwrap();
        assert_eq!(
            std::fs::read_to_string(&failures).unwrap(),
            format!("{before}{kept}")
        );
        check::<Manifest>(&dir, Purpose::Read).unwrap();
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
        let err = check::<Manifest>(&dir, Purpose::Read)
            .err()
            .expect("refused");
        assert!(err.contains("cut off") && err.contains("--resume"), "{err}");
        let checked = check::<Manifest>(&dir, Purpose::Resume).expect("a resume takes the folder");
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
        check::<Manifest>(&dir, Purpose::Read).unwrap();
        // A header cut off (the file's first write stopped short): the whole header back.
        std::fs::write(&failures, "cell_key,cla").unwrap();
        let checked = check::<Manifest>(&dir, Purpose::Resume).unwrap();
        prune_unfinished(&dir, &checked).unwrap();
        assert_eq!(
            std::fs::read_to_string(&failures).unwrap(),
            format!("{}\n", FailureRow::COLUMNS.join(","))
        );
    }
}
