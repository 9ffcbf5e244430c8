//! The records a run's `manifest.json` holds for its readers: the stacks it knew (name,
//! label, encoding, ALPN, in registry order), the measured service and its targets, and the
//! runs a `runner merge` added up. The runner's whole manifest (with the experiment and the
//! machine) is the runner's; readers take these parts of it, or the JSON as it is.

use serde::{Deserialize, Serialize};

/// One run a `runner merge` added up, as the merged manifest records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedInput {
    /// Its results directory as given on the command line.
    pub dir: String,
    pub started_utc: String,
    pub git_commit: String,
    pub cpu_model: String,
    pub kernel: String,
    /// Rows of its `cells.csv`.
    pub cells: usize,
}

impl MergedInput {
    /// The same run (wherever its directory is now): started at the same instant on the
    /// same kind of machine.
    pub fn same_run(&self, other: &MergedInput) -> bool {
        (&self.started_utc, &self.cpu_model, &self.kernel)
            == (&other.started_utc, &other.cpu_model, &other.kernel)
    }
}

/// The measured service's targets as the run found them (no secrets: header values are in
/// the manifest's `experiment`, redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    /// Some target's certificate was not verified: every output of the run says so, and
    /// the study's paper (`study paper`) refuses it.
    pub insecure: bool,
    pub targets: Vec<TargetRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// `rest` or `grpc`.
    pub api: String,
    pub stacks: Vec<String>,
    /// `host:port` as written.
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// The address the host resolved to.
    pub address: String,
    pub loopback: bool,
    /// `tls` or `plaintext`.
    pub transport: String,
    /// What the certificate was verified against: `system trust store`, the CA file, or
    /// `not verified`.
    pub trust: String,
    pub server_name: String,
}

/// One registered stack as the manifest lists it (`stacks`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackInfo {
    pub name: String,
    pub label: String,
    pub encoding: String,
    pub alpn: String,
}

impl ServiceRecord {
    /// The manifest's service record, if the run measured a service.
    pub fn of(manifest: &serde_json::Value) -> Option<ServiceRecord> {
        serde_json::from_value(manifest.get("service")?.clone()).ok()
    }
}

impl StackInfo {
    /// The manifest's stacks, in the order the run's registry listed them (empty in manifests
    /// written before they were recorded).
    pub fn of(manifest: &serde_json::Value) -> Vec<StackInfo> {
        manifest
            .get("stacks")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default()
    }
}

/// Stalls at least this long are counted as time lost (the "≥ 50 µs" of `lost_pct`).
pub const STALL_US: u64 = 50;

/// The machine's stall probe before an open-loop run, as the manifest's `environment`
/// records it (crate `load`'s `stalls::probe` takes it): a floor under pacing lag.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallProbe {
    /// How long the thread spun: the length asked for, or more when the machine stopped it
    /// just before the end.
    pub probe_ms: u64,
    /// The core it spun on (`None`: not pinned, any core).
    pub cpu: Option<usize>,
    /// Share of the probe spent in stalls of at least [`STALL_US`], in percent.
    pub lost_pct: f64,
    /// Stalls of at least [`STALL_US`].
    pub stalls: u64,
    /// The longest stall.
    pub longest_us: u64,
    /// p99 / p99.9 of the lateness of an instant chosen uniformly in the probe: the remainder
    /// of the stall it falls into, 0 outside stalls. A perfectly punctual pacer on this
    /// machine would show this pacing lag.
    pub lateness_p99_us: u64,
    pub lateness_p999_us: u64,
}

impl StallProbe {
    /// One line for the terminal and the report.
    pub fn describe(&self) -> String {
        let core = self
            .cpu
            .map_or("any core".to_string(), |c| format!("CPU {c}"));
        format!(
            "a thread spinning on {core} for {} ms was stopped by the machine {} times for ≥ {STALL_US} µs \
             ({:.2} % of the time, longest {} µs): a perfectly punctual pacer would be late by p99 {} µs, \
             p99.9 {} µs",
            self.probe_ms,
            self.stalls,
            self.lost_pct,
            self.longest_us,
            self.lateness_p99_us,
            self.lateness_p999_us
        )
    }
}
