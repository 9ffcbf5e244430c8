//! The `hosts` executor: the run's namespaces ([`crate::netem::hosts::Hosts`]: a server host
//! and N agent hosts on a bridge, 198.18.0.0/15); each cell's server is a `runner serve` child
//! in the server's host, its load shared by the agents in theirs, and each agent host's
//! interface counters are read around the cell. A cell with `netem` has it on every agent's
//! link for the cell's duration ([`crate::netem::links`]). The hosts live as long as the
//! cell's `host_namespaces` says: the run, a variant's sweep, or one cell.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bench_core::tls::{ensure_certs, SERVER_NAME};

use super::{CellServer, CellSite, Executor, LoadGenerator};
use crate::exec::agent::{AgentLink, Agents};
use crate::exec::loadgen::LoadJob;
use crate::exec::serve::{ServeOptions, ServerHandle, ServerProcess};
use crate::netem::hosts::{Hosts, SERVER_IP, SERVER_PORT};
use crate::netem::links::LinkEmulation;
use crate::output::CellResult;
use crate::plan::Cell;
use crate::settings::HostNamespaces;

pub struct HostsExecutor {
    /// The hosts in use, their agents, and the lifetime they serve (`None` until the first
    /// cell adopts the ones made with the executor).
    current: Mutex<(Option<String>, Arc<Hosts>, Arc<Agents>)>,
    /// Sets of hosts made so far (their namespaces' names carry it).
    generations: std::sync::atomic::AtomicU32,
    host_agents: u32,
    /// Source addresses per agent host: the most any cell spreads over.
    addresses: u32,
    certs_dir: PathBuf,
}

/// Which hosts' lifetime a cell belongs to ([`HostNamespaces`]).
fn lifetime(cell: &Cell, index: usize) -> String {
    match cell.settings.host_namespaces {
        HostNamespaces::Run => "run".into(),
        HostNamespaces::Sweep => format!("sweep {} r{}", cell.variant, cell.repetition),
        HostNamespaces::Cell => format!("cell {index}"),
    }
}

/// Makes a set of hosts and the link to its agents.
fn make(
    host_agents: u32,
    addresses: u32,
    certs_dir: &Path,
    generation: u32,
) -> anyhow::Result<(Arc<Hosts>, Arc<Agents>)> {
    let hosts = Hosts::create(host_agents, addresses, certs_dir, generation)?;
    let ca = bench_core::tls::CertPaths::new(certs_dir).ca_cert();
    let link = AgentLink::new(&ca, SERVER_NAME, hosts.token.clone())?;
    let agents = Arc::new(Agents {
        addrs: hosts.agent_addrs.clone(),
        server: None,
        link: Arc::new(link),
    });
    Ok((Arc::new(hosts), agents))
}

impl HostsExecutor {
    /// Creates the namespaces and starts the agents in theirs (they live as long as the run).
    /// Namespaces a killed runner left behind are removed first.
    pub fn create(exp: &crate::settings::Experiment, certs_dir: &Path) -> anyhow::Result<Self> {
        crate::netem::netns::remove_stale();
        ensure_certs(certs_dir)?;
        // Each agent host gets as many source addresses as the most any cell spreads over.
        let addresses = crate::plan::plan(exp)
            .iter()
            .map(|c| c.settings.source_addresses)
            .max()
            .unwrap_or(1);
        let (hosts, agents) = make(exp.host_agents, addresses, certs_dir, 0)?;
        Ok(HostsExecutor {
            current: Mutex::new((None, hosts, agents)),
            generations: 1.into(),
            host_agents: exp.host_agents,
            addresses,
            certs_dir: certs_dir.to_path_buf(),
        })
    }

    /// The hosts for a cell: the current ones while its lifetime lasts, else a new set (the
    /// old one goes once its last cell is done with it).
    fn hosts_for(&self, cell: &Cell, index: usize) -> anyhow::Result<(Arc<Hosts>, Arc<Agents>)> {
        let wanted = lifetime(cell, index);
        let mut current = self.current.lock().expect("not poisoned");
        match &current.0 {
            None => current.0 = Some(wanted),
            Some(key) if *key == wanted => {}
            Some(_) => {
                let generation = self
                    .generations
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (hosts, agents) = make(
                    self.host_agents,
                    self.addresses,
                    &self.certs_dir,
                    generation,
                )?;
                *current = (Some(wanted), hosts, agents);
            }
        }
        Ok((current.1.clone(), current.2.clone()))
    }
}

impl Executor for HostsExecutor {
    fn cell(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<dyn CellSite>> {
        let (hosts, agents) = self.hosts_for(cell, index)?;
        // The hosts are namespaces already: the cell's sysctls go to every one of them.
        hosts.apply_sysctls(&cell.settings.sysctls())?;
        let emulation = match &cell.settings.netem {
            Some(netem) => {
                let netem = crate::settings::Netem::parse(netem).map_err(anyhow::Error::msg)?;
                LinkEmulation::start(&hosts.agent_links(), &netem)?
            }
            None => None,
        };
        Ok(Arc::new(HostsCell {
            emulation,
            links_before: hosts.agent_link_bytes(),
            hosts,
            agents,
            certs_dir: self.certs_dir.clone(),
        }))
    }
}

struct HostsCell {
    /// The cell's emulation on the agents' links, removed with the cell.
    emulation: Option<LinkEmulation>,
    hosts: Arc<Hosts>,
    agents: Arc<Agents>,
    certs_dir: PathBuf,
    /// Each agent host's interface counters before the cell.
    links_before: Vec<Option<(u64, u64)>>,
}

#[async_trait]
impl CellSite for HostsCell {
    /// The cell's threads live in the server's host: the server starts there, and the runner
    /// reaches the agents from there, across the bridge.
    fn enter(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let hosts = self.hosts.clone();
        Some(Arc::new(move || {
            hosts
                .enter_server()
                .expect("cannot enter the server's host namespace")
        }))
    }

    async fn start_server(
        &self,
        serve: ServeOptions,
        _stop: &AtomicBool,
    ) -> anyhow::Result<Box<dyn CellServer>> {
        let serve = ServeOptions {
            listen: SocketAddr::from((SERVER_IP, SERVER_PORT)),
            ..serve
        };
        Ok(Box::new(ServerHandle::Child(
            ServerProcess::start(&serve).await?,
        )))
    }

    async fn start_loadgens(&self, job: &LoadJob) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
        super::loadgens_for(job, &self.certs_dir, Some(&self.agents)).await
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
            .zip(self.hosts.agent_link_bytes())
            .zip(&self.links_before)
        {
            agent.link = after
                .zip(*before)
                .map(|((rx1, tx1), (rx0, tx0))| (rx1 - rx0, tx1 - tx0));
        }
    }
}
