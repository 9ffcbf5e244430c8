//! `runner merge DIR… --out DIR`: adds up results directories of the same experiment run
//! separately (one per load-generator host, say) into a new results directory. Per cell in
//! every input, each input's histograms are read from its `.hlog` file and its counts from its
//! `cells.csv` and `failures.csv` rows; they are merged with [`Measurements::merge`], which
//! adds histograms of the suite's one precision exactly, so the merged percentiles are those
//! of one histogram of every request. The merged cell is then written by the same
//! [`ResultsWriter::write_cell`] as a run's cell.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bench_core::{FailureClass, WireBytes};

use load::measurements::{CodeCount, Measurements};
use load::sampler::ResourceSummary;
use load::timewait::TimeWaitCounts;
use results::exit::{Status, Stopped};
use results::hlog;

use crate::output::{Manifest, ResultsWriter};
use executors::cell_result::CellResult;
use experiment::plan::Cell;
use results::rows::{self, CellRow, FailureRow, Row};

/// Why a merge did not happen.
#[derive(Debug)]
pub enum MergeError {
    /// The inputs cannot be merged (exit 2); nothing was written.
    Refused(String),
    /// Reading or writing failed midway (exit 1); nothing was left in `--out`.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for MergeError {
    fn from(e: anyhow::Error) -> Self {
        MergeError::Failed(e)
    }
}

fn refused<T>(message: impl Into<String>) -> Result<T, MergeError> {
    Err(MergeError::Refused(message.into()))
}

/// One input: a results directory as written by a run (or by an earlier merge).
struct Input {
    dir: PathBuf,
    manifest: Manifest,
    cells: HashMap<String, CellRow>,
    /// Keys in file order.
    order: Vec<String>,
    failures: HashMap<String, Vec<FailureRow>>,
    /// The cells of the input's experiment, by key.
    plan: HashMap<String, Cell>,
}

impl Input {
    fn load(dir: &Path) -> Result<Input, MergeError> {
        let name = dir.display();
        if !dir.is_dir() {
            return refused(format!("{name} is not a directory"));
        }
        if !dir.join("manifest.json").is_file() || !dir.join("cells.csv").is_file() {
            return refused(format!(
                "{name} is not a results directory (it needs manifest.json and cells.csv)"
            ));
        }
        results::folder::check::<Manifest>(dir, results::folder::Purpose::Read)
            .map_err(MergeError::Refused)?;
        let manifest = Manifest::read(dir).map_err(|e| MergeError::Refused(format!("{e:#}")))?;
        let table = rows::read::<CellRow>(&dir.join("cells.csv"))
            .map_err(|e| MergeError::Refused(format!("{e:#}")))?;
        let failures_table = rows::read_if_present::<FailureRow>(&dir.join("failures.csv"))
            .map_err(|e| MergeError::Refused(format!("{e:#}")))?;
        let mut failures: HashMap<String, Vec<FailureRow>> = HashMap::new();
        // Per-name rows of a request mix repeat the cell's failures: the cell's are enough.
        for f in failures_table
            .rows
            .into_iter()
            .filter(|f| f.request.is_empty())
        {
            failures.entry(f.cell_key.clone()).or_default().push(f);
        }
        let mut cells = HashMap::new();
        let mut order = Vec::new();
        for row in table.rows {
            if cells.contains_key(&row.cell_key) {
                return refused(format!(
                    "{name}: cell {} has two rows in cells.csv",
                    row.cell_key
                ));
            }
            order.push(row.cell_key.clone());
            cells.insert(row.cell_key.clone(), row);
        }
        let plan = experiment::plan::plan(&manifest.experiment)
            .into_iter()
            .map(|c| (c.key(), c))
            .collect();
        Ok(Input {
            dir: dir.to_path_buf(),
            manifest,
            cells,
            order,
            failures,
            plan,
        })
    }

