//! The settings of a run: every knob defined once ([`knobs`]), merged in one place in a fixed
//! order (defaults < experiment file < variant < flags, [`resolve`]), validated on the merged
//! result before any socket or file is opened ([`validate`]).

pub mod file;
mod knobs;
pub mod mesh;
mod netem_spec;
pub mod origin;
mod parsed;
mod rate_sweep;
mod types;
mod validate;
mod values;

pub use knobs::{Experiment, Knobs, KEYS};
pub use mesh::{MeshPath, Pool, ProxyKind};
pub use netem_spec::Netem;
pub use origin::ServerKind;
pub use parsed::Parsed;
pub use rate_sweep::{ladder, RateSweep, MAX_RATE_POINTS};
pub use types::{
    CellOrder, Executor, HostNamespaces, ListenAddr, Pacing, Threshold, MAX_HOST_AGENTS,
    MAX_K8S_AGENTS, MAX_NAME_BYTES,
};
pub use validate::Invalid;
pub use values::{
    parse_duration_s, parse_labels, parse_name, parse_regimes, parse_resources, Labels,
    PodResources, PortRange, RegimeList,
};

/// When a worker opens connections (the load engine's).
pub use load::Regime;

/// A knob's value as the command line would write it (lists comma-separated); `None` for a
/// knob without a value, or a table (which no flag writes).
pub fn value_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null | serde_json::Value::Object(_) => None,
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) if items.is_empty() => None,
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => Some(other.to_string()),
    }
}

/// The one place layers are merged: the defaults, then the file, then the flags; each
/// variant is kept without the keys the flags set, so that a variant's cells get
/// defaults < file < variant < flags.
pub fn resolve(file: Option<&Knobs>, flags: &Knobs) -> Experiment {
    let mut settings = Experiment::default();
    if let Some(file) = file {
        file.apply(&mut settings);
    }
    flags.apply(&mut settings);
    for variant in &mut settings.variants {
        let name = variant.name.take();
        *variant = variant.without_keys_of(flags);
        variant.name = name;
    }
    settings
}

/// With targets and no `stacks` given: the stacks that can reach a target (the REST stacks for
/// `[targets.rest]`, gRPC for `[targets.grpc]`; over TLS only where the stack has no plaintext
/// form) and measure it by default (`Stack::targets_by_default`), not every stack.
pub fn default_stacks_for_targets(settings: &mut Experiment) {
    if settings.targets.is_empty() {
        return;
    }
    let targets = settings.targets.clone();
    settings.stacks.retain(|name| {
        stacks::find(name).is_some_and(|s| {
            s.targets_by_default()
                && targets.for_api(s.api()).is_some_and(|target| {
                    s.supports_plaintext() || target.endpoint().map_or(true, |e| e.https)
                })
        })
    });
}

impl Experiment {
    /// Whether cells need a private network namespace (emulation or namespace sysctls).
    /// The namespace sysctls these settings set, as `key=value` (in a cell's private
    /// namespace, or in every host of the hosts executor).
    pub fn sysctls(&self) -> Vec<String> {
        let mut sysctls = Vec::new();
        if let Some(range) = &self.port_range {
            sysctls.push(format!("net.ipv4.ip_local_port_range={range}"));
        }
        if let Some(v) = self.tcp_tw_reuse {
            sysctls.push(format!("net.ipv4.tcp_tw_reuse={v}"));
        }
        if let Some(v) = self.somaxconn {
            sysctls.push(format!("net.core.somaxconn={v}"));
        }
        if let Some(v) = &self.tcp_congestion {
            sysctls.push(format!("net.ipv4.tcp_congestion_control={v}"));
        }
        sysctls
    }

    pub fn needs_netns(&self) -> bool {
        self.netem.is_some()
            || self.port_range.is_some()
            || self.tcp_tw_reuse.is_some()
            || self.somaxconn.is_some()
            || self.tcp_congestion.is_some()
    }

    /// These settings as results record them: targets with literal credentials redacted
    /// ([`bench_core::user_service::Targets::redacted`]).
    pub fn for_record(&self) -> Experiment {
        Experiment {
            targets: self.targets.redacted(),
            ..self.clone()
        }
    }

