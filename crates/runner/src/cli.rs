//! Command-line flags. Every run flag overrides the same key of the experiment file.

use std::net::SocketAddr;
use std::path::PathBuf;

use bench_core::{FaultSpec, HandshakeVariant, PayloadProfile};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::settings::{Experiment, Regime};

#[derive(Parser, Debug)]
#[command(
    name = "runner",
    version,
    about = "Transport benchmark: HTTP/1.1, HTTP/2, HTTP/3 and gRPC over TLS 1.3"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve one stack until SIGINT/SIGTERM; prints one JSON ready line.
    Serve(ServeArgs),
    /// Write RESULTS_DIR/report.html: one self-contained page in the shape of seed 000's report.
    Report {
        /// A run's results directory (the one holding manifest.json and cells.csv).
        dir: PathBuf,
    },
    /// Write OUT/reproduction.md from a reference run of the default sweep and claim runs
    /// (the study is described in paper/study.md). Refuses runs from different commits,
    /// CPU models or kernels, or a dirty tree, unless --allow-mixed.
    Paper {
        /// Results directory of the default sweep.
        #[arg(long)]
        reference: PathBuf,
        /// Results directories of the experiments in experiments/claims/.
        #[arg(long, num_args = 0..)]
        claims: Vec<PathBuf>,
        /// Results directory of experiments/scale.toml: adds the "Beyond 500" section (each
        /// stack's knee past the study's 500 workers, and why).
        #[arg(long)]
        scale: Option<PathBuf>,
        /// Directory that receives reproduction.md.
        #[arg(long, default_value = "paper")]
        out: PathBuf,
        /// Write the paper even if the runs differ in commit, CPU model or kernel, or ran on
        /// a dirty tree; it then opens with a warning saying what is mixed.
        #[arg(long)]
        allow_mixed: bool,
    },
    /// Compare two runs cell by cell (Welch's t-test over repetitions); writes compare.csv and
    /// compare.html. Exit 2 when the workloads differ, 1 with --fail-on-regression exceeded.
    Compare {
        /// Results directory of the base run.
        base: PathBuf,
        /// Results directory of the new run.
        new: PathBuf,
        /// Directory that receives compare.csv and compare.html (default: NEW/compare).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Exit 1 when a significant regression larger than PCT % exists (after writing
        /// everything).
        #[arg(long, value_name = "PCT")]
        fail_on_regression: Option<f64>,
    },
    /// Validate an experiment file (and flags) without running anything; prints the cells and
    /// an estimated duration.
    Check {
        /// The experiment file (TOML) to validate.
        file: PathBuf,
        /// Run flags, accepted after the subcommand as well as before it.
        #[command(flatten)]
        run: Box<RunArgs>,
    },
    /// Print a shell completion script to stdout, e.g. `runner completions bash >
    /// /etc/bash_completion.d/runner`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout, e.g. `runner man > runner.1; man ./runner.1`.
    Man,
    /// Internal: one cell's load generator, started by the runner (job on stdin).
    #[command(hide = true)]
    Load {
        #[arg(long)]
        certs: PathBuf,
        /// The stack, so that `ps` shows which cell this is (the job names it too).
        #[arg(long)]
        stack: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The stack to serve: h1, h2, h3 or grpc (required).
    #[arg(long)]
    pub stack: String,
    /// Address to listen on; port 0 picks a free one (a non-loopback address warns).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// No TLS: h1, h2c with prior knowledge, gRPC over h2c (h3 has none) (default: TLS 1.3).
    #[arg(long)]
    pub plaintext: bool,
    /// Payload profile of the item: small (256 B JSON), 4k or 64k.
    #[arg(long, default_value = "small")]
    pub payload: PayloadProfile,
    /// Server runtime worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    /// Listen backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = 4096)]
    pub backlog: u32,
    /// Test-only fault: status | bad-body | missing-field | delay-<N>ms, with optional
    /// :<fraction> (default: none).
    #[arg(long)]
    pub fault: Option<FaultSpec>,
    /// Certificate directory, created on first use (default: certs/ of this checkout).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Pin the server to this CPU (default: not pinned).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Transport knobs as JSON, e.g. '{"quic_initial_rtt_ms":100,"udp_buffer_bytes":4194304}'
    /// (default: none, the stacks' own settings).
    #[arg(long, value_parser = parse_tuning)]
    pub tuning: Option<bench_core::Tuning>,
    /// Processing time of each item request: fixed:<D> or exp:<mean>, e.g. exp:2ms (default:
    /// none, answer at once).
    #[arg(long)]
    pub service_time: Option<bench_core::ServiceTime>,
    /// Seed of the exp: draws.
    #[arg(long, default_value_t = bench_core::service::DEFAULT_SERVICE_TIME_SEED)]
    pub service_time_seed: u64,
    /// Busy CPU work per item request on the handler's thread, in µs.
    #[arg(long, default_value_t = 0)]
    pub service_cpu_us: u64,
}

