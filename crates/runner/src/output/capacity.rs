//! What a capacity search (`runner capacity`) leaves in `summary.json`: per stack and regime,
//! the highest offered rate at which the SLO held, its interval, why the search stopped and
//! every probe it ran (each probe is also a row of `cells.csv`). docs/capacity.md explains the
//! search; `docs/summary.schema.json` documents the fields.

use serde::{Deserialize, Serialize};

/// The service-level objective a probe is judged by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Latency p99 bound, in ms (from each request's scheduled start: no coordinated omission).
    pub latency_p99_max_ms: f64,
    /// Successes as a share of requests sent, in %.
    pub success_min_pct: f64,
    /// The load generator's pacing-lag p99 bound, in µs: above it the instrument, not the
    /// server, missed the schedule; `None`: the default of the instrument check applies.
    pub pacing_lag_p99_max_us: Option<u64>,
}

/// One probe: a cell at one offered rate and what it says about the SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The probe's row in `cells.csv`.
    pub cell_key: String,
    /// What the probe was for: `ladder`, `bisect`, `recheck` (a rate with one miss or a tie)
    /// or `confirm`.
    pub step: String,
    pub offered_rps: f64,
    /// Successes per second over the measured phase (`throughput_rps`).
    pub achieved_rps: f64,
    pub sent: u64,
    pub elapsed_s: f64,
    pub latency_p99_us: u64,
    pub success_rate: f64,
    pub late: u64,
    pub pacing_lag_p99_us: Option<u64>,
    pub client_cpu_pct_mean: Option<f64>,
    pub slo_met: bool,
    /// Each part of the SLO it missed, e.g. `latency p99 12.400 ms > 10 ms`.
    pub missed: Vec<String>,
    /// The load generator could not offer the rate: what it ran into (pacing lag, client CPU,
    /// too few workers); empty when the probe measured the server.
    pub instrument_limits: Vec<String>,
    /// The cell could not run (its `error`).
    pub error: Option<String>,
}

/// The outcome of one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Bracketed to the resolution and confirmed: the server's capacity under the SLO.
    Found,
    /// The SLO failed where the load generator could not offer the rate: the capacity is at
    /// least `capacity_rps`, the instrument's limit, not the server's.
    InstrumentLimit,
    /// Even the start rate missed the SLO.
    BelowStart,
    /// The SLO held up to the ceiling rate.
    AtCeiling,
    /// The request or time budget ran out before the bracket was narrow and confirmed.
    BudgetExhausted,
    /// The run was interrupted.
    Interrupted,
}

/// One capacity search: one stack and regime (and variant and concurrency).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub variant: String,
    pub stack: String,
    pub regime: String,
    pub concurrency: u32,
    pub slo: Slo,
    pub outcome: Outcome,
    /// The highest rate below the lowest failing one at which most probes met the SLO
    /// (confirmed when `outcome` is `found`); `None` when none did.
    pub capacity_rps: Option<f64>,
    /// `[highest passing rate, lowest failing rate]`: the capacity lies between them; an end
    /// is `None` when no probe passed (or failed) there.
    pub interval_rps: [Option<f64>; 2],
    /// The probes at the two ends of the interval (`cell_key`s).
    pub bracket: [Option<String>; 2],
    /// Who set the upper end: `server`, `instrument`, or `None` without a failing probe.
    pub limited_by: Option<String>,
    /// One sentence saying what the result means.
    pub note: String,
    pub requests_spent: u64,
    pub seconds_spent: f64,
    pub probes: Vec<Probe>,
}

/// The search's settings as recorded: bounds, resolution, probe rule, budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub start_rps: f64,
    pub ceiling_rps: f64,
    pub factor: f64,
    /// Bisection stops when the failing rate is within this % above the passing one.
    pub resolution_pct: f64,
    /// Probes of the passing end, the first included, before it is the answer.
    pub confirmations: u32,
    /// The probe-length rule's parts: `max(tail_samples / (1 − 0.99), rate × probe_seconds)`
    /// requests.
    pub tail_samples: u64,
    pub probe_seconds: f64,
    /// The whole search (every stack and regime) stops within these.
    pub budget_requests: u64,
    pub budget_seconds: f64,
}

/// The capacity part of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub settings: Settings,
    pub searches: Vec<Search>,
}
