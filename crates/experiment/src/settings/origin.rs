//! The `server` knob: which program answers the load. Ours by default (the stack's own
//! server); for the bulk workload's downloads also a server nobody here wrote, serving the
//! same object as a static file, so that a verdict about a transport is not only a verdict
//! about our servers. What each program serves is what its Debian 12 package does: decided by
//! the stack's HTTP version and API, never by its name.

use bench_core::HttpVersion;
use serde::{Deserialize, Serialize};

use super::mesh::{ProxyKind, NGINX_NO_QUIC};

/// The program that answers a cell's requests.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// The stack's own server (`runner serve`).
    #[default]
    Ours,
    /// Caddy 2.6 (Go's net/http over HTTP/1.1 and HTTP/2, quic-go over HTTP/3), its
    /// `file_server`.
    Caddy,
    /// nginx 1.22 (HTTP/1.1 and HTTP/2; no HTTP/3 before 1.25), a static location.
    Nginx,
}

impl ServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Ours => "ours",
            ServerKind::Caddy => "caddy",
            ServerKind::Nginx => "nginx",
        }
    }

    /// The program it runs, for a server nobody here wrote (the proxies' programs: one
    /// place knows where they live, their versions and how they start).
    pub fn program(self) -> Option<ProxyKind> {
        match self {
            ServerKind::Ours => None,
            ServerKind::Caddy => Some(ProxyKind::Caddy),
            ServerKind::Nginx => Some(ProxyKind::Nginx),
        }
    }

    /// Whether this server answers `stack`'s bulk downloads, or the one line saying why not.
    pub fn serves(self, stack: &dyn bench_core::Stack) -> Result<(), String> {
        if self == ServerKind::Ours {
            return Ok(());
        }
        let name = stack.name();
        if stack.api() != bench_core::Api::Rest {
            return Err(format!(
                "{} serves the REST object (GET /bulk/<bytes>) as a static file; {name} is a gRPC API, whose Download stream only our server answers",
                self.as_str()
            ));
        }
        match (self, stack.http_version()) {
            (ServerKind::Nginx, HttpVersion::Http3) => Err(format!(
                "{NGINX_NO_QUIC}, so it cannot serve {name}; caddy can"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each program serves follows from the stack's API and HTTP version.
    #[test]
    fn each_server_serves_what_its_package_speaks() {
        for stack in stacks::stacks() {
            assert!(ServerKind::Ours.serves(stack).is_ok(), "{}", stack.name());
            let rest = stack.api() == bench_core::Api::Rest;
            let quic = stack.http_version() == HttpVersion::Http3;
            assert_eq!(
                ServerKind::Caddy.serves(stack).is_ok(),
                rest,
                "{}",
                stack.name()
            );
            assert_eq!(
                ServerKind::Nginx.serves(stack).is_ok(),
                rest && !quic,
                "{}",
                stack.name()
            );
        }
    }
}
