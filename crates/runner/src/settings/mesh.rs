//! The mesh knobs' types (`path`, `proxy`, `pool`) and which proxy carries which stack. What
//! a proxy can carry is decided by the stack's wire properties (its ALPN and whether it is a
//! gRPC API), never by its name, and the table below is what the Debian packages on the
//! suite's machine do (docs/mesh.md).

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

/// The HTTP version a stack speaks on every hop of a proxied path (the proxies here pass a
/// request on in the version it came in: see [`carries`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopProtocol {
    Http1,
    Http2,
}

impl HopProtocol {
    pub fn alpn(self) -> &'static str {
        match self {
            HopProtocol::Http1 => "http/1.1",
            HopProtocol::Http2 => "h2",
        }
    }
}

/// What a proxied path needs to know about a stack: its hops' protocol and whether the
/// requests are gRPC (nginx passes those with `grpc_pass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    pub protocol: HopProtocol,
    pub grpc: bool,
}

/// Whether `proxy` carries `stack` end to end (in front and upstream, in the stack's own
/// protocol, since the servers speak only theirs), or the one line saying why not.
pub fn carries(proxy: ProxyKind, stack: &dyn bench_core::Stack) -> Result<Carried, String> {
    let grpc = stack.api() == bench_core::Api::Grpc;
    let protocol = match stack.alpn() {
        b"http/1.1" => HopProtocol::Http1,
        b"h2" => HopProtocol::Http2,
        b"h3" => {
            return Err(format!(
                "{} cannot carry {} (HTTP/3): {}",
                proxy.as_str(),
                stack.name(),
                match proxy {
                    ProxyKind::Haproxy =>
                        "Debian's HAProxy 2.6 is built without QUIC (-QUIC in haproxy -vv)",
                    ProxyKind::Nginx => "nginx 1.22 has no HTTP/3 (QUIC came in 1.25)",
                    ProxyKind::Caddy =>
                        "Caddy 2.6 serves HTTP/3 in front, but its experimental HTTP/3 upstream (versions 3) dials TCP, so it cannot reach an HTTP/3 server (docs/mesh.md)",
                }
            ))
        }
        other => {
            return Err(format!(
                "no proxy carries {} (ALPN {})",
                stack.name(),
                String::from_utf8_lossy(other)
            ))
        }
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
    Ok(Carried { protocol, grpc })
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
            if let Some(stack) = crate::registry::find(name) {
                if let Err(why) = carries(self.proxy, stack) {
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
