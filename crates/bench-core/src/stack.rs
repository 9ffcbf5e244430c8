//! The trait every protocol stack implements. The runner sees only this.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

use crate::call::Call;
use crate::failure::Failure;
use crate::reply::{ConnectTiming, Reply};
use crate::service_time::ServiceTimeSpec;
use crate::tls::{ClientTls, ServerIdentity};
use crate::user_service::{Api, Calls};
use crate::workload::{FaultSpec, PayloadProfile};

/// What a server needs to serve the workload.
#[derive(Clone)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    /// `None` serves plaintext (only on stacks that support it).
    pub tls: Option<Arc<ServerIdentity>>,
    pub payload: PayloadProfile,
    pub fault: Option<FaultSpec>,
    /// Accept backlog for TCP listeners.
    pub backlog: u32,
    pub tuning: Tuning,
    /// Processing time of each item request (none by default).
    pub service_time: ServiceTimeSpec,
}

/// A UDP server socket's SO_RCVBUF/SO_SNDBUF unless `udp_buffer_bytes` is tuned (the kernel
/// caps it at rmem_max). Shared, so that the runner can record what the kernel grants for it
/// without knowing which stack uses UDP.
pub const DEFAULT_SERVER_UDP_BUFFER_BYTES: usize = 4 << 20;

/// Transport knobs a study may turn (the study's collapse candidates); `None` keeps the
/// library's default. Each stack applies the ones that exist for it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tuning {
    /// QUIC: the initial RTT estimate before any sample (quinn's default is 333 ms, so a lost
    /// Initial costs about a second).
    pub quic_initial_rtt_ms: Option<u64>,
    /// QUIC: SO_RCVBUF and SO_SNDBUF of the UDP sockets, in bytes.
    pub udp_buffer_bytes: Option<usize>,
    /// QUIC: connection-level receive window in bytes (stream windows follow it).
    pub quic_receive_window: Option<u64>,
    /// QUIC server: endpoints (each a socket and a driver task) sharing the port with
    /// SO_REUSEPORT; `None` = one.
    pub quic_server_endpoints: Option<u32>,
    /// QUIC: `Some(false)` turns segmentation offload off (GSO on send; GRO on the server's
    /// socket); `None` = quinn's default, on where the kernel has it.
    pub quic_offload: Option<bool>,
    /// QUIC: `Some(false)` turns path MTU discovery off (no probes, 1,200-byte packets);
    /// `None` = quinn's default, on. Each probe is padded to the size it tries, and quinn
    /// parses PADDING a byte at a time: off, client CPU per 1,000 new-conn requests fell from
    /// 430–472 to 365–416 ms (results/quic-breakdown/changes.md).
    pub quic_mtu_discovery: Option<bool>,
    /// TCP client: close with SO_LINGER 0 (an RST, no TIME_WAIT) instead of a FIN.
    pub linger_zero: bool,
    /// Clients: how many local source addresses (127.0.0.1, 127.0.0.2, … for a loopback
    /// target) connections take in turn, so one address's ephemeral ports are not the limit;
    /// 0 or 1 = the kernel picks the source. See [`crate::source`].
    pub source_addresses: u32,
    /// Server: issue no TLS session tickets and keep no session cache. Set for cells whose
    /// clients do full handshakes, which would otherwise pay for tickets they never use.
    pub no_session_tickets: bool,
    /// Client: which implementation sends the requests (a stack that has one only uses it).
    pub client: ClientImplementation,
    /// Lean clients: the largest response head accepted, in bytes (HTTP/1.1: with interim 1xx
    /// heads; HTTP/3: the decoded field section); `None` = [`crate::limits`]' default (64 KiB).
    pub response_head_max_bytes: Option<usize>,
    /// Lean clients (HTTP/1.1, HTTP/3): the most header fields in one response head; `None` =
    /// [`crate::limits`]' default (100).
    pub response_headers_max: Option<usize>,
    /// Lean clients (HTTP/1.1, HTTP/2, HTTP/3): the largest response body accepted, in bytes
    /// (each worker may hold one that large); `None` = [`crate::limits`]' default (4 MiB).
    pub response_body_max_bytes: Option<u64>,
    /// Lean gRPC clients: the largest message received, refused at its length prefix; `None`
    /// = [`crate::limits`]' default (4 MiB, as gRPC's implementations).
    pub grpc_max_receive_message_bytes: Option<u64>,
    /// QUIC client: a UDP socket and endpoint per connection, or one shared by all of the
    /// client's connections.
    pub quic_endpoint: QuicEndpoint,
    /// Our gRPC servers: which method of the item service each request calls (unary GetItem,
    /// or a streaming one of `stream_messages` messages).
    pub grpc_call: GrpcCall,
    /// Streaming calls: the messages each call streams (answers of a server-streaming or bidi
    /// call, requests of a client-streaming one).
    pub stream_messages: u32,
    /// The bulk workload: one object moved per request instead of the item (`object`), on
    /// the stacks that have it ([`Stack::bulk`]).
    pub bulk: Option<crate::bulk::BulkObject>,
    /// gRPC stacks, bulk workload: each message's size in bytes (0 =
    /// [`crate::bulk::DEFAULT_MESSAGE_BYTES`]).
    pub bulk_message_bytes: u32,
}

