//! Results on disk: `cells.csv` (one row per cell, flushed as each cell ends),
//! `resources.csv` (raw samples), `failures.csv` (an example message per failure class),
//! `manifest.json` (all knobs and the environment), and per cell its histograms as an
//! HdrHistogram interval log (`hlog/`). docs/results-schema.md defines each column.

pub mod capacity;
pub mod merge;
pub mod row_of;
pub mod summary_json;
pub mod thresholds;
pub mod unfinished;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bench_core::FailureClass;
use serde::Serialize;

use results::folder::REQUESTS_FILE;
use results::hlog;
use results::manifest::{MergedInput, ServiceRecord, StackInfo};
use results::rows::{self, AgentRow, FailureRow, LatencyRow, ResourceRow, Row};

use executors::cell_result::CellResult;
use experiment::settings::Experiment;
use load::sampler::Sample;

/// An append-only CSV file written whole rows at a time: each batch is encoded in memory and
/// written with one call; if that fails (disk full), the file is cut back to where it was, so
/// it never ends in half a line.
struct CsvFile {
    path: PathBuf,
    file: File,
    has_header: bool,
}

impl CsvFile {
    fn open(path: PathBuf) -> anyhow::Result<Self> {
        let has_header = path.exists() && std::fs::metadata(&path)?.len() > 0;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(CsvFile {
            path,
            file,
            has_header,
        })
    }

    /// [`CsvFile::open`] when the file exists and holds something, else `None` (opened with
    /// the first cell that writes it).
    fn open_existing(path: PathBuf) -> anyhow::Result<Option<Self>> {
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            Ok(Some(CsvFile::open(path)?))
        } else {
            Ok(None)
        }
    }

    /// Where the file ends now and whether it has its header: what [`CsvFile::roll_back`]
    /// returns it to.
    fn mark(&self) -> anyhow::Result<(u64, bool)> {
        Ok((self.file.metadata()?.len(), self.has_header))
    }

    fn roll_back(&mut self, (len, has_header): (u64, bool)) -> std::io::Result<()> {
        self.has_header = has_header;
        self.file.set_len(len)?;
        self.file.sync_data()
    }

    fn append<T: Row>(&mut self, rows: &[T]) -> anyhow::Result<()> {
        let bytes = rows::to_bytes(!self.has_header, rows)?;
        let before = self.file.metadata()?.len();
        let written = self
            .file
            .write_all(&bytes)
            .and_then(|_| self.file.sync_data());
        if let Err(e) = written {
            let _ = self.file.set_len(before);
            return Err(e).with_context(|| format!("cannot write {}", self.path.display()));
        }
        self.has_header = true;
        Ok(())
    }
}

/// The CSV files of one results directory; every cell's rows are written at once, as the
/// cell ends.
pub struct ResultsWriter {
    pub dir: PathBuf,
    /// An exclusive lock on the directory while the run writes to it: a second writer (a
    /// `--resume` of a run still going) is refused instead of interleaving rows.
    _lock: nix::fcntl::Flock<File>,
    cells: CsvFile,
    resources: CsvFile,
    failures: CsvFile,
    latency: CsvFile,
    /// Opened with the first cell that ran on agents.
    agents: Option<CsvFile>,
    /// `requests.csv`, opened at the first cell with a request mix.
    requests: Option<CsvFile>,
}