    /// The runs this input adds up: itself, or, when it was merged, its inputs' runs.
    fn runs(&self) -> Vec<results::manifest::MergedInput> {
        if !self.manifest.merged_from.is_empty() {
            return self.manifest.merged_from.clone();
        }
        vec![results::manifest::MergedInput {
            dir: self.dir.display().to_string(),
            started_utc: self.manifest.started_utc.clone(),
            git_commit: self.manifest.git_commit.clone(),
            cpu_model: self.manifest.cpu_model.clone(),
            kernel: self.manifest.kernel.clone(),
            cells: self.cells.len(),
        }]
    }

    /// The cell's settings as its row states them, from the input's own experiment.
    fn settings(&self, key: &str) -> Result<CellRow, MergeError> {
        match self.plan.get(key) {
            Some(cell) => Ok(crate::output::row_of::planned(cell)),
            None => refused(format!(
                "{}: cell {key} is not in the plan of its manifest's experiment",
                self.dir.display()
            )),
        }
    }

    /// The window of the cell's measured phase: from the row, else from the `.hlog`.
    fn window(&self, row: &CellRow, logged: &hlog::Histograms) -> Option<hlog::Window> {
        match row.measured_start_unix_s {
            Some(start) => Some(hlog::Window {
                start_unix_s: start,
                duration_s: row.elapsed_s,
            }),
            None => logged.window,
        }
    }

    /// What the input measured in the cell: histograms from its `.hlog`, counts from its rows.
    fn measurements(
        &self,
        row: &CellRow,
        logged: hlog::Histograms,
    ) -> Result<(Measurements, Measurements), MergeError> {
        let mut m = Measurements::default();
        let key = &row.cell_key;
        if logged.latency.len() != row.ok {
            return refused(format!(
                "{}: the latency histogram of {key} holds {} requests but cells.csv says ok = {}",
                hlog::path(&self.dir, key).display(),
                logged.latency.len(),
                row.ok
            ));
        }
        m.take_histograms(logged);
        m.sent = row.sent;
        m.ok = row.ok;
        m.late = row.late;
        for class in FailureClass::ALL {
            m.failures[class.index()] = row.failures(class);
        }
        for f in self.failures.get(key).into_iter().flatten() {
            let Some(class) = FailureClass::ALL.iter().find(|c| c.as_str() == f.class) else {
                return refused(format!(
                    "{}: failures.csv names an unknown class '{}'",
                    self.dir.display(),
                    f.class
                ));
            };
            // failures.csv lists a class's uncoded row first: its example is the class's.
            m.failure_examples[class.index()].get_or_insert_with(|| f.example.clone());
            if !f.code.is_empty() {
                let codes = m.failure_codes.entry(f.class.clone()).or_default();
                let entry = codes.entry(f.code.clone()).or_insert(CodeCount {
                    count: 0,
                    example: f.example.clone(),
                });
                entry.count += f.count;
            }
        }
        // Runs from before the split counted only established connections.
        m.connections_attempted = row
            .connections_attempted
            .unwrap_or(row.connections_established);
        m.connections_established = row.connections_established;
        m.connections_resumed = row.connections_resumed;
        m.moved = row.requests_moved.unwrap_or(0);
        m.wire = WireBytes {
            sent: row.wire_sent_bytes,
            received: row.wire_received_bytes,
        };
        m.body_bytes = (row.body_bytes_per_ok * row.ok as f64).round() as u64;
        // Runs from before `streamed_ok` averaged over every success.
        m.streamed_ok = row
            .streamed_ok
            .or(row.messages_per_call_mean.map(|_| row.ok))
            .unwrap_or(0);
        m.messages = row.messages_per_call_mean.map_or(0, |per_call| {
            (per_call * m.streamed_ok as f64).round() as u64
        });
        let warmup = Measurements {
            sent: row.warmup_sent,
            ok: row.warmup_ok,
            ..Measurements::default()
        };
        Ok((m, warmup))
    }
}

/// The total length of the union of `windows` (overlaps counted once) and its earliest start.
pub fn union(windows: &[hlog::Window]) -> Option<(f64, f64)> {
    let mut spans: Vec<(f64, f64)> = windows
        .iter()
        .map(|w| (w.start_unix_s, w.start_unix_s + w.duration_s.max(0.0)))
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let start = spans.first()?.0;
    let (mut total, mut current) = (0.0, spans[0]);
    for &(b, e) in &spans[1..] {
        if b <= current.1 {
            current.1 = current.1.max(e);
        } else {
            total += current.1 - current.0;
            current = (b, e);
        }
    }
    total += current.1 - current.0;
    Some((start, total))
}

