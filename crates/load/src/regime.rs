//! How the engine opens connections ([`Regime`]) and paces an open loop ([`Pacing`]): the
//! settings name them, the engine acts on them.

use std::fmt;
use std::str::FromStr;

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

/// How an open-loop worker waits until a request is due. tokio's timer wheel has 1 ms
/// slots and fires on the first tick after the deadline, so a plain timer sends ≈ 0.5–1 ms
/// late, and that lateness would count as the server's latency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// Sleep on the timer until 2 ms (`SPIN_BEFORE_DUE`) before the due time, then yield in a loop
    /// (other workers keep running) until it: microsecond precision for the CPU of one
    /// polling worker at a time, which shows in the client's CPU.
    #[default]
    Spin,
    /// The timer alone (1 ms granularity): kept to show what precise pacing removes.
    Timer,
}

impl Pacing {
    pub fn as_str(self) -> &'static str {
        match self {
            Pacing::Spin => "spin",
            Pacing::Timer => "timer",
        }
    }
}
