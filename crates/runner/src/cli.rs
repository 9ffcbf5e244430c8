//! Command-line flags. Every run flag overrides the same key of the experiment file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use experiment::settings::{Experiment, Knobs};

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

// Parsed once per process: the serve options' size (its transport tuning) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve one stack until SIGINT/SIGTERM; prints one JSON ready line.
    Serve(executors::serve::ServeOptions),
    /// Write RESULTS_DIR/report.html: one self-contained page in the shape of seed 000's report.
    Report {
        /// A run's results directory (the one holding manifest.json and cells.csv).
        dir: PathBuf,
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
        /// What stdout gets: the terminal table, or a Markdown table for a pull-request
        /// comment (alone on stdout; the rest goes to stderr).
        #[arg(long, value_enum, default_value_t)]
        format: report::compare::Format,
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
        /// Also send your service one real request per target, mix entry and gRPC call and
        /// apply that entry's checks, one line each (exit 2 when one fails).
        #[arg(long)]
        probe: bool,
        /// Run flags, accepted after the subcommand as well as before it.
        #[command(flatten)]
        run: Box<RunArgs>,
    },
    /// Find, per stack and regime (and level), the highest open-loop rate at which an SLO
    /// holds: a ladder from --start-rps, then bisection, the passing end confirmed, within a
    /// budget; probes are cells of one results directory and the result is in summary.json
    /// (docs/capacity.md).
    Capacity {
        #[command(flatten)]
        search: CapacityArgs,
        /// Run flags (stacks, regime, concurrency, targets, …), accepted after the subcommand
        /// as well as before it.
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
    /// Internal: starts a proxy of a mesh path and stops it when the runner's end of stdin
    /// closes, however the runner ended (docs/mesh.md).
    #[command(hide = true)]
    ProxyGuard {
        /// The proxy's private directory, removed with it.
        #[arg(long)]
        dir: PathBuf,
        /// The proxy's command line.
        #[arg(last = true, required = true)]
        command: Vec<String>,
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

/// The SLO, bounds, probe rule and budget of `runner capacity` (docs/capacity.md).
#[derive(Args, Debug, Clone, PartialEq)]
pub struct CapacityArgs {
    /// SLO: the largest latency p99 in ms (from each request's scheduled start).
    #[arg(long, value_name = "MS")]
    pub slo_p99_ms: f64,
    /// SLO: the smallest share of successful requests, in %.
    #[arg(long, value_name = "PCT", default_value_t = 99.9)]
    pub slo_success_pct: f64,
    /// SLO (optional): the largest pacing-lag p99 in µs, so that a probe the load generator
    /// could not pace fails as the instrument's (default: not in the SLO; 1000 µs still marks
    /// the instrument).
    #[arg(long, value_name = "US")]
    pub slo_pacing_lag_p99_us: Option<u64>,
    /// The ladder's first rate, req/s.
    #[arg(long, value_name = "RPS", default_value_t = 1000.0)]
    pub start_rps: f64,
    /// The highest rate probed, req/s.
    #[arg(long, value_name = "RPS", default_value_t = 200_000.0)]
    pub ceiling_rps: f64,
    /// The ladder's step: each rate this many times the last.
    #[arg(long, default_value_t = 2.0)]
    pub factor: f64,
    /// Bisection stops when the failing rate is within this % above the passing one.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub resolution_pct: f64,
    /// Probes at the passing end, the first included; most of them must meet the SLO (a
    /// rate's verdict is the majority of its probes, docs/capacity.md).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub confirmations: u32,
    /// Probe length: at least this many requests above the p99, i.e. N / (1 − 0.99) requests.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub tail_samples: u64,
    /// Probe length: at least this many seconds of the schedule (rate × seconds requests).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub probe_seconds: f64,
    /// The whole search starts no probe that would take its requests (warm-up included) past
    /// this.
    #[arg(long, value_name = "N", default_value_t = 20_000_000)]
    pub budget_requests: u64,
    /// The whole search starts no probe after this many seconds, and bounds each probe by what
    /// is left.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800.0)]
    pub budget_seconds: f64,
}

impl CapacityArgs {
    /// The settings as recorded, or the first bad flag in one line.
    pub fn settings(&self) -> Result<crate::output::capacity::Settings, String> {
        let positive = |flag: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{flag}: {v} is not a positive number"))
            }
        };
        positive("--slo-p99-ms", self.slo_p99_ms)?;
        positive("--start-rps", self.start_rps)?;
        positive("--ceiling-rps", self.ceiling_rps)?;
        positive("--resolution-pct", self.resolution_pct)?;
        positive("--budget-seconds", self.budget_seconds)?;
        if !(0.0..=100.0).contains(&self.slo_success_pct) {
            return Err(format!(
                "--slo-success-pct: {} is not a percentage",
                self.slo_success_pct
            ));
        }
        if self.ceiling_rps < self.start_rps {
            return Err("--ceiling-rps: below --start-rps".into());
        }
        if !(self.factor.is_finite() && self.factor > 1.0) {
            return Err(format!("--factor: {} is not a number above 1", self.factor));
        }
        if self.confirmations == 0 || self.tail_samples == 0 || self.budget_requests == 0 {
            return Err(
                "--confirmations, --tail-samples and --budget-requests must be at least 1".into(),
            );
        }
        if !(self.probe_seconds.is_finite() && self.probe_seconds >= 0.0) {
            return Err(format!(
                "--probe-seconds: {} is not ≥ 0",
                self.probe_seconds
            ));
        }
        Ok(crate::output::capacity::Settings {
            start_rps: self.start_rps,
            ceiling_rps: self.ceiling_rps,
            factor: self.factor,
            resolution_pct: self.resolution_pct,
            confirmations: self.confirmations,
            tail_samples: self.tail_samples,
            probe_seconds: self.probe_seconds,
            budget_requests: self.budget_requests,
            budget_seconds: self.budget_seconds,
        })
    }

    pub fn slo(&self) -> crate::output::capacity::Slo {
        crate::output::capacity::Slo {
            latency_p99_max_ms: self.slo_p99_ms,
            success_min_pct: self.slo_success_pct,
            pacing_lag_p99_max_us: self.slo_pacing_lag_p99_us,
        }
    }
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
    /// Go on measuring when a cell's first requests all fail alike, to study the failure
    /// (sets stop_after_identical_failures = 0).
    #[arg(long)]
    pub keep_going: bool,
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
    /// Your REST service's HTTP method: sets targets.rest.method (default: GET).
    #[arg(short = 'm', long, value_name = "METHOD")]
    pub method: Option<String>,
    /// Your REST service's request body, a template as in the file (targets.rest.body), or
    /// `@FILE` for a file's bytes as they are (targets.rest.body_file) (default: none).
    #[arg(short = 'd', long, value_name = "BODY|@FILE")]
    pub body: Option<String>,
    /// A request header `NAME: VALUE` (repeat for several; templates as in the file, e.g.
    /// `Authorization: Bearer {{env.TOKEN}}`): adds to targets.rest.headers, and to
    /// targets.grpc.metadata when there is a gRPC target (default: none).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// A header (or gRPC metadata) name whose values are secrets, besides Authorization,
    /// Proxy-Authorization, Cookie and names with token, key, secret, password or auth:
    /// their literal values never reach results, manifests or logs (repeat for several;
    /// adds to targets.secret_headers) (default: none).
    #[arg(long = "secret-header", value_name = "NAME")]
    pub secret_headers: Vec<String>,
    /// Record request bodies (--body, --grpc-request and the file's bodies and requests) as
    /// written in manifest.json and its command line, which makes the run resumable; without
    /// it only each body's size and SHA-256 prefix are recorded, since a body can hold a
    /// password or a token (sets targets.record_bodies) (default: off).
    #[arg(long)]
    pub record_bodies: bool,
    /// The CA (PEM) your service's certificate is verified against, instead of the system
    /// trust store (SSL_CERT_FILE or SSL_CERT_DIR when set): sets targets.*.ca.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// The name verified in your service's certificate and sent as SNI, when not the URL's
    /// host: sets targets.*.server_name.
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Accept any certificate from your service (the handshake's signature is still checked):
    /// for a first look only. Every output of the run says so and `study paper` refuses it
    /// (sets targets.*.insecure).
    #[arg(long)]
    pub insecure: bool,
    /// With --url or --grpc and no experiment file: the study's full sweep instead of the
    /// short first look.
    #[arg(long)]
    pub full_sweep: bool,
    /// Start a run of more than 10,000 requests to a service that is not on loopback without
    /// asking (default: ask on a terminal, refuse otherwise).
    #[arg(long)]
    pub yes: bool,
    /// Exit 0 even when a threshold of the experiment failed (default: exit 99); the results
    /// and thresholds.csv are written either way.
    #[arg(long)]
    pub no_thresholds_exit: bool,
    /// Measure your service without first sending it one real request per target, mix entry
    /// and gRPC call and applying that entry's checks (default: probe, and refuse the run,
    /// exit 2, when a probe's request fails).
    #[arg(long)]
    pub no_probe: bool,
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
            keep_going: self.keep_going || other.keep_going,
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
            method: self.method.or(other.method),
            body: self.body.or(other.body),
            headers: if self.headers.is_empty() {
                other.headers
            } else {
                self.headers
            },
            secret_headers: if self.secret_headers.is_empty() {
                other.secret_headers
            } else {
                self.secret_headers
            },
            ca: self.ca.or(other.ca),
            server_name: self.server_name.or(other.server_name),
            insecure: self.insecure || other.insecure,
            full_sweep: self.full_sweep || other.full_sweep,
            yes: self.yes || other.yes,
            no_thresholds_exit: self.no_thresholds_exit || other.no_thresholds_exit,
            no_probe: self.no_probe || other.no_probe,
            record_bodies: self.record_bodies || other.record_bodies,
        }
    }

    /// The flag that set the experiment key `key`, if one was given: a validation error about
    /// that key is then about the flag, not the file.
    pub fn flag_for(&self, key: &str) -> Option<String> {
        let shorthand = match key {
            "requests_reuse" | "requests_new_conn" => self.requests.map(|_| "--requests"),
            k if k.ends_with("_timeout_ms") => self.timeout.map(|_| "--timeout"),
            "stop_after_identical_failures" if self.keep_going => Some("--keep-going"),
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
        if self.keep_going {
            knobs.stop_after_identical_failures.get_or_insert(0);
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
            .map(experiment::settings::file::read)
            .transpose()
    }

    /// A first look at your service: `--url` or `--grpc` without an experiment file (and
    /// without --full-sweep) runs [`first_look`]'s short sweep.
    pub fn is_first_look(&self) -> bool {
        self.experiment.is_none()
            && self.resume.is_none()
            && !self.full_sweep
            && (self.url.is_some() || self.grpc.is_some())
    }

    /// The resolved settings: defaults, then the file (or a first look's short sweep), then
    /// the flags (the target flags set parts of the file's targets, or make them).
    pub fn experiment(&self) -> Result<Experiment, String> {
        let file = self.file()?;
        let first_look = self.is_first_look().then(|| {
            let mut knobs = first_look();
            // A request budget given on the command line makes budgeted cells, not timed ones.
            let budget = self.requests.is_some()
                || self.knobs.requests_reuse.is_some()
                || self.knobs.requests_new_conn.is_some();
            if budget {
                knobs.duration_seconds = None;
            }
            knobs
        });
        let base = file.as_ref().map(|(_, k)| k).or(first_look.as_ref());
        let mut exp = experiment::settings::resolve(base, &self.layer()?);
        self.apply_targets(&mut exp.targets)?;
        let stacks_given =
            self.knobs.stacks.is_some() || file.as_ref().is_some_and(|(_, k)| k.stacks.is_some());
        if !stacks_given {
            experiment::settings::default_stacks_for_targets(&mut exp);
        }
        // Your service's cells last a time by default (as k6's stages do): a request budget
        // that ends in a fraction of a second measures start-up more than the service.
        let sizes = |k: &Knobs| {
            k.requests_reuse.is_some()
                || k.requests_new_conn.is_some()
                || k.duration_seconds.is_some()
        };
        let sized = self.requests.is_some()
            || sizes(&self.knobs)
            || file.as_ref().is_some_and(|(_, k)| sizes(k))
            || first_look.is_some()
            || self.full_sweep;
        if !exp.targets.is_empty() && !sized {
            if exp.variants.is_empty() {
                exp.duration_seconds = Some(TARGETS_CELL_SECONDS);
            }
            // A variant that sizes its cells (a request budget) keeps them; the others last
            // the default time.
            for variant in exp.variants.iter_mut().filter(|v| !sizes(v)) {
                variant.duration_seconds = Some(TARGETS_CELL_SECONDS);
            }
        }
        Ok(exp)
    }

    /// Lays `--url`, the request flags, the TLS flags and the `--grpc*` flags over `targets`.
    fn apply_targets(&self, targets: &mut bench_core::user_service::Targets) -> Result<(), String> {
        use bench_core::user_service::RestTarget;
        if let Some(url) = &self.url {
            match &mut targets.rest {
                Some(rest) => rest.url = url.clone(),
                None => targets.rest = Some(RestTarget::at(url)),
            }
        }
        self.apply_grpc(targets)?;
        targets
            .secret_headers
            .extend(self.secret_headers.iter().cloned());
        targets.record_bodies |= self.record_bodies;
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        if self.method.is_some() || self.body.is_some() {
            let Some(rest) = targets.rest.as_mut() else {
                let flag = if self.method.is_some() {
                    "--method"
                } else {
                    "--body"
                };
                return Err(format!(
                    "{flag}: your REST service has no URL: give --url (or [targets.rest] in an experiment file)"
                ));
            };
            if let Some(method) = &self.method {
                rest.method = method.to_ascii_uppercase();
            }
            match self.body.as_deref().map(|b| b.strip_prefix('@').ok_or(b)) {
                Some(Ok(file)) => {
                    rest.body_file = Some(PathBuf::from(file));
                    rest.body = None;
                }
                Some(Err(template)) => {
                    rest.body = Some(template.to_string());
                    rest.body_file = None;
                }
                None => {}
            }
        }
        let tls_given = self.ca.is_some() || self.server_name.is_some() || self.insecure;
        if (tls_given || !headers.is_empty()) && targets.is_empty() {
            let flag = match () {
                _ if self.ca.is_some() => "--ca",
                _ if self.server_name.is_some() => "--server-name",
                _ if self.insecure => "--insecure",
                _ => "--header",
            };
            return Err(format!(
                "{flag} is about your service: give --url or --grpc (or [targets] in an experiment file)"
            ));
        }
        if let Some(rest) = targets.rest.as_mut() {
            rest.headers.extend(headers.iter().cloned());
            if let Some(ca) = &self.ca {
                rest.ca = Some(ca.clone());
            }
            if let Some(name) = &self.server_name {
                rest.server_name = Some(name.clone());
            }
            rest.insecure |= self.insecure;
        }
        if let Some(grpc) = targets.grpc.as_mut() {
            // gRPC metadata keys are lower case.
            grpc.metadata.extend(
                headers
                    .iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.clone())),
            );
            if let Some(ca) = &self.ca {
                grpc.ca = Some(ca.clone());
            }
            if let Some(name) = &self.server_name {
                grpc.server_name = Some(name.clone());
            }
            grpc.insecure |= self.insecure;
        }
        Ok(())
    }

    /// Lays the `--grpc*` flags over `targets`.
    fn apply_grpc(&self, targets: &mut bench_core::user_service::Targets) -> Result<(), String> {
        use bench_core::user_service::GrpcTarget;
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

/// `NAME: VALUE` of `--header`.
fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() && !name.trim().contains(' ') => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        // The text is not echoed: it may be a credential without its name.
        _ => Err(
            "--header: expected NAME: VALUE, e.g. -H 'Authorization: Bearer {{env.TOKEN}}'"
                .to_string(),
        ),
    }
}

