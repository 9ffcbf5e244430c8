//! The `local` executor (the default): each cell's server is a `runner serve` child on this
//! machine listening on loopback (or, with `server_agent`, the same server started by an
//! agent), its load a `runner load` child (or shares of it on `agents`); a cell that emulates
//! a network or sets namespace sysctls runs in a network namespace of its own.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::Agents;
use crate::cell_result::CellResult;
use crate::executor::{CellServer, CellSite, Executor, LoadGenerator};
use crate::load_child::LoadJob;
use crate::netem::netns::Netns;
use crate::serve::{ServeOptions, ServerHandle, ServerProcess};
use experiment::plan::Cell;
use experiment::settings::{MeshPath, ServerKind};

pub struct Local {
    certs_dir: PathBuf,
    agents: Option<Arc<Agents>>,
}

impl Local {
    pub fn new(certs_dir: &Path, agents: Option<Arc<Agents>>) -> Self {
        Local {
            certs_dir: certs_dir.to_path_buf(),
            agents,
        }
    }
}

impl Executor for Local {
    fn cell(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<dyn CellSite>> {
        let netns = if cell.settings.needs_netns() {
            Some(Arc::new(Netns::create(&cell.settings, index)?))
        } else {
            None
        };
        Ok(Arc::new(LocalCell {
            cell: cell.clone(),
            netns,
            certs_dir: self.certs_dir.clone(),
            agents: self.agents.clone(),
        }))
    }
}

struct LocalCell {
    /// The cell, for its path's proxies.
    cell: Cell,
    /// The cell's own network namespace (emulation, sysctls): its threads live there.
    netns: Option<Arc<Netns>>,
    certs_dir: PathBuf,
    agents: Option<Arc<Agents>>,
}

#[async_trait]
impl CellSite for LocalCell {
    fn enter(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let ns = self.netns.clone()?;
        Some(Arc::new(move || {
            ns.enter()
                .expect("cannot enter the cell's network namespace")
        }))
    }

    async fn start_server(
        &self,
        serve: ServeOptions,
        _stop: &AtomicBool,
    ) -> anyhow::Result<Box<dyn CellServer>> {
        match self
            .agents
            .as_deref()
            .and_then(|a| a.server.map(|s| (s, a)))
        {
            Some((agent, agents)) => {
                crate::executor::agent_server(agent, 0, &agents.link, serve).await
            }
            // A server nobody here wrote, where ours would run (validated: local, direct).
            None if self.cell.settings.server != ServerKind::Ours => Ok(Box::new(
                crate::proxy::OriginServer::start(&self.cell, &self.certs_dir, serve.cpu)?,
            )),
            None => {
                let serve = ServeOptions {
                    listen: "127.0.0.1:0".parse().expect("address"),
                    ..serve
                };
                let server: Box<dyn CellServer> =
                    Box::new(ServerHandle::Child(ServerProcess::start(&serve).await?));
                match self.cell.settings.path {
                    MeshPath::Direct => Ok(server),
                    // Beside the server, in the cell's namespace when it has one (this thread's).
                    MeshPath::Edge => crate::proxy::edge_in_front(
                        &self.cell,
                        &self.certs_dir,
                        server,
                        std::net::Ipv4Addr::LOCALHOST.into(),
                        0,
                    ),
                    MeshPath::Sidecar => {
                        anyhow::bail!("path sidecar needs the hosts executor")
                    }
                }
            }
        }
    }

    async fn start_loadgens(&self, job: &LoadJob) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
        crate::executor::loadgens_for(job, &self.certs_dir, self.agents.as_deref()).await
    }

    fn account(&self, result: &mut CellResult) {
        let Some(ns) = &self.netns else {
            return;
        };
        result.emulated_packets = Some(ns.emulated_packets());
        result.environment = Some(crate::measure::environment::CellEnvironment {
            emulation: ns
                .emulator_kind()
                .map(|kind| crate::netem::emulator::Emulation {
                    kind,
                    cpu_s: ns.emulator_cpu_s(),
                }),
            ..result.environment.unwrap_or_default()
        });
    }
}
