//! One experiment: every knob of a run, from defaults (the study's numbers), an optional TOML
//! file and flags, validated before any socket or file is opened.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use bench_core::{HandshakeVariant, PayloadProfile};
use serde::{Deserialize, Serialize};

/// When a worker opens connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Regime {
    /// One connection per worker (or `connections` shared ones), reused for every request.
    Reuse,
    /// A new connection with a full handshake for every request, closed after it.
    NewConn,
}

impl Regime {
    pub fn as_str(self) -> &'static str {
        match self {
            Regime::Reuse => "reuse",
            Regime::NewConn => "new-conn",
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Regime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reuse" => Ok(Regime::Reuse),
            "new-conn" => Ok(Regime::NewConn),
            other => Err(format!(
                "unknown regime '{other}', expected reuse or new-conn"
            )),
        }
    }
}

/// Every knob of a run. Field names are the TOML keys; README documents each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Experiment {
    pub name: String,
    pub stacks: Vec<String>,
    pub regimes: Vec<Regime>,
    pub concurrency: Vec<u32>,
    pub repetitions: u32,
    /// Measured requests per cell in the reuse regime (study: 50,000).
    pub requests_reuse: u64,
    /// Measured requests per cell in the new-conn regime (study: 5,000).
    pub requests_new_conn: u64,
    /// Unrecorded warm-up requests before each cell, as a fraction of its measured requests.
    pub warmup_fraction: f64,
    /// Single-user baseline per stack and regime: one worker for this many seconds (0 = none).
    pub baseline_seconds: u64,
    /// Open loop: requests per second on a fixed arrival schedule, latency from each request's
    /// scheduled start (no coordinated omission). `None` = closed loop (the study's mode).
    pub rate: Option<f64>,
    /// Open loop: how workers wait for a request's due time (README "Open loop").
    pub pacing: crate::exec::load::Pacing,
    /// Test-only: a fault the servers inject (`status`, `bad-body`, `missing-field`,
    /// `delay-<N>ms`, `stall-<N>ms`, each with optional `:<fraction>`).
    pub server_fault: Option<String>,
    /// Server processing time of each item request: `fixed:<D>` or `exp:<mean>` (D like `2ms`,
    /// `500us`), a wait during which the server serves other requests; `None` = answer at once.
    pub service_time: Option<String>,
    /// Seed of the `exp:` draws; request i's time depends only on the seed and i.
    pub service_time_seed: u64,
    /// Busy CPU work per item request on the server's handler thread, in µs (0 = none).
    pub service_cpu_us: u64,
    pub payload: PayloadProfile,
    pub plaintext: bool,
    pub handshake: HandshakeVariant,
    /// Reuse regime only: connections shared by all workers; 0 = one per worker.
    pub connections: u32,
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub handshake_timeout_ms: u64,
    /// Hard bound on one cell's measured phase; workers stop when it passes.
    pub max_cell_seconds: u64,
    /// Lower bound on a stress cell's measured phase: a cell that finishes its request budget
    /// sooner keeps sending until this much time has passed (`extended` in cells.csv), so
    /// that sub-second cells do not decide a comparison. 0 = the budget alone.
    pub min_cell_seconds: f64,
    /// Soak: stress cells run this long instead of for a request count.
    pub duration_seconds: Option<u64>,
    /// The runner's open-file soft limit (`None` = inherited).
    pub client_nofile: Option<u64>,
    pub sample_interval_ms: u64,
    pub server_threads: u32,
    /// Client runtime threads; 0 = one per core the runner may use.
    pub client_threads: u32,
    /// Pin the server to core 0 and the runner to core 1.
    pub pin: bool,
    /// The load generator polls for I/O instead of sleeping while it measures. On loopback
    /// the kernel wakes a sleeping client on the server's CPU, so a client faster than the
    /// server makes the server pay for waking it; polling removes that single-machine
    /// artefact, and the client's CPU figure then counts the polling. For pinned runs only.
    pub busy_poll: bool,
    pub backlog: u32,
    pub out: PathBuf,
    /// Network emulation on the loopback of a private network namespace, e.g.
    /// `rtt=40ms,jitter=2ms,loss=0.5%,rate=100mbit` (`delay=` is the one-way qdisc delay).
    pub netem: Option<String>,
    /// `net.ipv4.ip_local_port_range` inside the private namespace, e.g. `"40000 40999"`.
    pub port_range: Option<String>,
    /// `net.ipv4.tcp_tw_reuse` inside the private namespace (0, 1 or 2).
    pub tcp_tw_reuse: Option<u8>,
    /// `net.core.somaxconn` inside the private namespace.
    pub somaxconn: Option<u32>,
    pub quic_initial_rtt_ms: Option<u64>,
    pub udp_buffer_bytes: Option<usize>,
    pub quic_receive_window: Option<u64>,
    /// TCP clients close with SO_LINGER 0 (RST, no TIME_WAIT) instead of a FIN.
    pub linger_zero: bool,
    /// Local source addresses the clients' connections take in turn (127.0.0.1, 127.0.0.2, …
    /// for the loopback server), so that one address's ≈ 28k ephemeral ports are not the first
    /// limit of new-conn or many-connection cells; 1 = the kernel picks (one address), which a
    /// port-budget experiment wants.
    pub source_addresses: u32,
    /// Conditions to compare: each variant overrides some knobs and runs the whole plan.
    pub variants: Vec<Variant>,
    /// Pass/fail criteria over cells.csv columns (`[[thresholds]]`); every variant's cells
    /// are checked unless a threshold's `variants` selects.
    pub thresholds: Vec<crate::output::thresholds::Threshold>,
}

