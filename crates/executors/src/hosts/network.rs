//! Several hosts on this machine (the `hosts` executor): a network namespace for the server and
//! one per agent, each joined by a veth pair to a bridge that lives in a namespace of its own
//! (the host's network is never touched), with addresses from 198.18.0.0/15 (RFC 2544's
//! benchmark range). Server and agents talk across real interfaces with their own addresses,
//! not loopback. Everything is removed on drop, also after an error or Ctrl-C. The agents that
//! run in the agent hosts are the executor's ([`super::HostsExecutor`]).

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// The server host's address; agent `i` (from 0) is `AGENT_BASE + i`.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The port every cell's server listens on in its host, as a service does: connections of
/// later cells have the 4-tuples of earlier ones, so the TIME_WAIT those left behind holds
/// their ports as on a real client host (a new port per cell would give each cell a fresh
/// budget of ephemeral ports).
pub const SERVER_PORT: u16 = 443;
const AGENT_BASE: u8 = 11;
const PREFIX_LEN: u8 = 15;
/// Most addresses one agent host has: its own and up to 254 more (198.19.<agent>.1–254), which
/// its load generators spread their connections over (`source_addresses`).
pub const MAX_AGENT_ADDRESSES: u32 = 255;

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (install iproute2)")?;
    if !output.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `ip -n NS -batch -` on `commands` (one per line; nothing to do when empty).