impl ResultsWriter {
    /// Opens the CSVs in `dir`, a directory the run created ([`create_run_dir`]) or, for a
    /// resumed run, its own: no other run may be writing there.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let handle = File::open(dir)
            .with_context(|| format!("cannot open results directory {}", dir.display()))?;
        let lock = nix::fcntl::Flock::lock(handle, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| {
                anyhow::anyhow!(
                    "results directory {}: another run is writing to it ({e})",
                    dir.display()
                )
            })?;
        Ok(ResultsWriter {
            dir: dir.to_path_buf(),
            _lock: lock,
            cells: CsvFile::open(dir.join("cells.csv"))?,
            resources: CsvFile::open(dir.join("resources.csv"))?,
            failures: CsvFile::open(dir.join("failures.csv"))?,
            latency: CsvFile::open(dir.join("latency.csv"))?,
            // Files earlier cells wrote are opened now, so that a failed cell's rollback
            // returns them to their length rather than to nothing.
            agents: CsvFile::open_existing(dir.join("agents.csv"))?,
            requests: CsvFile::open_existing(dir.join(REQUESTS_FILE))?,
        })
    }

    /// Writes every row and log of one cell as a unit: if any write fails (a full disk),
    /// everything this cell wrote is taken back, in every file, so that a resumed run that
    /// measures the cell again holds it once.
    pub fn write_cell(&mut self, result: &CellResult, samples: &[Sample]) -> anyhow::Result<()> {
        let had_agents = self.agents.is_some();
        let had_requests = self.requests.is_some();
        let marks = [
            Some(self.cells.mark()?),
            Some(self.resources.mark()?),
            Some(self.failures.mark()?),
            Some(self.latency.mark()?),
            self.agents.as_ref().map(CsvFile::mark).transpose()?,
            self.requests.as_ref().map(CsvFile::mark).transpose()?,
        ];
        let written = self.append_cell(result, samples);
        if written.is_err() {
            let key = result.cell.key();
            let files = [
                Some(&mut self.cells),
                Some(&mut self.resources),
                Some(&mut self.failures),
                Some(&mut self.latency),
                self.agents.as_mut(),
                self.requests.as_mut(),
            ];
            for (file, mark) in files.into_iter().zip(marks) {
                if let Some(file) = file {
                    // A file this cell opened first goes back to nothing.
                    let _ = file.roll_back(mark.unwrap_or((0, false)));
                }
            }
            for (opened_now, name) in [
                (!had_agents && self.agents.is_some(), "agents.csv"),
                (!had_requests && self.requests.is_some(), REQUESTS_FILE),
            ] {
                if opened_now && std::fs::metadata(self.dir.join(name)).is_ok_and(|m| m.len() == 0)
                {
                    let _ = std::fs::remove_file(self.dir.join(name));
                }
            }
            if !had_agents {
                self.agents = None;
            }
            if !had_requests {
                self.requests = None;
            }
            let logs = std::iter::once(hlog::file_name(&key))
                .chain((1..=result.per_agent.len()).map(|i| hlog::agent_file_name(&key, i)));
            for name in logs {
                let path = self.dir.join(hlog::DIR).join(name);
                let _ = std::fs::remove_file(path.with_extension("hlog.tmp"));
                let _ = std::fs::remove_file(path);
            }
        }
        written
    }

    fn append_cell(&mut self, result: &CellResult, samples: &[Sample]) -> anyhow::Result<()> {
        let row = row_of::finished(result);
        let key = &row.cell_key;
        let resources: Vec<ResourceRow> = samples
            .iter()
            .map(|s| ResourceRow {
                cell_key: key.clone(),
                t_s: s.t.as_secs_f64(),
                role: s.role.as_str().to_string(),
                rss_bytes: s.rss_bytes,
                cpu_pct: s.cpu_pct,
            })
            .collect();
        self.resources.append(&resources)?;
        if !result.per_agent.is_empty() {
            let rows: Vec<AgentRow> = result
                .per_agent
                .iter()
                .enumerate()
                .map(|(i, a)| AgentRow {
                    cell_key: key.clone(),
                    agent: i as u32 + 1,
                    address: a.label.clone(),
                    sent: a.sent,
                    ok: a.ok,
                    failed: a.failed,
                    latency_p50_us: a.latency.p50,
                    latency_p99_us: a.latency.p99,
                    latency_max_us: a.latency.max,
                    elapsed_s: a.elapsed_s,
                    client_rss_peak_bytes: a
                        .client
                        .rss_hwm_bytes
                        .unwrap_or(a.client.rss_peak_bytes),
                    client_cpu_s: a.client.cpu_s,
                    link_received_bytes: a.link.map(|l| l.0),
                    link_sent_bytes: a.link.map(|l| l.1),
                })
                .collect();
            if self.agents.is_none() {
                self.agents = Some(CsvFile::open(self.dir.join("agents.csv"))?);
            }
            self.agents.as_mut().expect("opened").append(&rows)?;
        }
        let m = &result.measured;
        let mut failures: Vec<FailureRow> = Vec::new();
        for c in FailureClass::ALL
            .iter()
            .filter(|c| m.failures[c.index()] > 0)
        {
            let codes = m.failure_codes.get(c.as_str());
            let coded: u64 = codes.map_or(0, |codes| codes.values().map(|n| n.count).sum());
            let total = m.failures[c.index()];
            if total > coded {
                failures.push(FailureRow {
                    cell_key: key.clone(),
                    class: c.as_str().to_string(),
                    count: total - coded,
                    example: m.failure_examples[c.index()].clone().unwrap_or_default(),
                    code: String::new(),
                    request: String::new(),
                });
            }
            for (code, n) in codes.into_iter().flatten() {
                failures.push(FailureRow {
                    cell_key: key.clone(),
                    class: c.as_str().to_string(),
                    count: n.count,
                    example: experiment::settings::answered_by_proxy(
                        &result.cell.settings,
                        *c,
                        code,
                    )
                    .map_or_else(|| n.example.clone(), |who| format!("{who}: {}", n.example)),
                    code: code.clone(),
                    request: String::new(),
                });
            }
        }
        for r in &m.by_request {
            for (class, codes) in &r.failures {
                for (code, n) in codes {
                    failures.push(FailureRow {
                        cell_key: key.clone(),
                        class: class.clone(),
                        count: n.count,
                        example: n.example.clone(),
                        code: code.clone(),
                        request: r.name.clone(),
                    });
                }
            }
        }
        self.failures.append(&failures)?;
        let quantiles = |h: &hdrhistogram::Histogram<u64>, request: &str, metric: &str| {
            results::rows::CDF_QUANTILES
                .iter()
                .filter(|_| !h.is_empty())
                .map(|q| LatencyRow {
                    cell_key: key.clone(),
                    quantile: *q,
                    latency_us: h.value_at_quantile(*q),
                    request: request.to_string(),
                    metric: metric.to_string(),
                })
                .collect::<Vec<_>>()
        };
        let mut latency = quantiles(&m.latency, "", "latency");
        for r in &m.by_request {
            latency.extend(quantiles(&r.latency, &r.name, "latency"));
        }
        latency.extend(quantiles(&m.message_gap, "", "message_gap"));
        self.latency.append(&latency)?;
        let requests = row_of::requests(result);
        if !requests.is_empty() {
            if self.requests.is_none() {
                self.requests = Some(CsvFile::open(self.dir.join(REQUESTS_FILE))?);
            }
            if let Some(file) = self.requests.as_mut() {
                file.append(&requests)?;
            }
        }
        if let (Some(start), None) = (result.measured_start_unix_s, &result.error) {
            let window = hlog::Window {
                start_unix_s: start,
                duration_s: result.elapsed_s,
            };
            hlog::write(&self.dir, key, m.tagged(), window)?;
            for (i, agent) in result.per_agent.iter().enumerate() {
                let window = hlog::Window {
                    duration_s: agent.elapsed_s,
                    ..window
                };
                hlog::write_agent(&self.dir, key, i + 1, agent.measured.tagged(), window)?;
            }
        }
        // The cell row goes last: a row in cells.csv means the cell's other data is on disk.
        self.cells.append(&[row])
    }
}