/// A knob that failed validation: its key, the variant it failed in, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub variant: Option<String>,
    pub key: String,
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = &self.variant {
            write!(f, "variant '{v}': ")?;
        }
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The 1-based line of an experiment file's TOML `text` that sets `key`: inside the
/// `[[variants]]` table named `variant` when given and it sets the key there, else at the top
/// level. `None` when no line sets it (a default, or a form this textual search misses).
pub fn key_line(text: &str, variant: Option<&str>, key: &str) -> Option<usize> {
    /// One TOML table: its header's line (0 for the top level), the variant it names (`None`
    /// for the top level) and its `(line number, trimmed line)`s.
    struct Table<'a> {
        header: usize,
        name: Option<String>,
        lines: Vec<(usize, &'a str)>,
    }
    impl Table<'_> {
        fn sets(&self, key: &str) -> Option<usize> {
            self.lines.iter().find_map(|(n, l)| {
                let (k, _) = l.split_once('=')?;
                (k.trim().trim_matches('"') == key).then_some(*n)
            })
        }
    }
    let mut tables = vec![Table {
        header: 0,
        name: None,
        lines: Vec::new(),
    }];
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !trimmed.contains('=') {
            tables.push(Table {
                header: i + 1,
                name: Some(String::new()),
                lines: Vec::new(),
            });
            continue;
        }
        let table = tables.last_mut().expect("top level");
        table.lines.push((i + 1, trimmed));
        if let (Some(name), Some((k, v))) = (&mut table.name, trimmed.split_once('=')) {
            if k.trim() == "name" {
                let quoted = v.trim().trim_start_matches(['"', '\'']);
                *name = quoted.split(['"', '\'']).next().unwrap_or("").to_string();
            }
        }
    }
    let named = |v| tables.iter().filter(move |t| t.name.as_deref() == Some(v));
    if key == "variants" {
        return match variant {
            Some(v) => named(v).next().map(|t: &Table| t.header),
            None => tables
                .iter()
                .find(|t| t.name.is_some())
                .map(|t| t.header)
                .or_else(|| tables[0].sets(key)),
        };
    }
    variant
        .and_then(|v| named(v).find_map(|t| t.sets(key)))
        .or_else(|| tables[0].sets(key))
}

/// A named set of knob overrides; every cell of the plan runs once per variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub stacks: Option<Vec<String>>,
    pub regimes: Option<Vec<Regime>>,
    pub concurrency: Option<Vec<u32>>,
    pub connections: Option<u32>,
    pub payload: Option<PayloadProfile>,
    pub handshake: Option<HandshakeVariant>,
    pub netem: Option<String>,
    pub port_range: Option<String>,
    pub tcp_tw_reuse: Option<u8>,
    pub somaxconn: Option<u32>,
    pub backlog: Option<u32>,
    pub client_nofile: Option<u64>,
    pub request_timeout_ms: Option<u64>,
    pub connect_timeout_ms: Option<u64>,
    pub handshake_timeout_ms: Option<u64>,
    pub quic_initial_rtt_ms: Option<u64>,
    pub udp_buffer_bytes: Option<usize>,
    pub quic_receive_window: Option<u64>,
    pub linger_zero: Option<bool>,
    pub source_addresses: Option<u32>,
    pub server_threads: Option<u32>,
    pub client_threads: Option<u32>,
    pub busy_poll: Option<bool>,
    pub service_time: Option<String>,
    pub service_time_seed: Option<u64>,
    pub service_cpu_us: Option<u64>,
}

