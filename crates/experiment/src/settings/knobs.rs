//! Every knob of a run, defined once. The [`knobs!`] list below generates the optional layer
//! ([`Knobs`]: what the defaults, an experiment file, a variant or the command line set) and
//! the resolved settings ([`Experiment`]: every knob with a value). A knob's doc comment is
//! its `--help` text; its TOML key is its name; its flag is given by its `#[arg]`.

use std::path::PathBuf;

use bench_core::{ClientImplementation, GrpcCall, HandshakeVariant, PayloadProfile, QuicEndpoint};
use serde::{Deserialize, Serialize};

use super::mesh::{MeshPath, Pool, ProxyKind};
use super::netem_spec::Netem;
use super::origin::ServerKind;
use super::parsed::Parsed;
use super::rate_sweep::RateSweep;
use super::types::{CellOrder, Executor, HostNamespaces, ListenAddr, Pacing, Threshold};
use super::values::{
    parse_duration_s, parse_labels, parse_name, parse_regimes, Labels, PodResources, PortRange,
    RegimeList,
};
use load::Regime;

/// Whether a knob may differ between the variants of one run (`cell`) or is the run's alone
/// (`run`), and whether it has a value by default (`…_opt`: none by default).
macro_rules! resolved_type {
    (cell, $t:ty) => { $t };
    (run, $t:ty) => { $t };
    (cell_opt, $t:ty) => { Option<$t> };
    (run_opt, $t:ty) => { Option<$t> };
}

macro_rules! resolved_value {
    (cell, $v:expr) => {
        $v
    };
    (run, $v:expr) => {
        $v
    };
    (cell_opt, $v:expr) => {
        Some($v)
    };
    (run_opt, $v:expr) => {
        Some($v)
    };
}

macro_rules! per_variant {
    (cell) => {
        true
    };
    (cell_opt) => {
        true
    };
    (run) => {
        false
    };
    (run_opt) => {
        false
    };
}