/// A new run's id: the second it started, its process id and the clock's nanoseconds, so
/// that two runs (even of one name in one second) never share one.
pub fn new_run_id(started: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "{}-{}-{:09}",
        started.format("%Y%m%dT%H%M%SZ"),
        std::process::id(),
        started.timestamp_subsec_nanos()
    )
}

/// Creates the run's results directory `out/<base>` exclusively, or `<base>-2`, `<base>-3`,
/// … when that name is taken: a run never writes into a directory it did not create.
pub fn create_run_dir(out: &Path, base: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create results directory {}", out.display()))?;
    for n in 1u32.. {
        let dir = match n {
            1 => out.join(base),
            n => out.join(format!("{base}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create results directory {}", dir.display()))
            }
        }
    }
    unreachable!("some suffix is free")
}

/// Where and on what a run happened, rewritten after every cell.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Manifest {
    /// Which run wrote this directory (README "Results schema"): a resumed run keeps it, so
    /// readers can tell one run's rows from another's. Absent in runs from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub experiment: Experiment,
    pub started_utc: String,
    pub finished_utc: Option<String>,
    /// "running", "completed" or "interrupted".
    pub status: String,
    pub cells_planned: usize,
    pub cells_done: usize,
    pub git_commit: String,
    pub rustc: String,
    pub crate_versions: std::collections::BTreeMap<String, String>,
    pub kernel: String,
    pub cpu_model: String,
    /// Cores the runner's process may use: after `--pin`, the one it is pinned to.
    pub cores: usize,
    /// The machine's online CPUs, whatever the pinning (absent in older manifests).
    #[serde(default)]
    pub online_cpus: Option<usize>,
    pub pinning: String,
    pub client_threads: usize,
    pub server_threads: u32,
    pub argv: Vec<String>,
    /// The network emulator of the run's `netem` cells: `netem-qdisc` or `nfqueue`
    /// (docs/conditions.md); `None` without delay, jitter or loss.
    #[serde(default)]
    pub emulator: Option<String>,
    /// Where the emulator held a delayed packet: `qdisc` or `input` (`EmulatorKind::delays_at`);
    /// absent in manifests of runs whose NFQUEUE emulator held packets at `OUTPUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_delays_at: Option<String>,
    /// Each stack's server settings, as the stack states them (docs/fairness.md).
    #[serde(default)]
    pub stack_settings:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// Every registered stack in registry order (name, label, wire encoding, ALPN): what
    /// scripts need to label, order and style stacks without a list of their own. Absent in
    /// manifests written before it was recorded.
    #[serde(default)]
    pub stacks: Vec<StackInfo>,
    /// The machine and kernel settings as the run started (docs/results-schema.md); absent
    /// in manifests written before it was recorded.
    #[serde(default)]
    pub environment: Option<executors::measure::environment::Environment>,
    /// The user's service when the run measured one (`[targets]`): where each target was,
    /// as resolved; `None` when our own servers were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRecord>,
    /// Set by `runner merge`: the runs this directory adds up, in the order given (an input
    /// that was itself merged contributes its own runs); the other fields are the first
    /// input's, but for the times, status, cell counts and command line. Absent in a run's
    /// manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedInput>,
    /// On edge and sidecar paths: each proxy that ran, once per variant, stack and role, with
    /// its version and the configuration of the first cell it served (paths to keys, never
    /// keys); likewise a server nobody here wrote (`server`, role `origin-server`). Absent
    /// when every path was direct to our own servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxies: Vec<ManifestProxy>,
}