/// The emulated network of a cell, parsed from `netem`.
#[derive(Debug, Clone, PartialEq)]
pub struct Netem {
    /// One-way qdisc delay on loopback; a round trip crosses it twice.
    pub delay_ms: f64,
    pub jitter_ms: f64,
    pub loss_pct: f64,
    pub rate: Option<String>,
}

impl Netem {
    pub fn parse(text: &str) -> Result<Netem, String> {
        let mut netem = Netem {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss_pct: 0.0,
            rate: None,
        };
        let ms = |v: &str| -> Result<f64, String> {
            let n = v
                .strip_suffix("ms")
                .ok_or_else(|| format!("'{v}' needs a unit of ms"))?;
            n.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0)
                .ok_or_else(|| format!("'{v}' is not a duration in ms"))
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not key=value"))?;
            match key {
                "delay" => netem.delay_ms = ms(value)?,
                "rtt" => netem.delay_ms = ms(value)? / 2.0,
                "jitter" => netem.jitter_ms = ms(value)?,
                "loss" => {
                    let pct = value
                        .strip_suffix('%')
                        .ok_or_else(|| format!("loss '{value}' needs a %"))?;
                    netem.loss_pct = pct
                        .parse::<f64>()
                        .ok()
                        .filter(|p| (0.0..=100.0).contains(p))
                        .ok_or_else(|| format!("loss '{value}' is not a percentage"))?;
                }
                "rate" => {
                    let ok = value
                        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                        .parse::<f64>()
                        .is_ok()
                        && ["kbit", "mbit", "gbit"].iter().any(|u| value.ends_with(u));
                    if !ok {
                        return Err(format!("rate '{value}' must look like 100mbit"));
                    }
                    netem.rate = Some(value.to_string());
                }
                other => {
                    return Err(format!(
                        "unknown netem key '{other}', expected delay, rtt, jitter, loss or rate"
                    ))
                }
            }
        }
        Ok(netem)
    }
}

impl Default for Experiment {
    fn default() -> Self {
        Experiment {
            name: "default".into(),
            stacks: crate::registry::names()
                .iter()
                .map(|s| s.to_string())
                .collect(),
            regimes: vec![Regime::Reuse, Regime::NewConn],
            concurrency: vec![10, 50, 100, 200, 500],
            repetitions: 1,
            requests_reuse: 50_000,
            requests_new_conn: 5_000,
            warmup_fraction: 0.05,
            baseline_seconds: 10,
            rate: None,
            pacing: crate::exec::load::Pacing::default(),
            server_fault: None,
            service_time: None,
            service_time_seed: bench_core::service::DEFAULT_SERVICE_TIME_SEED,
            service_cpu_us: 0,
            payload: PayloadProfile::Small,
            plaintext: false,
            handshake: HandshakeVariant::Full,
            connections: 0,
            request_timeout_ms: 10_000,
            connect_timeout_ms: 10_000,
            handshake_timeout_ms: 10_000,
            max_cell_seconds: 300,
            min_cell_seconds: 0.0,
            duration_seconds: None,
            client_nofile: None,
            sample_interval_ms: 100,
            server_threads: 2,
            client_threads: 0,
            pin: false,
            busy_poll: false,
            backlog: 4096,
            out: PathBuf::from("results"),
            netem: None,
            port_range: None,
            tcp_tw_reuse: None,
            somaxconn: None,
            quic_initial_rtt_ms: None,
            udp_buffer_bytes: None,
            quic_receive_window: None,
            linger_zero: false,
            source_addresses: 16,
            variants: Vec::new(),
            thresholds: Vec::new(),
        }
    }
}

impl Experiment {
    /// Whether cells need a private network namespace (emulation or namespace sysctls).
    pub fn needs_netns(&self) -> bool {
        self.netem.is_some()
            || self.port_range.is_some()
            || self.tcp_tw_reuse.is_some()
            || self.somaxconn.is_some()
    }