/// The command line as a run records it (`manifest.json`'s `argv`): the literal value of a
/// secret header given with `-H`/`--header` replaced by `<redacted>`
/// ([`bench_core::user_service::secrets`]), and every URL without userinfo or credential
/// query values. A placeholder such as `{{env.TOKEN}}` is kept: it holds no secret.
/// `secret_headers` are the names the run marks secret besides `--secret-header` (the
/// experiment file's `targets.secret_headers`). A request body (`-d`/`--body`,
/// `--grpc-request`) is recorded as its size and hash ([`secrets::body`]) unless
/// `record_bodies` (the file's `targets.record_bodies` or `--record-bodies`); `--body @FILE`
/// names a file and is kept.
pub fn argv_for_record(
    argv: &[String],
    secret_headers: &[String],
    record_bodies: bool,
) -> Vec<String> {
    use bench_core::user_service::secrets;
    let mut marked = secret_headers.to_vec();
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--secret-header" {
            marked.extend(args.next().cloned());
        } else if let Some(name) = arg.strip_prefix("--secret-header=") {
            marked.push(name.to_string());
        }
    }
    let record_bodies = record_bodies || argv.iter().any(|a| a == "--record-bodies");
    let body = |text: &str| -> String {
        if record_bodies || text.starts_with('@') {
            text.to_string()
        } else {
            secrets::body(text)
        }
    };
    let mut out = Vec::with_capacity(argv.len());
    let mut header_next = false;
    let mut body_next = false;
    for arg in argv {
        let recorded = if std::mem::take(&mut header_next) {
            secrets::header_line(arg, &marked)
        } else if std::mem::take(&mut body_next) {
            body(arg)
        } else if arg == "-H" || arg == "--header" {
            header_next = true;
            arg.clone()
        } else if arg == "-d" || arg == "--body" || arg == "--grpc-request" {
            body_next = true;
            arg.clone()
        } else if let Some((flag, text)) = ["--body=", "--grpc-request=", "-d="]
            .iter()
            .find_map(|f| arg.strip_prefix(f).map(|t| (f, t)))
        {
            format!("{flag}{}", body(text))
        } else if let Some(text) = arg.strip_prefix("-d").filter(|t| !t.is_empty()) {
            format!("-d{}", body(text))
        } else if let Some(line) = arg.strip_prefix("--header=") {
            format!("--header={}", secrets::header_line(line, &marked))
        } else if let Some(line) = arg.strip_prefix("-H=") {
            format!("-H={}", secrets::header_line(line, &marked))
        } else if let Some(line) = arg.strip_prefix("-H").filter(|l| !l.is_empty()) {
            format!("-H{}", secrets::header_line(line, &marked))
        } else {
            secrets::url(arg)
        };
        out.push(recorded);
    }
    out
}

