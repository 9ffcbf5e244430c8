//! One results folder per run: two runs started together (same name, same second) each
//! write a folder of their own; a folder holding two runs' rows, a damaged one or a merged one
//! is refused by readers and by `--resume` with one line; a cell's rows are written as a unit
//! (a full disk leaves none of them), and a run that fails before its first cell leaves no
//! folder.

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
            err.contains("more than one run") && err.contains("cells.csv: a second header line"),
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

/// The rows of `file` per cell key.
fn rows_per_cell(file: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for row in read_csv(file) {
        *counts.entry(row["cell_key"].clone()).or_insert(0) += 1;
    }
    counts
}

/// A tmpfs of `size` mounted at a fresh directory (root only), unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("note: skipped: mounting a small tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        Some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// Issue 40, item 2: when a cell's write fails on a full disk, none of its rows stay in any
/// file; the run exits 1 (the input was fine, writing failed), and the resume measures the
/// cell again, so that every file holds each cell once and readers accept the folder.
#[test]
fn a_full_disk_mid_run_then_resume_leaves_every_cell_once_in_every_file() {
    let Some(disk) = SmallDisk::mount("200k") else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let out = disk.dir.path().join("o");
    std::fs::create_dir(&out).unwrap();
    // Leaves about 24 KB: the first cells fit, a later one does not.
    let filler = disk.dir.path().join("filler");
    std::fs::write(&filler, vec![0u8; 176 * 1024]).unwrap();
    let levels = "1,2,3,4,5,6,7,8,9,10,11,12";
    let output = runner()
        .args([
            "--stacks",
            "h1",
            "--baseline-seconds",
            "0",
            "--regime",
            "reuse",
        ])
        .args(["--concurrency", levels, "--requests", "200", "--out"])
        .arg(&out)
        .arg("--certs")
        .arg(certs.path())
        .output()
        .unwrap();
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(1), "the disk filled: {text}");
    assert!(text.contains("No space left on device"), "{text}");
    let dir = results_dir(&out);
    // What the failed cell wrote before the failure is gone from every file.
    let cells = rows_per_cell(&dir.join("cells.csv"));
    assert!(
        cells.len() < 12,
        "the disk filled before the end: {cells:?}"
    );
    for file in ["latency.csv", "resources.csv", "failures.csv"] {
        if dir.join(file).exists() {
            for key in rows_per_cell(&dir.join(file)).keys() {
                assert!(
                    cells.contains_key(key),
                    "{file} holds rows of unfinished {key}"
                );
            }
        }
    }
    std::fs::remove_file(&filler).unwrap();
    let resumed = resume(&dir, certs.path());
    assert!(resumed.status.success(), "{}", output_text(&resumed));
    let cells = rows_per_cell(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 12, "{cells:?}");
    assert!(cells.values().all(|n| *n == 1), "{cells:?}");
    let latency = rows_per_cell(&dir.join("latency.csv"));
    assert_eq!(latency.len(), 12);
    assert!(
        latency.values().all(|n| *n == 30),
        "30 quantiles per cell, once: {latency:?}"
    );
    let logs = std::fs::read_dir(dir.join("hlog")).unwrap().count();
    assert_eq!(logs, 12, "one histogram log per cell");
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
}

/// A cell's leftovers (rows in latency.csv of a cell that cells.csv lacks, as a run killed
/// mid-write leaves them) are refused by readers with the way out, and dropped by a resume
/// before the cell is measured again.
#[test]
fn a_cut_off_cell_is_refused_by_readers_and_repaired_by_resume() {
    let run = run_ok(&[&["--stacks", "h1,h2"][..], &ONE_TINY_CELL[..]].concat());
    let dir = run.dir();
    // Drop h2's row from cells.csv, as if the run died before writing it.
    let cells = dir.join("cells.csv");
    let text = std::fs::read_to_string(&cells).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("h2/")).collect();
    assert_eq!(kept.len(), 2, "{text}");
    std::fs::write(&cells, format!("{}\n", kept.join("\n"))).unwrap();
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert_eq!(report.status.code(), Some(2), "{}", output_text(&report));
    let err = String::from_utf8_lossy(&report.stderr);
    assert!(
        err.contains("cut off") && err.contains("--resume"),
        "says what happened and the way out: {err}"
    );
    let resumed = resume(&dir, run.certs.path());
    let text = output_text(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(
        text.contains("resume: latency.csv: dropped 30 rows"),
        "{text}"
    );
    let latency = rows_per_cell(&dir.join("latency.csv"));
    assert_eq!(latency.values().copied().collect::<Vec<_>>(), [30, 30]);
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
}

