//! `cells.csv`: one row per cell. docs/results-schema.md describes each column; a test
//! checks its table against [`CellRow`]'s columns.

use bench_core::FailureClass;

use super::{fmt, row_type};

row_type! {
    /// One cell: coordinates, settings, measured figures, environment and outcome.
    pub struct CellRow {
        /// `stack/regime/c<concurrency>/r<repetition>` (baseline: `…/baseline/r<n>`; a rate
        /// sweep's point: `…/c<concurrency>/q<rate>/r<n>`).
        pub cell_key: String,
        pub variant: String,
        pub stage: String,
        pub stack: String,
        pub regime: String,
        pub concurrency: u32,
        pub repetition: u32,
        pub payload: String,
        pub plaintext: bool,
        pub handshake: String,
        /// The client implementation that ran (`lean` or `library`); empty in runs from
        /// before the knob existed.
        #[serde(default)]
        pub client: Option<String>,
        /// The program that answered (`ours`, `caddy`, `nginx`); empty in runs from before
        /// the knob (ours).
        #[serde(default)]
        pub server: Option<String>,
        pub connections: u32,
        /// The request budget; empty for a time-bound cell.
        #[serde(default)]
        pub requests: Option<u64>,
        #[serde(default)]
        pub duration_s: Option<u64>,
        /// `closed` or `open` (a target rate).
        pub mode: String,
        #[serde(default, serialize_with = "fmt::opt_display")]
        pub rate_rps: Option<f64>,
        pub late: u64,
        /// Open loop only.
        #[serde(default)]
        pub pacing: Option<String>,
        #[serde(default)]
        pub pacing_lag_p50_us: Option<u64>,
        #[serde(default)]
        pub pacing_lag_p99_us: Option<u64>,
        #[serde(default)]
        pub pacing_lag_max_us: Option<u64>,
        /// Load generators whose measurements the row adds up (1 for one local load
        /// generator, N with N agents, whose shares `agents.csv` lists; in a `runner merge`,
        /// the sum of the inputs'); empty in runs from before.
        #[serde(default)]
        pub agents: Option<u32>,
        pub sent: u64,
        pub ok: u64,
        pub failed: u64,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub success_rate: f64,
        #[serde(serialize_with = "fmt::dec::<6, _>")]
        pub elapsed_s: f64,
        /// Wall-clock start of the measured phase, seconds since the Unix epoch; empty when
        /// the cell did not run, and in runs from before.
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub measured_start_unix_s: Option<f64>,
        /// `ok / elapsed_s`: the whole phase, ramp-up and drain included.
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub throughput_rps: f64,
        /// Successes per second while every worker was busy; empty without such a window.
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub throughput_steady_rps: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<6, _>")]
        pub steady_s: Option<f64>,
        /// The steady window held at least [`MIN_STEADY_OK_PER_WORKER`] successes per worker
        /// and [`MIN_STEADY_FRACTION_OF_ELAPSED`] of the phase ([`steady_window_valid_for`]); when
        /// `false`, verdicts use `throughput_rps`. Empty without a window, and in runs from
        /// before (then judged from `throughput_steady_rps × steady_s` and `elapsed_s`).
        #[serde(default)]
        pub steady_window_valid: Option<bool>,
        pub cut_short: bool,
        /// The phase sent more than one request budget: whole budgets (`budget_repeats` > 1);
        /// in runs from before `budget_repeats`, past its budget by time.
        pub extended: bool,
        /// Whole request budgets the measured phase sent (1 without a repeat,
        /// `min_cell_seconds`); `sent = requests × budget_repeats` unless `cut_short`. Empty
        /// for a time-bound cell, a cell that did not run, and in runs from before.
        #[serde(default)]
        pub budget_repeats: Option<u64>,
        pub warmup_sent: u64,
        pub warmup_ok: u64,
        pub latency_min_us: u64,
        pub latency_p50_us: u64,
        pub latency_p90_us: u64,
        pub latency_p95_us: u64,
        pub latency_p99_us: u64,
        pub latency_p999_us: u64,
        pub latency_max_us: u64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub latency_mean_us: f64,
        pub ttfb_min_us: u64,
        pub ttfb_p50_us: u64,
        pub ttfb_p90_us: u64,
        pub ttfb_p95_us: u64,
        pub ttfb_p99_us: u64,
        pub ttfb_p999_us: u64,
        pub ttfb_max_us: u64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub ttfb_mean_us: f64,
        pub connect_min_us: u64,
        pub connect_p50_us: u64,
        pub connect_p90_us: u64,
        pub connect_p95_us: u64,
        pub connect_p99_us: u64,
        pub connect_p999_us: u64,
        pub connect_max_us: u64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub connect_mean_us: f64,
        pub handshake_min_us: u64,
        pub handshake_p50_us: u64,
        pub handshake_p90_us: u64,
        pub handshake_p95_us: u64,
        pub handshake_p99_us: u64,
        pub handshake_p999_us: u64,
        pub handshake_max_us: u64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub handshake_mean_us: f64,
        /// Connections set out to open (attempted), and of them those whose setup finished
        /// (established); runs from before the split have `connections_opened`, the
        /// established ones, and no attempted count.
        #[serde(default)]
        pub connections_attempted: Option<u64>,
        #[serde(alias = "connections_opened")]
        pub connections_established: u64,
        pub connections_resumed: u64,
        /// Requests the server refused unprocessed (GOAWAY above their stream, REFUSED_STREAM)
        /// and that were sent again on a new connection; empty in runs from before.
        #[serde(default)]
        pub requests_moved: Option<u64>,
        pub fail_connect_refused: u64,
        pub fail_connect_timeout: u64,
        pub fail_addr_unavailable: u64,
        pub fail_fd_exhausted: u64,
        pub fail_conn_reset: u64,
        pub fail_tls_failed: u64,
        pub fail_handshake_timeout: u64,
        pub fail_quic_idle_timeout: u64,
        pub fail_request_timeout: u64,
        pub fail_bad_status: u64,
        pub fail_bad_body: u64,
        pub fail_missing_data: u64,
        pub fail_other: u64,
        /// The largest sampled reading; empty when the server was not sampled (a service
        /// without --target-pid).
        #[serde(default)]
        pub server_rss_peak_bytes: Option<u64>,
        /// The kernel's VmHWM over the phase; empty if unavailable.
        #[serde(default)]
        pub server_rss_hwm_bytes: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<0, _>")]
        pub server_rss_mean_bytes: Option<f64>,
        /// Empty when it could not be measured (shown as "—", never as 0).
        #[serde(default, serialize_with = "fmt::opt_dec::<2, _>")]
        pub server_cpu_pct_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub server_cpu_s: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub server_cpu_ms_per_1k_ok: Option<f64>,
        pub client_rss_peak_bytes: u64,
        #[serde(default)]
        pub client_rss_hwm_bytes: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<0, _>")]
        pub client_rss_mean_bytes: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<2, _>")]
        pub client_cpu_pct_mean: Option<f64>,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub client_cpu_s: f64,
        #[serde(serialize_with = "fmt::dec::<3, _>")]
        pub client_cpu_ms_per_1k_ok: f64,
        /// On an edge or sidecar path: the proxies beside the load generators (`client`, a
        /// sidecar path's) and the one beside the server (`server`), each role summed over
        /// its proxies' processes: the kernel's RSS high-water marks over the phase and CPU
        /// seconds; empty on a direct path.
        #[serde(default)]
        pub proxy_client_rss_hwm_bytes: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub proxy_client_cpu_s: Option<f64>,
        #[serde(default)]
        pub proxy_server_rss_hwm_bytes: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub proxy_server_cpu_s: Option<f64>,
        /// Both roles' proxy CPU per 1,000 successes, in ms.
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub proxy_cpu_ms_per_1k_ok: Option<f64>,
        pub short_phase: bool,
        pub wire_sent_bytes: u64,
        pub wire_received_bytes: u64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub wire_sent_bytes_per_request: f64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub wire_received_bytes_per_request: f64,
        #[serde(serialize_with = "fmt::dec::<1, _>")]
        pub body_bytes_per_ok: f64,
        /// Streaming calls: the successful streaming calls, the messages they streamed per
        /// call (averaged over those calls only: a mix's unary calls are not counted as calls
        /// of 0 messages), messages per second of the phase, and the gaps between consecutive
        /// messages of a call; empty without streaming calls and in runs from before
        /// (`streamed_ok` is empty in runs that averaged over every success).
        #[serde(default)]
        pub streamed_ok: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub messages_per_call_mean: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub messages_per_s: Option<f64>,
        #[serde(default)]
        pub message_gap_p50_us: Option<u64>,
        #[serde(default)]
        pub message_gap_p99_us: Option<u64>,
        #[serde(default)]
        pub message_gap_p999_us: Option<u64>,
        #[serde(default)]
        pub message_gap_max_us: Option<u64>,
        /// Bulk workload: the application bytes the successful requests moved (objects
        /// downloaded or uploaded, each counted exactly), those bytes per second of the
        /// measured phase (`elapsed_s`), and the load generator's and the server's CPU seconds
        /// per GiB of them; empty for the item workload.
        #[serde(default)]
        pub object_bytes_moved: Option<u64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<1, _>")]
        pub goodput_bytes_per_s: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<4, _>")]
        pub client_cpu_s_per_gib: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<4, _>")]
        pub server_cpu_s_per_gib: Option<f64>,
        /// TCP connections in TIME_WAIT in the load generator's network namespace (summed
        /// over load generators) at the measured phase's start, at its end, and the largest
        /// sampled reading; empty when not read, and in runs from before.
        #[serde(default)]
        pub tcp_time_wait_before: Option<u64>,
        #[serde(default)]
        pub tcp_time_wait_after: Option<u64>,
        #[serde(default)]
        pub tcp_time_wait_peak: Option<u64>,
        /// The cell's settings from here to `service_cpu_us`.
        #[serde(default)]
        pub netem: Option<String>,
        #[serde(default)]
        pub port_range: Option<String>,
        #[serde(default)]
        pub tcp_tw_reuse: Option<u8>,
        #[serde(default)]
        pub somaxconn: Option<u32>,
        #[serde(default)]
        pub tcp_congestion: Option<String>,
        pub backlog: u32,
        #[serde(default)]
        pub client_nofile: Option<u64>,
        pub request_timeout_ms: u64,
        pub connect_timeout_ms: u64,
        pub handshake_timeout_ms: u64,
        #[serde(default)]
        pub quic_initial_rtt_ms: Option<u64>,
        #[serde(default)]
        pub udp_buffer_bytes: Option<u64>,
        #[serde(default)]
        pub quic_receive_window: Option<u64>,
        #[serde(default)]
        pub quic_server_endpoints: Option<u32>,
        #[serde(default)]
        pub quic_offload: Option<bool>,
        #[serde(default)]
        pub quic_mtu_discovery: Option<bool>,
        /// `per-connection` or `shared`; empty in runs from before the knob (per-connection).
        #[serde(default)]
        pub quic_endpoint: Option<String>,
        /// The item-service method our gRPC stacks call (`unary`, `server-stream`,
        /// `client-stream`, `bidi`), and a streaming call's messages; empty for other stacks,
        /// and in runs from before.
        #[serde(default)]
        pub grpc_call: Option<String>,
        #[serde(default)]
        pub stream_messages: Option<u32>,
        /// The bulk workload's object (`download:16MiB`); empty for the item workload.
        #[serde(default)]
        pub object: Option<String>,
        /// The bulk workload on a gRPC stack: each message's size; empty otherwise.
        #[serde(default)]
        pub object_message_bytes: Option<u32>,
        pub linger_zero: bool,
        /// Absent before the reference run's version: optional for that reason only.
        #[serde(default)]
        pub source_addresses: Option<u32>,
        /// `direct`, `edge` or `sidecar`; empty in runs from before the knob (direct).
        #[serde(default)]
        pub path: Option<String>,
        /// The proxy program, its upstream pooling and its threads on an edge or sidecar
        /// path; empty on a direct one.
        #[serde(default)]
        pub proxy: Option<String>,
        #[serde(default)]
        pub pool: Option<String>,
        #[serde(default)]
        pub proxy_threads: Option<u32>,
        /// On an edge or sidecar path, the ALPN identifiers of what the load generator speaks
        /// to the first proxy (`client_protocol`) and what the proxies speak on to the server
        /// (`upstream_protocol`): the same on TCP; `h3` and `h2` where an edge terminates
        /// QUIC and forwards to the stack's edge upstream. Empty on a direct path.
        #[serde(default)]
        pub client_protocol: Option<String>,
        #[serde(default)]
        pub upstream_protocol: Option<String>,
        pub server_threads: u32,
        #[serde(serialize_with = "fmt::display")]
        pub min_cell_seconds: f64,
        #[serde(default)]
        pub service_time: Option<String>,
        /// Only exponential draws use the seed.
        #[serde(default)]
        pub service_time_seed: Option<u64>,
        pub service_cpu_us: u64,
        #[serde(default, serialize_with = "fmt::opt_dec::<2, _>")]
        pub loadavg1_before: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<2, _>")]
        pub loadavg1_after: Option<f64>,
        #[serde(default, serialize_with = "fmt::opt_dec::<2, _>")]
        pub steal_pct: Option<f64>,
        #[serde(default)]
        pub emulated_packets_delayed: Option<u64>,
        #[serde(default)]
        pub emulated_packets_dropped: Option<u64>,
        #[serde(default)]
        pub emulator: Option<String>,
        #[serde(default, serialize_with = "fmt::opt_dec::<3, _>")]
        pub emulator_cpu_s: Option<f64>,
        /// Kernel counters over the measured phase; empty when it did not run.
        #[serde(default)]
        pub net_tcp_retrans_segs: Option<u64>,
        #[serde(default)]
        pub net_tcp_timeouts: Option<u64>,
        #[serde(default)]
        pub net_listen_overflows: Option<u64>,
        #[serde(default)]
        pub net_listen_drops: Option<u64>,
        #[serde(default)]
        pub net_tcp_out_rsts: Option<u64>,
        #[serde(default)]
        pub net_tcp_estab_resets: Option<u64>,
        #[serde(default)]
        pub net_syncookies_sent: Option<u64>,
        #[serde(default)]
        pub net_udp_rcvbuf_errors: Option<u64>,
        #[serde(default)]
        pub net_udp_sndbuf_errors: Option<u64>,
        #[serde(default)]
        pub net_udp_in_errors: Option<u64>,
        #[serde(default)]
        pub net_tcp_active_opens: Option<u64>,
        #[serde(default)]
        pub net_tcp_passive_opens: Option<u64>,
        #[serde(default)]
        pub net_counters_scope: Option<String>,
        #[serde(default)]
        pub server_exit: Option<String>,
        /// Why the cell could not run; a row with an error has no figures.
        #[serde(default)]
        pub error: Option<String>,
    }
}