/// The short sweep of a first look at your service (`--url` or `--grpc`, no experiment
/// file): a few concurrency levels, a few seconds per cell, no baseline, one repetition;
/// flags still override it. The study's sweep plans hundreds of thousands of requests.
pub fn first_look() -> Knobs {
    Knobs {
        concurrency: Some(FIRST_LOOK_CONCURRENCY.to_vec()),
        duration_seconds: Some(FIRST_LOOK_CELL_SECONDS),
        baseline_seconds: Some(0),
        repetitions: Some(1),
        name: Some("first-look".into()),
        ..Knobs::default()
    }
}

/// Concurrency levels of a first look.
pub const FIRST_LOOK_CONCURRENCY: [u32; 3] = [1, 10, 50];
/// Seconds each cell of a first look measures.
pub const FIRST_LOOK_CELL_SECONDS: u64 = 2;

/// Seconds per cell of a run against your service (`[targets]`) that gives neither a request
/// budget nor a duration: long enough that repetitions agree, short enough for a sweep.
pub const TARGETS_CELL_SECONDS: u64 = 10;

/// The line a first look opens with: what it runs, and how to run the full sweep.
pub fn first_look_banner() -> String {
    format!(
        "first look: a short sweep (concurrency {}, {FIRST_LOOK_CELL_SECONDS} s per cell, no baseline, one repetition); for the study's full sweep add --full-sweep, or choose your own with --concurrency, --requests, --duration or an experiment file (--experiment)",
        FIRST_LOOK_CONCURRENCY.map(|c| c.to_string()).join(", ")
    )
}