/// Issue 40, item 3: the output of `runner merge` is not resumable (it would measure the
/// missing cells locally beside merged rows): one line, exit 2, the folder untouched.
#[test]
fn resuming_a_merged_folder_is_refused() {
    let x = run_ok(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2,4",
        "--requests",
        "20",
        "--baseline-seconds",
        "0",
        "--repetitions",
        "1",
    ]);
    let y = run_ok(&[
        "--stacks",
        "h1",
        "--regime",
        "reuse",
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--baseline-seconds",
        "0",
        "--repetitions",
        "1",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let merged = tmp.path().join("m");
    let o = runner()
        .arg("merge")
        .arg(x.dir())
        .arg(y.dir())
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let before = std::fs::read(merged.join("cells.csv")).unwrap();
    let o = runner().arg("--resume").arg(&merged).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("runner merge"), "{err}");
    assert_eq!(std::fs::read(merged.join("cells.csv")).unwrap(), before);
}

/// Issue 40, item 4: a folder whose header lost a column is refused by `--resume` before
/// anything is measured (exit 2, one line naming the column), and nothing is appended.
#[test]
fn resume_checks_the_folder_before_measuring() {
    let run = run_ok(&[&["--stacks", "h1,h2"][..], &ONE_TINY_CELL[..]].concat());
    let dir = run.dir();
    let cells = dir.join("cells.csv");
    // Remove latency_p95_us from the header and every row, and h2's row (a cell to resume).
    let mut reader = csv::Reader::from_path(&cells).unwrap();
    let header = reader.headers().unwrap().clone();
    let drop = header.iter().position(|h| h == "latency_p95_us").unwrap();
    let mut writer = csv::Writer::from_writer(Vec::new());
    let keep = |r: &csv::StringRecord| {
        r.iter()
            .enumerate()
            .filter(|(i, _)| *i != drop)
            .map(|(_, v)| v.to_string())
            .collect::<Vec<_>>()
    };
    writer.write_record(keep(&header)).unwrap();
    for record in reader.records() {
        let record = record.unwrap();
        if !record[0].starts_with("h2/") {
            writer.write_record(keep(&record)).unwrap();
        }
    }
    std::fs::write(&cells, writer.into_inner().unwrap()).unwrap();
    let before = std::fs::read(&cells).unwrap();
    let manifest_before = std::fs::read(dir.join("manifest.json")).unwrap();
    let o = resume(&dir, run.certs.path());
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cells.csv") && err.contains("latency_p95_us"),
        "{err}"
    );
    assert_eq!(std::fs::read(&cells).unwrap(), before, "nothing appended");
    assert_eq!(
        std::fs::read(dir.join("manifest.json")).unwrap(),
        manifest_before,
        "the manifest is not marked completed"
    );
}

