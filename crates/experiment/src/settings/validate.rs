//! Validation of resolved settings: one clear line per problem, naming the key (and variant)
//! so that the caller can point at the flag or the file line that set it.

use bench_core::{HandshakeVariant, PayloadProfile};

use super::knobs::Experiment;
use super::mesh::{carries, MeshPath};
use super::origin::ServerKind;
use super::types::{
    CellOrder, Executor, HostNamespaces, MAX_HOST_AGENTS, MAX_K8S_AGENTS, MAX_NAME_BYTES,
};
use bench_core::user_service::Api;
use load::Regime;

/// Messages one streaming call of our workload may stream (`stream_messages`).
const MAX_STREAM_MESSAGES: u32 = 100_000;
/// The largest upload of one client-streaming call of our workload.
const MAX_UPLOAD_BYTES: u64 = 64 << 20;

impl Experiment {
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
            || self.name.len() > MAX_NAME_BYTES
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return fail(
                "name",
                format!(
                    "must be 1 to {} characters (it names the results folder), letters, digits, '-', '_', '.'",
                    MAX_NAME_BYTES
                ),
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
        if self.cell_order == CellOrder::Fixed && self.cell_order_seed.is_some() {
            return fail(
                "cell_order_seed",
                "orders cells only with cell_order = \"random\": drop the seed or the fixed order"
                    .into(),
            );
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
        if let Some(rates) = &self.rates {
            if let Err(e) = rates.parsed() {
                return fail("rates", e.to_string());
            }
            if self.rate.is_some() {
                return fail(
                    "rates",
                    "a rate sweep sets each cell's rate: give rates or rate, not both".into(),
                );
            }
        }
        if let Some(Err(e)) = self.server_fault.as_ref().map(|f| f.parsed()) {
            return fail("server_fault", e.to_string());
        }
        if let Some(Err(e)) = self.service_time.as_ref().map(|t| t.parsed()) {
            return fail("service_time", e.to_string());
        }
        let max_service_us = bench_core::service_time::MAX_SERVICE.as_micros() as u64;
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
                .filter(|s| stacks::find(s).is_some_and(|stack| !has(stack)))
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
        if self.grpc_call.is_streaming() {
            let call = self.grpc_call;
            let without: Vec<String> = self
                .stacks
                .iter()
                .filter(|s| {
                    stacks::find(s).is_some_and(|stack| !stack.grpc_calls().contains(&call))
                })
                .cloned()
                .collect();
            if !without.is_empty() {
                let with: Vec<&str> = stacks::stacks()
                    .into_iter()
                    .filter(|stack| stack.grpc_calls().contains(&call))
                    .map(|stack| stack.name())
                    .collect();
                return fail(
                    "grpc_call",
                    format!(
                        "{call} is a gRPC method of the item service; {} make no gRPC calls (set stacks to {})",
                        without.join(", "),
                        with.join(", ")
                    ),
                );
            }
            if self.client == bench_core::ClientImplementation::Library {
                return fail(
                    "grpc_call",
                    format!("the library gRPC clients make unary calls only; {call} needs client = \"lean\""),
                );
            }
        }
        if self.stream_messages == 0 || self.stream_messages > MAX_STREAM_MESSAGES {
            return fail(
                "stream_messages",
                format!("must be 1 to 100,000, got {}", self.stream_messages),
            );
        }
        // An upload is built whole before it is sent, per worker: held to a size a load
        // generator can hold for each of its workers.
        let upload = u64::from(self.stream_messages) * self.payload.padding_bytes() as u64;
        if self.grpc_call == bench_core::GrpcCall::ClientStream && upload > MAX_UPLOAD_BYTES {
            return fail(
                "stream_messages",
                format!(
                    "a client-stream call of {} items of the {} payload uploads {} MiB, above {} MiB per call",
                    self.stream_messages,
                    self.payload,
                    upload >> 20,
                    MAX_UPLOAD_BYTES >> 20
                ),
            );
        }
        self.check_object()?;
        self.check_server()?;
        if let Some(Err(e)) = self.netem.as_ref().map(|n| n.parsed()) {
            return fail("netem", e.to_string());
        }
        if let Some(Err(e)) = self.port_range.as_ref().map(|r| r.parsed()) {
            return fail("port_range", e.to_string());
        }
        if self.tcp_tw_reuse.is_some_and(|v| v > 2) {
            return fail("tcp_tw_reuse", "must be 0, 1 or 2".into());
        }
        if let Some(cc) = &self.tcp_congestion {
            const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
            let available = std::fs::read_to_string(AVAILABLE).unwrap_or_default();
            if !available.split_whitespace().any(|a| a == cc) {
                return fail(
                    "tcp_congestion",
                    format!(
                        "'{cc}' is not in {AVAILABLE} ({}); load its module (modprobe tcp_{cc}) or pick one listed",
                        available.trim()
                    ),
                );
            }
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
        if self.response_head_max_bytes.is_some_and(|b| b < 64) {
            return fail(
                "response_head_max_bytes",
                "must be at least 64 (a status line and a header)".into(),
            );
        }
        if self.response_body_max_bytes.is_some_and(|b| b < 1024) {
            return fail("response_body_max_bytes", "must be at least 1024".into());
        }
        if self.grpc_max_receive_message_bytes == Some(0) {
            return fail(
                "grpc_max_receive_message_bytes",
                "must be at least 1".into(),
            );
        }
        if self.response_headers_max == Some(0) {
            return fail("response_headers_max", "must be at least 1".into());
        }
        if self.quic_initial_rtt_ms == Some(0) {
            return fail("quic_initial_rtt_ms", "must be at least 1".into());
        }
        if self
            .quic_server_endpoints
            .is_some_and(|n| !(1..=64).contains(&n))
        {
            return fail("quic_server_endpoints", "must be 1 to 64".into());
        }
        if self.quic_receive_window.is_some_and(|w| w < 1024) {
            return fail("quic_receive_window", "must be at least 1024".into());
        }
        let mut names = Vec::new();
        for v in &self.variants {
            let name = v.name.as_deref().unwrap_or("");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return fail("variants", format!("variant name '{name}' must be non-empty and use only letters, digits, '-', '_', '.'"));
            }
            if names.contains(&name) {
                return fail("variants", format!("variant '{name}' is listed twice"));
            }
            names.push(name);
            if let Some(key) = v.run_level_keys_set().into_iter().find(|k| *k != "name") {
                return Err(Invalid {
                    variant: Some(name.to_string()),
                    key: key.to_string(),
                    message: "applies to the whole run; set it outside [[variants]]".into(),
                });
            }
        }
        if !self.targets.is_empty() {
            self.check_targets()?;
        }
        self.check_mesh()?;
        if self.executor == Executor::Hosts {
            let why = if !self.agents.is_empty() || self.server_agent.is_some() {
                Some("the hosts executor starts its own agents; give no `agents` or `server_agent`")
            } else if !self.targets.is_empty() {
                Some("the hosts executor measures our server in its own host; [targets] are not reachable from there")
            } else if self
                .netem
                .as_ref()
                .and_then(|n| n.parsed().ok())
                .is_some_and(|n| n.rate.is_some())
            {
                Some("netem's rate is not emulated per link yet (delay, jitter and loss are)")
            } else {
                None
            };
            if let Some(why) = why {
                return fail("executor", why.into());
            }
            if !(1..=MAX_HOST_AGENTS).contains(&self.host_agents) {
                return fail("host_agents", format!("must be 1 to {}", MAX_HOST_AGENTS));
            }
        }
        if self.executor != Executor::Hosts
            && std::iter::once(self.host_namespaces)
                .chain(self.variants.iter().filter_map(|v| v.host_namespaces))
                .any(|h| h != HostNamespaces::Run)
        {
            return fail(
                "host_namespaces",
                "applies to the hosts executor (the local one gives each cell that needs a namespace its own)".into(),
            );
        }
        if self.executor == Executor::Kubernetes {
            let why = if !self.agents.is_empty() || self.server_agent.is_some() {
                Some("the kubernetes executor starts its own agents in pods; give no `agents` or `server_agent`")
            } else if !self.targets.is_empty() {
                Some("the kubernetes executor measures our server in its pod; [targets] are not supported with it")
            } else if self.needs_netns() {
                Some("network emulation and namespace sysctls are not available with the kubernetes executor")
            } else {
                None
            };
            if let Some(why) = why {
                return fail("executor", why.into());
            }
        }
        self.check_k8s()?;
        if let Some(listen) = &self.metrics_listen {
            match listen.parsed() {
                Err(e) => return fail("metrics_listen", e.to_string()),
                Ok(addr) if !addr.is_loopback() && !self.metrics_listen_public => {
                    return fail("metrics_listen", format!("{addr} is not a loopback address, and the endpoint has no authentication: add metrics_listen_public (--metrics-listen-public) to serve the run's figures there"));
                }
                Ok(_) => {}
            }
        }
        if let Some(a) = &self.server_agent {
            let why = if self.executor != Executor::Local {
                Some("only the local executor takes a server agent".to_string())
            } else if !self.targets.is_empty() {
                Some("[targets] measure your service: there is no server to start".to_string())
            } else if self.needs_netns() {
                Some("cannot be used with network emulation or namespace sysctls".to_string())
            } else if self.agents.contains(a) {
                Some(format!(
                    "'{a}' is also in `agents`: an agent runs one job at a time"
                ))
            } else if !a.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
            }) {
                Some(format!("'{a}' is not HOST:PORT"))
            } else {
                None
            };
            if let Some(why) = why {
                return fail("server_agent", why);
            }
        }
        if !self.agents.is_empty() {
            if self.needs_netns() {
                return fail(
                    "agents",
                    "cannot be used with network emulation or namespace sysctls (the server's namespace is not reachable from the agents)".into(),
                );
            }
            for a in &self.agents {
                let valid = a.rsplit_once(':').is_some_and(|(host, port)| {
                    !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
                });
                if !valid {
                    return fail("agents", format!("'{a}' is not HOST:PORT"));
                }
            }
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

    /// With targets: every stack has one, their addresses parse, and no knob asks for
    /// something only our own server can do.
    /// The Kubernetes knobs: names Kubernetes accepts, a sane agent count, quantities.
    fn check_k8s(&self) -> Result<(), Invalid> {
        let fail = |key: &str, message: String| {
            Err(Invalid {
                variant: None,
                key: key.to_string(),
                message,
            })
        };
        let ns = &self.k8s_namespace;
        let dns_label = !ns.is_empty()
            && ns.len() <= 63
            && ns
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !dns_label {
            return fail(
                "k8s_namespace",
                format!("'{ns}' is not a namespace name (lowercase letters, digits and '-', at most 63)"),
            );
        }
        if self.k8s_image.trim().is_empty() || self.k8s_image.contains(char::is_whitespace) {
            return fail("k8s_image", "must name an image".into());
        }
        if !(1..=MAX_K8S_AGENTS).contains(&self.k8s_agents) {
            return fail("k8s_agents", format!("must be 1 to {}", MAX_K8S_AGENTS));
        }
        for (key, value) in [
            ("k8s_server_resources", &self.k8s_server_resources),
            ("k8s_agent_resources", &self.k8s_agent_resources),
        ] {
            if let Err(e) = value.parsed() {
                return fail(key, e.to_string());
            }
        }
        if let Some(k) = self.k8s_node_selector.keys().find(|k| k.is_empty()) {
            return fail("k8s_node_selector", format!("empty label key '{k}'"));
        }
        Ok(())
    }

    fn check_targets(&self) -> Result<(), Invalid> {
        let fail = |key: &str, message: String| {
            Err(Invalid {
                variant: None,
                key: key.to_string(),
                message,
            })
        };
        for name in &self.stacks {
            let Some(stack) = stacks::find(name) else {
                continue;
            };
            let api = stack.api();
            match self.targets.for_api(api) {
                None => {
                    return fail(
                        "stacks",
                        format!(
                            "stack '{name}' sends to [targets.{}], which the experiment does not give; add it or leave '{name}' out of stacks",
                            api.as_str()
                        ),
                    )
                }
                Some(target) => {
                    if let Err(e) = target.endpoint() {
                        return fail("targets", e);
                    }
                    let plaintext = target.endpoint().is_ok_and(|e| !e.https);
                    if plaintext && !stack.supports_plaintext() {
                        return fail(
                            "targets",
                            format!("stack '{name}' needs TLS: its target must be https://"),
                        );
                    }
                }
            }
        }
        if let Err(e) = self.targets.ids.validate() {
            return fail("targets", e);
        }
        for api in [Api::Rest, Api::Grpc] {
            if let Err(e) = self.targets.mix(api) {
                return fail("targets", e);
            }
        }
        // A call the client ends after `duration_ms` must end before the timeout fails it.
        let grpc = self.targets.grpc.as_ref();
        if let Some((key, ms)) = grpc.and_then(|g| g.longest_call_duration_ms()) {
            if ms >= self.request_timeout_ms {
                return fail(
                    "targets",
                    format!(
                        "{key} = {ms} is not shorter than request_timeout_ms = {}: every call would time out; raise request_timeout_ms above it",
                        self.request_timeout_ms
                    ),
                );
            }
        }
        let ours_only: [(&str, bool); 7] = [
            ("server_fault", self.server_fault.is_some()),
            ("object", self.object.is_some()),
            ("service_time", self.service_time.is_some()),
            ("service_cpu_us", self.service_cpu_us > 0),
            ("payload", self.payload != PayloadProfile::default()),
            ("plaintext", self.plaintext),
            ("netem", self.needs_netns()),
        ];
        if let Some((key, _)) = ours_only.iter().find(|(_, set)| *set) {
            let why = match *key {
                "plaintext" => "the target's URL decides (http:// is plaintext)",
                "netem" => "network emulation and namespaces need a server the runner starts",
                _ => "it changes our own server, and with targets no server is started",
            };
            return fail(key, format!("cannot be used with [targets]: {why}"));
        }
        Ok(())
    }
}

/// A knob that failed validation: its key, the variant it failed in, and why. Typed, because
/// the caller points at what set the key (the flag, or the file's line and column).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{key}: {message}", variant.as_ref().map(|v| format!("variant '{v}': ")).unwrap_or_default())]
pub struct Invalid {
    pub variant: Option<String>,
    pub key: String,
    pub message: String,
}

impl Experiment {
    /// The bulk workload's object against the stacks, the client and the answer limits: a
    /// download larger than the body limit is refused here, naming the knob to raise, rather
    /// than failing every request of the run.
    fn check_object(&self) -> Result<(), Invalid> {
        let fail = |message: String| {
            Err(Invalid {
                variant: None,
                key: "object".to_string(),
                message,
            })
        };
        let Some(object) = &self.object else {
            return Ok(());
        };
        let object = match object.parsed() {
            Ok(o) => *o,
            Err(e) => return fail(e.to_string()),
        };
        let without: Vec<&str> = self
            .stacks
            .iter()
            .filter(|s| stacks::find(s).is_some_and(|stack| !stack.bulk()))
            .map(String::as_str)
            .collect();
        if !without.is_empty() {
            let with: Vec<&str> = stacks::stacks()
                .into_iter()
                .filter(|stack| stack.bulk())
                .map(|stack| stack.name())
                .collect();
            return fail(format!(
                "{} have no bulk workload yet (set stacks to {})",
                without.join(", "),
                with.join(", ")
            ));
        }
        if self.client == bench_core::ClientImplementation::Library {
            return fail(
                "the library clients hold whole answers; the bulk workload needs client = \"lean\""
                    .into(),
            );
        }
        if self.grpc_call.is_streaming() {
            return fail(format!(
                "moves one object per request; it cannot be combined with grpc_call = \"{}\"",
                self.grpc_call
            ));
        }
        let apis: Vec<Api> = self
            .stacks
            .iter()
            .filter_map(|s| stacks::find(s).map(|stack| stack.api()))
            .collect();
        let limit = self
            .response_body_max_bytes
            .unwrap_or(bench_core::limits::DEFAULT_MAX_BODY_BYTES);
        if apis.contains(&Api::Rest)
            && object.direction == bench_core::bulk::Direction::Download
            && object.bytes > limit
        {
            return fail(format!(
                "{object} is {} B, above response_body_max_bytes ({limit} B): raise response_body_max_bytes to at least {}",
                object.bytes, object.bytes
            ));
        }
        let message = self.object_message_bytes;
        let (min, max) = (
            bench_core::bulk::MIN_MESSAGE_BYTES,
            bench_core::bulk::MAX_MESSAGE_BYTES,
        );
        if !(min..=max).contains(&message) {
            return Err(Invalid {
                variant: None,
                key: "object_message_bytes".into(),
                message: format!("must be {min} to {max}, got {message}"),
            });
        }
        let grpc_limit = self
            .grpc_max_receive_message_bytes
            .unwrap_or(bench_core::limits::DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES);
        if apis.contains(&Api::Grpc)
            && object.direction == bench_core::bulk::Direction::Download
            && u64::from(message) > grpc_limit
        {
            return Err(Invalid {
                variant: None,
                key: "object_message_bytes".into(),
                message: format!(
                    "messages of {message} B are above grpc_max_receive_message_bytes ({grpc_limit} B): raise grpc_max_receive_message_bytes to at least {message}"
                ),
            });
        }
        Ok(())
    }