/// The command line with each knob's default (from [`Experiment::default`]) appended to its
/// help, so that the default is stated once, where it is defined.
pub fn command() -> clap::Command {
    let cmd = with_defaults(<Cli as clap::CommandFactory>::command())
        .after_help(format!("Exit status:\n{}", results::exit::Status::table()));
    cmd.mut_subcommand("check", with_defaults)
        .mut_subcommand("capacity", with_defaults)
}

/// `cmd` with each knob's help followed by its default.
fn with_defaults(mut cmd: clap::Command) -> clap::Command {
    let defaults = serde_json::to_value(Experiment::default()).expect("settings serialize");
    for key in experiment::settings::KEYS {
        let Some(value) = defaults
            .get(*key)
            .and_then(experiment::settings::value_text)
        else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    #[test]
    fn a_recorded_command_line_holds_no_secret() {
        let argv: Vec<String> = [
            "runner",
            "--url",
            "https://alice:pw-S3CRET@localhost:8443/items/{{id}}?access_token=q-S3CRET",
            "-H",
            "Authorization: Bearer h-S3CRET",
            "-HCookie: c-S3CRET",
            "--header=Proxy-Authorization: Basic p-S3CRET",
            "--header",
            "X-Tenant: t-S3CRET",
            "--secret-header",
            "x-tenant",
            "-H",
            "Authorization: Bearer {{env.TOKEN}}",
            "-H",
            "Accept: application/json",
        ]
        .map(String::from)
        .to_vec();
        let recorded = argv_for_record(&argv, &[], false);
        assert_eq!(
            recorded.len(),
            argv.len(),
            "one recorded argument per argument"
        );
        assert!(
            recorded.iter().all(|a| !a.contains("S3CRET")),
            "{recorded:?}"
        );
        assert!(recorded.contains(&"Authorization: Bearer {{env.TOKEN}}".to_string()));
        assert!(recorded.contains(&"Accept: application/json".to_string()));
        assert!(recorded.contains(&"X-Tenant: <redacted>".to_string()));
        // The record still parses as the same command (a resume reads it).
        assert!(command().try_get_matches_from(&recorded).is_ok());
    }

    #[test]
    fn a_recorded_command_line_honours_the_files_secret_headers_and_every_header_form() {
        let argv: Vec<String> = [
            "runner",
            "--experiment",
            "exp.toml",
            "-H=X-Tenant: a-S3CRET",
            "--header=x-tenant: b-S3CRET",
            "-H",
            "X-Tenant: c-S3CRET",
            "-HX-Tenant: d-S3CRET",
            "-H=Authorization: e-S3CRET",
            "-H=Accept: text/plain",
        ]
        .map(String::from)
        .to_vec();
        let recorded = argv_for_record(&argv, &["X-TENANT".to_string()], false);
        assert!(
            recorded.iter().all(|a| !a.contains("S3CRET")),
            "{recorded:?}"
        );
        assert!(recorded.contains(&"-H=X-Tenant: <redacted>".to_string()));
        assert!(recorded.contains(&"-H=Authorization: <redacted>".to_string()));
        assert!(recorded.contains(&"-H=Accept: text/plain".to_string()));
        assert!(command().try_get_matches_from(&recorded).is_ok());
        // Without the file's names a marked header's value would be kept.
        let plain = argv_for_record(&argv, &[], false);
        assert!(plain.contains(&"-H=X-Tenant: a-S3CRET".to_string()));
    }

    #[test]
    fn a_recorded_command_line_holds_bodies_as_size_and_hash_unless_asked_for() {
        let argv: Vec<String> = [
            "runner",
            "--url",
            "https://localhost:8443/login",
            "-d",
            "{\"password\":\"a-S3CRET\"}",
            "-db-S3CRET",
            "--body=c-S3CRET",
            "--grpc-request",
            "{\"token\":\"d-S3CRET\"}",
            "--grpc-request={\"token\":\"e-S3CRET\"}",
            "--body",
            "@req.json",
        ]
        .map(String::from)
        .to_vec();
        let recorded = argv_for_record(&argv, &[], false);
        assert!(
            recorded.iter().all(|a| !a.contains("S3CRET")),
            "{recorded:?}"
        );
        use bench_core::user_service::secrets;
        assert!(recorded.contains(&secrets::body("{\"password\":\"a-S3CRET\"}")));
        assert!(recorded.contains(&format!("-d{}", secrets::body("b-S3CRET"))));
        assert!(recorded.contains(&format!("--body={}", secrets::body("c-S3CRET"))));
        assert!(
            recorded.contains(&"@req.json".to_string()),
            "a file's name is kept"
        );
        // A command that parses still parses once recorded (each flag given once here).
        let one: Vec<String> = ["runner", "--url", "https://h:1/x", "-d", "x-S3CRET"]
            .map(String::from)
            .to_vec();
        assert!(command()
            .try_get_matches_from(argv_for_record(&one, &[], false))
            .is_ok());
        // Asked for, in the file or by flag: kept as written.
        assert_eq!(argv_for_record(&argv, &[], true), argv);
        let mut flagged = argv.clone();
        flagged.push("--record-bodies".into());
        assert_eq!(argv_for_record(&flagged, &[], false), flagged);
    }

    fn args(argv: &[&str]) -> RunArgs {
        let matches = command()
            .try_get_matches_from(std::iter::once("runner").chain(argv.iter().copied()))
            .unwrap();
        Cli::from_arg_matches(&matches).unwrap().run
    }

    #[test]
    fn request_and_tls_flags_set_the_targets_keys() {
        let a = args(&[
            "--url",
            "https://h:1/x",
            "--grpc",
            "https://h:2",
            "--grpc-method",
            "p.S/M",
            "-m",
            "post",
            "-d",
            "{\"id\": {{id}}}",
            "-H",
            "Authorization: Bearer {{env.T}}",
            "-H",
            "X-Trace:1",
            "--ca",
            "ca.pem",
            "--server-name",
            "api",
            "--insecure",
        ]);
        let exp = a.experiment().unwrap();
        let rest = exp.targets.rest.as_ref().unwrap();
        assert_eq!(rest.method, "POST");
        assert_eq!(rest.body.as_deref(), Some("{\"id\": {{id}}}"));
        assert_eq!(rest.headers["Authorization"], "Bearer {{env.T}}");
        assert_eq!(rest.headers["X-Trace"], "1");
        let grpc = exp.targets.grpc.as_ref().unwrap();
        assert_eq!(grpc.metadata["authorization"], "Bearer {{env.T}}");
        for tls in [rest.tls(), grpc.tls()] {
            assert_eq!(tls.ca.as_deref(), Some(std::path::Path::new("ca.pem")));
            assert_eq!(tls.server_name.as_deref(), Some("api"));
            assert!(tls.insecure);
        }
        let file = args(&["--url", "https://h:1/x", "--body", "@req.json"])
            .experiment()
            .unwrap();
        let rest = file.targets.rest.unwrap();
        assert_eq!(
            rest.body_file.as_deref(),
            Some(std::path::Path::new("req.json"))
        );
        assert_eq!(rest.body, None);
    }

    #[test]
    fn flags_about_your_service_need_one() {
        for (argv, flag) in [
            (&["--ca", "x.pem"][..], "--ca"),
            (&["--insecure"][..], "--insecure"),
            (&["-H", "a: b"][..], "--header"),
            (&["-m", "POST"][..], "--method"),
        ] {
            let e = args(argv).experiment().unwrap_err();
            assert!(e.starts_with(flag), "{e}");
        }
        let e = args(&["--url", "https://h:1/", "-H", "no colon"])
            .experiment()
            .unwrap_err();
        assert!(e.contains("expected NAME: VALUE"), "{e}");
    }

    #[test]
    fn a_first_look_is_short_unless_told_otherwise() {
        let look = args(&["--url", "https://h:1/x"]);
        assert!(look.is_first_look());
        let exp = look.experiment().unwrap();
        assert_eq!(exp.concurrency, FIRST_LOOK_CONCURRENCY);
        assert_eq!(exp.duration_seconds, Some(FIRST_LOOK_CELL_SECONDS));
        assert_eq!((exp.baseline_seconds, exp.repetitions), (0, 1));
        // Flags still win; a request budget makes budgeted cells.
        let exp = args(&[
            "--url",
            "https://h:1/x",
            "--concurrency",
            "7",
            "--requests",
            "9",
        ])
        .experiment()
        .unwrap();
        assert_eq!(
            (exp.concurrency.as_slice(), exp.duration_seconds),
            (&[7][..], None)
        );
        let full = args(&["--url", "https://h:1/x", "--full-sweep"]);
        assert!(!full.is_first_look());
        assert_eq!(
            full.experiment().unwrap().concurrency,
            Experiment::default().concurrency
        );
    }

    #[test]
    fn a_service_run_lasts_a_time_per_cell_unless_sized() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("exp.toml");
        let with = |extra: &str| {
            std::fs::write(
                &file,
                format!("{extra}\n[targets.rest]\nurl = \"https://h:1/x\"\n"),
            )
            .unwrap();
            args(&["--experiment", file.to_str().unwrap()])
                .experiment()
                .unwrap()
                .duration_seconds
        };
        assert_eq!(with(""), Some(TARGETS_CELL_SECONDS));
        assert_eq!(with("requests_reuse = 300"), None);
        assert_eq!(with("duration_seconds = 4"), Some(4));
        // A variant's budget sizes that variant's cells; the others last the default time.
        std::fs::write(
            &file,
            "[targets.rest]\nurl = \"https://h:1/x\"\n[[variants]]\nname = \"budget\"\nrequests_reuse = 300\n[[variants]]\nname = \"plain\"\n",
        )
        .unwrap();
        let exp = args(&["--experiment", file.to_str().unwrap()])
            .experiment()
            .unwrap();
        let variants = exp.variant_experiments();
        assert_eq!(variants[0].0, "budget");
        assert_eq!(variants[0].1.duration_seconds, None);
        assert_eq!(variants[0].1.requests_reuse, 300);
        assert_eq!(variants[1].1.duration_seconds, Some(TARGETS_CELL_SECONDS));
        // Our own servers keep the study's request budgets.
        std::fs::write(&file, "stacks = [\"h1\"]\n").unwrap();
        let own = args(&["--experiment", file.to_str().unwrap()]);
        assert_eq!(own.experiment().unwrap().duration_seconds, None);
        let full = args(&["--url", "https://h:1/x", "--full-sweep"]);
        assert_eq!(full.experiment().unwrap().duration_seconds, None);
    }
}
