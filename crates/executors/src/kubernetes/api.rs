//! The create → wait until ready → start and collect → delete sequence against the API
//! server ([`KubeExecutor`]); [`CellControl`] lets the sequence alone be tested against
//! kube-rs's mock service.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};

use super::objects::{
    CellObjects, AGENT_PORT, CELL_LABEL, COMPONENT_LABEL, INDEX_ANNOTATION, SERVER_PORT,
};

/// Where the ready pods are: the control address of the server pod's agent and of each agent
/// pod, by completion index (the shard it sends).
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub server: String,
    pub agents: Vec<String>,
}

/// Starting and collecting a cell once its pods are ready: the runner's side of the agents'
/// control channel (connect with the token, hand over shard i to agent i, `go` to all, read
/// their results). Behind a trait so that the API sequence is tested without agents.
pub trait CellControl {
    type Output;
    fn run(
        &mut self,
        endpoints: &Endpoints,
        stop: &AtomicBool,
    ) -> impl Future<Output = anyhow::Result<Self::Output>>;
}

/// Runs cells' objects against one API server (a namespace's worth of rights).
pub struct KubeExecutor {
    client: kube::Client,
    namespace: String,
    /// The port the cell's server listens on in its pod (0: the kernel chooses, for tests).
    pub server_port: u16,
    /// How often the pods' state is read while waiting.
    pub poll: Duration,
    /// How long all pods get to become ready (image pulls included).
    pub ready_timeout: Duration,
}

/// An object the executor created, to delete at the end.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    Pod(String),
    Service(String),
    Job(String),
}

impl KubeExecutor {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        KubeExecutor {
            client,
            namespace: namespace.to_string(),
            server_port: SERVER_PORT,
            poll: Duration::from_secs(1),
            ready_timeout: Duration::from_secs(300),
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// One cell: create its objects, wait until every pod is ready, start and collect through
    /// `control`, and delete what was created (also after a failure or an interruption).
    pub async fn run_cell<C: CellControl>(
        &self,
        objects: &CellObjects,
        control: &mut C,
        stop: &AtomicBool,
    ) -> anyhow::Result<C::Output> {
        let mut created = Vec::new();
        let outcome = async {
            self.create(objects, &mut created).await?;
            let endpoints = self.wait_ready(objects, stop).await?;
            if stop.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            control.run(&endpoints, stop).await
        }
        .await;
        let cleanup = self.delete(&created).await;
        match (outcome, cleanup) {
            (Ok(out), Ok(())) => Ok(out),
            (Ok(_), Err(e)) => Err(e),
            (Err(e), Ok(())) => Err(e),
            (Err(e), Err(c)) => Err(e.context(format!("and cleaning up failed too: {c:#}"))),
        }
    }

    /// Creates the cell's objects in order, recording each in `created` as it is created.
    pub async fn create(&self, o: &CellObjects, created: &mut Vec<Created>) -> anyhow::Result<()> {
        let pp = PostParams::default();
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        self.api::<Pod>()
            .create(&pp, &o.server_pod)
            .await
            .context("cannot create the server pod")?;
        created.push(Created::Pod(name(&o.server_pod.metadata)));
        for svc in [&o.server_service, &o.agents_service] {
            self.api::<Service>()
                .create(&pp, svc)
                .await
                .with_context(|| format!("cannot create the service {}", name(&svc.metadata)))?;
            created.push(Created::Service(name(&svc.metadata)));
        }
        self.api::<Job>()
            .create(&pp, &o.agents_job)
            .await
            .context("cannot create the agents' job")?;
        created.push(Created::Job(name(&o.agents_job.metadata)));
        Ok(())
    }