/// What a merge wrote.
pub struct Merged {
    pub out: PathBuf,
    pub cells: usize,
    pub warnings: Vec<String>,
}

/// Merges the results directories `inputs` into the new results directory `out`.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<Merged, MergeError> {
    if inputs.len() < 2 {
        return refused("merge needs at least two results directories");
    }
    let mut seen = Vec::new();
    for dir in inputs {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if seen.contains(&canonical) {
            return refused(format!("{} is given twice", dir.display()));
        }
        seen.push(canonical);
    }
    let inputs: Vec<Input> = inputs
        .iter()
        .map(|d| Input::load(d))
        .collect::<Result<_, _>>()?;
    // A run in two inputs (copied, or already merged into one) would count twice.
    let mut runs: Vec<(results::manifest::MergedInput, &Path)> = Vec::new();
    for input in &inputs {
        for run in input.runs() {
            if let Some((_, other)) = runs.iter().find(|(r, _)| r.same_run(&run)) {
                return refused(format!(
                    "the run started at {} is in both {} and {}: it would count twice",
                    run.started_utc,
                    other.display(),
                    input.dir.display()
                ));
            }
            runs.push((run, &input.dir));
        }
    }
    if out.exists() {
        let empty = out.is_dir() && std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_none());
        if !empty {
            return refused(format!(
                "--out {}: exists and is not an empty directory",
                out.display()
            ));
        }
    }
    let mut warnings = Vec::new();
    let first = &inputs[0];
    let common: Vec<&String> = first
        .order
        .iter()
        .filter(|k| inputs.iter().all(|i| i.cells.contains_key(*k)))
        .collect();
    if common.is_empty() {
        return refused("the inputs have no cell in common: not the same experiment");
    }
    let left_out: Vec<&String> = inputs
        .iter()
        .flat_map(|i| i.order.iter())
        .filter(|k| !common.contains(k))
        .fold(Vec::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        });
    if !left_out.is_empty() {
        let shown: Vec<&str> = left_out.iter().take(5).map(|k| k.as_str()).collect();
        warnings.push(format!(
            "{} cells are not in every input and were left out: {}{}",
            left_out.len(),
            shown.join(", "),
            if left_out.len() > 5 { ", …" } else { "" }
        ));
    }
    // The same cell means the same settings in every input; anything else is refused.
    for key in &common {
        let expected = first.settings(key)?;
        for input in &inputs[1..] {
            let got = input.settings(key)?;
            if got != expected {
                let column = CellRow::COLUMNS
                    .iter()
                    .find(|c| got.text(c) != expected.text(c))
                    .copied()
                    .unwrap_or("settings");
                return refused(format!(
                    "cell {key}: {column} is '{}' in {} but '{}' in {}: not the same experiment",
                    expected.text(column).unwrap_or_default(),
                    first.dir.display(),
                    got.text(column).unwrap_or_default(),
                    input.dir.display()
                ));
            }
        }
        // A cell some input could not run is merged as not run: no histogram is read.
        if inputs.iter().any(|i| !i.cells[*key].ran()) {
            continue;
        }
        for input in &inputs {
            if !hlog::path(&input.dir, key).is_file() {
                return refused(format!(
                    "{} has no {}/{} for cell {key} (results written before .hlog files cannot be merged)",
                    input.dir.display(),
                    hlog::DIR,
                    hlog::file_name(key)
                ));
            }
        }
    }
    let commits: Vec<&str> =
        inputs
            .iter()
            .map(|i| i.manifest.git_commit.as_str())
            .fold(Vec::new(), |mut v, c| {
                if !v.contains(&c) {
                    v.push(c);
                }
                v
            });
    if commits.len() > 1 {
        warnings.push(format!(
            "the inputs were measured by different commits: {}",
            commits.join(", ")
        ));
    }

    // Written beside `out` and renamed into place once whole, so a failure leaves nothing.
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "merged".into());
    let staging = out.with_file_name(format!(".{name}.merging-{}", std::process::id()));
    let written = write(&inputs, &common, &staging, &mut warnings).and_then(|()| {
        if out.exists() {
            std::fs::remove_dir(out)
                .with_context(|| format!("cannot replace {}", out.display()))?;
        }
        std::fs::rename(&staging, out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        Ok(())
    });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    Ok(Merged {
        out: out.to_path_buf(),
        cells: common.len(),
        warnings,
    })
}