    /// The transport knobs the stacks apply.
    pub fn tuning(&self) -> bench_core::Tuning {
        bench_core::Tuning {
            quic_initial_rtt_ms: self.quic_initial_rtt_ms,
            udp_buffer_bytes: self.udp_buffer_bytes,
            quic_receive_window: self.quic_receive_window,
            quic_server_endpoints: self.quic_server_endpoints,
            quic_offload: self.quic_offload,
            quic_mtu_discovery: self.quic_mtu_discovery,
            linger_zero: self.linger_zero,
            source_addresses: self.source_addresses,
            no_session_tickets: false,
            client: self.client,
            response_head_max_bytes: self.response_head_max_bytes,
            response_headers_max: self.response_headers_max,
            response_body_max_bytes: self.response_body_max_bytes,
            grpc_max_receive_message_bytes: self.grpc_max_receive_message_bytes,
            quic_endpoint: self.quic_endpoint,
            grpc_call: self.grpc_call,
            stream_messages: self.stream_messages,
            bulk: self.object.as_ref().and_then(|o| o.parsed().ok().copied()),
            bulk_message_bytes: self.object_message_bytes,
        }
    }

    /// What each item request costs the servers (validated knobs).
    pub fn service_time_spec(&self) -> bench_core::ServiceTimeSpec {
        bench_core::ServiceTimeSpec {
            time: self.service_time.as_ref().map(|t| *t.value()),
            seed: self.service_time_seed,
            cpu: std::time::Duration::from_micros(self.service_cpu_us),
        }
    }