/// Successes per worker a steady window must hold for its rate to stand for the cell. At each
/// edge of the window every worker has about one request in flight that is counted or not, so
/// the count is uncertain by about one success per worker at each edge: with ≈ 2 per worker
/// (a failing cell whose workers wait out timeouts) the window's rate came out 4.5 × `ok /
/// elapsed`; at 10 per worker the edges move it by at most ≈ 20 %, and less as cells grow.
pub const MIN_STEADY_OK_PER_WORKER: f64 = 10.0;

/// The share of the measured phase a steady window must cover for its rate to stand for the
/// cell. Outside the window are the ramp-up and the drain; when the drain is the slow tail of
/// a failing cell (handshakes retransmitted after a 1 s timeout, a full accept queue), the
/// window's rate leaves most of the cell out: in the committed claim runs every window under
/// 40 % of its phase came out 1.7–9.6 × `ok / elapsed`, while healthy cells' windows covered
/// 48 % of the phase and more.
pub const MIN_STEADY_FRACTION_OF_ELAPSED: f64 = 0.5;

/// Whether a steady window of `window_s` seconds with `ok` successes gives the rate of a cell
/// of `workers` workers whose measured phase lasted `elapsed_s`
/// ([`MIN_STEADY_OK_PER_WORKER`], [`MIN_STEADY_FRACTION_OF_ELAPSED`]).
pub fn steady_window_valid_for(ok: f64, window_s: f64, workers: u32, elapsed_s: f64) -> bool {
    ok >= MIN_STEADY_OK_PER_WORKER * f64::from(workers.max(1))
        && window_s >= MIN_STEADY_FRACTION_OF_ELAPSED * elapsed_s
}