macro_rules! knobs {
    ($(
        $(#[$meta:meta])*
        $name:ident : $kind:ident < $ty:ty > = $default:expr;
    )*) => {
        /// One layer of settings: every knob optional. The experiment file and each of its
        /// `[[variants]]` deserialize into it, the command line parses into it, and
        /// [`Knobs::apply`] lays it over resolved settings.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
        #[serde(deny_unknown_fields)]
        pub struct Knobs {
            $(
                $(#[$meta])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<$ty>,
            )*
        }

        /// Every knob of a run, resolved (defaults < file < variant < flags). Field names are
        /// the TOML keys; [`Knobs`] documents each.
        #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields, default)]
        pub struct Experiment {
            $( pub $name: resolved_type!($kind, $ty), )*
        }

        impl Default for Experiment {
            fn default() -> Self {
                Experiment { $( $name: $default, )* }
            }
        }

        impl Knobs {
            /// Sets every knob this layer gives on `settings`.
            pub fn apply(&self, settings: &mut Experiment) {
                $(
                    if let Some(v) = &self.$name {
                        settings.$name = resolved_value!($kind, v.clone());
                    }
                )*
            }

            /// This layer's knobs, each one not set taken from `other`.
            pub fn or(self, other: Knobs) -> Knobs {
                Knobs { $( $name: self.$name.or(other.$name), )* }
            }

            /// The keys this layer sets, in definition order.
            pub fn keys_set(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $( if self.$name.is_some() { keys.push(stringify!($name)); } )*
                keys
            }

            /// The keys this layer sets that a variant may not (they belong to the whole run).
            pub fn run_level_keys_set(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(
                    if !per_variant!($kind) && self.$name.is_some() {
                        keys.push(stringify!($name));
                    }
                )*
                keys
            }

            /// This layer without the keys `other` sets (so that `other`, laid on later, wins).
            pub fn without_keys_of(&self, other: &Knobs) -> Knobs {
                let mut out = self.clone();
                $( if other.$name.is_some() { out.$name = None; } )*
                out
            }
        }

        /// Every knob's key, in definition order.
        pub const KEYS: &[&str] = &[$( stringify!($name), )*];
    };
}

knobs! {
    /// Part of the results directory's name (`new-conn`/`reuse` with --regime and no file).
    #[arg(long)]
    name: run<String> = "default".into();
    /// Comma-separated stacks, in this order within each group.
    #[arg(long, value_delimiter = ',', value_name = "STACK,...")]
    stacks: cell<Vec<String>> = stacks::names().iter().map(|s| s.to_string()).collect();
    /// Connection regime(s): reuse (one connection per worker, reused), new-conn (a new
    /// connection and full handshake per request) or both.
    #[arg(long = "regime", value_parser = parse_regimes, value_name = "reuse|new-conn|both")]
    regimes: cell<RegimeList> = vec![Regime::Reuse, Regime::NewConn];
    /// Comma-separated concurrency levels, in workers.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    concurrency: cell<Vec<u32>> = vec![10, 50, 100, 200, 500];
    /// Repetitions of every cell, interleaved.
    #[arg(long)]
    repetitions: run<u32> = 1;
    /// The order of the cells within each repetition: random (shuffled anew for every
    /// repetition, seeded by cell_order_seed, so that drift and what one cell leaves to the
    /// next hit no stack or level alike every time) or fixed (the planned order: variants as
    /// listed; in each, baselines, then regime, concurrency, rate and stack in their lists'
    /// order). Kept in either: each variant's cells stay together, baselines first; with
    /// host_namespaces = sweep, a sweep's levels ascend (only its stacks are shuffled).
    #[arg(long, value_enum, value_name = "random|fixed")]
    cell_order: run<CellOrder> = CellOrder::Random;
    /// The seed of a random cell order (default: drawn as the run starts; the manifest
    /// records it, and --resume replays the order).
    #[arg(long, value_name = "N")]
    cell_order_seed: run_opt<u64> = None;
    /// Measured requests per cell in the reuse regime (study: 50,000; --requests sets both).
    #[arg(long)]
    requests_reuse: cell<u64> = 50_000;
    /// Measured requests per cell in the new-conn regime (study: 5,000; --requests sets both).
    #[arg(long)]
    requests_new_conn: cell<u64> = 5_000;
    /// Unrecorded warm-up requests before each cell, as a fraction of its measured requests.
    #[arg(long)]
    warmup_fraction: cell<f64> = 0.05;
    /// Single-user baseline per stack and regime: one worker for this many seconds (0 = none).
    #[arg(long)]
    baseline_seconds: cell<u64> = 10;
    /// Open loop: requests per second on a fixed arrival schedule, latency from each
    /// request's scheduled start (no coordinated omission) (default: closed loop, the study's).
    #[arg(long)]
    rate: cell_opt<f64> = None;
    /// Rate sweep: the open loop at each of these rates, a list (1000,2000,5000) or a geometric
    /// ladder START..CEILINGxFACTOR (1000..64000x2); each rate is a cell per stack, regime and
    /// level, its key ending in `/q<rate>` (default: none).
    #[arg(long, value_name = "R,...|START..CEILINGxFACTOR")]
    rates: cell_opt<Parsed<RateSweep>> = None;
    /// Open loop: how a free worker waits for a due time: spin (timer, then polling for the
    /// last 2 ms; µs precision) or timer (tokio's 1 ms timer alone, for comparison).
    #[arg(long, value_enum)]
    pacing: cell<Pacing> = Pacing::default();
    /// Test-only: a fault the servers inject (status, bad-body, missing-field, delay-<N>ms,
    /// stall-<N>ms, each with optional :<fraction>) (default: none).
    #[arg(long)]
    server_fault: cell_opt<Parsed<bench_core::FaultSpec>> = None;
    /// Server processing time per item request: fixed:<D> or exp:<mean> (D like 2ms, 500us),
    /// a wait during which the server serves other requests (default: none, answer at once).
    #[arg(long)]
    service_time: cell_opt<Parsed<bench_core::ServiceTime>> = None;
    /// Seed of the exp: service-time draws; request i's time depends only on the seed and i.
    #[arg(long)]
    service_time_seed: cell<u64> = bench_core::service_time::DEFAULT_SERVICE_TIME_SEED;
    /// Busy CPU work per item request on the server's handler thread, in µs (0 = none).
    #[arg(long)]
    service_cpu_us: cell<u64> = 0;
    /// Payload profile: small (256 B JSON body), 4k or 64k.
    #[arg(long)]
    payload: cell<PayloadProfile> = PayloadProfile::Small;
    /// No TLS, on the stacks that have a plaintext form (HTTP/2 then with prior knowledge);
    /// a stack without one cannot run.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    plaintext: cell<bool> = false;
    /// TLS/QUIC session handling of new connections: full (no session cache), resumed or
    /// zero-rtt.
    #[arg(long, value_parser = parse_name::<HandshakeVariant>, value_name = "full|resumed|zero-rtt")]
    handshake: cell<HandshakeVariant> = HandshakeVariant::Full;
    /// Client implementation: lean (the suite's own protocol clients, cheapest per request) or
    /// library (what an application runs: hyper, tonic); a stack with one client uses it, and
    /// each row's `client` says which ran.
    #[arg(long, value_parser = parse_name::<ClientImplementation>, value_name = "lean|library")]
    client: cell<ClientImplementation> = ClientImplementation::Lean;
    /// The program that answers the load: ours (the stack's own server) or, for the bulk
    /// workload's downloads on the REST stacks, a server nobody here wrote serving the same
    /// object as a static file at /bulk/<bytes>: caddy (Go's net/http over HTTP/1.1 and
    /// HTTP/2, quic-go over HTTP/3) or nginx (HTTP/1.1, HTTP/2), started and measured where
    /// ours would be; each row's `server` says which ran.
    #[arg(long, value_enum, value_name = "ours|caddy|nginx")]
    server: cell<ServerKind> = ServerKind::Ours;
    /// Lean clients: the largest response head accepted, in bytes (HTTP/1.1: with interim 1xx
    /// heads; HTTP/3: the decoded field section, and a HEADERS frame announcing more is
    /// refused at its frame header; HTTP/2 holds its 64 KiB header list); a longer one is
    /// bad_body (default: 64 KiB).
    #[arg(long, value_name = "BYTES")]
    response_head_max_bytes: cell_opt<usize> = None;
    /// Lean clients (HTTP/1.1, HTTP/3): the most header fields in one response head; more is
    /// bad_body (default: 100).
    #[arg(long, value_name = "N")]
    response_headers_max: cell_opt<usize> = None;
    /// Lean clients (HTTP/1.1, HTTP/2, HTTP/3): the largest response body accepted, in bytes;
    /// each worker may hold one that large, so it bounds the load generator's memory against
    /// an endless body (default: 4 MiB).
    #[arg(long, value_name = "BYTES")]
    response_body_max_bytes: cell_opt<u64> = None;
    /// Lean gRPC clients (gRPC over HTTP/2 and HTTP/3): the largest message received, in
    /// bytes, refused as bad_body as soon as its length prefix announces more (default: 4 MiB,
    /// as gRPC's implementations).
    #[arg(long, value_name = "BYTES")]
    grpc_max_receive_message_bytes: cell_opt<u64> = None;
    /// gRPC stacks on our servers: the item service's method each request calls: unary
    /// (GetItem), server-stream (ListItems: `stream_messages` items), client-stream (PutItems:
    /// that many items uploaded) or bidi (ChatItems: that many requests, each answered).
    #[arg(long, value_parser = parse_name::<GrpcCall>, value_name = "unary|server-stream|client-stream|bidi")]
    grpc_call: cell<GrpcCall> = GrpcCall::Unary;
    /// Streaming calls (`grpc_call`): the messages one call streams.
    #[arg(long, value_name = "N")]
    stream_messages: cell<u32> = bench_core::stack::DEFAULT_STREAM_MESSAGES;
    /// The bulk workload: every request moves one object instead of the item,
    /// download:<size> (the server streams it) or upload:<size> (the client streams it, the
    /// server answers with the count it received), size in B, KiB, MiB or GiB (download:16MiB);
    /// counted as it arrives and never held, each answer's byte count checked exactly. A
    /// download above response_body_max_bytes is refused before the run (default: none, the
    /// item).
    #[arg(long, value_name = "download|upload:SIZE")]
    object: cell_opt<Parsed<bench_core::BulkObject>> = None;
    /// The bulk workload on the gRPC stacks: the size of each message of the object's stream
    /// (Download's answers, Upload's requests), in bytes, 1024 to 1048576 (the `bytes` field's
    /// header included).
    #[arg(long, value_name = "BYTES")]
    object_message_bytes: cell<u32> = bench_core::bulk::DEFAULT_MESSAGE_BYTES;
    /// Reuse regime only: connections shared by all workers (0 = one per worker).
    #[arg(long)]
    connections: cell<u32> = 0;
    /// Request timeout in ms (--timeout sets all three timeouts, in seconds).
    #[arg(long)]
    request_timeout_ms: cell<u64> = 10_000;
    /// TCP connect timeout in ms.
    #[arg(long)]
    connect_timeout_ms: cell<u64> = 10_000;
    /// TLS or QUIC handshake timeout in ms.
    #[arg(long)]
    handshake_timeout_ms: cell<u64> = 10_000;
    /// Hard bound on a cell's measured phase, in seconds; workers stop when it passes.
    #[arg(long)]
    max_cell_seconds: cell<u64> = 300;
    /// When a cell's first N requests all fail in one class with one message (a refused
    /// port, an untrusted certificate), the run stops there: nothing can be measured. The cell
    /// is recorded as failed; finished cells are kept (0 = never stop; --keep-going).
    #[arg(long, value_name = "N")]
    stop_after_identical_failures: cell<u64> = 100;
    /// A stress cell whose whole request budget ends sooner than this many seconds runs the
    /// whole budget again, as often as needed (`budget_repeats` in cells.csv): it sends a whole
    /// number of budgets, never a part of one, so that sub-second cells do not decide a
    /// comparison and every attempt still belongs to a whole budget (0 = one budget).
    #[arg(long)]
    min_cell_seconds: cell<f64> = 0.0;
    /// Soak: every stress cell runs this long (90s, 10m, 1h; seconds in the file) instead of
    /// for a request count (default: none).
    #[arg(long = "duration", value_parser = parse_duration_s, value_name = "DURATION")]
    duration_seconds: cell_opt<u64> = None;
    /// The runner's open-file soft limit, for exhaustion studies; servers are not affected
    /// (default: inherited).
    #[arg(long)]
    client_nofile: cell_opt<u64> = None;
    /// Pause between consecutive cells, in ms: the previous cell's TIME_WAIT sockets, closing
    /// QUIC connections and freed memory settle before the next server starts (0 = none).
    #[arg(long)]
    cell_pause_ms: cell<u64> = 0;
    /// Resource sampling interval in ms.
    #[arg(long)]
    sample_interval_ms: cell<u64> = 100;
    /// Server runtime worker threads.
    #[arg(long)]
    server_threads: cell<u32> = 2;
    /// Load generator runtime threads; 0 = one per core the runner may use.
    #[arg(long)]
    client_threads: cell<u32> = 0;
    /// Pin the server to core 0 and the runner to core 1.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pin: run<bool> = false;
    /// The load generator polls for I/O instead of sleeping while it measures. On loopback the
    /// kernel wakes a sleeping client on the server's CPU, so a client faster than the server
    /// makes the server pay for waking it; polling removes that single-machine artefact, and
    /// the client's CPU figure then counts the polling. For pinned runs (docs/fairness.md).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    busy_poll: cell<bool> = false;
    /// Server listen backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long)]
    backlog: cell<u32> = 4096;
    /// Results root; each run writes a new directory below it.
    #[arg(long)]
    out: run<PathBuf> = PathBuf::from("results");
    /// Serve live metrics for Prometheus at http://ADDR/metrics while the run goes: a port
    /// (on 127.0.0.1) or IP:PORT; an address other than loopback also needs
    /// metrics_listen_public (default: none, no endpoint).
    #[arg(long, value_name = "[IP:]PORT")]
    metrics_listen: run_opt<Parsed<ListenAddr>> = None;
    /// Let metrics_listen be an address other than loopback: whoever reaches it reads the
    /// run's cells and figures (the endpoint has no authentication).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    metrics_listen_public: run<bool> = false;
    /// After the last cell, the metrics endpoint stays up until it has been scraped once more
    /// (the final figures), at most this many seconds (0 = not at all).
    #[arg(long, value_name = "SECONDS")]
    metrics_linger_seconds: run<u64> = 15;
    /// Network emulation on the loopback of a private network namespace, e.g.
    /// rtt=40ms,jitter=2ms,loss=0.5%,rate=100mbit (delay= is the one-way delay); needs root
    /// (default: none, plain loopback).
    #[arg(long, value_name = "SPEC")]
    netem: cell_opt<Parsed<Netem>> = None;
    /// net.ipv4.ip_local_port_range inside a private namespace, e.g. "40000 40999" (default:
    /// the kernel's).
    #[arg(long, value_name = "LOW HIGH")]
    port_range: cell_opt<Parsed<PortRange>> = None;
    /// net.ipv4.tcp_tw_reuse (0, 1 or 2) inside a private namespace (default: the kernel's).
    #[arg(long)]
    tcp_tw_reuse: cell_opt<u8> = None;
    /// net.core.somaxconn inside a private namespace (default: the kernel's).
    #[arg(long)]
    somaxconn: cell_opt<u32> = None;
    /// net.ipv4.tcp_congestion_control inside the cell's private namespace: cubic, bbr, reno,
    /// one of /proc/sys/net/ipv4/tcp_available_congestion_control (default: the kernel's).
    #[arg(long, value_name = "cubic|bbr|...")]
    tcp_congestion: cell_opt<String> = None;
    /// QUIC initial RTT estimate in ms (default: quinn's, 333).
    #[arg(long)]
    quic_initial_rtt_ms: cell_opt<u64> = None;
    /// SO_RCVBUF/SO_SNDBUF of QUIC sockets in bytes (default: 4 MiB on the server's socket and
    /// on a shared client endpoint's, bench_core's DEFAULT_SERVER_UDP_BUFFER_BYTES; the
    /// kernel's on per-connection client sockets).
    #[arg(long)]
    udp_buffer_bytes: cell_opt<usize> = None;
    /// QUIC connection receive window in bytes (default: quinn's).
    #[arg(long)]
    quic_receive_window: cell_opt<u64> = None;
    /// QUIC server endpoints on the one port, each its own socket (SO_REUSEPORT) and driver
    /// task, as an operator spreads a QUIC server over cores (default: one).
    #[arg(long, value_name = "N")]
    quic_server_endpoints: cell_opt<u32> = None;
    /// QUIC segmentation offload: `false` turns GSO (both sides) and the server socket's GRO
    /// off (default: quinn's, on where the kernel has it).
    #[arg(long, value_name = "BOOL")]
    quic_offload: cell_opt<bool> = None;
    /// QUIC path MTU discovery (RFC 9000 §14.3): `false` sends no probes and keeps packets at
    /// the 1,200-byte minimum, both sides (default: quinn's, on).
    #[arg(long, value_name = "BOOL")]
    quic_mtu_discovery: cell_opt<bool> = None;
    /// QUIC client: per-connection (a UDP socket and quinn endpoint per connection, so a new
    /// connection costs a port and a descriptor, as on TCP) or shared (one socket and endpoint
    /// for all of a load generator's connections, as QUIC client libraries run).
    #[arg(long, value_parser = parse_name::<QuicEndpoint>, value_name = "per-connection|shared")]
    quic_endpoint: cell<QuicEndpoint> = QuicEndpoint::PerConnection;
    /// TCP clients close with SO_LINGER 0: an RST, no TIME_WAIT (default: a FIN).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    linger_zero: cell<bool> = false;
    /// Local source addresses the clients' connections take in turn (127.0.0.1, 127.0.0.2, …
    /// for the loopback server), so that one address's ≈ 28k ephemeral ports are not the first
    /// limit; 1 = the kernel picks (one address), which a port-budget experiment wants.
    #[arg(long, value_name = "N")]
    source_addresses: cell<u32> = 16;
    /// The path requests take: direct (to the server), edge (through one TLS-terminating
    /// reverse proxy in front of the server) or sidecar (hosts executor: a plaintext hop to a
    /// proxy beside the client, mutual TLS to a proxy beside the server, plaintext to the
    /// server on its loopback) (docs/mesh.md).
    #[arg(long, value_enum, value_name = "direct|edge|sidecar")]
    path: cell<MeshPath> = MeshPath::Direct;
    /// The proxy program of an edge or sidecar path: haproxy, nginx or caddy (Debian's
    /// packages); a stack it cannot carry is refused before the run.
    #[arg(long, value_enum, value_name = "haproxy|nginx|caddy")]
    proxy: cell<ProxyKind> = ProxyKind::Haproxy;
    /// The proxies' upstream connections: keep (pooled and reused, as meshes run) or
    /// per-request (a new upstream connection for every request).
    #[arg(long, value_enum, value_name = "keep|per-request")]
    pool: cell<Pool> = Pool::Keep;
    /// Worker threads (HAProxy's nbthread, nginx's worker processes, Caddy's GOMAXPROCS) of
    /// each proxy of an edge or sidecar path.
    #[arg(long, value_name = "N")]
    proxy_threads: cell<u32> = 2;
    /// Conditions to compare: each `[[variants]]` table names itself (`name`) and overrides
    /// some knobs; the whole plan runs once per variant (file only).
    #[arg(skip)]
    variants: run<Vec<Knobs>> = Vec::new();
    /// Pass/fail criteria over cells.csv columns (`[[thresholds]]`, file only); every
    /// variant's cells are checked unless a threshold's `variants` selects.
    #[arg(skip)]
    thresholds: run<Vec<Threshold>> = Vec::new();
    /// Where servers and load generators run: `local` child processes, `hosts`, a network
    /// namespace per host on this machine joined by a bridge (see "Running on several hosts"),
    /// or `kubernetes`, pods per cell (see "Running on Kubernetes").
    #[arg(long, value_enum)]
    executor: run<Executor> = Executor::Local;
    /// With the `hosts` executor: how many agent hosts send each cell's load.
    #[arg(long, value_name = "N")]
    host_agents: run<u32> = 3;
    /// With the `hosts` executor: how long its namespaces live before they are made anew: run
    /// (the whole run), sweep (one variant's levels and stacks in one repetition, so TIME_WAIT
    /// accumulates from level to level as on a real host) or cell (anew every cell, as the
    /// local executor's namespace per cell).
    #[arg(long, value_enum, value_name = "run|sweep|cell")]
    host_namespaces: cell<HostNamespaces> = HostNamespaces::Run;
    /// Agents (`runner agent` at HOST:PORT) that send each cell's load instead of one local
    /// load generator: workers, requests and rate are split among them and their histograms
    /// merged exactly (see "Agents").
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    agents: run<Vec<String>> = Vec::new();
    /// An agent (`runner agent` at HOST:PORT) that runs each cell's server (`runner serve`, on
    /// the agent's address) and samples it, instead of a local child (default: a local child).
    #[arg(long, value_name = "HOST:PORT")]
    server_agent: run_opt<String> = None;
    /// The CA (PEM) the agents' certificates are verified against (default: the suite's CA
    /// in --certs).
    #[arg(long)]
    agent_ca: run_opt<PathBuf> = None;
    /// The name verified in the agents' certificates.
    #[arg(long)]
    agent_server_name: run<String> = "localhost".into();
    /// File with the agents' shared token (default: the TBENCH_AGENT_TOKEN variable; never a
    /// flag's value).
    #[arg(long)]
    agent_token_file: run_opt<PathBuf> = None;
    /// Kubernetes (`runner k8s render`): the image holding `runner` that the server pod and
    /// the agent pods run (build it with the repository's Dockerfile and push it).
    #[arg(long, value_name = "IMAGE")]
    k8s_image: run<String> = "tbench-runner:latest".into();
    /// Kubernetes: the namespace of everything the runner creates.
    #[arg(long, value_name = "NAME")]
    k8s_namespace: run<String> = "tbench".into();
    /// Kubernetes: agent pods per cell (an Indexed Job of N pods; pod i sends shard i).
    #[arg(long, value_name = "N")]
    k8s_agents: run<u32> = 3;
    /// Kubernetes: the server pod's CPU and memory, requests equal to limits (Guaranteed QoS),
    /// e.g. cpu=2,memory=1Gi.
    #[arg(long, value_name = "cpu=C,memory=M")]
    k8s_server_resources: run<Parsed<PodResources>> = "cpu=2,memory=1Gi".into();
    /// Kubernetes: each agent pod's CPU and memory, requests equal to limits, e.g.
    /// cpu=2,memory=1Gi.
    #[arg(long, value_name = "cpu=C,memory=M")]
    k8s_agent_resources: run<Parsed<PodResources>> = "cpu=2,memory=1Gi".into();
    /// Kubernetes: node labels every pod must match (`[k8s_node_selector]` table, or
    /// key=value,... as a flag) (default: any node).
    #[arg(long, value_parser = parse_labels, value_name = "KEY=VALUE,...")]
    k8s_node_selector: run<Labels> = Default::default();
    /// Kubernetes: keep agent pods off the server pod's node (required pod anti-affinity), so
    /// that load and server do not share a machine.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    k8s_agents_off_server_node: run<bool> = true;
    /// The user's own service, measured instead of our servers: `[targets.rest]` (the REST
    /// stacks; `[[targets.rest.requests]]` make it a weighted mix), `[targets.grpc]` (the gRPC stacks; grpc-h3 only when named; `[[targets.grpc.calls]]` make it a mix), `[targets.ids]` and `data` for the
    /// templates (file; `--url` and `--grpc-*` set the common parts).
    #[arg(skip)]
    targets: run<bench_core::user_service::Targets> = Default::default();
}
