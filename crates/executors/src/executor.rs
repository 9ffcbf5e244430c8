//! Executors: where a cell's server and load generators run, and what the cell loop knows of
//! them. The cell loop (the runner's `run`) asks the run's [`Executor`] for each cell's
//! [`CellSite`], starts the server and the load generators through it, and never asks which
//! executor it is: `local` (child processes on this machine, optionally agents elsewhere),
//! `hosts` (a network namespace per host on this machine) and `kubernetes` (pods).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::agent::{Agents, RemoteLoad, RemoteServer};
use crate::cell_result::CellResult;
use crate::load_child::{LoadJob, LoadProcess, Message};
use crate::serve::{ServeOptions, ServerHandle};
use experiment::plan::Cell;
use load::sampler::{ResourceSummary, Sample};

/// Where a run's cells execute: made once per run (the runner's `run::executor_for_run`),
/// dropped (and everything it created removed) when the run ends.
pub trait Executor: Send + Sync {
    /// Prepares cell number `index` of this run (0-based).
    fn cell(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<dyn CellSite>>;
}

/// One cell's place: where its server runs and clients reach it, where its load generators
/// run, and what is accounted and cleaned up around it.
#[async_trait]
pub trait CellSite: Send + Sync {
    /// What each thread of the cell's own runtime does first (entering a network namespace);
    /// `None`: the cell runs on the run's runtime.
    fn enter(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        None
    }
    /// Starts the cell's server as `serve` describes it (the site chooses the address it
    /// listens on); returns once it accepts connections. `stop` ends a long wait.
    async fn start_server(
        &self,
        serve: ServeOptions,
        stop: &AtomicBool,
    ) -> anyhow::Result<Box<dyn CellServer>>;
    /// Starts the cell's load generators for `job`: one, or one share of it per agent.
    async fn start_loadgens(&self, job: &LoadJob) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>>;
    /// After the cell, on its runtime: removes what the cell created (also after a failure or
    /// an interruption).
    async fn close(&self) -> anyhow::Result<()> {
        Ok(())
    }
    /// After the cell's runtime ended: what the site measured around the cell.
    fn account(&self, _result: &mut CellResult) {}
}

/// A server's summary over the measured phase and its samples, as its agent measured them.
pub type ServerReadings = (ResourceSummary, Vec<Sample>);

/// A cell's server, wherever it runs.
#[async_trait]
pub trait CellServer: Send {
    /// Where clients reach it.
    fn addr(&self) -> SocketAddr;
    /// Its pid when the runner samples it itself (a child, or the user's service here).
    fn pid(&self) -> Option<u32>;
    /// The measured phase starts (before `go`): a server measured where it runs takes its
    /// first reading, and this returns once it is taken.
    async fn measuring(&mut self, _interval: Duration) -> anyhow::Result<()> {
        Ok(())
    }
    /// The measured phase is over: a server measured where it runs gives its summary and
    /// samples (`None`: the runner sampled it, or could not).
    async fn finished(&mut self, _phase: Duration) -> anyhow::Result<Option<ServerReadings>> {
        Ok(None)
    }
    /// Its exit status if it has died.
    fn exited(&mut self) -> Option<String>;
    /// The proxies of its path (an edge or sidecar path), sampled like the server.
    fn proxies(&self) -> Vec<crate::measure::proxies::ProxyGroup> {
        Vec::new()
    }
    /// What those proxies are, for the manifest (versions, configurations).
    fn proxy_records(&self) -> Vec<crate::measure::proxies::ProxyRecord> {
        Vec::new()
    }
    /// Stops it (an external server is left running).
    async fn stop(self: Box<Self>) -> Option<String>;
}

#[async_trait]
impl CellServer for ServerHandle {
    fn addr(&self) -> SocketAddr {
        ServerHandle::addr(self)
    }
    fn pid(&self) -> Option<u32> {
        ServerHandle::pid(self)
    }
    fn exited(&mut self) -> Option<String> {
        ServerHandle::exited(self)
    }
    async fn stop(self: Box<Self>) -> Option<String> {
        ServerHandle::stop(*self).await
    }
}

#[async_trait]
impl CellServer for RemoteServer {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
    fn pid(&self) -> Option<u32> {
        None
    }
    async fn measuring(&mut self, interval: Duration) -> anyhow::Result<()> {
        RemoteServer::measuring(self, interval).await
    }
    async fn finished(&mut self, phase: Duration) -> anyhow::Result<Option<ServerReadings>> {
        RemoteServer::finished(self, phase).await.map(Some)
    }
    fn exited(&mut self) -> Option<String> {
        RemoteServer::exited(self)
    }
    async fn stop(self: Box<Self>) -> Option<String> {
        RemoteServer::stop(*self).await
    }
}

/// One load generator of a cell, wherever it runs.
#[async_trait]
pub trait LoadGenerator: Send {
    /// Where it runs: `local`, or the agent's address.
    fn label(&self) -> String;
    /// Its pid when the runner samples it itself (a local child); `None` when it is measured
    /// where it runs (an agent).
    fn pid(&self) -> Option<u32>;
    async fn next(&mut self) -> anyhow::Result<Message>;
    async fn go(&mut self) -> anyhow::Result<()>;
    /// Its resources over the measured phase as measured where it runs (after `finished`).
    fn resources(&self) -> Option<ResourceSummary>;
    /// Stops it at once.
    async fn kill(self: Box<Self>);
    /// Lets it exit after its last message.
    async fn wait(self: Box<Self>);
}

#[async_trait]
impl LoadGenerator for LoadProcess {
    fn label(&self) -> String {
        "local".into()
    }
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }
    async fn next(&mut self) -> anyhow::Result<Message> {
        LoadProcess::next(self).await
    }
    async fn go(&mut self) -> anyhow::Result<()> {
        LoadProcess::go(self).await
    }
    fn resources(&self) -> Option<ResourceSummary> {
        None
    }
    async fn kill(self: Box<Self>) {
        LoadProcess::kill(*self).await
    }
    async fn wait(self: Box<Self>) {
        LoadProcess::wait(*self).await
    }
}

