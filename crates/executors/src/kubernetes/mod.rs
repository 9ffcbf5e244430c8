//! The `kubernetes` executor: per cell, the server pod (its agent starts the cell's server
//! and samples it) with a headless Service, and an Indexed Job of agent pods with theirs
//! ([`objects::cell_objects`]); once every pod is ready the runner connects to
//! each pod's agent (pod IPs, TLS with the shared token), starts the server, hands agent pod
//! *i* shard *i*, sends `go` to all, collects, and deletes what it created, also after a
//! failure or Ctrl-C.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use async_trait::async_trait;

pub mod api;
pub mod objects;
pub mod yaml;

pub use api::{pod_problem, CellControl, Created, Endpoints, KubeExecutor};
pub use objects::{
    cell_id, cell_objects, render, render_stream, run_objects, secret_commands, CellObjects,
    RunObjects, AGENT_PORT, CELL_LABEL, CERTS_DIR, CERTS_SECRET, SERVER_PORT, SERVICE_ACCOUNT,
    TOKEN_KEY, TOKEN_SECRET,
};

use crate::agent::AgentLink;
use crate::executor::{CellServer, CellSite, Executor, LoadGenerator};
use crate::load_child::LoadJob;
use crate::serve::ServeOptions;
use experiment::plan::Cell;

pub struct Kubernetes {
    api: Arc<KubeExecutor>,
    link: Arc<AgentLink>,
}

impl Kubernetes {
    /// Connects to the API server the environment names (in-cluster, or the kubeconfig), with
    /// the agents' token and CA from the experiment.
    pub async fn connect(
        exp: &experiment::settings::Experiment,
        certs_dir: &Path,
    ) -> anyhow::Result<Self> {
        let client = kube::Client::try_default()
            .await
            .context("executor kubernetes: cannot set up the Kubernetes API client")?;
        let token = crate::agent::read_token(exp.agent_token_file.as_deref())?;
        let ca = exp
            .agent_ca
            .clone()
            .unwrap_or_else(|| bench_core::tls::CertPaths::new(certs_dir).ca_cert());
        let link = AgentLink::new(&ca, &exp.agent_server_name, token)?;
        Ok(Self::new(
            KubeExecutor::new(client, &exp.k8s_namespace),
            link,
        ))
    }

    /// Cells run through `api` (its namespace), their agents reached through `link`.
    pub fn new(api: KubeExecutor, link: AgentLink) -> Self {
        Kubernetes {
            api: Arc::new(api),
            link: Arc::new(link),
        }
    }
}

/// An API server that the environment names (in-cluster, or the kubeconfig), that answers and
/// whose certificate verifies, checked before anything is created; why not as one line.
pub fn check_api_server() -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client = runtime.block_on(kube::Client::try_default()).map_err(|e| {
        format!("executor kubernetes: cannot set up the Kubernetes API client: {e}")
    })?;
    // The client connects lazily: ask the server its version now, so that an unreachable or
    // untrusted API server is one line here rather than a failed first cell.
    runtime
        .block_on(client.apiserver_version())
        .map(drop)
        .map_err(|e| {
            // The cause (refused, certificate not trusted, …) is at the end of the chain.
            let chain = anyhow::Error::from(e);
            format!("executor kubernetes: cannot reach the Kubernetes API server: {chain:#}")
        })
}

impl Executor for Kubernetes {
    fn cell(&self, cell: &Cell, index: usize) -> anyhow::Result<Arc<dyn CellSite>> {
        Ok(Arc::new(KubeCell {
            api: self.api.clone(),
            link: self.link.clone(),
            objects: cell_objects(cell, index + 1),
            created: Mutex::new(Vec::new()),
            agents: Mutex::new(Vec::new()),
        }))
    }
}

struct KubeCell {
    api: Arc<KubeExecutor>,
    link: Arc<AgentLink>,
    objects: CellObjects,
    /// What was created so far, deleted by `close`.
    created: Mutex<Vec<Created>>,
    /// The agent pods' control addresses, by completion index, once ready.
    agents: Mutex<Vec<SocketAddr>>,
}

#[async_trait]
impl CellSite for KubeCell {
    /// Creates the cell's objects, waits until every pod is ready, and has the server pod's
    /// agent start the server on its pod's address.
    async fn start_server(
        &self,
        serve: ServeOptions,
        stop: &AtomicBool,
    ) -> anyhow::Result<Box<dyn CellServer>> {
        let mut created = Vec::new();
        let outcome = self.api.create(&self.objects, &mut created).await;
        *self.created.lock().expect("not poisoned") = created;
        outcome.context("the cell's pods")?;
        let endpoints = self
            .api
            .wait_ready(&self.objects, stop)
            .await
            .context("the cell's pods")?;
        let parse = |a: &String| {
            a.parse::<SocketAddr>()
                .with_context(|| format!("pod address {a}"))
        };
        let server = parse(&endpoints.server)?;
        let agents = endpoints
            .agents
            .iter()
            .map(parse)
            .collect::<anyhow::Result<Vec<_>>>()?;
        *self.agents.lock().expect("not poisoned") = agents;
        crate::executor::agent_server(server, self.api.server_port, &self.link, serve)
            .await
            .with_context(|| format!("server pod {}", self.objects.id))
    }

    async fn start_loadgens(&self, job: &LoadJob) -> anyhow::Result<Vec<Box<dyn LoadGenerator>>> {
        let agents = self.agents.lock().expect("not poisoned").clone();
        anyhow::ensure!(!agents.is_empty(), "no agent pod is ready");
        crate::executor::agent_loadgens(job, &agents, &self.link).await
    }

    async fn close(&self) -> anyhow::Result<()> {
        let created = std::mem::take(&mut *self.created.lock().expect("not poisoned"));
        self.api.delete(&created).await
    }
}