/// Which of the item service's methods a request of our own workload calls. Streaming calls
/// are what feeds (server streaming), uploads (client streaming) and chats (bidi) are built
/// on; a stack that has them lists them in [`Stack::grpc_calls`].
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum GrpcCall {
    /// `GetItem`: one request, one item.
    #[default]
    Unary,
    /// `ListItems`: one request, `stream_messages` items in order.
    ServerStream,
    /// `PutItems`: `stream_messages` items uploaded, one count back.
    ClientStream,
    /// `ChatItems`: `stream_messages` requests, each answered by its item, in order (the
    /// requests are all sent at once, not one after each answer).
    Bidi,
}

impl GrpcCall {
    pub const ALL: [GrpcCall; 4] = [
        GrpcCall::Unary,
        GrpcCall::ServerStream,
        GrpcCall::ClientStream,
        GrpcCall::Bidi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GrpcCall::Unary => "unary",
            GrpcCall::ServerStream => "server-stream",
            GrpcCall::ClientStream => "client-stream",
            GrpcCall::Bidi => "bidi",
        }
    }

    /// Whether the call streams messages (all but unary).
    pub fn is_streaming(self) -> bool {
        self != GrpcCall::Unary
    }
}

impl std::fmt::Display for GrpcCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Messages per streaming call unless `stream_messages` says otherwise.
pub const DEFAULT_STREAM_MESSAGES: u32 = 10;

/// How a QUIC client's connections map onto UDP sockets. Whether QUIC holds up where TCP runs
/// out of ports or descriptors may be the protocol's or this pattern's: one socket per
/// connection costs a descriptor and an ephemeral port each, as TCP does; one shared socket,
/// as QUIC client libraries run by default, costs one of each for all connections.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum QuicEndpoint {
    /// Every connection its own socket and quinn endpoint: "a new connection" is a new
    /// socket, as on the TCP stacks.
    #[default]
    PerConnection,
    /// One socket and quinn endpoint for all of a client's connections; quinn's endpoint
    /// holds each closing connection's closing period.
    Shared,
}

impl QuicEndpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            QuicEndpoint::PerConnection => "per-connection",
            QuicEndpoint::Shared => "shared",
        }
    }
}

impl std::fmt::Display for QuicEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stack's client implementation: the suite's lean protocol client, or the library an
/// application would use (hyper, tonic, h3 + quinn). Comparing the two separates what the
/// protocol costs from what an implementation costs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ClientImplementation {
    /// Requests written and answers parsed by the suite itself, on the socket, per worker.
    #[default]
    Lean,
    /// The general-purpose client library of the protocol, as an application runs it.
    Library,
}

