//! Setting types that are more than a value: the open-loop pacing method, a threshold table
//! as the experiment file writes it, and the live metrics endpoint's address. They live with the settings (the runner's lowest
//! layer) so that the model depends on nothing above it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use load::Regime;

/// Where a run's server and load generators run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Executor {
    /// Child processes on this machine, talking over loopback (or to `agents`, and the server
    /// on `server_agent`).
    #[default]
    Local,
    /// A network namespace per host on this machine (the server's and `host_agents` agents'),
    /// joined by a bridge: traffic crosses real interfaces with their own addresses.
    Hosts,
    /// Per cell, a server pod and an Indexed Job of `k8s_agents` agent pods (kube-rs).
    Kubernetes,
}

/// How long the `hosts` executor keeps its namespaces (the hosts, their agents and their
/// kernel state: TIME_WAIT sockets above all) before making them anew.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HostNamespaces {
    /// For the whole run: every cell inherits what the cells before it left behind.
    #[default]
    Run,
    /// For one sweep of a variant (its levels and stacks in one repetition): TIME_WAIT
    /// accumulates from level to level, as on a real client host, and no sweep inherits
    /// another's.
    Sweep,
    /// Anew for every cell, as the local executor's namespace per cell: nothing accumulates.
    Cell,
}

impl HostNamespaces {
    pub fn as_str(self) -> &'static str {
        match self {
            HostNamespaces::Run => "run",
            HostNamespaces::Sweep => "sweep",
            HostNamespaces::Cell => "cell",
        }
    }
}

/// The order of a run's cells within each repetition (`cell_order`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CellOrder {
    /// Shuffled anew for every repetition, from `cell_order_seed`.
    #[default]
    Random,
    /// The planned order ([`crate::plan::plan`]).
    Fixed,
}

/// The most agent hosts one `hosts` run creates (`host_agents`); the bridge's addresses are
/// numbered from the first agent's.
pub const MAX_HOST_AGENTS: u32 = 32;

/// The longest experiment name: it names the results folder (`<UTC stamp>-<name>`, with a
/// suffix when taken), which a file system allows 255 bytes.
pub const MAX_NAME_BYTES: usize = 200;
/// The most agent pods per cell `k8s_agents` accepts.
pub const MAX_K8S_AGENTS: u32 = 100;

pub use load::Pacing;

/// One `[[thresholds]]` table as written: optional selectors (absent = every cell), an
/// optional name, and any number of `column = { min = …, max = … }` bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regimes: Option<Vec<Regime>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<String>>,
    /// Names of a request mix's entries: the bounds then apply to each of those names'
    /// figures in each selected cell (`requests.csv`), not to the cell's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<String>>,
    /// `stress` (default) or `baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Kept raw so that a malformed bound gets a message naming its key, not serde's.
    #[serde(flatten)]
    pub bounds: BTreeMap<String, toml::Value>,
}

/// Where the live metrics endpoint listens (`metrics_listen`), as the user writes it: a port
/// (on 127.0.0.1), or an IP address with its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr(pub std::net::SocketAddr);

impl std::str::FromStr for ListenAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Ok(port) = text.parse::<u16>() {
            return Ok(ListenAddr((std::net::Ipv4Addr::LOCALHOST, port).into()));
        }
        text.parse().map(ListenAddr).map_err(|_| {
            format!("'{text}' is not a port or an IP address with its port (9464, 127.0.0.1:9464, [::1]:9464)")
        })
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ListenAddr {
    /// Only this machine can reach it.
    pub fn is_loopback(&self) -> bool {
        self.0.ip().is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use super::ListenAddr;

    #[test]
    fn a_port_alone_is_loopback_and_other_addresses_say_so() {
        let a: ListenAddr = "9464".parse().unwrap();
        assert_eq!(a.to_string(), "127.0.0.1:9464");
        assert!(a.is_loopback());
        assert!("[::1]:9464".parse::<ListenAddr>().unwrap().is_loopback());
        assert!("127.0.0.2:1".parse::<ListenAddr>().unwrap().is_loopback());
        assert!(!"0.0.0.0:9464".parse::<ListenAddr>().unwrap().is_loopback());
        assert!(!"192.0.2.1:9464"
            .parse::<ListenAddr>()
            .unwrap()
            .is_loopback());
        for bad in ["localhost:9464", "99999", "", "1.2.3.4"] {
            let e = bad.parse::<ListenAddr>().unwrap_err();
            assert!(e.contains("is not a port or an IP address"), "{e}");
        }
    }
}