    /// A server nobody here wrote (`server`) against the rest: it serves the bulk workload's
    /// downloads as static files over TLS, started beside the load by the local executor, and
    /// none of our server's knobs reach it.
    fn check_server(&self) -> Result<(), Invalid> {
        let fail = |key: &str, message: String| {
            Err(Invalid {
                variant: None,
                key: key.to_string(),
                message,
            })
        };
        if self.server == ServerKind::Ours {
            return Ok(());
        }
        let name = self.server.as_str();
        let download = self
            .object
            .as_ref()
            .and_then(|o| o.parsed().ok())
            .is_some_and(|o| o.direction == bench_core::bulk::Direction::Download);
        if !download {
            return fail(
                "server",
                format!("{name} serves the bulk workload's downloads (static files): set object = \"download:<size>\", or server = \"ours\""),
            );
        }
        for stack in &self.stacks {
            if let Some(stack) = stacks::find(stack) {
                if let Err(why) = self.server.serves(stack) {
                    return fail("server", why);
                }
            }
        }
        let why = if !self.targets.is_empty() {
            Some(("targets", "with [targets] no server is started"))
        } else if self.executor != Executor::Local || self.server_agent.is_some() {
            Some((
                "executor",
                "it is started beside the load by the local executor, without server_agent",
            ))
        } else if self.path != MeshPath::Direct {
            Some(("path", "it is measured on the direct path"))
        } else if self.plaintext {
            Some((
                "plaintext",
                "it serves over TLS 1.3 with the suite's certificate",
            ))
        } else if self.handshake != HandshakeVariant::Full {
            Some(("handshake", "its session resumption is not configured here; new connections run full handshakes"))
        } else if self.server_fault.is_some()
            || self.service_time.is_some()
            || self.service_cpu_us > 0
        {
            Some((
                "server",
                "server_fault, service_time and service_cpu_us change our own server",
            ))
        } else if self.quic_server_endpoints.is_some() {
            Some((
                "quic_server_endpoints",
                "it is a knob of our own HTTP/3 server",
            ))
        } else {
            None
        };
        match why {
            Some((key, why)) => fail(key, format!("server = \"{name}\": {why}")),
            None => Ok(()),
        }
    }