impl ClientImplementation {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientImplementation::Lean => "lean",
            ClientImplementation::Library => "library",
        }
    }
}

impl std::fmt::Display for ClientImplementation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a client needs to reach and check a server.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    pub target: SocketAddr,
    /// The TLS server name to verify (the certificate is for `localhost`).
    pub server_name: String,
    /// `None` connects in plaintext.
    pub tls: Option<ClientTls>,
    pub connect_timeout: Duration,
    pub handshake_timeout: Duration,
    /// The profile the server uses, so the client can check the padding size.
    pub payload: PayloadProfile,
    pub tuning: Tuning,
    /// What each request is: our server's item, or a target's templated calls.
    pub calls: Calls,
}

/// A bound, not yet running server: its address is known before it serves, so a ready line
/// can be printed and tests can connect.
pub struct BoundServer {
    pub local_addr: SocketAddr,
    /// Serves until dropped or until it fails.
    pub serving: BoxFuture<'static, anyhow::Result<()>>,
}

/// Cumulative bytes at the socket for one connection: TCP payload (including TLS records and
/// HTTP/2 framing) or UDP datagram payloads for QUIC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WireBytes {
    pub sent: u64,
    pub received: u64,
}

/// The HTTP version a stack speaks. The one place the ALPN identifiers are written: the
/// stacks, the proxies in front of them and the manifest take them from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpVersion {
    Http1,
    Http2,
    /// Over QUIC.
    Http3,
}

impl HttpVersion {
    /// Its ALPN identifier (RFC 7301's registry), also what `cells.csv` records
    /// (`client_protocol`, `upstream_protocol`).
    pub const fn alpn(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "http/1.1",
            HttpVersion::Http2 => "h2",
            HttpVersion::Http3 => "h3",
        }
    }

    /// [`HttpVersion::alpn`] as the bytes TLS negotiates.
    pub const fn alpn_bytes(self) -> &'static [u8] {
        self.alpn().as_bytes()
    }

    /// Whether it runs over QUIC (UDP) rather than TCP.
    pub const fn over_quic(self) -> bool {
        matches!(self, HttpVersion::Http3)
    }
}