/// One proxy of a run as the manifest records it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ManifestProxy {
    pub variant: String,
    pub stack: String,
    #[serde(flatten)]
    pub record: executors::measure::proxies::ProxyRecord,
}

impl Manifest {
    /// Records the proxies of a finished cell that the manifest does not have yet.
    pub fn add_proxies(&mut self, result: &CellResult) {
        for record in result.proxies.iter().flat_map(|p| &p.records) {
            let seen = self.proxies.iter().any(|m| {
                m.variant == result.cell.variant
                    && m.stack == result.cell.stack
                    && m.record.role == record.role
            });
            if !seen {
                self.proxies.push(ManifestProxy {
                    variant: result.cell.variant.clone(),
                    stack: result.cell.stack.clone(),
                    record: record.clone(),
                });
            }
        }
    }
}

/// The registry as [`Manifest::stacks`] records it.
pub fn registered_stacks() -> Vec<StackInfo> {
    stacks::stacks()
        .into_iter()
        .map(|s| StackInfo {
            name: s.name().into(),
            label: s.label().into(),
            encoding: s.encoding().into(),
            alpn: String::from_utf8_lossy(s.alpn()).into_owned(),
        })
        .collect()
}

impl Manifest {
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join("manifest.json");
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a run manifest", path.display()))
    }

    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let tmp = dir.join("manifest.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, dir.join("manifest.json")).context("cannot write manifest.json")?;
        Ok(())
    }
}

/// Versions of the crates that implement the registered stacks (each stack names its own,
/// [`bench_core::Stack::libraries`]) and of the runtime and TLS every stack shares, read from
/// the committed Cargo.lock.
pub fn crate_versions() -> std::collections::BTreeMap<String, String> {
    const LOCK: &str = include_str!("../../../../Cargo.lock");
    /// The async runtime and the TLS library under every stack.
    const SHARED: [&str; 2] = ["tokio", "rustls"];
    let stacks = stacks::stacks();
    let wanted: Vec<&str> = SHARED
        .into_iter()
        .chain(stacks.iter().flat_map(|s| s.libraries().iter().copied()))
        .collect();
    let mut out = std::collections::BTreeMap::new();
    let mut name: Option<&str> = None;
    for line in LOCK.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"'));
        } else if let (Some(n), Some(v)) = (name, line.strip_prefix("version = ")) {
            if wanted.contains(&n) {
                out.insert(n.to_string(), v.trim_matches('"').to_string());
            }
            name = None;
        }
    }
    out
}

/// The commit this binary was built from, with `-dirty` when tracked files differed from it
/// at build time (`build.rs`), so a number can be traced to the code that produced it.
pub fn git_commit() -> String {
    env!("RUNNER_GIT_COMMIT").to_string()
}

pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commit built in is the checkout's, `-dirty` exactly when tracked files differ from
    /// it (the build reruns on every change to HEAD, the index or a tracked file).
    #[test]
    fn the_built_in_commit_is_the_checkouts() {
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .expect("git runs");
            assert!(o.status.success(), "git {args:?}");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let head = git(&["rev-parse", "HEAD"]);
        let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
        let expected = if dirty { format!("{head}-dirty") } else { head };
        assert_eq!(git_commit(), expected);
    }
}
