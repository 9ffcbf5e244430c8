//! The mesh knobs' types (`path`, `proxy`, `pool`) and which proxy carries which stack. What
//! a proxy can carry is decided by the stack's wire properties (its ALPN, whether it is a
//! gRPC API, the TCP stack it names for an edge's upstream), never by its name, and the
//! table below is what the Debian packages on the suite's machine do (docs/mesh.md).

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

/// The HTTP version a hop of a proxied path speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopProtocol {
    Http1,
    Http2,
    /// Only in front of an edge proxy (QUIC from the client, terminated there).
    Http3,
}

impl HopProtocol {
    /// Its ALPN identifier, also what `cells.csv` records (`client_protocol`,
    /// `upstream_protocol`).
    pub fn alpn(self) -> &'static str {
        match self {
            HopProtocol::Http1 => "http/1.1",
            HopProtocol::Http2 => "h2",
            HopProtocol::Http3 => "h3",
        }
    }

    /// The TCP protocol of an ALPN identifier.
    fn over_tcp(alpn: &[u8]) -> Option<HopProtocol> {
        match alpn {
            b"http/1.1" => Some(HopProtocol::Http1),
            b"h2" => Some(HopProtocol::Http2),
            _ => None,
        }
    }
}

/// What a proxied path needs to know about a stack: what the client speaks to the first proxy
/// (`front`), what every later hop and the server speak (`protocol`), whether the requests
/// are gRPC (nginx passes those with `grpc_pass`), and whose server runs behind the proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    pub front: HopProtocol,
    pub protocol: HopProtocol,
    pub grpc: bool,
    /// The stack whose server the cell starts: the cell's own, or the one its edge forwards
    /// to ([`bench_core::Stack::edge_upstream_stack`]).
    pub server_stack: &'static str,
}

/// What was checked on this machine about QUIC in the packaged proxies (docs/mesh.md).
const HAPROXY_NO_QUIC: &str = "Debian's HAProxy 2.6 is built without QUIC (-QUIC in haproxy -vv)";
const NGINX_NO_QUIC: &str = "nginx 1.22 has no HTTP/3 (QUIC came in 1.25; no http_v3 in nginx -V)";
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
    let Some(protocol) = HopProtocol::over_tcp(stack.alpn()) else {
        if stack.alpn() == b"h3" {
            return over_quic(proxy, path, stack);
        }
        return Err(format!(
            "no proxy carries {} (ALPN {})",
            stack.name(),
            String::from_utf8_lossy(stack.alpn())
        ));
    };
    if !stack.supports_plaintext() {
        return Err(format!(
            "{} has no plaintext form, which the hop from the proxy to the server on its loopback needs",
            stack.name()
        ));
    }
    if proxy == ProxyKind::Nginx && protocol == HopProtocol::Http2 && !grpc {
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
    if upstream_stack.api() != stack.api() || HopProtocol::over_tcp(upstream_stack.alpn()).is_none()
    {
        return refused(format!(
            "its edge upstream {upstream} is not the same API over TCP"
        ));
    }
    let behind = carries(proxy, path, upstream_stack)?;
    Ok(Carried {
        front: HopProtocol::Http3,
        ..behind
    })
}

impl super::Experiment {
    /// The mesh knobs against the rest: a proxy that cannot carry a stack, a path the
    /// executor cannot build, or a knob a proxied path contradicts, each as one line.
    pub(super) fn check_mesh(&self) -> Result<(), super::Invalid> {
        let fail = |key: &str, message: String| {
            Err(super::Invalid {
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
                (MeshPath::Edge, super::Executor::Local | super::Executor::Hosts) => None,
                (MeshPath::Sidecar, super::Executor::Hosts) => None,
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

/// The statuses a proxy answers with itself when its upstream fails (bad gateway, no
/// upstream available, upstream timeout); our servers never send them.
pub const PROXY_STATUSES: [u16; 3] = [502, 503, 504];

/// Who answered a failure of `class` with `code` on the path `settings` describe: on an edge
/// or sidecar path a 502/503/504 (`502` from a REST answer, `HTTP 502` from a gRPC one) is the
/// proxy's own answer,
/// named so in failures.csv's example; `None` for anything else.
pub fn answered_by_proxy(
    settings: &super::Experiment,
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
    use super::*;
    use crate::settings::Experiment;
    use bench_core::FailureClass;

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