/// Merges every common cell into `dir`, then writes `summary.csv`, `memory.csv` and the
/// manifest.
fn write(
    inputs: &[Input],
    common: &[&String],
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<(), MergeError> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut writer = ResultsWriter::open(dir)?;
    let mut apart = Vec::new();
    for key in common {
        let result = merge_cell(inputs, key)?;
        if result.apart {
            apart.push(key.as_str());
        }
        writer.write_cell(&result.result, &[])?;
    }
    if !apart.is_empty() {
        warnings.push(format!(
            "in {} cells the inputs' measured phases do not all overlap (e.g. {}): their throughput_rps is over the union of the windows, not one concurrent load",
            apart.len(),
            apart[0]
        ));
    }
    results::summary::write(dir)?;
    let first = &inputs[0].manifest;
    let completed = inputs.iter().all(|i| i.manifest.status == "completed");
    let manifest = Manifest {
        // The merged directory is a result of its own.
        run_id: Some(crate::output::new_run_id(chrono::Utc::now())),
        experiment: first.experiment.clone(),
        started_utc: inputs
            .iter()
            .map(|i| i.manifest.started_utc.clone())
            .min()
            .unwrap_or_default(),
        finished_utc: Some(chrono::Utc::now().to_rfc3339()),
        status: if completed {
            "completed"
        } else {
            "interrupted"
        }
        .into(),
        cells_planned: common.len(),
        cells_done: common.len(),
        git_commit: first.git_commit.clone(),
        rustc: first.rustc.clone(),
        crate_versions: first.crate_versions.clone(),
        kernel: first.kernel.clone(),
        cpu_model: first.cpu_model.clone(),
        cores: first.cores,
        online_cpus: first.online_cpus,
        pinning: first.pinning.clone(),
        client_threads: first.client_threads,
        server_threads: first.server_threads,
        // Paths only, but a URL-shaped argument loses its credentials as a run's would.
        argv: std::env::args()
            .map(|a| bench_core::user_service::secrets::url(&a))
            .collect(),
        emulator: first.emulator.clone(),
        emulator_delays_at: first.emulator_delays_at.clone(),
        stack_settings: first.stack_settings.clone(),
        stacks: first.stacks.clone(),
        environment: first.environment.clone(),
        service: first.service.clone(),
        merged_from: inputs.iter().flat_map(Input::runs).collect(),
        proxies: first.proxies.clone(),
    };
    manifest.write(dir)?;
    Ok(())
}

struct MergedCell {
    result: CellResult,
    /// The inputs' windows do not share a common instant.
    apart: bool,
}