    /// Polls the server pod and the agent pods until all are ready; fails at once when one
    /// of them fails (with its last log lines), when `stop` is set, or at the time bound.
    pub async fn wait_ready(
        &self,
        o: &CellObjects,
        stop: &AtomicBool,
    ) -> anyhow::Result<Endpoints> {
        let pods = self.api::<Pod>();
        let server_name = o.server_pod.metadata.name.clone().unwrap_or_default();
        let selector = format!("{CELL_LABEL}={},{COMPONENT_LABEL}=agent", o.id);
        let deadline = tokio::time::Instant::now() + self.ready_timeout;
        loop {
            if stop.load(Ordering::SeqCst) {
                bail!("interrupted while waiting for the pods");
            }
            let server = pods
                .get(&server_name)
                .await
                .context("cannot read the server pod")?;
            self.check_pod(&server, "server pod").await?;
            let agents = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .context("cannot list the agent pods")?;
            let mut ready = BTreeMap::new();
            for pod in &agents.items {
                let index = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(INDEX_ANNOTATION))
                    .and_then(|i| i.parse::<u32>().ok());
                let what = match index {
                    Some(i) => format!("agent pod {i}"),
                    None => "agent pod".to_string(),
                };
                self.check_pod(pod, &what).await?;
                if let (Some(i), Some(addr)) = (index, ready_address(pod)) {
                    ready.insert(i, addr);
                }
            }
            let server_addr = ready_address(&server);
            if let Some(server) = &server_addr {
                if (0..o.agents).all(|i| ready.contains_key(&i)) {
                    return Ok(Endpoints {
                        server: server.clone(),
                        agents: ready.into_values().take(o.agents as usize).collect(),
                    });
                }
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the pods were not ready within {} s (server ready: {}, agents ready: {} of {})",
                    self.ready_timeout.as_secs(),
                    server_addr.is_some(),
                    ready.len(),
                    o.agents
                );
            }
            let wake = (tokio::time::Instant::now() + self.poll).min(deadline);
            while tokio::time::Instant::now() < wake && !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20).min(self.poll)).await;
            }
        }
    }

    /// Fails when `pod` failed, exited, or cannot start its container; the error names the
    /// pod, the reason and its last log lines.
    async fn check_pod(&self, pod: &Pod, what: &str) -> anyhow::Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(problem) = pod_problem(pod) else {
            return Ok(());
        };
        let logs = self
            .api::<Pod>()
            .logs(
                &name,
                &LogParams {
                    tail_lines: Some(5),
                    ..LogParams::default()
                },
            )
            .await
            .ok()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty());
        match logs {
            Some(logs) => bail!("{what} {name} failed: {problem}; its last log lines: {logs}"),
            None => bail!("{what} {name} failed: {problem}"),
        }
    }

    /// Deletes in the reverse order of creation; the Job with its pods (background
    /// propagation). An object already gone is not an error.
    pub async fn delete(&self, created: &[Created]) -> anyhow::Result<()> {
        let mut errors = Vec::new();
        for object in created.iter().rev() {
            let result = match object {
                Created::Pod(n) => self
                    .api::<Pod>()
                    .delete(n, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                Created::Service(n) => self
                    .api::<Service>()
                    .delete(n, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                Created::Job(n) => self
                    .api::<Job>()
                    .delete(n, &DeleteParams::background())
                    .await
                    .map(|_| ()),
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => errors.push(format!("{object:?}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("cannot delete {}", errors.join("; ")))
        }
    }
}

/// The control port a pod declares (the container port named `control`; [`AGENT_PORT`] when
/// it declares none).
fn control_port(pod: &Pod) -> u16 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some("control"))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .unwrap_or(AGENT_PORT)
}

/// `IP:port` of the agent of a pod whose Ready condition is true.
fn ready_address(pod: &Pod) -> Option<String> {
    let port = control_port(pod);
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .as_ref()?
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let ip = status.pod_ip.as_ref()?;
    ready.then(|| match ip.contains(':') {
        true => format!("[{ip}]:{port}"),
        false => format!("{ip}:{port}"),
    })
}

/// Why `pod` cannot serve, if it cannot: it failed or exited (servers and agents run until
/// deleted), or its container cannot start.
pub fn pod_problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let fatal_waits = [
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
    ];
    for c in status.container_statuses.iter().flatten() {
        let Some(state) = &c.state else { continue };
        if let Some(t) = &state.terminated {
            return Some(format!(
                "container {} exited with code {}{}",
                c.name,
                t.exit_code,
                t.reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(w) = &state.waiting {
            let reason = w.reason.clone().unwrap_or_default();
            if fatal_waits.contains(&reason.as_str()) {
                return Some(format!(
                    "container {}: {reason}{}",
                    c.name,
                    w.message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    match status.phase.as_deref() {
        Some("Failed") | Some("Succeeded") => Some(format!(
            "phase {}{}",
            status.phase.as_deref().unwrap_or_default(),
            status
                .message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
        _ => None,
    }
}
