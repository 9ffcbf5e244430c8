//! Files derived from `cells.csv`: `summary.csv`, `memory.csv`, `thresholds.csv` and
//! `compare.csv`.

use super::{fmt, row_type};

row_type! {
    /// `summary.csv`: one (variant, stage, stack, regime, concurrency, mode, rate) group over its
    /// repetitions; per figure of [`crate::output::summary::FIGURES`] its mean, sample sd and
    /// 95 % interval of the mean (empty when not computable).
    pub struct SummaryRow {
        pub variant: String,
        pub stage: String,
        pub stack: String,
        pub regime: String,
        pub concurrency: u32,
        pub mode: String,
        /// The offered rate (open loop); empty in closed loop, and in runs from before.
        #[serde(default, serialize_with = "fmt::opt_display")]
        pub rate_rps: Option<f64>,
        pub repetitions: usize,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_rps_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_rps_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_rps_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_rps_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_steady_rps_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_steady_rps_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_steady_rps_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub throughput_steady_rps_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p50_us_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p50_us_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p50_us_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p50_us_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p95_us_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p95_us_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p95_us_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p95_us_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p99_us_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p99_us_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p99_us_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub latency_p99_us_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub success_rate_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub success_rate_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub success_rate_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub success_rate_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_peak_bytes_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_peak_bytes_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_peak_bytes_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_peak_bytes_ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_hwm_bytes_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_hwm_bytes_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_hwm_bytes_ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub server_rss_hwm_bytes_ci95_high: Option<f64>,
    }
}

row_type! {
    /// `memory.csv`: an OLS fit of RSS against open connections. KB and MB are decimal.
    pub struct MemoryRow {
        pub variant: String,
        pub stack: String,
        pub regime: String,
        /// `server` or `client`.
        pub role: String,
        /// The `cells.csv` column fitted.
        pub rss_column: String,
        pub n: usize,
        pub levels: usize,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub slope_kb_per_conn: f64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub slope_kb_ci95_low: f64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub slope_kb_ci95_high: f64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub intercept_mb: f64,
        #[serde(default, serialize_with = "fmt::opt_dec::<4, _>")]
        pub r_squared: Option<f64>,
    }
}

row_type! {
    /// `thresholds.csv`: one threshold check of one cell.
    pub struct ThresholdRow {
        pub threshold: String,
        pub cell_key: String,
        /// The key as written (an alias or a column); `value` and `bound` are in its units.
        pub column: String,
        /// Empty when the cell had no value for it.
        #[serde(default, serialize_with = "fmt::opt_number")]
        pub value: Option<f64>,
        pub bound: String,
        pub pass: bool,
        /// Empty: the cell's figures; a name of a request mix: that name's (`requests.csv`).
        #[serde(default)]
        pub request: String,
    }
}

row_type! {
    /// `compare.csv`: one metric of one cell present in both compared runs.
    pub struct CompareRow {
        pub variant: String,
        pub stage: String,
        pub stack: String,
        pub regime: String,
        pub concurrency: String,
        pub mode: String,
        /// The offered rate (open loop); empty in closed loop.
        #[serde(default, serialize_with = "fmt::opt_display")]
        pub rate_rps: Option<f64>,
        pub metric: String,
        pub column: String,
        pub higher_is_better: bool,
        pub n_base: usize,
        pub n_new: usize,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub base_mean: f64,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub new_mean: f64,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub base_sd: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub new_sd: Option<f64>,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub delta: f64,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub delta_pct: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub ci95_low: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub ci95_high: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub df: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub p_value: Option<f64>,
        pub verdict: String,
    }
}

row_type! {
    /// One point of a latency–throughput curve (`curve.csv`): the means over its repetitions.
    pub struct CurveRow {
        pub variant: String,
        pub stack: String,
        pub regime: String,
        pub concurrency: u32,
        #[serde(serialize_with = "fmt::display")]
        pub offered_rps: f64,
        /// Mean `throughput_rps` (successes per second over the measured phase).
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub achieved_rps: f64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub latency_p50_us: f64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub latency_p99_us: f64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub latency_p999_us: f64,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub success_rate: f64,
        /// Requests sent late (no worker free), summed over the repetitions.
        pub late: u64,
        /// The largest pacing-lag p99 of the repetitions, µs; empty when none recorded one.
        #[serde(default)]
        pub pacing_lag_p99_us: Option<u64>,
        pub repetitions: usize,
        /// This point is the curve's knee (the runner's `output::curve::knee` rule).
        pub knee: bool,
    }
}