fn merge_cell(inputs: &[Input], key: &str) -> Result<MergedCell, MergeError> {
    let rows: Vec<&CellRow> = inputs.iter().map(|i| &i.cells[key]).collect();
    let agents: u32 = rows.iter().map(|r| r.agents.unwrap_or(1)).sum();
    let cell = inputs[0].plan[key].clone();
    let server_exit = inputs.iter().zip(&rows).find_map(|(i, r)| {
        r.server_exit
            .as_ref()
            .map(|e| format!("{}: {e}", i.dir.display()))
    });
    let not_run = inputs.iter().zip(&rows).find(|(_, r)| !r.ran());
    let mut result = CellResult {
        agents,
        cut_short: rows.iter().any(|r| r.cut_short),
        extended: rows.iter().any(|r| r.extended),
        // Each input repeats its own share: the most any repeated.
        budget_repeats: rows.iter().filter_map(|r| r.budget_repeats).max(),
        server_exit,
        ..CellResult::unmeasured(cell)
    };
    if let Some((input, row)) = not_run {
        result.error = Some(format!(
            "not measured in {}: {}",
            input.dir.display(),
            row.error.as_deref().unwrap_or_default()
        ));
        return Ok(MergedCell {
            result,
            apart: false,
        });
    }
    let mut windows = Vec::new();
    for (input, row) in inputs.iter().zip(&rows) {
        let logged = hlog::read(&hlog::path(&input.dir, key))
            .map_err(|e| MergeError::Refused(format!("{e:#}")))?;
        let Some(window) = input.window(row, &logged) else {
            return refused(format!(
                "{}: cell {key} has no measured_start_unix_s and its .hlog no interval",
                input.dir.display()
            ));
        };
        windows.push(window);
        let (measured, warmup) = input.measurements(row, logged)?;
        result.measured.merge(&measured);
        result.warmup.merge(&warmup);
    }
    let (start, elapsed) = union(&windows).expect("one window per input");
    result.measured_start_unix_s = Some(start);
    result.elapsed_s = elapsed;
    let latest_start = windows
        .iter()
        .map(|w| w.start_unix_s)
        .fold(f64::MIN, f64::max);
    let earliest_end = windows
        .iter()
        .map(|w| w.start_unix_s + w.duration_s)
        .fold(f64::MAX, f64::min);
    // The load generators: CPU adds up (cores busy over the union), RSS is the largest one's.
    let cpu_s: f64 = rows.iter().map(|r| r.client_cpu_s).sum();
    result.client = ResourceSummary {
        rss_peak_bytes: rows
            .iter()
            .map(|r| r.client_rss_peak_bytes)
            .max()
            .unwrap_or(0),
        rss_hwm_bytes: rows
            .iter()
            .map(|r| r.client_rss_hwm_bytes)
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().max()),
        rss_mean_bytes: None,
        cpu_pct_mean: (elapsed > 0.0).then(|| cpu_s / elapsed * 100.0),
        cpu_s,
        short_phase: rows.iter().any(|r| r.short_phase),
        sampled: true,
        // Each input's own namespace: the counts add up, as across agents.
        tcp_time_wait: rows
            .iter()
            .map(|r| time_wait(r))
            .collect::<Option<Vec<_>>>()
            .and_then(|v| v.into_iter().reduce(TimeWaitCounts::plus)),
    };
    Ok(MergedCell {
        result,
        apart: latest_start >= earliest_end,
    })
}

/// The TIME_WAIT counts of a row, when it has all three.
fn time_wait(row: &CellRow) -> Option<TimeWaitCounts> {
    Some(TimeWaitCounts {
        before: row.tcp_time_wait_before?,
        after: row.tcp_time_wait_after?,
        peak: row.tcp_time_wait_peak?,
    })
}

/// `runner merge`: exit 0, 2 when refused, 1 when writing failed.
pub fn command(inputs: &[PathBuf], out: &Path) -> Result<ExitCode, Stopped> {
    let merged = merge(inputs, out).map_err(|e| match e {
        MergeError::Refused(e) => Stopped::invalid(one_line(&e)),
        MergeError::Failed(e) => Stopped::failed(one_line(&format!("{e:#}"))),
    })?;
    for w in &merged.warnings {
        eprintln!("warning: {w}");
    }
    println!(
        "merged {} cells of {} results directories: {}",
        merged.cells,
        inputs.len(),
        merged.out.display()
    );
    Ok(Status::Success.into())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: f64, duration: f64) -> hlog::Window {
        hlog::Window {
            start_unix_s: start,
            duration_s: duration,
        }
    }

    #[test]
    fn the_union_counts_overlaps_once_and_gaps_not_at_all() {
        assert_eq!(union(&[]), None);
        assert_eq!(union(&[w(10.0, 5.0)]), Some((10.0, 5.0)));
        assert_eq!(union(&[w(12.0, 5.0), w(10.0, 5.0)]), Some((10.0, 7.0)));
        assert_eq!(union(&[w(10.0, 2.0), w(20.0, 3.0)]), Some((10.0, 5.0)));
        assert_eq!(
            union(&[w(10.0, 10.0), w(11.0, 1.0), w(30.0, 1.0)]),
            Some((10.0, 11.0))
        );
    }
}
