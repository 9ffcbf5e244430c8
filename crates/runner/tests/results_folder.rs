//! One results folder per run: two runs started together (same name, same second) each
//! write a folder of their own, and a folder holding two runs' rows is refused by readers.

use std::path::Path;

mod common;

use common::*;

/// A tiny one-cell run of `stack` named `same`, writing under `out`.
fn tiny_run(stack: &str, out: &Path, certs: &Path) -> std::process::Child {
    runner()
        .args(["--name", "same", "--stacks", stack])
        .args(ONE_TINY_CELL)
        .arg("--out")
        .arg(out)
        .arg("--certs")
        .arg(certs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn header_lines(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let header = text.lines().next().unwrap().to_string();
    text.lines().filter(|l| *l == header).count()
}

#[test]
fn two_runs_started_together_with_one_name_write_two_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let certs = tmp.path().join("certs");
    std::fs::create_dir_all(&out).unwrap();
    // Both runs would name their folder `<second>-same`: that name is taken for every second
    // they can start in, so both collide on it and then race for the suffixes.
    let now = chrono::Utc::now();
    let taken: Vec<_> = (-2..120)
        .map(|s| {
            let stamp = (now + chrono::Duration::seconds(s)).format("%Y%m%dT%H%M%SZ");
            let dir = out.join(format!("{stamp}-same"));
            std::fs::create_dir(&dir).unwrap();
            dir
        })
        .collect();
    // Certificates made once, so both runs start at once rather than one after the other.
    let warm = tiny_run("h1", &tmp.path().join("warm"), &certs)
        .wait_with_output()
        .unwrap();
    assert!(warm.status.success(), "{}", output_text(&warm));
    let a = tiny_run("h1", &out, &certs);
    let b = tiny_run("h2", &out, &certs);
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", output_text(&o));
    }
    for dir in &taken {
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            0,
            "{dir:?} was not the runs' to write"
        );
    }
    let mut written: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !taken.contains(p))
        .collect();
    written.sort();
    assert_eq!(written.len(), 2, "one folder per run: {written:?}");
    let mut stacks = Vec::new();
    let mut ids = Vec::new();
    for dir in &written {
        assert!(
            dir.file_name()
                .unwrap()
                .to_string_lossy()
                .contains("-same-"),
            "{dir:?} is the taken name with a suffix"
        );
        let cells = dir.join("cells.csv");
        assert_eq!(header_lines(&cells), 1, "{cells:?}");
        let rows = read_csv(&cells);
        assert_eq!(rows.len(), 1, "{cells:?}: one run's one cell");
        stacks.push(rows[0]["stack"].clone());
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(
            manifest["experiment"]["stacks"][0],
            rows[0]["stack"].as_str()
        );
        ids.push(manifest["run_id"].as_str().unwrap().to_string());
        for failure in read_csv(&dir.join("failures.csv")) {
            assert!(failure["cell_key"].starts_with(rows[0]["stack"].as_str()));
        }
    }
    stacks.sort();
    assert_eq!(stacks, ["h1", "h2"]);
    assert_ne!(ids[0], ids[1], "each run has an id of its own");
}

#[test]
fn a_folder_with_two_runs_rows_is_refused_by_report_merge_and_compare() {
    let run = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    let dir = run.dir();
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let other = tempfile::tempdir().unwrap();
    let clean = other.path().join("clean");
    copy_dir(&dir, &clean);
    // What two runs appending to one cells.csv left before each run had its own folder.
    let cells = dir.join("cells.csv");
    let text = std::fs::read_to_string(&cells).unwrap();
    std::fs::write(&cells, format!("{text}{text}")).unwrap();
    for args in [
        vec!["report".into(), dir.clone()],
        vec![
            "merge".into(),
            clean.clone(),
            dir.clone(),
            "--out".into(),
            other.path().join("m"),
        ],
        vec!["compare".into(), clean.clone(), dir.clone()],
    ] {
        let o = runner().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", output_text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(
            err.contains("more than one run") && err.contains("cells.csv has 2 header lines"),
            "{args:?}: {err}"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}