/// A rate as a cell key writes it: the shortest decimal that reads back as the same number
/// (`2000`, `1414.25`).
pub fn rate_key(rate_rps: f64) -> String {
    rate_rps.to_string()
}

/// Whose packets the kernel counters of a row count (`net_counters_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetScope {
    /// The cell's private network namespace: only its server and load generator, exact.
    Namespace,
    /// The runner's (host) namespace: other processes on the machine add to them.
    Host,
}

impl NetScope {
    pub fn as_str(self) -> &'static str {
        match self {
            NetScope::Namespace => "namespace",
            NetScope::Host => "host",
        }
    }
}

/// The kernel counters' columns of `cells.csv` (`net_*`), in column order; the runner reads
/// each from the kernel.
pub fn net_counter_columns() -> impl Iterator<Item = &'static str> {
    <CellRow as super::Row>::COLUMNS
        .iter()
        .copied()
        .filter(|c| c.starts_with("net_") && *c != "net_counters_scope")
}

/// Columns renamed since runs were committed (old name, new name): a row reads the old name
/// as the new one (`#[serde(alias)]`), so committed runs stay readable.
pub const RENAMED_COLUMNS: &[(&str, &str)] = &[("connections_opened", "connections_established")];

impl CellRow {
    /// The cell ran (no `error`): only such rows have figures.
    pub fn ran(&self) -> bool {
        self.error.as_deref().is_none_or(str::is_empty)
    }