    /// The mesh knobs against the rest: a proxy that cannot carry a stack, a path the
    /// executor cannot build, or a knob a proxied path contradicts, each as one line.
    pub(super) fn check_mesh(&self) -> Result<(), Invalid> {
        let fail = |key: &str, message: String| {
            Err(Invalid {
                variant: None,
                key: key.to_string(),
                message,
            })
        };
        if self.proxy_threads == 0 || self.proxy_threads > 64 {
            return fail("proxy_threads", "must be 1 to 64".into());
        }
        if self.path == MeshPath::Direct {
            return Ok(());
        }
        let path = self.path.as_str();
        for name in &self.stacks {
            if let Some(stack) = stacks::find(name) {
                if let Err(why) = carries(self.proxy, self.path, stack) {
                    return fail("proxy", format!("path {path}: {why}"));
                }
            }
        }
        let why = if !self.targets.is_empty() {
            Some((
                "targets",
                "a proxied path runs in front of our own servers; measure [targets] directly",
            ))
        } else if self.plaintext {
            Some(("plaintext", "a proxied path sets TLS per hop itself (TLS to an edge proxy, mutual TLS between sidecars)"))
        } else if !self.agents.is_empty() || self.server_agent.is_some() {
            Some(("agents", "a proxied path starts its proxies beside the runner's own server and load generator; give no `agents` or `server_agent`"))
        } else {
            match (self.path, self.executor) {
                (MeshPath::Edge, Executor::Local | Executor::Hosts) => None,
                (MeshPath::Sidecar, Executor::Hosts) => None,
                (MeshPath::Sidecar, _) => Some(("path", "sidecar needs the hosts executor (a proxy in each agent host and one in the server's host)")),
                (_, _) => Some(("path", "the kubernetes executor does not start proxies")),
            }
        };
        if let Some((key, why)) = why {
            return fail(key, format!("path {path}: {why}"));
        }
        if self.path == MeshPath::Sidecar && self.handshake != bench_core::HandshakeVariant::Full {
            return fail(
                "handshake",
                "path sidecar: the client's hop to its sidecar is plaintext; it has no handshake to resume".into(),
            );
        }
        Ok(())
    }
}