/// Issue 40, item 5: a second run's rows appended without a header (same experiment: the
/// keys repeat; another experiment: more cells than the manifest counts) are refused by
/// `report` and `compare` with one line.
#[test]
fn rows_of_a_second_run_without_a_header_are_refused_by_every_reader() {
    let first = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    let same = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    let other = run_ok(&[&["--stacks", "h2"][..], &ONE_TINY_CELL[..]].concat());
    let tmp = tempfile::tempdir().unwrap();
    for (name, second, says) in [
        ("same", &same, "more than one row"),
        ("other", &other, "manifest.json counts 1 finished"),
    ] {
        let dir = tmp.path().join(name);
        copy_dir(&first.dir(), &dir);
        let appended = std::fs::read_to_string(second.dir().join("cells.csv")).unwrap();
        let rows: String = appended.split_inclusive('\n').skip(1).collect();
        let mut cells = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("cells.csv"))
            .unwrap();
        std::io::Write::write_all(&mut cells, rows.as_bytes()).unwrap();
        for args in [
            vec!["report".into(), dir.clone()],
            vec!["compare".into(), first.dir(), dir.clone()],
        ] {
            let o = runner().args(&args).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", output_text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(says), "{name} {args:?}: {err}");
        }
    }
}

/// Issue 40, items 8 and 9: a certificate directory whose key does not match its certificate
/// is bad input (exit 2, one line) and no results folder is made; an empty or truncated
/// manifest is named as such by readers.
#[test]
fn failures_before_the_first_cell_leave_no_folder_and_readers_name_a_damaged_one() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let other = tmp.path().join("other");
    bench_core::tls::ensure_certs(&certs).unwrap();
    bench_core::tls::ensure_certs(&other).unwrap();
    std::fs::copy(other.join("server.key"), certs.join("server.key")).unwrap();
    let out = tmp.path().join("results");
    let o = runner()
        .args(["--stacks", "h1"])
        .args(ONE_TINY_CELL)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(&certs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("server.key") && err.contains("--certs"),
        "{err}"
    );
    assert!(
        !out.exists() || std::fs::read_dir(&out).unwrap().count() == 0,
        "no folder is left behind"
    );
    // A folder whose manifest is empty or cut off: readers say so.
    let run = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    let dir = run.dir();
    let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
    for (damage, says) in [
        (&manifest[..0], "empty (0 bytes)"),
        (&manifest[..manifest.len() / 2], "truncated"),
    ] {
        std::fs::write(dir.join("manifest.json"), damage).unwrap();
        let o = runner().arg("report").arg(&dir).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says) && !err.contains("older runner"), "{err}");
    }
}

/// Issue 46, item 7: a run's cells go in the order its seed gives (drawn as the run starts
/// when not given), the manifest records the seed, and a resume replays that order for the
/// cells it measures.
#[test]
fn the_cell_order_follows_the_manifests_seed_and_a_resume_replays_it() {
    let run = run_ok(&[
        "--stacks",
        "h1,h2",
        "--regime",
        "reuse",
        "--concurrency",
        "1,2",
        "--requests",
        "20",
        "--baseline-seconds",
        "0",
        "--repetitions",
        "1",
    ]);
    let dir = run.dir();
    let manifest = || -> runner::output::Manifest {
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
    };
    let first = manifest();
    let online = first
        .online_cpus
        .expect("the manifest records the machine's CPUs");
    assert!(
        online >= first.cores,
        "{online} online CPUs < {} usable",
        first.cores
    );
    let seed = first
        .experiment
        .cell_order_seed
        .expect("the manifest records the drawn seed");
    let planned: Vec<String> = experiment::plan::plan(&first.experiment)
        .iter()
        .map(|c| c.key())
        .collect();
    let rows = |dir: &Path| -> Vec<String> {
        read_csv(&dir.join("cells.csv"))
            .iter()
            .map(|r| r["cell_key"].clone())
            .collect()
    };
    assert_eq!(rows(&dir), planned, "the run measured its seed's order");
    // Keep only the first cell, as if the run had stopped there; the resume measures the
    // other three in the seed's order.
    let cells = dir.join("cells.csv");
    let text = std::fs::read_to_string(&cells).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&cells, format!("{}\n", kept.join("\n"))).unwrap();
    let resumed = resume(&dir, run.certs.path());
    assert!(resumed.status.success(), "{}", output_text(&resumed));
    assert_eq!(rows(&dir), planned, "the resume replayed the order");
    assert_eq!(manifest().experiment.cell_order_seed, Some(seed));
}
