//! The mesh knobs' types (`path`, `proxy`, `pool`) and which proxy carries which stack. What
//! a proxy can carry is decided by the stack's wire properties (its ALPN, whether it is a
//! gRPC API, the TCP stack it names for an edge's upstream), never by its name, and the
//! table below is what the Debian packages on the suite's machine do (docs/mesh.md).

use bench_core::HttpVersion;
use serde::{Deserialize, Serialize};

/// The path a request takes from the load generator to the server.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum MeshPath {
    /// Straight to the server (the study's path).
    #[default]
    Direct,
    /// Through one TLS-terminating reverse proxy in front of the server, as a load balancer
    /// or CDN: the client verifies the proxy's certificate; the proxy reaches the server in
    /// plaintext on loopback.
    Edge,
    /// Through two sidecars (hosts executor): the client reaches its local proxy in plaintext
    /// on loopback, the two proxies talk mutually authenticated TLS across the bridge, and the
    /// server-side proxy reaches the server in plaintext on the server host's loopback.
    Sidecar,
}

impl MeshPath {
    pub fn as_str(self) -> &'static str {
        match self {
            MeshPath::Direct => "direct",
            MeshPath::Edge => "edge",
            MeshPath::Sidecar => "sidecar",
        }
    }
}

/// The proxy program a path's hops run (a Debian package each).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProxyKind {
    #[default]
    Haproxy,
    Nginx,
    Caddy,
}

impl ProxyKind {
    pub const ALL: [ProxyKind; 3] = [ProxyKind::Haproxy, ProxyKind::Nginx, ProxyKind::Caddy];

    pub fn as_str(self) -> &'static str {
        match self {
            ProxyKind::Haproxy => "haproxy",
            ProxyKind::Nginx => "nginx",
            ProxyKind::Caddy => "caddy",
        }
    }
}

/// Whether a proxy keeps its upstream connections open for later requests.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Pool {
    /// Upstream connections are kept and reused (every proxy's usual setting).
    #[default]
    Keep,
    /// A new upstream connection for every request, closed after it.
    PerRequest,
}

impl Pool {
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Keep => "keep",
            Pool::PerRequest => "per-request",
        }
    }
}

/// What a proxied path needs to know about a stack: what the client speaks to the first proxy
/// (`front`; HTTP/3 only in front of an edge that terminates QUIC), what every later hop and
/// the server speak (`protocol`, the server's [`bench_core::Stack::http_version`]), whether the requests
/// are gRPC (nginx passes those with `grpc_pass`), and whose server runs behind the proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    pub front: HttpVersion,
    pub protocol: HttpVersion,
    pub grpc: bool,
    /// The stack whose server the cell starts: the cell's own, or the one its edge forwards
    /// to ([`bench_core::Stack::edge_upstream_stack`]).
    pub server_stack: &'static str,
}

/// What was checked on this machine about QUIC in the packaged proxies (docs/mesh.md).
const HAPROXY_NO_QUIC: &str = "Debian's HAProxy 2.6 is built without QUIC (-QUIC in haproxy -vv)";
pub(super) const NGINX_NO_QUIC: &str =
    "nginx 1.22 has no HTTP/3 (QUIC came in 1.25; no http_v3 in nginx -V)";
const CADDY_NO_QUIC_UPSTREAM: &str = "Caddy 2.6's experimental HTTP/3 upstream (versions 3) dials TCP (checked here: `dial tcp …: connection refused` against an HTTP/3 server)";

/// Whether `proxy` carries `stack` on `path`, or the one line saying why not. On TCP every
/// hop speaks the stack's own protocol (the servers speak only theirs); QUIC only reaches an
/// edge that terminates it, which forwards over TCP to the stack's edge upstream.
pub fn carries(
    proxy: ProxyKind,
    path: MeshPath,
    stack: &dyn bench_core::Stack,
) -> Result<Carried, String> {
    let grpc = stack.api() == bench_core::Api::Grpc;
    let protocol = stack.http_version();
    if protocol.over_quic() {
        return over_quic(proxy, path, stack);
    }
    if !stack.supports_plaintext() {
        return Err(format!(
            "{} has no plaintext form, which the hop from the proxy to the server on its loopback needs",
            stack.name()
        ));
    }
    if proxy == ProxyKind::Nginx && protocol == HttpVersion::Http2 && !grpc {
        return Err(format!(
            "nginx cannot carry {} (HTTP/2): its proxy_pass speaks HTTP/1.1 upstream and the server speaks only HTTP/2 (grpc_pass is for gRPC)",
            stack.name()
        ));
    }
    Ok(Carried {
        front: protocol,
        protocol,
        grpc,
        server_stack: stack.name(),
    })
}

/// An HTTP/3 stack: only Caddy accepts QUIC, only at an edge (nothing here speaks QUIC
/// upstream), only for a REST API (its HTTP/3 server sends no trailers), and only for a stack
/// that names a TCP stack of the same API for the edge's upstream.
fn over_quic(
    proxy: ProxyKind,
    path: MeshPath,
    stack: &dyn bench_core::Stack,
) -> Result<Carried, String> {
    let name = stack.name();
    let refused = |why: String| {
        Err(format!(
            "{} cannot carry {name} (HTTP/3): {why}",
            proxy.as_str()
        ))
    };
    match proxy {
        ProxyKind::Haproxy => return refused(HAPROXY_NO_QUIC.into()),
        ProxyKind::Nginx => return refused(NGINX_NO_QUIC.into()),
        ProxyKind::Caddy => {}
    }
    if path != MeshPath::Edge {
        return refused(format!(
            "QUIC between sidecars needs a QUIC upstream, and {CADDY_NO_QUIC_UPSTREAM}; HAProxy 2.6 and nginx 1.22 as packaged have no QUIC at all (docs/mesh.md); Caddy terminates HTTP/3 at an edge (--path edge)"
        ));
    }
    if stack.api() == bench_core::Api::Grpc {
        return refused(
            "Caddy 2.6's HTTP/3 server (quic-go before v0.47) sends no response trailers, so a gRPC answer's grpc-status never reaches the client (checked here: every call through it ended without one); server trailers reached Caddy with quic-go v0.47 (caddyserver/caddy#6582), after 2.6 (docs/mesh.md)".into(),
        );
    }
    let Some(upstream) = stack.edge_upstream_stack() else {
        return refused(format!(
            "{CADDY_NO_QUIC_UPSTREAM}, and {name} names no TCP stack for the edge to forward to"
        ));
    };
    let Some(upstream_stack) = stacks::find(upstream) else {
        return refused(format!(
            "its edge upstream {upstream} is not a registered stack"
        ));
    };
    if upstream_stack.api() != stack.api() || upstream_stack.http_version().over_quic() {
        return refused(format!(
            "its edge upstream {upstream} is not the same API over TCP"
        ));
    }
    let behind = carries(proxy, path, upstream_stack)?;
    Ok(Carried {
        front: HttpVersion::Http3,
        ..behind
    })
}
