//! The `hosts` executor: the run's namespaces ([`network::Hosts`]: a server host
//! and N agent hosts on a bridge, 198.18.0.0/15); each cell's server is a `runner serve` child
//! in the server's host, its load shared by the agents in theirs, and each agent host's
//! interface counters are read around the cell. A cell with `netem` has it on every agent's
//! link for the cell's duration ([`crate::netem::links`]). The hosts and their agents live as
//! long as the cell's `host_namespaces` says: the run, a variant's sweep, or one cell.

pub mod network;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use async_trait::async_trait;
use bench_core::tls::{ensure_certs, SERVER_NAME};

use crate::agent::{AgentLink, Agents};
use crate::cell_result::CellResult;
use crate::executor::{CellServer, CellSite, Executor, LoadGenerator};
use crate::load_child::LoadJob;
use crate::netem::links::LinkEmulation;
use crate::proxy::{MeshServer, ProxyProcess};
use crate::serve::{ServeOptions, ServerHandle, ServerProcess};
use experiment::plan::Cell;
use experiment::settings::HostNamespaces;
use experiment::settings::MeshPath;
use network::{Hosts, SERVER_IP, SERVER_PORT};

/// The port each agent listens on, inside its own host.
pub const AGENT_PORT: u16 = 7400;

pub struct HostsExecutor {
    /// The hosts in use and the lifetime they serve (`None` until the first cell adopts the
    /// ones made with the executor).
    current: Mutex<(Option<String>, Arc<HostSet>)>,
    /// Sets of hosts made so far (their namespaces' names carry it).
    generations: std::sync::atomic::AtomicU32,
    host_agents: u32,
    /// Source addresses per agent host: the most any cell spreads over.
    addresses: u32,
    certs_dir: PathBuf,
}

/// One set of hosts with its agents running; dropped (agents stopped, namespaces removed) when
/// the executor and the last cell that used it let go of it.
struct HostSet {
    /// Declared first so that the agents stop before the namespaces are removed.
    _agent_processes: AgentProcesses,
    hosts: Hosts,
    agents: Arc<Agents>,
}

impl HostSet {
    /// Creates the namespaces and starts the agents in theirs.
    fn create(
        host_agents: u32,
        addresses: u32,
        certs_dir: &Path,
        generation: u32,
    ) -> anyhow::Result<HostSet> {
        let hosts = Hosts::create(host_agents, addresses, generation)?;
        let token = token();
        let processes = AgentProcesses::start(&hosts, certs_dir, &token)?;
        let ca = bench_core::tls::CertPaths::new(certs_dir).ca_cert();
        let link = AgentLink::new(&ca, SERVER_NAME, token)?;
        Ok(HostSet {
            agents: Arc::new(Agents {
                addrs: processes.addrs.clone(),
                server: None,
                link: Arc::new(link),
            }),
            _agent_processes: processes,
            hosts,
        })
    }
}

/// Which hosts' lifetime a cell belongs to ([`HostNamespaces`]).
fn lifetime(cell: &Cell, index: usize) -> String {
    match cell.settings.host_namespaces {
        HostNamespaces::Run => "run".into(),
        HostNamespaces::Sweep => format!("sweep {} r{}", cell.variant, cell.repetition),
        HostNamespaces::Cell => format!("cell {index}"),
    }
}

impl HostsExecutor {
    /// Creates the namespaces and starts the agents in theirs (they live as long as the first
    /// cell's `host_namespaces` says). Namespaces a killed runner left behind are removed
    /// first.
    pub fn create(
        exp: &experiment::settings::Experiment,
        certs_dir: &Path,
    ) -> anyhow::Result<Self> {
        crate::netem::netns::remove_stale();
        ensure_certs(certs_dir)?;
        // Each agent host gets as many source addresses as the most any cell spreads over.
        let addresses = experiment::plan::plan(exp)
            .iter()
            .map(|c| c.settings.source_addresses)
            .max()
            .unwrap_or(1);
        let set = HostSet::create(exp.host_agents, addresses, certs_dir, 0)?;
        Ok(HostsExecutor {
            current: Mutex::new((None, Arc::new(set))),
            generations: 1.into(),
            host_agents: exp.host_agents,
            addresses,
            certs_dir: certs_dir.to_path_buf(),
        })
    }

    /// The hosts for a cell: the current ones while its lifetime lasts, else a new set (the
    /// old one goes once its last cell is done with it).
    fn hosts_for(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<HostSet>> {
        let wanted = lifetime(cell, index);
        let mut current = self.current.lock().expect("not poisoned");
        match &current.0 {
            None => current.0 = Some(wanted),
            Some(key) if *key == wanted => {}
            Some(_) => {
                let generation = self
                    .generations
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let set = HostSet::create(
                    self.host_agents,
                    self.addresses,
                    &self.certs_dir,
                    generation,
                )?;
                *current = (Some(wanted), Arc::new(set));
            }
        }
        Ok(current.1.clone())
    }
}

impl Executor for HostsExecutor {
    fn cell(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<dyn CellSite>> {
        let set = self.hosts_for(cell, index)?;
        // The hosts are namespaces already: the cell's sysctls go to every one of them.
        set.hosts.apply_sysctls(&cell.settings.sysctls())?;
        let emulation = match &cell.settings.netem {
            Some(netem) => LinkEmulation::start(
                &set.hosts.agent_links(),
                &set.hosts.server_host(),
                netem.value(),
            )?,
            None => None,
        };
        Ok(Arc::new(HostsCell {
            cell: cell.clone(),
            emulation,
            links_before: set.hosts.agent_link_bytes(),
            set,
            certs_dir: self.certs_dir.clone(),
        }))
    }
}

struct HostsCell {
    /// The cell, for its path's proxies.
    cell: Cell,
    /// The cell's emulation on the agents' links, removed with the cell.
    emulation: Option<LinkEmulation>,
    set: Arc<HostSet>,
    certs_dir: PathBuf,
    /// Each agent host's interface counters before the cell.
    links_before: Vec<Option<(u64, u64)>>,
}

#[async_trait]
impl CellSite for HostsCell {
    /// The cell's threads live in the server's host: the server starts there, and the runner
    /// reaches the agents from there, across the bridge.
    fn enter(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let set = self.set.clone();
        Some(Arc::new(move || {
            set.hosts
                .enter_server()
                .expect("cannot enter the server's host namespace")
        }))
    }

