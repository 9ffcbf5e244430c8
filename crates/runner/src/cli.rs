//! Command-line flags. Every run flag overrides the same key of the experiment file.

use std::net::SocketAddr;
use std::path::PathBuf;

use bench_core::{FaultSpec, HandshakeVariant, PayloadProfile};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::experiment::{Experiment, Regime};

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
    Report { dir: PathBuf },
    /// Write OUT/reproduction.md from a reference run of the default sweep and claim runs.
    Paper {
        /// Results directory of the default sweep.
        #[arg(long)]
        reference: PathBuf,
        /// Results directories of the experiments in experiments/claims/.
        #[arg(long, num_args = 0..)]
        claims: Vec<PathBuf>,
        #[arg(long, default_value = "paper")]
        out: PathBuf,
    },
    /// Validate an experiment file (and flags) without running anything.
    Check { file: PathBuf },
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
    #[arg(long)]
    pub stack: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    #[arg(long)]
    pub plaintext: bool,
    #[arg(long, default_value = "small")]
    pub payload: PayloadProfile,
    /// Server runtime worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    #[arg(long, default_value_t = 4096)]
    pub backlog: u32,
    /// Test-only fault: status | bad-body | missing-field | delay-<N>ms, with optional :<fraction>.
    #[arg(long)]
    pub fault: Option<FaultSpec>,
    /// Certificate directory (created on first use).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Pin the server to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Transport knobs as JSON, e.g. '{"quic_initial_rtt_ms":100,"udp_buffer_bytes":4194304}'.
    #[arg(long, value_parser = parse_tuning)]
    pub tuning: Option<bench_core::Tuning>,
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
    /// Experiment file (TOML); flags override its keys.
    #[arg(long)]
    pub experiment: Option<PathBuf>,
    #[arg(long)]
    pub name: Option<String>,
    /// reuse, new-conn or both (default both).
    #[arg(long, value_enum)]
    pub regime: Option<RegimeArg>,
    /// Comma-separated stacks: h1,h2,h3,grpc.
    #[arg(long, value_delimiter = ',')]
    pub stacks: Option<Vec<String>>,
    /// Comma-separated concurrency levels (workers).
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Option<Vec<u32>>,
    /// Measured requests per cell, for every regime.
    #[arg(long)]
    pub requests: Option<u64>,
    #[arg(long)]
    pub repetitions: Option<u32>,
    /// Request timeout in seconds (also used for connect and handshake unless set in the file).
    #[arg(long)]
    pub timeout: Option<f64>,
    #[arg(long)]
    pub payload: Option<PayloadProfile>,
    #[arg(long)]
    pub plaintext: bool,
    #[arg(long, value_enum)]
    pub handshake: Option<HandshakeArg>,
    /// Reuse regime: connections shared by all workers (0 = one per worker).
    #[arg(long)]
    pub connections: Option<u32>,
    #[arg(long)]
    pub warmup_fraction: Option<f64>,
    /// Single-user baseline per stack and regime, in seconds (0 = none).
    #[arg(long)]
    pub baseline_seconds: Option<u64>,
    /// Open loop: requests per second on a fixed schedule (default: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Test-only: fault the servers inject, e.g. delay-50ms or stall-300ms:0.005.
    #[arg(long)]
    pub server_fault: Option<String>,
    #[arg(long)]
    pub max_cell_seconds: Option<u64>,
    /// Soak: every stress cell runs this long (e.g. 90s, 10m, 1h) instead of a request count.
    #[arg(long, value_parser = parse_duration_s)]
    pub duration: Option<u64>,
    /// Lower the runner's open-file soft limit to N (exhaustion studies; servers are not
    /// affected).
    #[arg(long)]
    pub client_nofile: Option<u64>,
    #[arg(long)]
    pub server_threads: Option<u32>,
    #[arg(long)]
    pub client_threads: Option<u32>,
    /// Pin the server to core 0 and the runner to core 1.
    #[arg(long)]
    pub pin: bool,
    /// The load generator polls for I/O instead of sleeping (use with pinned runs; README
    /// "Fairness").
    #[arg(long)]
    pub busy_poll: bool,
    #[arg(long)]
    pub backlog: Option<u32>,
    /// Results root; each run writes a new directory below it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Certificate directory (default: certs/ of this checkout).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Measure an already running `runner serve` at this loopback address instead of starting
    /// a server per cell (one stack; for comparisons with other load tools).
    #[arg(long)]
    pub target: Option<std::net::SocketAddr>,
    /// The pid of the --target server, so its RSS and CPU are sampled.
    #[arg(long, requires = "target")]
    pub target_pid: Option<u32>,
}

impl RunArgs {
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
        if let Some(f) = &self.server_fault {
            e.server_fault = Some(f.clone());
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