fn ip_batch(ns: &str, commands: &str) -> anyhow::Result<()> {
    if commands.is_empty() {
        return Ok(());
    }
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run ip (install iproute2)")?;
    std::io::Write::write_all(&mut child.stdin.take().expect("piped"), commands.as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "ip -n {ns} -batch failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// One namespace of the set.
struct Host {
    name: String,
    addr: Ipv4Addr,
    handle: std::sync::Arc<File>,
    /// Its link's port on the bridge.
    port: String,
}

/// The namespaces, the bridge and the agents running in their hosts.
pub struct Hosts {
    bridge: String,
    server: Host,
    agents: Vec<Host>,
    /// A new namespace's values of the sysctls a cell may set (`key=value`).
    default_sysctls: Vec<String>,
    /// The values every host has now: the defaults, then the last cell's.
    sysctls: std::sync::Mutex<Vec<String>>,
}

impl Hosts {
    /// Creates the bridge, the server host and `n` agent hosts with `addresses` addresses each
    /// (at most [`MAX_AGENT_ADDRESSES`]). `generation` tells apart the sets one run makes in
    /// turn ([`experiment::settings::HostNamespaces`]).
    pub fn create(n: u32, addresses: u32, generation: u32) -> anyhow::Result<Hosts> {
        assert!(
            n <= experiment::settings::MAX_HOST_AGENTS,
            "host_agents is validated"
        );
        let base = format!("tbench-{}-h-{generation}", std::process::id());
        let bridge = format!("{base}-br");
        ip(&["netns", "add", &bridge])?;
        let mut hosts = Hosts {
            bridge,
            server: Host {
                name: String::new(),
                addr: Ipv4Addr::UNSPECIFIED,
                handle: std::sync::Arc::new(File::open("/proc/self/ns/net")?),
                port: String::new(),
            },
            agents: Vec::new(),
            default_sysctls: Vec::new(),
            sysctls: Default::default(),
        };
        // From here on, dropping `hosts` removes what exists.
        ip(&["-n", &hosts.bridge, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hosts.bridge, "link", "set", "br0", "up"])?;
        ip(&["-n", &hosts.bridge, "link", "set", "lo", "up"])?;
        hosts.server = hosts.host(&format!("{base}-srv"), "vsrv", SERVER_IP)?;
        for i in 0..n {
            let addr = Ipv4Addr::new(198, 18, 0, AGENT_BASE + i as u8);
            let host = hosts.host(&format!("{base}-a{}", i + 1), &format!("va{}", i + 1), addr)?;
            hosts.agents.push(host);
            // More source addresses on the same /15, so a cell's connections from this host are
            // not limited to one address's ephemeral ports.
            let extra: String = (1..addresses.clamp(1, MAX_AGENT_ADDRESSES))
                .map(|k| format!("addr add 198.19.{i}.{k}/{PREFIX_LEN} dev eth0\n"))
                .collect();
            ip_batch(&hosts.agents[i as usize].name, &extra)?;
        }
        hosts.default_sysctls = defaults(&hosts.agents[0].name)?;
        *hosts.sysctls.lock().expect("not poisoned") = hosts.default_sysctls.clone();
        Ok(hosts)
    }

    /// A namespace joined to the bridge by a veth pair, `addr` on its end (`eth0`).
    fn host(&self, name: &str, veth: &str, addr: Ipv4Addr) -> anyhow::Result<Host> {
        ip(&["netns", "add", name])?;
        let handle = File::open(format!("/var/run/netns/{name}"))
            .context("cannot open a new network namespace")?;
        let host = Host {
            name: name.to_string(),
            addr,
            handle: std::sync::Arc::new(handle),
            port: veth.to_string(),
        };
        ip(&[
            "-n",
            &self.bridge,
            "link",
            "add",
            veth,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            name,
        ])?;
        ip(&[
            "-n",
            &self.bridge,
            "link",
            "set",
            veth,
            "master",
            "br0",
            "up",
        ])?;
        let cidr = format!("{addr}/{PREFIX_LEN}");
        ip(&["-n", name, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", name, "link", "set", "eth0", "up"])?;
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(host)
    }

    /// Sets a cell's namespace sysctls (`key=value`) in every host, and the namespace defaults
    /// for those it leaves unset, so no cell inherits the previous cell's settings.
    pub fn apply_sysctls(&self, cell: &[String]) -> anyhow::Result<()> {
        let mut current = self.sysctls.lock().expect("not poisoned");
        let wanted: Vec<String> = self
            .default_sysctls
            .iter()
            .map(|default| {
                let key = default.split('=').next().unwrap_or_default();
                cell.iter()
                    .find(|s| s.split('=').next() == Some(key))
                    .unwrap_or(default)
                    .clone()
            })
            .collect();
        if wanted == *current {
            return Ok(());
        }
        for host in std::iter::once(&self.server).chain(&self.agents) {
            let output = Command::new("ip")
                .args(["netns", "exec", &host.name, "sysctl", "-q", "-w"])
                .args(&wanted)
                .output()
                .context("cannot run sysctl in a host")?;
            if !output.status.success() {
                bail!(
                    "sysctl in host {} failed: {}",
                    host.name,
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
        }
        // Only the defaults' keys are ever set, so the next cell can restore each of them.
        *current = wanted;
        Ok(())
    }

    /// Moves the calling thread into the server's host (the server starts there, and the
    /// runner reaches the agents from there, across the bridge).
    pub fn enter_server(&self) -> nix::Result<()> {
        nix::sched::setns(&*self.server.handle, nix::sched::CloneFlags::CLONE_NEWNET)
    }

    /// Each agent host's link to the bridge (for per-link emulation).
    pub fn agent_links(&self) -> Vec<crate::netem::links::Link> {
        self.agents
            .iter()
            .map(|h| crate::netem::links::Link {
                namespace: h.name.clone(),
                bridge_namespace: self.bridge.clone(),
                bridge_port: h.port.clone(),
                handle: h.handle.clone(),
            })
            .collect()
    }

    /// The server's host (for per-link emulation: the NFQUEUE emulator delays there what the
    /// agents send).
    pub fn server_host(&self) -> crate::netem::links::ServerHost {
        crate::netem::links::ServerHost {
            namespace: self.server.name.clone(),
            handle: self.server.handle.clone(),
        }
    }

    /// Bytes each agent host's interface has received and sent so far.
    pub fn agent_link_bytes(&self) -> Vec<Option<(u64, u64)>> {
        self.agents
            .iter()
            .map(|h| link_bytes(&h.name, "eth0"))
            .collect()
    }

    /// Each agent host's namespace name and address, in order.
    pub fn agent_hosts(&self) -> impl Iterator<Item = (&str, Ipv4Addr)> {
        self.agents.iter().map(|h| (h.name.as_str(), h.addr))
    }

    /// The namespaces' names (for tests and the manifest).
    pub fn names(&self) -> Vec<String> {
        std::iter::once(self.bridge.clone())
            .chain(std::iter::once(self.server.name.clone()))
            .chain(self.agents.iter().map(|h| h.name.clone()))
            .filter(|n| !n.is_empty())
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for name in self.names().iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// The sysctls a cell may set ([`experiment::settings::Experiment::sysctls`]), as a new namespace has
/// them (`key=value`).
fn defaults(ns: &str) -> anyhow::Result<Vec<String>> {
    const KEYS: [&str; 3] = [
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_tw_reuse",
        "net.core.somaxconn",
    ];
    let output = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-n"])
        .args(KEYS)
        .output()
        .context("cannot run sysctl in a host")?;
    let text = String::from_utf8_lossy(&output.stdout);
    let values: Vec<String> = text
        .lines()
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    if !output.status.success() || values.len() != KEYS.len() {
        bail!("cannot read the namespace sysctls of host {ns}");
    }
    Ok(KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={v}"))
        .collect())
}

/// `(received, sent)` bytes of `dev` in namespace `ns`.
fn link_bytes(ns: &str, dev: &str) -> Option<(u64, u64)> {
    let output = Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show", dev])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let stats = &v.get(0)?["stats64"];
    Some((
        stats["rx"]["bytes"].as_u64()?,
        stats["tx"]["bytes"].as_u64()?,
    ))
}