    async fn start_server(
        &self,
        serve: ServeOptions,
        _stop: &AtomicBool,
    ) -> anyhow::Result<Box<dyn CellServer>> {
        let path = self.cell.settings.path;
        // Behind a proxy, the server listens on its host's loopback and the proxy on the
        // host's address.
        let ip = match path {
            MeshPath::Direct => SERVER_IP,
            MeshPath::Edge | MeshPath::Sidecar => std::net::Ipv4Addr::LOCALHOST,
        };
        let serve = ServeOptions {
            listen: SocketAddr::from((ip, SERVER_PORT)),
            ..serve
        };
        let server: Box<dyn CellServer> =
            Box::new(ServerHandle::Child(ServerProcess::start(&serve).await?));
        match path {
            MeshPath::Direct => Ok(server),
            MeshPath::Edge => crate::proxy::edge_in_front(
                &self.cell,
                &self.certs_dir,
                server,
                SERVER_IP.into(),
                SERVER_PORT,
            ),
            MeshPath::Sidecar => {
                let plan = crate::proxy::PathPlan {
                    cell: &self.cell,
                    certs: &self.certs_dir,
                };
                let server_side = SocketAddr::from((SERVER_IP, SERVER_PORT));
                // Dropped (killed) on any error below, with those started before it.
                let mut proxies = vec![ProxyProcess::start(
                    &plan.server_sidecar(server_side, server.addr())?,
                    None,
                )?];
                let local =
                    SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, crate::proxy::SIDECAR_PORT));
                for (namespace, _) in self.set.hosts.agent_hosts() {
                    let hop = plan.client_sidecar(local, server_side)?;
                    proxies.push(ProxyProcess::start(&hop, Some(namespace))?);
                }
                Ok(Box::new(MeshServer {
                    inner: server,
                    addr: local,
                    proxies,
                }))
            }
        }
    }

    async fn start_loadgens(&self, job: &LoadJob) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
        crate::executor::loadgens_for(job, &self.certs_dir, Some(&self.set.agents)).await
    }

    /// What crossed each agent host's interface during the cell, and what the links'
    /// emulation did.
    fn account(&self, result: &mut CellResult) {
        if let Some(e) = &self.emulation {
            result.emulated_packets = Some(e.packets());
            result.environment = Some(crate::measure::environment::CellEnvironment {
                emulation: Some(e.emulation()),
                ..result.environment.unwrap_or_default()
            });
        }
        for ((agent, after), before) in result
            .per_agent
            .iter_mut()
            .zip(self.set.hosts.agent_link_bytes())
            .zip(&self.links_before)
        {
            agent.link = after
                .zip(*before)
                .map(|((rx1, tx1), (rx0, tx0))| (rx1 - rx0, tx1 - tx0));
        }
    }
}

/// The `runner agent` processes, one in each agent host; killed on drop.
struct AgentProcesses {
    children: Vec<Child>,
    /// Where each listens, in host order.
    addrs: Vec<SocketAddr>,
}

impl AgentProcesses {
    /// Starts `runner agent` in each agent host of `hosts` (certificates from `certs`, `token`
    /// in its environment) and waits for each to be ready.
    fn start(hosts: &Hosts, certs: &Path, token: &str) -> anyhow::Result<AgentProcesses> {
        let exe = std::env::current_exe().context("cannot find the runner executable")?;
        // From here on, dropping `processes` stops what was started.
        let mut processes = AgentProcesses {
            children: Vec::new(),
            addrs: Vec::new(),
        };
        for (i, (namespace, ip)) in hosts.agent_hosts().enumerate() {
            let listen = SocketAddr::from((ip, AGENT_PORT));
            let mut child = Command::new("ip")
                .args(["netns", "exec", namespace])
                .arg(&exe)
                .args(["agent", "--listen", &listen.to_string(), "--certs"])
                .arg(certs)
                .env(crate::agent::TOKEN_ENV, token)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .process_group(0)
                .spawn()
                .context("cannot start an agent in its host")?;
            let stdout = child.stdout.take().expect("piped");
            processes.children.push(child);
            wait_ready(stdout).with_context(|| format!("agent {} did not start", i + 1))?;
            processes.addrs.push(listen);
        }
        Ok(processes)
    }
}

impl Drop for AgentProcesses {
    fn drop(&mut self) {
        for child in &mut self.children {
            // `ip netns exec` replaced itself with the agent: this is the agent's pid.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits (bounded) for an agent's ready line.
fn wait_ready(stdout: std::process::ChildStdout) -> anyhow::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let started = Instant::now();
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| anyhow!("no ready line after {:?}", started.elapsed()))?;
    if !line.contains("\"agent\"") {
        bail!("unexpected ready line: {line:?}");
    }
    Ok(())
}

/// A token for this run's agents, from the kernel's random source.
fn token() -> String {
    let mut bytes = [0u8; 16];
    let ok = File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_ok();
    assert!(ok, "/dev/urandom is readable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