    /// The transport knobs the stacks apply.
    pub fn tuning(&self) -> bench_core::Tuning {
        bench_core::Tuning {
            quic_initial_rtt_ms: self.quic_initial_rtt_ms,
            udp_buffer_bytes: self.udp_buffer_bytes,
            quic_receive_window: self.quic_receive_window,
            linger_zero: self.linger_zero,
            source_addresses: self.source_addresses,
            no_session_tickets: false,
        }
    }

    /// What each item request costs the servers (validated knobs).
    pub fn service(&self) -> bench_core::ServiceSpec {
        bench_core::ServiceSpec {
            time: self
                .service_time
                .as_deref()
                .map(|t| t.parse().expect("validated service_time")),
            seed: self.service_time_seed,
            cpu: std::time::Duration::from_micros(self.service_cpu_us),
        }
    }

    /// One experiment per variant (the knobs overridden), or just this one, named `default`.
    pub fn variant_experiments(&self) -> Vec<(String, Experiment)> {
        if self.variants.is_empty() {
            return vec![("default".into(), self.clone())];
        }
        self.variants
            .iter()
            .map(|v| {
                let mut e = Experiment { variants: Vec::new(), ..self.clone() };
                macro_rules! over {
                    ($($f:ident),*) => { $( if let Some(x) = &v.$f { e.$f = x.clone().into(); } )* };
                }
                over!(stacks, regimes, concurrency, connections, payload, handshake, backlog, request_timeout_ms, connect_timeout_ms, handshake_timeout_ms, linger_zero, source_addresses, server_threads, client_threads, busy_poll, service_time_seed, service_cpu_us);
                macro_rules! over_opt {
                    ($($f:ident),*) => { $( if v.$f.is_some() { e.$f = v.$f.clone(); } )* };
                }
                over_opt!(netem, port_range, tcp_tw_reuse, somaxconn, client_nofile, quic_initial_rtt_ms, udp_buffer_bytes, quic_receive_window, service_time);
                (v.name.clone(), e)
            })
            .collect()
    }