impl ServeArgs {
    /// What each item request costs this server.
    pub fn service(&self) -> bench_core::ServiceSpec {
        bench_core::ServiceSpec {
            time: self.service_time,
            seed: self.service_time_seed,
            cpu: std::time::Duration::from_micros(self.service_cpu_us),
        }
    }
}

fn parse_tuning(text: &str) -> Result<bench_core::Tuning, String> {
    serde_json::from_str(text).map_err(|e| format!("invalid tuning JSON: {e}"))
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum RegimeArg {
    Reuse,
    NewConn,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum HandshakeArg {
    Full,
    Resumed,
    ZeroRtt,
}

#[derive(Args, Debug, Default, Clone, PartialEq)]
pub struct RunArgs {
    /// Finish an interrupted run: only its missing cells, with its own settings, appended to
    /// its files.
    #[arg(long, value_name = "RESULTS_DIR")]
    pub resume: Option<PathBuf>,
    /// Experiment file (TOML); flags override its keys (default: none, the study's numbers).
    #[arg(long)]
    pub experiment: Option<PathBuf>,
    /// Part of the results directory's name (default: `default`; `reuse`/`new-conn` with
    /// --regime).
    #[arg(long)]
    pub name: Option<String>,
    /// reuse, new-conn or both (default both).
    #[arg(long, value_enum)]
    pub regime: Option<RegimeArg>,
    /// Comma-separated stacks: h1,h2,h3,grpc (default: all four).
    #[arg(long, value_delimiter = ',')]
    pub stacks: Option<Vec<String>>,
    /// Comma-separated concurrency levels, in workers (default: 10,50,100,200,500).
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Option<Vec<u32>>,
    /// Measured requests per cell, for every regime (default: 50000 reuse, 5000 new-conn).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Repetitions of every cell, interleaved (default: 1).
    #[arg(long)]
    pub repetitions: Option<u32>,
    /// Request, connect and handshake timeout in seconds (default: 10).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Payload profile: small (256 B JSON body), 4k or 64k (default: small).
    #[arg(long)]
    pub payload: Option<PayloadProfile>,
    /// No TLS: h1, h2c, gRPC over h2c; h3 cannot run (default: TLS 1.3).
    #[arg(long)]
    pub plaintext: bool,
    /// TLS/QUIC session handling of new connections: full (no session cache), resumed or
    /// zero-rtt (h3 only) (default: full).
    #[arg(long, value_enum)]
    pub handshake: Option<HandshakeArg>,
    /// Reuse regime: connections shared by all workers (default: 0 = one per worker).
    #[arg(long)]
    pub connections: Option<u32>,
    /// Unrecorded warm-up requests before each cell, as a fraction of its measured requests
    /// (default: 0.05).
    #[arg(long)]
    pub warmup_fraction: Option<f64>,
    /// Single-user baseline per stack and regime, in seconds; 0 = none (default: 10).
    #[arg(long)]
    pub baseline_seconds: Option<u64>,
    /// Open loop: requests per second on a fixed schedule (default: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: `spin` (default: timer, then polling for the last 2 ms; µs precision) or
    /// `timer` (tokio's 1 ms timer alone, for comparison).
    #[arg(long, value_enum)]
    pub pacing: Option<crate::exec::load::Pacing>,
    /// Test-only: fault the servers inject, e.g. delay-50ms or stall-300ms:0.005 (default:
    /// none).
    #[arg(long)]
    pub server_fault: Option<String>,
    /// Server processing time per item request: fixed:<D> or exp:<mean>, e.g. exp:2ms
    /// (default: none, answer at once).
    #[arg(long)]
    pub service_time: Option<String>,
    /// Seed of the exp: service-time draws (default: 1).
    #[arg(long)]
    pub service_time_seed: Option<u64>,
    /// Busy CPU work per item request on the server's handler thread, in µs (default: 0).
    #[arg(long)]
    pub service_cpu_us: Option<u64>,
    /// Hard bound on a cell's measured phase, in seconds (default: 300).
    #[arg(long)]
    pub max_cell_seconds: Option<u64>,
    /// Stress cells measure at least this long, sending past their request budget if needed
    /// (default: 0 = the budget alone).
    #[arg(long)]
    pub min_cell_seconds: Option<f64>,
    /// Soak: every stress cell runs this long (e.g. 90s, 10m, 1h) instead of a request count
    /// (default: none).
    #[arg(long, value_parser = parse_duration_s)]
    pub duration: Option<u64>,
    /// Lower the runner's open-file soft limit to N (exhaustion studies; servers are not
    /// affected) (default: inherited).
    #[arg(long)]
    pub client_nofile: Option<u64>,
    /// Server runtime worker threads (default: 2).
    #[arg(long)]
    pub server_threads: Option<u32>,
    /// Load generator runtime threads; 0 = one per usable core (default: 0).
    #[arg(long)]
    pub client_threads: Option<u32>,
    /// Pin the server to core 0 and the runner to core 1 (default: off).
    #[arg(long)]
    pub pin: bool,
    /// The load generator polls for I/O instead of sleeping (use with pinned runs; README
    /// "Fairness") (default: off).
    #[arg(long)]
    pub busy_poll: bool,
    /// Server listen backlog (default: 4096).
    #[arg(long)]
    pub backlog: Option<u32>,
    /// Network emulation in a private namespace, e.g. rtt=40ms,jitter=2ms,loss=0.5%,rate=100mbit
    /// (needs root; default: none, plain loopback).
    #[arg(long, value_name = "SPEC")]
    pub netem: Option<String>,
    /// net.ipv4.ip_local_port_range in a private namespace, e.g. "40000 40999" (default: the
    /// kernel's).
    #[arg(long, value_name = "LOW HIGH")]
    pub port_range: Option<String>,
    /// net.ipv4.tcp_tw_reuse (0, 1 or 2) in a private namespace (default: the kernel's, 2).
    #[arg(long)]
    pub tcp_tw_reuse: Option<u8>,
    /// net.core.somaxconn in a private namespace (default: the kernel's).
    #[arg(long)]
    pub somaxconn: Option<u32>,
    /// TCP clients close with SO_LINGER 0: an RST, no TIME_WAIT (default: off, a FIN).
    #[arg(long)]
    pub linger_zero: bool,
    /// Local source addresses the clients' connections take in turn (127.0.0.1, 127.0.0.2, …
    /// for a loopback server), so one address's ephemeral ports are not the limit; 1 = the
    /// kernel picks (default: 16).
    #[arg(long, value_name = "N")]
    pub source_addresses: Option<u32>,
    /// QUIC initial RTT estimate in ms (default: quinn's, 333).
    #[arg(long)]
    pub quic_initial_rtt_ms: Option<u64>,
    /// SO_RCVBUF/SO_SNDBUF of QUIC sockets in bytes (default: the kernel's).
    #[arg(long)]
    pub udp_buffer_bytes: Option<usize>,
    /// QUIC connection receive window in bytes (default: quinn's).
    #[arg(long)]
    pub quic_receive_window: Option<u64>,
    /// Resource sampling interval in ms (default: 100).
    #[arg(long)]
    pub sample_interval_ms: Option<u64>,
    /// Results root; each run writes a new directory below it (default: results).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Certificate directory (default: certs/ of this checkout).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Measure an already running `runner serve` at this loopback address instead of starting
    /// a server per cell (one stack; for comparisons with other load tools) (default: none).
    #[arg(long)]
    pub target: Option<std::net::SocketAddr>,
    /// The pid of the --target server, so its RSS and CPU are sampled (default: not sampled).
    #[arg(long, requires = "target")]
    pub target_pid: Option<u32>,
    /// Exit 0 even when a threshold of the experiment failed (default: exit 99); the results
    /// and thresholds.csv are written either way.
    #[arg(long)]
    pub no_thresholds_exit: bool,
}

impl RunArgs {
    /// These flags, each one not given taken from `other` (flags after a subcommand over those
    /// before it).
    pub fn or(self, other: RunArgs) -> RunArgs {
        RunArgs {
            resume: self.resume.or(other.resume),
            experiment: self.experiment.or(other.experiment),
            name: self.name.or(other.name),
            regime: self.regime.or(other.regime),
            stacks: self.stacks.or(other.stacks),
            concurrency: self.concurrency.or(other.concurrency),
            requests: self.requests.or(other.requests),
            repetitions: self.repetitions.or(other.repetitions),
            timeout: self.timeout.or(other.timeout),
            payload: self.payload.or(other.payload),
            plaintext: self.plaintext || other.plaintext,
            handshake: self.handshake.or(other.handshake),
            connections: self.connections.or(other.connections),
            warmup_fraction: self.warmup_fraction.or(other.warmup_fraction),
            baseline_seconds: self.baseline_seconds.or(other.baseline_seconds),
            rate: self.rate.or(other.rate),
            pacing: self.pacing.or(other.pacing),
            server_fault: self.server_fault.or(other.server_fault),
            service_time: self.service_time.or(other.service_time),
            service_time_seed: self.service_time_seed.or(other.service_time_seed),
            service_cpu_us: self.service_cpu_us.or(other.service_cpu_us),
            max_cell_seconds: self.max_cell_seconds.or(other.max_cell_seconds),
            min_cell_seconds: self.min_cell_seconds.or(other.min_cell_seconds),
            duration: self.duration.or(other.duration),
            client_nofile: self.client_nofile.or(other.client_nofile),
            server_threads: self.server_threads.or(other.server_threads),
            client_threads: self.client_threads.or(other.client_threads),
            pin: self.pin || other.pin,
            busy_poll: self.busy_poll || other.busy_poll,
            backlog: self.backlog.or(other.backlog),
            netem: self.netem.or(other.netem),
            port_range: self.port_range.or(other.port_range),
            tcp_tw_reuse: self.tcp_tw_reuse.or(other.tcp_tw_reuse),
            somaxconn: self.somaxconn.or(other.somaxconn),
            linger_zero: self.linger_zero || other.linger_zero,
            source_addresses: self.source_addresses.or(other.source_addresses),
            quic_initial_rtt_ms: self.quic_initial_rtt_ms.or(other.quic_initial_rtt_ms),
            udp_buffer_bytes: self.udp_buffer_bytes.or(other.udp_buffer_bytes),
            quic_receive_window: self.quic_receive_window.or(other.quic_receive_window),
            sample_interval_ms: self.sample_interval_ms.or(other.sample_interval_ms),
            out: self.out.or(other.out),
            certs: self.certs.or(other.certs),
            target: self.target.or(other.target),
            target_pid: self.target_pid.or(other.target_pid),
            no_thresholds_exit: self.no_thresholds_exit || other.no_thresholds_exit,
        }
    }

    /// The flag that set the experiment key `key`, if one was given: a validation error about
    /// that key is then about the flag, not the file.
    pub fn flag_for(&self, key: &str) -> Option<&'static str> {
        let (flag, given) = match key {
            "name" => ("--name", self.name.is_some()),
            "regimes" => ("--regime", self.regime.is_some()),
            "stacks" => ("--stacks", self.stacks.is_some()),
            "concurrency" => ("--concurrency", self.concurrency.is_some()),
            "requests_reuse" | "requests_new_conn" => ("--requests", self.requests.is_some()),
            "repetitions" => ("--repetitions", self.repetitions.is_some()),
            "request_timeout_ms" | "connect_timeout_ms" | "handshake_timeout_ms" => {
                ("--timeout", self.timeout.is_some())
            }
            "payload" => ("--payload", self.payload.is_some()),
            "plaintext" => ("--plaintext", self.plaintext),
            "handshake" => ("--handshake", self.handshake.is_some()),
            "connections" => ("--connections", self.connections.is_some()),
            "warmup_fraction" => ("--warmup-fraction", self.warmup_fraction.is_some()),
            "baseline_seconds" => ("--baseline-seconds", self.baseline_seconds.is_some()),
            "rate" => ("--rate", self.rate.is_some()),
            "pacing" => ("--pacing", self.pacing.is_some()),
            "server_fault" => ("--server-fault", self.server_fault.is_some()),
            "max_cell_seconds" => ("--max-cell-seconds", self.max_cell_seconds.is_some()),
            "min_cell_seconds" => ("--min-cell-seconds", self.min_cell_seconds.is_some()),
            "duration_seconds" => ("--duration", self.duration.is_some()),
            "client_nofile" => ("--client-nofile", self.client_nofile.is_some()),
            "server_threads" => ("--server-threads", self.server_threads.is_some()),
            "client_threads" => ("--client-threads", self.client_threads.is_some()),
            "pin" => ("--pin", self.pin),
            "busy_poll" => ("--busy-poll", self.busy_poll),
            "backlog" => ("--backlog", self.backlog.is_some()),
            "service_time" => ("--service-time", self.service_time.is_some()),
            "service_time_seed" => ("--service-time-seed", self.service_time_seed.is_some()),
            "service_cpu_us" => ("--service-cpu-us", self.service_cpu_us.is_some()),
            "netem" => ("--netem", self.netem.is_some()),
            "port_range" => ("--port-range", self.port_range.is_some()),
            "tcp_tw_reuse" => ("--tcp-tw-reuse", self.tcp_tw_reuse.is_some()),
            "somaxconn" => ("--somaxconn", self.somaxconn.is_some()),
            "linger_zero" => ("--linger-zero", self.linger_zero),
            "source_addresses" => ("--source-addresses", self.source_addresses.is_some()),
            "quic_initial_rtt_ms" => ("--quic-initial-rtt-ms", self.quic_initial_rtt_ms.is_some()),
            "udp_buffer_bytes" => ("--udp-buffer-bytes", self.udp_buffer_bytes.is_some()),
            "quic_receive_window" => ("--quic-receive-window", self.quic_receive_window.is_some()),
            "sample_interval_ms" => ("--sample-interval-ms", self.sample_interval_ms.is_some()),
            "out" => ("--out", self.out.is_some()),
            _ => return None,
        };
        given.then_some(flag)
    }

    /// The experiment: file (or defaults), then flags on top.
    pub fn experiment(&self) -> Result<Experiment, String> {
        let mut e = match &self.experiment {
            Some(path) => Experiment::from_file(path)?,
            None => Experiment::default(),
        };
        if let Some(v) = &self.name {
            e.name = v.clone();
        }
        if let Some(r) = self.regime {
            e.regimes = match r {
                RegimeArg::Reuse => vec![Regime::Reuse],
                RegimeArg::NewConn => vec![Regime::NewConn],
                RegimeArg::Both => vec![Regime::Reuse, Regime::NewConn],
            };
            if self.name.is_none() && self.experiment.is_none() {
                e.name = match r {
                    RegimeArg::Reuse => "reuse".into(),
                    RegimeArg::NewConn => "new-conn".into(),
                    RegimeArg::Both => e.name,
                };
            }
        }
        if let Some(v) = &self.stacks {
            e.stacks = v.iter().map(|s| s.trim().to_string()).collect();
        }
        if let Some(v) = &self.concurrency {
            e.concurrency = v.clone();
        }
        if let Some(n) = self.requests {
            e.requests_reuse = n;
            e.requests_new_conn = n;
        }
        if let Some(n) = self.repetitions {
            e.repetitions = n;
        }
        if let Some(t) = self.timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!(
                    "--timeout: {t} is not a positive number of seconds"
                ));
            }
            let ms = (t * 1000.0).round().max(1.0) as u64;
            e.request_timeout_ms = ms;
            e.connect_timeout_ms = ms;
            e.handshake_timeout_ms = ms;
        }
        if let Some(p) = self.payload {
            e.payload = p;
        }
        if self.plaintext {
            e.plaintext = true;
        }
        if let Some(h) = self.handshake {
            e.handshake = match h {
                HandshakeArg::Full => HandshakeVariant::Full,
                HandshakeArg::Resumed => HandshakeVariant::Resumed,
                HandshakeArg::ZeroRtt => HandshakeVariant::ZeroRtt,
            };
        }
        if let Some(n) = self.connections {
            e.connections = n;
        }
        if let Some(f) = self.warmup_fraction {
            e.warmup_fraction = f;
        }
        if let Some(n) = self.baseline_seconds {
            e.baseline_seconds = n;
        }
        if let Some(r) = self.rate {
            e.rate = Some(r);
        }
        if let Some(p) = self.pacing {
            e.pacing = p;
        }
        if let Some(f) = &self.server_fault {
            e.server_fault = Some(f.clone());
        }
        if let Some(t) = &self.service_time {
            e.service_time = Some(t.clone());
        }
        if let Some(seed) = self.service_time_seed {
            e.service_time_seed = seed;
        }
        if let Some(us) = self.service_cpu_us {
            e.service_cpu_us = us;
        }
        if let Some(d) = self.duration {
            e.duration_seconds = Some(d);
        }
        if let Some(n) = self.client_nofile {
            e.client_nofile = Some(n);
        }
        if let Some(n) = self.max_cell_seconds {
            e.max_cell_seconds = n;
        }
        if let Some(s) = self.min_cell_seconds {
            e.min_cell_seconds = s;
        }
        if let Some(n) = self.server_threads {
            e.server_threads = n;
        }
        if let Some(n) = self.client_threads {
            e.client_threads = n;
        }
        if self.pin {
            e.pin = true;
        }
        if self.busy_poll {
            e.busy_poll = true;
        }
        if let Some(n) = self.backlog {
            e.backlog = n;
        }
        if let Some(v) = &self.netem {
            e.netem = Some(v.clone());
        }
        if let Some(v) = &self.port_range {
            e.port_range = Some(v.clone());
        }
        if let Some(v) = self.tcp_tw_reuse {
            e.tcp_tw_reuse = Some(v);
        }
        if let Some(v) = self.somaxconn {
            e.somaxconn = Some(v);
        }
        if self.linger_zero {
            e.linger_zero = true;
        }
        if let Some(v) = self.source_addresses {
            e.source_addresses = v;
        }
        if let Some(v) = self.quic_initial_rtt_ms {
            e.quic_initial_rtt_ms = Some(v);
        }
        if let Some(v) = self.udp_buffer_bytes {
            e.udp_buffer_bytes = Some(v);
        }
        if let Some(v) = self.quic_receive_window {
            e.quic_receive_window = Some(v);
        }
        if let Some(v) = self.sample_interval_ms {
            e.sample_interval_ms = v;
        }
        if let Some(o) = &self.out {
            e.out = o.clone();
        }
        Ok(e)
    }
}

/// `90`, `90s`, `10m` or `1h` → seconds.
fn parse_duration_s(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 90s, 10m or 1h"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("'{text}' is not a duration like 90s, 10m or 1h")),
    };
    Ok(n * factor)
}