    /// The steady window is there and long enough ([`steady_window_valid_for`]); in runs from
    /// before the column, judged from the window's rate and length.
    pub fn steady_valid(&self) -> bool {
        if self.throughput_steady_rps.is_none() {
            return false;
        }
        match self.steady_window_valid {
            Some(valid) => valid,
            None => match (self.throughput_steady_rps, self.steady_s) {
                (Some(rps), Some(s)) => {
                    steady_window_valid_for((rps * s).round(), s, self.concurrency, self.elapsed_s)
                }
                _ => false,
            },
        }
    }

    /// The count of one failure class (`fail_<class>`).
    pub fn failures(&self, class: FailureClass) -> u64 {
        self.number(&format!("fail_{}", class.as_str()))
            .map_or(0, |n| n as u64)
    }
}

use super::Row as _;

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed scale run, read and written again, comes out value for value: every
    /// column it has (under its new name where renamed since) in the same number format, and
    /// the columns added since it was measured are empty.
    #[test]
    fn a_committed_cells_csv_round_trips_value_for_value() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/scale/cells.csv");
        let table = super::super::read::<CellRow>(&path).unwrap();
        let written = super::super::to_bytes(true, &table.rows).unwrap();
        let records = |bytes: &[u8]| {
            let mut r = csv::Reader::from_reader(bytes);
            let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
            let rows: Vec<Vec<String>> = r
                .records()
                .map(|rec| rec.unwrap().iter().map(String::from).collect())
                .collect();
            (header, rows)
        };
        let (new_header, new_rows) = records(&written);
        assert_eq!(new_header, CellRow::COLUMNS);
        let (old_header, old_rows) = records(&std::fs::read(&path).unwrap());
        assert_eq!(old_rows.len(), new_rows.len());
        for (i, old_name) in old_header.iter().enumerate() {
            let name = RENAMED_COLUMNS
                .iter()
                .find(|(o, _)| o == old_name)
                .map_or(old_name.as_str(), |(_, n)| n);
            let j = new_header
                .iter()
                .position(|c| c == name)
                .unwrap_or_else(|| panic!("committed column {old_name} is not read"));
            for (old, new) in old_rows.iter().zip(&new_rows) {
                assert_eq!(old[i], new[j], "{old_name}");
            }
        }
        for (j, name) in new_header.iter().enumerate() {
            let old_name = RENAMED_COLUMNS
                .iter()
                .find(|(_, n)| n == name)
                .map_or(name.as_str(), |(o, _)| o);
            if !old_header.iter().any(|c| c == old_name) {
                assert!(new_rows.iter().all(|r| r[j].is_empty()), "{name} not empty");
            }
        }
    }

    /// The rule at its boundaries: 10 successes per worker is enough, one fewer is not; half
    /// the phase is enough, a little less is not. A row from before the column is judged from
    /// its rate × window and its elapsed time; one without a window is never valid.
    #[test]
    fn a_steady_window_needs_ten_successes_per_worker_and_half_the_phase() {
        assert!(steady_window_valid_for(5000.0, 1.0, 500, 2.0));
        assert!(!steady_window_valid_for(4999.0, 1.0, 500, 2.0));
        assert!(steady_window_valid_for(10.0, 1.0, 1, 1.0));
        assert!(!steady_window_valid_for(9.0, 1.0, 1, 1.0));
        assert!(!steady_window_valid_for(5000.0, 0.999, 500, 2.0));
        let row = |rps: Option<f64>, s: Option<f64>, valid: Option<bool>| CellRow {
            concurrency: 500,
            elapsed_s: 1.0,
            throughput_steady_rps: rps,
            steady_s: s,
            steady_window_valid: valid,
            ..CellRow::default()
        };
        // c4 loss-333ms h3 c=500 as committed: 2,078 req/s in a window of 2.17 s of 10.85 s,
        // 9 successes per worker: 4.5 × ok / elapsed, invalid on both counts.
        let c4 = CellRow {
            elapsed_s: 10.850224,
            ..row(Some(2078.0), Some(2.166274), None)
        };
        assert!(!c4.steady_valid());
        assert!(row(Some(10_000.0), Some(0.5), None).steady_valid());
        assert!(!row(Some(9_998.0), Some(0.5), None).steady_valid());
        // The recorded verdict wins over the figures.
        assert!(!row(Some(10_000.0), Some(0.5), Some(false)).steady_valid());
        assert!(!row(None, None, Some(true)).steady_valid());
    }
}