    /// One experiment per variant (its knobs laid over these), or just this one, named
    /// `default`.
    pub fn variant_experiments(&self) -> Vec<(String, Experiment)> {
        if self.variants.is_empty() {
            return vec![("default".into(), self.clone())];
        }
        self.variants
            .iter()
            .map(|v| {
                let mut e = Experiment {
                    variants: Vec::new(),
                    ..self.clone()
                };
                Knobs {
                    name: None,
                    ..v.clone()
                }
                .apply(&mut e);
                (v.name.clone().unwrap_or_default(), e)
            })
            .collect()
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
}

/// The statuses a proxy answers with itself when its upstream fails (bad gateway, no
/// upstream available, upstream timeout); our servers never send them.
pub const PROXY_STATUSES: [u16; 3] = [502, 503, 504];

/// Who answered a failure of `class` with `code` on the path `settings` describe: on an edge
/// or sidecar path a 502/503/504 (`502` from a REST answer, `HTTP 502` from a gRPC one) is the
/// proxy's own answer,
/// named so in failures.csv's example; `None` for anything else.
pub fn answered_by_proxy(
    settings: &Experiment,
    class: bench_core::FailureClass,
    code: &str,
) -> Option<String> {
    let proxied = settings.path != MeshPath::Direct;
    // REST answers carry the bare status (`502`), gRPC's the HTTP status (`HTTP 502`).
    let status: u16 = code.strip_prefix("HTTP ").unwrap_or(code).parse().ok()?;
    (proxied && class == bench_core::FailureClass::BadStatus && PROXY_STATUSES.contains(&status))
        .then(|| {
            format!(
                "the {} proxy ({} path) answered {status}, not the server",
                settings.proxy.as_str(),
                settings.path.as_str()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::file::nearest;

    #[test]
    fn an_unknown_key_is_matched_to_the_nearest_one_or_none() {
        let keys = ["concurrency", "connections", "requests_reuse", "stacks"];
        assert_eq!(nearest("concurency", &keys), Some("concurrency"));
        assert_eq!(nearest("stakcs", &keys), Some("stacks"));
        assert_eq!(nearest("requests-reuse", &keys), Some("requests_reuse"));
        assert_eq!(nearest("payload_size", &keys), None);
    }

    use super::*;
    use bench_core::FailureClass;

    #[test]
    fn defaults_are_the_study_and_valid() {
        let e = Experiment::default();
        e.validate(&stacks::names()).unwrap();
        assert_eq!(e.requests(Regime::Reuse), 50_000);
        assert_eq!(e.requests(Regime::NewConn), 5_000);
        assert_eq!(e.concurrency, vec![10, 50, 100, 200, 500]);
    }

    #[test]
    fn layers_merge_as_defaults_then_file_then_variant_then_flags() {
        let file: Knobs = toml::from_str(
            "concurrency = [5]\nbacklog = 7\n[[variants]]\nname = \"v\"\nbacklog = 9\nserver_threads = 3\n",
        )
        .unwrap();
        let flags = Knobs {
            server_threads: Some(4),
            name: Some("run".into()),
            ..Knobs::default()
        };
        let e = resolve(Some(&file), &flags);
        let variants = e.variant_experiments();
        let (name, v) = &variants[0];
        assert_eq!(name, "v", "a variant keeps its name under --name");
        assert_eq!(v.name, "run");
        assert_eq!(v.requests_reuse, 50_000, "default");
        assert_eq!(v.concurrency, vec![5], "file over default");
        assert_eq!(v.backlog, 9, "variant over file");
        assert_eq!(v.server_threads, 4, "flag over variant");
        assert_eq!(e.backlog, 7);
    }

    #[test]
    fn settings_round_trip_through_json_as_the_manifest_keeps_them() {
        let file: Knobs =
            toml::from_str("rate = 5.0\n[[variants]]\nname = \"x\"\nnetem = \"rtt=2ms\"\n")
                .unwrap();
        let e = resolve(Some(&file), &Knobs::default());
        let back: Experiment = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert_eq!(
            back.variant_experiments()[0]
                .1
                .netem
                .as_ref()
                .map(|n| n.text()),
            Some("rtt=2ms")
        );
    }

    #[test]
    fn key_line_finds_the_top_level_or_the_variant_that_sets_a_key() {
        let text = "stacks = [\"h1\"]\nplaintext = true\n\n[[variants]]\nname = \"a\" # first\nstacks = [\"h3\"]\n\n[[variants]]\nname = 'b'\n";
        assert_eq!(file::key_line(text, None, "stacks"), Some(1));
        assert_eq!(file::key_line(text, Some("a"), "stacks"), Some(6));
        // Variant b inherits stacks and plaintext from the top level.
        assert_eq!(file::key_line(text, Some("b"), "stacks"), Some(1));
        assert_eq!(file::key_line(text, Some("a"), "plaintext"), Some(2));
        assert_eq!(file::key_line(text, Some("b"), "variants"), Some(8));
        assert_eq!(file::key_line(text, None, "concurrency"), None);
    }

    #[test]
    fn file_errors_name_file_key_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, "name = \"x\"\nconcurency = [1]\n").unwrap();
        let err = file::read(&p).unwrap_err();
        assert!(err.contains("bad.toml:2:1"), "{err}");
        assert!(err.contains("concurency"), "{err}");
        std::fs::write(&p, "repetitions = \"three\"\n").unwrap();
        let err = file::read(&p).unwrap_err();
        assert!(err.contains(":1:15"), "{err}");
    }

    /// A 502/503/504 on a proxied path is the proxy's answer; the same code on a direct path,
    /// another status, or another class is not.
    #[test]
    fn a_gateway_status_on_a_proxied_path_is_the_proxys_answer() {
        let edge = Experiment {
            path: MeshPath::Edge,
            proxy: crate::settings::ProxyKind::Nginx,
            ..Experiment::default()
        };
        let who = answered_by_proxy(&edge, FailureClass::BadStatus, "HTTP 502").unwrap();
        assert!(
            who.contains("nginx proxy (edge path) answered 502"),
            "{who}"
        );
        for code in ["HTTP 503", "HTTP 504", "502", "504"] {
            assert!(answered_by_proxy(&edge, FailureClass::BadStatus, code).is_some());
        }
        assert!(answered_by_proxy(&edge, FailureClass::BadStatus, "HTTP 500").is_none());
        assert!(answered_by_proxy(&edge, FailureClass::BadStatus, "UNAVAILABLE").is_none());
        assert!(answered_by_proxy(&edge, FailureClass::BadBody, "HTTP 502").is_none());
        let direct = Experiment::default();
        assert!(answered_by_proxy(&direct, FailureClass::BadStatus, "HTTP 502").is_none());
    }
}