    /// Reads an experiment file; errors name the file, and for TOML the key, line and column.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read experiment file: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            let message = e.message().replace('\n', " ");
            let Some(span) = e.span() else {
                return format!("{}: {message}", path.display());
            };
            let before = &text[..span.start.min(text.len())];
            let line_no = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let column = before.len() - line_start + 1;
            // Name the key whose value is wrong (serde's message names only the type).
            let line = text[line_start..].lines().next().unwrap_or("");
            let key = line
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| !k.is_empty() && !message.contains(&format!("`{k}`")));
            match key {
                Some(key) => format!("{}:{line_no}:{column}: {key}: {message}", path.display()),
                None => format!("{}:{line_no}:{column}: {message}", path.display()),
            }
        })
    }

    /// Measured requests per cell for a regime.
    pub fn requests(&self, regime: Regime) -> u64 {
        match regime {
            Regime::Reuse => self.requests_reuse,
            Regime::NewConn => self.requests_new_conn,
        }
    }

    pub fn warmup_requests(&self, regime: Regime) -> u64 {
        (self.requests(regime) as f64 * self.warmup_fraction).round() as u64
    }

    /// Checks every knob against what the runner can do; one clear line per problem, naming
    /// the experiment (callers that know the file use [`Experiment::check`] to name it).
    pub fn validate(&self, known_stacks: &[&str]) -> Result<(), String> {
        self.check(known_stacks)
            .map_err(|e| format!("experiment '{}': {e}", self.name))
    }

    /// [`Experiment::validate`] with the key (and variant) at fault kept apart, so that the
    /// caller can point at the file line or flag that set it.
    pub fn check(&self, known_stacks: &[&str]) -> Result<(), Invalid> {
        let fail = |key: &str, message: String| {
            Err(Invalid {
                variant: None,
                key: key.to_string(),
                message,
            })
        };
        if self.name.trim().is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return fail(
                "name",
                "must be non-empty and use only letters, digits, '-', '_', '.'".into(),
            );
        }
        if self.stacks.is_empty() {
            return fail("stacks", "must name at least one stack".into());
        }
        for (i, s) in self.stacks.iter().enumerate() {
            if !known_stacks.contains(&s.as_str()) {
                return fail(
                    "stacks",
                    format!(
                        "unknown stack '{s}' (expected one of {})",
                        known_stacks.join(", ")
                    ),
                );
            }
            if self.stacks[..i].contains(s) {
                return fail("stacks", format!("'{s}' is listed twice"));
            }
        }
        if self.regimes.is_empty() {
            return fail("regimes", "must name at least one regime".into());
        }
        if self.concurrency.is_empty() {
            return fail("concurrency", "must list at least one level".into());
        }
        for (i, c) in self.concurrency.iter().enumerate() {
            if *c == 0 || *c > 100_000 {
                return fail("concurrency", format!("{c} is outside 1..=100000"));
            }
            if self.concurrency[..i].contains(c) {
                return fail("concurrency", format!("{c} is listed twice"));
            }
        }
        if self.repetitions == 0 {
            return fail("repetitions", "must be at least 1".into());
        }
        for regime in &self.regimes {
            if self.requests(*regime) == 0 {
                let key = match regime {
                    Regime::Reuse => "requests_reuse",
                    Regime::NewConn => "requests_new_conn",
                };
                return fail(key, "must be at least 1".into());
            }
        }
        if !(0.0..=1.0).contains(&self.warmup_fraction) {
            return fail(
                "warmup_fraction",
                format!("{} is outside 0..1", self.warmup_fraction),
            );
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return fail(
                    "rate",
                    format!("{rate} is not a positive number of requests per second"),
                );
            }
        }
        if let Some(fault) = &self.server_fault {
            if let Err(e) = fault.parse::<bench_core::FaultSpec>() {
                return fail("server_fault", e.to_string());
            }
        }
        if let Some(time) = &self.service_time {
            if let Err(e) = time.parse::<bench_core::ServiceTime>() {
                return fail("service_time", e);
            }
        }
        let max_service_us = bench_core::service::MAX_SERVICE.as_micros() as u64;
        if self.service_cpu_us > max_service_us {
            return fail(
                "service_cpu_us",
                format!(
                    "{} is more than {max_service_us} (60 s)",
                    self.service_cpu_us
                ),
            );
        }
        if self.baseline_seconds > 3600 {
            return fail("baseline_seconds", "must be at most 3600".into());
        }
        for (key, ms) in [
            ("request_timeout_ms", self.request_timeout_ms),
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("sample_interval_ms", self.sample_interval_ms),
        ] {
            if ms == 0 {
                return fail(key, "must be at least 1 ms".into());
            }
        }
        if self.duration_seconds == Some(0) {
            return fail("duration_seconds", "must be at least 1".into());
        }
        if self.client_nofile.is_some_and(|n| n < 16) {
            return fail(
                "client_nofile",
                "must be at least 16 (the runner needs a few files itself)".into(),
            );
        }
        if self.max_cell_seconds == 0 {
            return fail("max_cell_seconds", "must be at least 1".into());
        }
        if !(self.min_cell_seconds.is_finite()
            && self.min_cell_seconds >= 0.0
            && self.min_cell_seconds <= self.max_cell_seconds as f64)
        {
            return fail(
                "min_cell_seconds",
                format!(
                    "must be between 0 and max_cell_seconds ({}), got {}",
                    self.max_cell_seconds, self.min_cell_seconds
                ),
            );
        }
        if self.server_threads == 0 {
            return fail("server_threads", "must be at least 1".into());
        }
        if self.backlog == 0 {
            return fail("backlog", "must be at least 1".into());
        }
        if self.connections > 0 && !self.regimes.contains(&Regime::Reuse) {
            return fail("connections", "only applies to the reuse regime".into());
        }
        let lacking = |has: fn(&dyn bench_core::Stack) -> bool| -> Vec<String> {
            self.stacks
                .iter()
                .filter(|s| crate::registry::find(s).is_some_and(|stack| !has(stack)))
                .cloned()
                .collect()
        };
        if self.plaintext {
            let tls_only = lacking(|s| s.supports_plaintext());
            if !tls_only.is_empty() {
                return fail(
                    "plaintext",
                    format!(
                        "{} have no plaintext form; remove them from stacks",
                        tls_only.join(", ")
                    ),
                );
            }
            if self.handshake != HandshakeVariant::Full {
                return fail(
                    "handshake",
                    "resumption needs TLS; plaintext has no handshake".into(),
                );
            }
        }
        if self.handshake == HandshakeVariant::ZeroRtt {
            let without = lacking(|s| s.supports_zero_rtt());
            if !without.is_empty() {
                return fail(
                    "handshake",
                    format!("zero-rtt is not offered by {}", without.join(", ")),
                );
            }
        }
        if let Some(netem) = &self.netem {
            if let Err(e) = Netem::parse(netem) {
                return fail("netem", e);
            }
        }
        if let Some(range) = &self.port_range {
            let ports: Vec<u32> = range
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if ports.len() != 2 || ports[0] == 0 || ports[0] > ports[1] || ports[1] > 65535 {
                return fail(
                    "port_range",
                    format!("'{range}' must be two ports 'low high' with low <= high"),
                );
            }
        }
        if self.tcp_tw_reuse.is_some_and(|v| v > 2) {
            return fail("tcp_tw_reuse", "must be 0, 1 or 2".into());
        }
        if self.somaxconn == Some(0) {
            return fail("somaxconn", "must be at least 1".into());
        }
        if self.udp_buffer_bytes.is_some_and(|b| b < 1024) {
            return fail("udp_buffer_bytes", "must be at least 1024".into());
        }
        if !(1..=bench_core::source::MAX_SOURCE_ADDRESSES).contains(&self.source_addresses) {
            return fail(
                "source_addresses",
                format!(
                    "must be 1 (the kernel picks) to {} (all of 127/8)",
                    bench_core::source::MAX_SOURCE_ADDRESSES
                ),
            );
        }
        if self.quic_initial_rtt_ms == Some(0) {
            return fail("quic_initial_rtt_ms", "must be at least 1".into());
        }
        if self.quic_receive_window.is_some_and(|w| w < 1024) {
            return fail("quic_receive_window", "must be at least 1024".into());
        }
        let mut names = Vec::new();
        for v in &self.variants {
            if v.name.is_empty()
                || !v
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return fail("variants", format!("variant name '{}' must be non-empty and use only letters, digits, '-', '_', '.'", v.name));
            }
            if names.contains(&&v.name) {
                return fail("variants", format!("variant '{}' is listed twice", v.name));
            }
            names.push(&v.name);
        }
        if !self.variants.is_empty() {
            for (name, e) in self.variant_experiments() {
                e.check(known_stacks).map_err(|invalid| Invalid {
                    variant: Some(name.clone()),
                    ..invalid
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STACKS: [&str; 4] = ["h1", "h2", "h3", "grpc"];

    #[test]
    fn defaults_are_the_study_and_valid() {
        let e = Experiment::default();
        e.validate(&STACKS).unwrap();
        assert_eq!(e.requests(Regime::Reuse), 50_000);
        assert_eq!(e.requests(Regime::NewConn), 5_000);
        assert_eq!(e.concurrency, vec![10, 50, 100, 200, 500]);
    }

    #[test]
    fn key_line_finds_the_top_level_or_the_variant_that_sets_a_key() {
        let text = "stacks = [\"h1\"]\nplaintext = true\n\n[[variants]]\nname = \"a\" # first\nstacks = [\"h3\"]\n\n[[variants]]\nname = 'b'\n";
        assert_eq!(key_line(text, None, "stacks"), Some(1));
        assert_eq!(key_line(text, Some("a"), "stacks"), Some(6));
        // Variant b inherits stacks and plaintext from the top level.
        assert_eq!(key_line(text, Some("b"), "stacks"), Some(1));
        assert_eq!(key_line(text, Some("a"), "plaintext"), Some(2));
        assert_eq!(key_line(text, Some("b"), "variants"), Some(8));
        assert_eq!(key_line(text, None, "concurrency"), None);
    }

    #[test]
    fn file_errors_name_file_key_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, "name = \"x\"\nconcurency = [1]\n").unwrap();
        let err = Experiment::from_file(&p).unwrap_err();
        assert!(err.contains("bad.toml:2:1"), "{err}");
        assert!(err.contains("concurency"), "{err}");
        std::fs::write(&p, "repetitions = \"three\"\n").unwrap();
        let err = Experiment::from_file(&p).unwrap_err();
        assert!(err.contains(":1:15"), "{err}");
    }
}
