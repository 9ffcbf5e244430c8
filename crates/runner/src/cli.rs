//! Command-line flags. Every run flag overrides the same key of the experiment file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::{Experiment, Knobs};

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
    Serve(crate::exec::serve::ServeOptions),
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
        /// `breakdown.csv` of scripts/quic-breakdown: adds the section on where QUIC's
        /// instructions go (per request, by group, both sides, both regimes).
        #[arg(long)]
        breakdown: Option<PathBuf>,
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
    /// Add up results directories of one experiment run separately (e.g. one per load-generator
    /// host) into a new results directory: histograms (.hlog) added exactly, counts summed.
    /// Exit 2 when the inputs are not results of the same experiment.
    Merge {
        /// Results directories (two or more) of the same experiment.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The new results directory (must not exist, or be empty).
        #[arg(long)]
        out: PathBuf,
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
    /// Internal: the registered stacks (name, label, encoding, ALPN) as the manifest lists
    /// them, so scripts (compare-anchors) learn the stacks from the runner, not from a list.
    #[command(hide = true)]
    Stacks {
        /// One JSON array (the only format; the flag keeps the output's form explicit).
        #[arg(long, required = true)]
        json: bool,
    },
    /// Run cells' load for a runner on another host: listens for the runner over TLS (the
    /// suite's certificate, or --cert/--key) and refuses anyone without the shared token
    /// (TBENCH_AGENT_TOKEN or --token-file; never on the command line).
    Agent {
        /// Address to listen on (default: loopback only; give another address to be reached
        /// from other hosts).
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: std::net::SocketAddr,
        /// Certificate directory (default: certs/ in the current directory).
        #[arg(long)]
        certs: Option<PathBuf>,
        /// The agent's certificate chain (PEM), with --key (default: the suite's certificate
        /// for `localhost`).
        #[arg(long, requires = "key")]
        cert: Option<PathBuf>,
        #[arg(long, requires = "cert")]
        key: Option<PathBuf>,
        /// File holding the shared token (default: the TBENCH_AGENT_TOKEN variable).
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
    /// Kubernetes: the manifests the runner would create (see docs/hosts-and-kubernetes.md).
    K8s {
        #[command(subcommand)]
        command: K8sCommand,
    },
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

/// `runner k8s …`.
#[derive(Subcommand, Debug)]
pub enum K8sCommand {
    /// Print the manifests for the experiment's first cell as one YAML stream (the
    /// namespace, the runner's ServiceAccount, Role and RoleBinding, the server pod and its
    /// Service, the agents' Indexed Job and their Service), or write one file per object to
    /// --out DIR. Secrets are referenced, never printed.
    Render {
        /// The experiment file (TOML); run flags given before `k8s` override its keys (e.g.
        /// `runner --k8s-agents 5 k8s render x.toml`).
        experiment: PathBuf,
        /// Directory that receives one YAML file per object (default: print to stdout).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// The flags of a run: every knob of the settings model ([`Knobs`], flattened: one flag per
/// TOML key), two shorthands that set several knobs, and what is not a setting of the
/// experiment (where to read and write, what to measure).
#[derive(Args, Debug, Default, Clone, PartialEq)]
pub struct RunArgs {
    /// Finish an interrupted run: only its missing cells, with its own settings, appended to
    /// its files.
    #[arg(long, value_name = "RESULTS_DIR")]
    pub resume: Option<PathBuf>,
    /// Experiment file (TOML); flags override its keys, also inside its variants (default:
    /// none, the study's numbers).
    #[arg(long)]
    pub experiment: Option<PathBuf>,
    #[command(flatten)]
    pub knobs: Knobs,
    /// Measured requests per cell, for every regime (sets requests_reuse and
    /// requests_new_conn).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Request, connect and handshake timeout in seconds (sets the three *_timeout_ms).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Certificate directory (default: certs/ in the current directory).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Measure an already running `runner serve` at this loopback address instead of starting
    /// a server per cell (one stack; for comparisons with other load tools) (default: none).
    #[arg(long)]
    pub target: Option<std::net::SocketAddr>,
    /// The pid of the server measured (--target, or your service of [targets] when it runs on
    /// this machine), so its RSS and CPU are sampled (default: not sampled).
    #[arg(long)]
    pub target_pid: Option<u32>,
    /// Your REST service: sets targets.rest.url (`https://host:port/path/{{id}}`; `http://` is
    /// plaintext) (default: none).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Your gRPC service: sets targets.grpc.address (`https://host:port`; `http://` is h2c)
    /// (default: none).
    #[arg(long, value_name = "ADDRESS")]
    pub grpc: Option<String>,
    /// Sets targets.grpc.method (`package.Service/Method`) (default: none).
    #[arg(long, value_name = "PKG.SERVICE/METHOD")]
    pub grpc_method: Option<String>,
    /// Sets targets.grpc.proto: the .proto files describing the method (repeat for several)
    /// (default: none).
    #[arg(long, value_name = "FILE")]
    pub proto: Vec<PathBuf>,
    /// Sets targets.grpc.reflection: ask the server for the descriptors (default: off).
    #[arg(long)]
    pub reflection: bool,
    /// Sets targets.grpc.request: the request message as a JSON template (default: `{}`).
    #[arg(long, value_name = "JSON")]
    pub grpc_request: Option<String>,
    /// Start a run of more than 10,000 requests to a service that is not on loopback without
    /// asking (default: ask on a terminal, refuse otherwise).
    #[arg(long)]
    pub yes: bool,
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
            knobs: self.knobs.or(other.knobs),
            requests: self.requests.or(other.requests),
            timeout: self.timeout.or(other.timeout),
            certs: self.certs.or(other.certs),
            target: self.target.or(other.target),
            target_pid: self.target_pid.or(other.target_pid),
            url: self.url.or(other.url),
            grpc: self.grpc.or(other.grpc),
            grpc_method: self.grpc_method.or(other.grpc_method),
            proto: if self.proto.is_empty() {
                other.proto
            } else {
                self.proto
            },
            reflection: self.reflection || other.reflection,
            grpc_request: self.grpc_request.or(other.grpc_request),
            yes: self.yes || other.yes,
            no_thresholds_exit: self.no_thresholds_exit || other.no_thresholds_exit,
        }
    }

    /// The flag that set the experiment key `key`, if one was given: a validation error about
    /// that key is then about the flag, not the file.
    pub fn flag_for(&self, key: &str) -> Option<String> {
        let shorthand = match key {
            "requests_reuse" | "requests_new_conn" => self.requests.map(|_| "--requests"),
            k if k.ends_with("_timeout_ms") => self.timeout.map(|_| "--timeout"),
            _ => None,
        };
        if let Some(flag) = shorthand {
            return Some(flag.to_string());
        }
        if !self.knobs.keys_set().contains(&key) {
            return None;
        }
        let cmd = <Knobs as Args>::augment_args(clap::Command::new("runner"));
        let arg = cmd.get_arguments().find(|a| a.get_id() == key)?;
        Some(format!("--{}", arg.get_long()?))
    }

    /// The flags as one settings layer: the knobs, with the shorthands expanded.
    pub fn layer(&self) -> Result<Knobs, String> {
        let mut knobs = self.knobs.clone();
        if let Some(n) = self.requests {
            knobs.requests_reuse.get_or_insert(n);
            knobs.requests_new_conn.get_or_insert(n);
        }
        if let Some(t) = self.timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!(
                    "--timeout: {t} is not a positive number of seconds"
                ));
            }
            let ms = (t * 1000.0).round().max(1.0) as u64;
            knobs.request_timeout_ms.get_or_insert(ms);
            knobs.connect_timeout_ms.get_or_insert(ms);
            knobs.handshake_timeout_ms.get_or_insert(ms);
        }
        // Without a file or a name, a one-regime run is named after its regime.
        if let (None, None, Some([regime])) =
            (&self.experiment, &knobs.name, knobs.regimes.as_deref())
        {
            knobs.name = Some(regime.to_string());
        }
        Ok(knobs)
    }

    /// The experiment file (if any) as text and layer.
    pub fn file(&self) -> Result<Option<(String, Knobs)>, String> {
        self.experiment
            .as_deref()
            .map(crate::settings::file::read)
            .transpose()
    }

    /// The resolved settings: defaults, then the file, then the flags (the target flags set
    /// parts of the file's targets, or make them).
    pub fn experiment(&self) -> Result<Experiment, String> {
        let file = self.file()?;
        let mut exp = crate::settings::resolve(file.as_ref().map(|(_, k)| k), &self.layer()?);
        self.apply_targets(&mut exp.targets)?;
        let stacks_given =
            self.knobs.stacks.is_some() || file.as_ref().is_some_and(|(_, k)| k.stacks.is_some());
        if !stacks_given {
            crate::settings::default_stacks_for_targets(&mut exp);
        }
        Ok(exp)
    }

    /// Lays `--url` and the `--grpc*` flags over `targets`.
    fn apply_targets(&self, targets: &mut bench_core::user_service::Targets) -> Result<(), String> {
        use bench_core::user_service::{GrpcTarget, RestTarget};
        if let Some(url) = &self.url {
            match &mut targets.rest {
                Some(rest) => rest.url = url.clone(),
                None => targets.rest = Some(RestTarget::at(url)),
            }
        }
        let any_grpc = self.grpc.is_some()
            || self.grpc_method.is_some()
            || !self.proto.is_empty()
            || self.reflection
            || self.grpc_request.is_some();
        if !any_grpc {
            return Ok(());
        }
        let grpc = match (&mut targets.grpc, &self.grpc, &self.grpc_method) {
            (Some(grpc), _, _) => grpc,
            (None, Some(address), Some(method)) => {
                targets.grpc.insert(GrpcTarget::at(address, method))
            }
            (None, _, _) => {
                return Err("--grpc and --grpc-method go together (or complete a [targets.grpc] of the experiment file)".into())
            }
        };
        if let Some(address) = &self.grpc {
            grpc.address = address.clone();
        }
        if let Some(method) = &self.grpc_method {
            grpc.method = method.clone();
        }
        if !self.proto.is_empty() {
            grpc.proto = self.proto.clone();
            grpc.reflection = false;
        }
        if self.reflection {
            grpc.reflection = true;
            grpc.proto.clear();
        }
        if let Some(request) = &self.grpc_request {
            grpc.request = request.clone();
        }
        Ok(())
    }
}

/// The command line with each knob's default (from [`Experiment::default`]) appended to its
/// help, so that the default is stated once, where it is defined.
pub fn command() -> clap::Command {
    let cmd = with_defaults(<Cli as clap::CommandFactory>::command());
    cmd.mut_subcommand("check", with_defaults)
}

/// `cmd` with each knob's help followed by its default.
fn with_defaults(mut cmd: clap::Command) -> clap::Command {
    let defaults = serde_json::to_value(Experiment::default()).expect("settings serialize");
    for key in crate::settings::KEYS {
        let Some(value) = defaults.get(*key).and_then(crate::settings::value_text) else {
            continue;
        };
        cmd = cmd.mut_arg(*key, |a| {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            a.help(format!("{help} (default: {value})"))
        });
    }
    cmd
}

/// Parses the command line (with [`command`]'s help).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}