#[async_trait]
impl LoadGenerator for RemoteLoad {
    fn label(&self) -> String {
        self.addr.to_string()
    }
    fn pid(&self) -> Option<u32> {
        None
    }
    async fn next(&mut self) -> anyhow::Result<Message> {
        RemoteLoad::next(self).await
    }
    async fn go(&mut self) -> anyhow::Result<()> {
        RemoteLoad::go(self).await
    }
    fn resources(&self) -> Option<ResourceSummary> {
        self.client
    }
    async fn kill(self: Box<Self>) {
        RemoteLoad::kill(*self).await
    }
    async fn wait(self: Box<Self>) {
        RemoteLoad::wait(*self).await
    }
}

/// One local `runner load` child for the whole job.
pub async fn local_loadgen(
    job: &LoadJob,
    certs_dir: &Path,
) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
    let local = LoadProcess::start(job, certs_dir).await?;
    Ok(vec![Box::new(local) as Box<dyn LoadGenerator>])
}

/// One share of `job` per agent at `addrs` (fewer when the cell has fewer workers), started
/// in order; when one cannot start, those already started are stopped.
pub async fn agent_loadgens(
    job: &LoadJob,
    addrs: &[SocketAddr],
    link: &crate::agent::AgentLink,
) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
    let jobs = crate::shard::shard_jobs(job, addrs.len());
    let mut gens: Vec<Box<dyn LoadGenerator>> = Vec::new();
    for (shard, addr) in jobs.iter().zip(addrs) {
        match RemoteLoad::start(*addr, link, shard).await {
            Ok(r) => gens.push(Box::new(r)),
            Err(e) => {
                for g in gens {
                    g.kill().await;
                }
                return Err(e);
            }
        }
    }
    Ok(gens)
}

/// The cell's server started by the agent at `agent`, listening on the agent's own address
/// (port `port`; 0 lets the kernel choose).
pub async fn agent_server(
    agent: SocketAddr,
    port: u16,
    link: &crate::agent::AgentLink,
    serve: ServeOptions,
) -> anyhow::Result<Box<dyn CellServer>> {
    let serve = ServeOptions {
        listen: SocketAddr::new(agent.ip(), port),
        ..serve
    };
    Ok(Box::new(RemoteServer::start(agent, link, &serve).await?))
}

/// Load generators on the agents of `agents` (when it has any), else one local child.
pub async fn loadgens_for(
    job: &LoadJob,
    certs_dir: &Path,
    agents: Option<&Agents>,
) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
    match agents.filter(|a| !a.addrs.is_empty()) {
        Some(a) => agent_loadgens(job, &a.addrs, &a.link).await,
        None => local_loadgen(job, certs_dir).await,
    }
}
