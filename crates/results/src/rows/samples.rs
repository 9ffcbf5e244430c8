//! The per-cell detail files written next to `cells.csv`: resource samples, failure examples,
//! latency quantiles and a request mix's per-name figures.

use super::{fmt, row_type};

row_type! {
    /// `resources.csv`: one resource sample of the server or the load generator.
    pub struct ResourceRow {
        pub cell_key: String,
        /// Seconds since the phase started.
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub t_s: f64,
        /// `server` or `client`.
        pub role: String,
        pub rss_bytes: u64,
        #[serde(serialize_with = "fmt::dec::<2, _>")]
        pub cpu_pct: f64,
    }
}

row_type! {
    /// `failures.csv`: how often one failure class (and, when the answer named one, one
    /// code within it: HTTP status, gRPC status name, missing field) occurred in a cell, with
    /// one example. A class's rows with an empty `request` add up to its count in cells.csv.
    pub struct FailureRow {
        pub cell_key: String,
        pub class: String,
        pub count: u64,
        pub example: String,
        /// Empty for failures that named no code.
        #[serde(default)]
        pub code: String,
        /// Empty: the cell's requests, all of them; a name of a request mix: that name's
        /// requests only (the same failures again, broken down).
        #[serde(default)]
        pub request: String,
    }
}

row_type! {
    /// `latency.csv`: one point of a cell's latency distribution, or of one request name's
    /// within a mix.
    pub struct LatencyRow {
        pub cell_key: String,
        #[serde(serialize_with = "fmt::display")]
        pub quantile: f64,
        pub latency_us: u64,
        /// Empty: all the cell's successes; a name of a request mix: that name's only.
        #[serde(default)]
        pub request: String,
        /// `latency` (the success latency), or `message_gap` (the gaps between a streamed
        /// answer's messages: `latency_us` is then a gap); empty in runs from before (latency).
        #[serde(default)]
        pub metric: String,
    }
}

row_type! {
    /// `agents.csv` (runs with agents): what each agent measured of a cell; the cell's row in
    /// `cells.csv` holds the exact merge of all of them.
    pub struct AgentRow {
        pub cell_key: String,
        /// 1-based, in the order of the `agents` setting.
        pub agent: u32,
        pub address: String,
        pub sent: u64,
        pub ok: u64,
        pub failed: u64,
        pub latency_p50_us: u64,
        pub latency_p99_us: u64,
        pub latency_max_us: u64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub elapsed_s: f64,
        /// The agent's load generator, sampled by the agent.
        pub client_rss_peak_bytes: u64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub client_cpu_s: f64,
        /// With the hosts executor: bytes the agent host's interface received and sent during
        /// the cell (the traffic crossed the bridge); empty otherwise.
        pub link_received_bytes: Option<u64>,
        pub link_sent_bytes: Option<u64>,
    }
}

row_type! {
    /// `requests.csv` (runs with a request mix): what the requests of one name measured in a
    /// cell. Its `sent`, `ok` and `failed` add up, over a cell's names, to the cell's in
    /// cells.csv; the latency columns mean what cells.csv's do, for this name's successes
    /// (empty when it had none, so that no latency bound passes on nothing).
    pub struct RequestRow {
        pub cell_key: String,
        /// The `name` of the mix entry.
        pub request: String,
        pub sent: u64,
        pub ok: u64,
        pub failed: u64,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub success_rate: f64,
        pub latency_min_us: Option<u64>,
        pub latency_p50_us: Option<u64>,
        pub latency_p90_us: Option<u64>,
        pub latency_p95_us: Option<u64>,
        pub latency_p99_us: Option<u64>,
        pub latency_p999_us: Option<u64>,
        pub latency_max_us: Option<u64>,
        #[serde(serialize_with = "fmt::opt_dec::<1, _>")]
        pub latency_mean_us: Option<f64>,
    }
}

/// Quantiles written to `latency.csv` for every cell: enough for a CDF, dense in the tail.
pub const CDF_QUANTILES: [f64; 30] = [
    0.0, 0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75,
    0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0,
];