/// A protocol stack: serves the workload and makes clients for it.
#[async_trait]
pub trait Stack: Send + Sync + 'static {
    /// Short name used on the command line and in results (`h1`, `h2`, `h3`, `grpc`, `grpc-h3`).
    fn name(&self) -> &'static str;
    /// Human-readable description for reports.
    fn description(&self) -> &'static str;
    /// Short label for tables and charts ("HTTP/1.1").
    fn label(&self) -> &'static str;
    /// The HTTP version its connections speak: what a proxy in front of its server must
    /// speak, and what its ALPN names.
    fn http_version(&self) -> HttpVersion;
    /// The ALPN protocol negotiated under TLS (in the manifest: scripts choose the external
    /// load tool that speaks it).
    fn alpn(&self) -> &'static [u8] {
        self.http_version().alpn_bytes()
    }
    /// Whether the stack can run without TLS (HTTP/3 cannot).
    fn supports_plaintext(&self) -> bool;
    /// Whether a client can send its request in the handshake's first flight (QUIC 0-RTT).
    fn supports_zero_rtt(&self) -> bool {
        false
    }
    /// Which of an experiment's targets this stack's client sends to (`[targets.rest]` or
    /// `[targets.grpc]`).
    fn api(&self) -> Api {
        Api::Rest
    }
    /// Whether a targets run (`[targets.*]`) without `stacks` measures this stack: false where
    /// few services of its API serve its transport (gRPC over HTTP/3: most gRPC servers speak
    /// HTTP/2 only), so a run against such a service does not fail by default; naming the
    /// stack in `stacks` sends to the target all the same.
    fn targets_by_default(&self) -> bool {
        true
    }
    /// The stack whose server an edge proxy that terminates this stack's connections forwards
    /// to, when the proxies here cannot speak this stack's protocol upstream: the same API
    /// over a TCP transport (QUIC terminated at the edge, TCP behind it). `None`: the edge
    /// forwards in the stack's own protocol to its own server.
    fn edge_upstream_stack(&self) -> Option<&'static str> {
        None
    }
    /// How the item is encoded on the wire ("JSON", "protobuf"), for reports.
    fn encoding(&self) -> &'static str;
    /// The crates (as named in Cargo.lock) that implement this stack's protocol, so that the
    /// manifest records their versions.
    fn libraries(&self) -> &'static [&'static str] {
        &[]
    }
    /// The server settings that matter for a fair comparison (written into the manifest), as
    /// a knowledgeable operator would state them.
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// The item-service methods its servers answer and its lean client calls (`grpc_call`);
    /// only the gRPC stacks have more than the one request of the workload.
    fn grpc_calls(&self) -> &'static [GrpcCall] {
        &[GrpcCall::Unary]
    }
    /// Whether its servers and lean client move the bulk workload's objects (`object`).
    fn bulk(&self) -> bool {
        false
    }
    /// Binds the listener; the returned future serves.
    async fn bind(&self, settings: ServerSettings) -> anyhow::Result<BoundServer>;
    /// The client implementations this stack has, the default first.
    fn client_implementations(&self) -> &'static [ClientImplementation] {
        &[ClientImplementation::Lean, ClientImplementation::Library]
    }
    /// The implementation a client made for `requested` uses: the requested one if the stack
    /// has it, else its default (recorded per cell, so a row says what actually ran).
    fn client_implementation(&self, requested: ClientImplementation) -> ClientImplementation {
        let offered = self.client_implementations();
        if offered.contains(&requested) {
            requested
        } else {
            offered[0]
        }
    }
    /// Prepares a client (TLS config, sockets policy) that opens connections to one server,
    /// in the implementation [`Stack::client_implementation`] picks for `settings.tuning`.
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>>;
}

/// Opens connections to one server.
#[async_trait]
pub trait Client: Send + Sync {
    /// A new socket and, with TLS, a new handshake (full or resumed per the settings).
    async fn connect(&self) -> Result<Connected, Failure>;

    /// Waits (at most `bound`) until the connections this client closed have finished
    /// closing in this process, so one phase's teardown does not run into the next. Only
    /// QUIC keeps such state in the process (its closing period); TCP's is in the kernel.
    async fn settle(&self, _bound: std::time::Duration) {}

    /// What the user should know about the target before the run, one line each (an
    /// expectation that cannot be checked as written, and what to write instead); printed once
    /// by the runner's preflight.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A fresh connection and how long it took to open.
pub struct Connected {
    pub conn: Arc<dyn Connection>,
    pub timing: ConnectTiming,
}

/// One open connection. `request` takes `&self` so that multiplexed stacks can carry several
/// requests at once from different workers; HTTP/1.1 serialises them.
#[async_trait]
pub trait Connection: Send + Sync {
    /// Sends the request for `call` (the item, or the target's rendered request) and
    /// validates the answer.
    async fn request(&self, call: Call) -> Result<Reply, Failure>;
    /// [`Connection::request`], telling `on_message` each gap between two consecutive
    /// messages of a streaming answer as they arrive (the runner's inter-message latency);
    /// connections without streaming calls need not implement it.
    async fn request_observed(
        &self,
        call: Call,
        on_message: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Reply, Failure> {
        let _ = on_message;
        self.request(call).await
    }
    /// Bytes at the socket so far.
    fn wire_bytes(&self) -> WireBytes;
    /// Closes the connection (client closes first, as the study's clients did).
    async fn close(&self);
}
