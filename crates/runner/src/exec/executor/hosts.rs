//! The `hosts` executor: the run's namespaces ([`crate::netem::hosts::Hosts`]: a server host
//! and N agent hosts on a bridge, 198.18.0.0/15); each cell's server is a `runner serve` child
//! in the server's host, its load shared by the agents in theirs, and each agent host's
//! interface counters are read around the cell. A cell with `netem` has it on every agent's
//! link for the cell's duration ([`crate::netem::links`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use async_trait::async_trait;
use bench_core::tls::{ensure_certs, SERVER_NAME};

use super::{CellServer, CellSite, Executor, LoadGenerator};
use crate::exec::agent::{AgentLink, Agents};
use crate::exec::loadgen::LoadJob;
use crate::exec::serve::{ServeOptions, ServerHandle, ServerProcess};
use crate::netem::hosts::{Hosts, SERVER_IP};
use crate::netem::links::LinkEmulation;
use crate::output::CellResult;
use crate::plan::Cell;

pub struct HostsExecutor {
    hosts: Arc<Hosts>,
    agents: Arc<Agents>,
    certs_dir: PathBuf,
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
        let hosts = Hosts::create(exp.host_agents, addresses, certs_dir)?;
        let ca = bench_core::tls::CertPaths::new(certs_dir).ca_cert();
        let link = AgentLink::new(&ca, SERVER_NAME, hosts.token.clone())?;
        Ok(HostsExecutor {
            agents: Arc::new(Agents {
                addrs: hosts.agent_addrs.clone(),
                server: None,
                link: Arc::new(link),
            }),
            hosts: Arc::new(hosts),
            certs_dir: certs_dir.to_path_buf(),
        })
    }
}

impl Executor for HostsExecutor {
    fn cell(&self, cell: &Cell, _index: usize) -> anyhow::Result<Arc<dyn CellSite>> {
        // The hosts are namespaces already: the cell's sysctls go to every one of them.
        self.hosts.apply_sysctls(&cell.settings.sysctls())?;
        let emulation = match &cell.settings.netem {
            Some(netem) => {
                let netem = crate::settings::Netem::parse(netem).map_err(anyhow::Error::msg)?;
                LinkEmulation::start(&self.hosts.agent_links(), &netem)?
            }
            None => None,
        };
        Ok(Arc::new(HostsCell {
            emulation,
            links_before: self.hosts.agent_link_bytes(),
            hosts: self.hosts.clone(),
            agents: self.agents.clone(),
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
            listen: SocketAddr::from((SERVER_IP, 0)),
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
