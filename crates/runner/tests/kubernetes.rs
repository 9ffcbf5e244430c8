//! Kubernetes without a cluster: `runner k8s render` writes manifests that pass
//! `kubernetes-validate --strict` (offline, bundled schemas; skipped with a note when it is
//! missing unless `TBENCH_REQUIRE_KUBERNETES_VALIDATE=1`) and carry the settings and no
//! secret; and the executor's create → wait → start and collect → delete sequence runs
//! against kube-rs's mock API service (`tower_test::mock`, in-process: no network traffic),
//! including a pod that fails, a cell interrupted while waiting and a create the API refuses;
//! and `executor = "kubernetes"` runs whole cells with that mock API answering pods whose
//! addresses are real `runner agent` processes on loopback (127.0.0.2–4).

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use executors::kubernetes::{self, CellControl, CellObjects, Endpoints, KubeExecutor};
use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};

const TOKEN: &str = "k8s-test-token-never-printed-0123456789";

const EXPERIMENT: &str = r#"
name = "k8s_Render.Test"
stacks = ["h3", "h1"]
regimes = ["reuse"]
concurrency = [40]
requests_reuse = 1000
baseline_seconds = 0
k8s_image = "registry.example/tbench/runner:1.2.3"
k8s_namespace = "bench-ns"
k8s_agents = 4
k8s_server_resources = "cpu=2,memory=1Gi"
k8s_agent_resources = "cpu=1500m,memory=512Mi"

[k8s_node_selector]
"node.example/pool" = "bench"
"#;

fn experiment_file(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("k8s.toml");
    let text = EXPERIMENT.replace(
        "[k8s_node_selector]",
        &format!("{extra}\n[k8s_node_selector]"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn render(args: &[&str]) -> (String, String) {
    let out = common::runner()
        .args(args)
        .env(executors::agent::TOKEN_ENV, TOKEN)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "runner k8s render failed: {text}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn kubernetes_validate() -> Option<&'static str> {
    let found = Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("kubernetes-validate");
    }
    if std::env::var("TBENCH_REQUIRE_KUBERNETES_VALIDATE").as_deref() == Ok("1") {
        panic!("kubernetes-validate is required (pip install -r scripts/requirements.txt)");
    }
    eprintln!("note: kubernetes-validate not found (pip install -r scripts/requirements.txt); schema validation skipped");
    None
}

/// Every document `runner k8s render` prints passes the Kubernetes 1.37 schemas strictly
/// (no unknown field anywhere), and so does every file of `--out DIR`.
#[test]
fn rendered_manifests_pass_kubernetes_validate_strict() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment_file(dir.path(), "");
    let (stream, stderr) = render(&["k8s", "render", file.to_str().unwrap()]);
    assert!(stderr.contains("cell 1 of 2 (h3/reuse/c40/r1)"), "{stderr}");
    let documents = stream.matches("\n---\n").count() + usize::from(stream.starts_with("---\n"));
    assert_eq!(documents, 8, "{stream}");
    let Some(validate) = kubernetes_validate() else {
        return;
    };
    let path = dir.path().join("all.yaml");
    std::fs::write(&path, &stream).unwrap();
    let out = Command::new(validate)
        .arg("--strict")
        .arg(&path)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(
        out.status.success(),
        "kubernetes-validate --strict failed:\n{text}\n{stream}"
    );
    assert_eq!(text.matches(" passed for resource ").count(), 8, "{text}");
    for kind in [
        "namespace/bench-ns",
        "serviceaccount/tbench-runner",
        "role/tbench-runner",
        "rolebinding/tbench-runner",
        "pod/tb-k8s-render-test-c1-server",
        "service/tb-k8s-render-test-c1-server",
        "service/tb-k8s-render-test-c1-agents",
        "job/tb-k8s-render-test-c1-agents",
    ] {
        assert!(
            text.contains(&format!("passed for resource {kind} ")),
            "{kind}: {text}"
        );
    }

    // One file per object, each valid on its own.
    let out_dir = dir.path().join("manifests");
    let (stdout, _) = render(&[
        "k8s",
        "render",
        file.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(stdout.is_empty(), "{stdout}");
    let files: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 8, "{files:?}");
    let out = Command::new(validate)
        .arg("--strict")
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
}

/// The rendered objects say what the settings say: image, namespace, N agent pods in an
/// Indexed Job with their index exported, resources, node selector, anti-affinity (and none
/// when turned off), the RBAC the runner needs; the token appears nowhere.
#[test]
fn rendered_manifests_carry_the_settings_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment_file(dir.path(), "");
    let (stream, stderr) = render(&["k8s", "render", file.to_str().unwrap()]);
    assert!(
        !stream.contains(TOKEN) && !stderr.contains(TOKEN),
        "the token leaked"
    );
    assert!(stream.contains("kubectl -n bench-ns create secret generic tbench-agent-token"));
    assert_eq!(
        stream
            .matches("image: \"registry.example/tbench/runner:1.2.3\"")
            .count(),
        2
    );
    assert!(!stream.contains("namespace: \"tbench\""), "{stream}");

    // The same objects as the library builds them, field by field.
    let exp = settings(&file);
    let cells = experiment::plan::plan(&exp);
    let o = kubernetes::cell_objects(&cells[0], 1);
    assert_eq!(o.namespace, "bench-ns");
    let job = o.agents_job.spec.as_ref().unwrap();
    assert_eq!(job.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!((job.completions, job.parallelism), (Some(4), Some(4)));
    assert_eq!(job.backoff_limit, Some(0));
    let agent_spec = job.template.spec.as_ref().unwrap();
    let agent = &agent_spec.containers[0];
    assert_eq!(
        agent.image.as_deref(),
        Some("registry.example/tbench/runner:1.2.3")
    );
    assert_eq!(
        agent.args.as_ref().unwrap()[..3],
        ["agent", "--listen", "0.0.0.0:7400"]
    );
    let env: BTreeMap<_, _> = agent
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e))
        .collect();
    let token = env["TBENCH_AGENT_TOKEN"];
    assert!(token.value.is_none(), "the token is a Secret reference");
    let secret = token
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (secret.name.as_str(), secret.key.as_str()),
        ("tbench-agent-token", "token")
    );
    assert!(env.contains_key("JOB_COMPLETION_INDEX"));
    assert_eq!(
        agent_spec.subdomain.as_deref(),
        Some("tb-k8s-render-test-c1-agents")
    );
    let limits = agent.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["cpu"].0, "1500m");
    assert_eq!(limits["memory"].0, "512Mi");
    assert_eq!(
        agent.resources.as_ref().unwrap().requests.as_ref(),
        Some(limits),
        "requests = limits"
    );
    let selector = agent_spec.node_selector.as_ref().unwrap();
    assert_eq!(selector["node.example/pool"], "bench");
    let anti = agent_spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|p| {
            p.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("agents kept off the server's node");
    assert_eq!(anti[0].topology_key, "kubernetes.io/hostname");
    let server_labels = o.server_pod.metadata.labels.as_ref().unwrap();
    for (k, v) in anti[0]
        .label_selector
        .as_ref()
        .unwrap()
        .match_labels
        .as_ref()
        .unwrap()
    {
        assert_eq!(
            server_labels.get(k),
            Some(v),
            "the anti-affinity selects the server pod"
        );
    }

    // The server pod runs an agent (which starts the cell's server when the runner asks),
    // with the token from the Secret; it declares the agent's port and the server's.
    let server = &o.server_pod.spec.as_ref().unwrap().containers[0];
    let args = server.args.as_ref().unwrap();
    assert_eq!(args[..3], ["agent", "--listen", "0.0.0.0:7400"], "{args:?}");
    assert!(
        args.windows(2).any(|w| w == ["--certs", "/certs"]),
        "{args:?}"
    );
    let server_token = server
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "TBENCH_AGENT_TOKEN")
        .expect("the server pod's agent gets the token");
    assert!(
        server_token.value.is_none(),
        "the token is a Secret reference"
    );
    let ports: Vec<(&str, i32, &str)> = server
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.as_deref().unwrap(),
                p.container_port,
                p.protocol.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("control", 7400, "TCP"),
            ("serve-tcp", 8443, "TCP"),
            ("serve-udp", 8443, "UDP")
        ]
    );
    let probe = server
        .readiness_probe
        .as_ref()
        .unwrap()
        .exec
        .as_ref()
        .unwrap();
    assert!(
        probe.command.as_ref().unwrap()[2].contains(":1CE8 "),
        "the server pod is ready when its agent listens (port 7400 = 0x1CE8)"
    );
    assert_eq!(
        server.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"].0,
        "2"
    );

    let run = kubernetes::run_objects(&exp);
    let rules = run.role.rules.unwrap();
    let allows = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    for verb in ["create", "get", "list", "watch", "delete"] {
        assert!(
            allows("", "pods", verb) && allows("", "services", verb),
            "{verb}"
        );
        assert!(allows("batch", "jobs", verb), "{verb}");
    }
    assert!(allows("", "pods/log", "get"));
    assert!(
        !allows("", "secrets", "get"),
        "the runner never reads secrets"
    );

    // Anti-affinity off, and flags before `k8s` override the file.
    let (stream, _) = render(&[
        "--k8s-agents-off-server-node=false",
        "--k8s-agents",
        "2",
        "k8s",
        "render",
        file.to_str().unwrap(),
    ]);
    assert!(!stream.contains("podAntiAffinity"), "{stream}");
    assert!(stream.contains("completions: 2\n"), "{stream}");

    // An invalid setting is refused with its key and exit status 2.
    let bad = experiment_file(dir.path(), "k8s_agent_resources = \"cpu=lots\"");
    let out = common::runner()
        .args(["k8s", "render", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::output_text(&out));
    assert!(
        common::output_text(&out).contains("k8s_agent_resources"),
        "{}",
        common::output_text(&out)
    );
}

fn settings(file: &std::path::Path) -> experiment::settings::Experiment {
    let (_, knobs) = experiment::settings::file::read(file).unwrap();
    let exp = experiment::settings::resolve(Some(&knobs), &Default::default());
    exp.validate(&stacks::names()).unwrap();
    exp
}

// ---------------------------------------------------------------------------------------
// The executor's API sequence against kube-rs's mock service.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    /// Pods become ready on the second poll.
    Ready,
    /// Agent pod 1 cannot pull its image.
    AgentFails,
    /// Pods never become ready; the stop flag is set at the second poll.
    Interrupted,
    /// Creating the Job is forbidden (RBAC).
    JobForbidden,
}

/// What the fake API server saw, and what the fake control channel did, in order.
type Log = Arc<Mutex<Vec<String>>>;

fn pod_json(name: &str, ip: &str, ready: bool, index: Option<u32>, waiting: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "bench-ns" },
        "spec": { "containers": [ { "name": "c", "image": "i" } ] },
        "status": {
            "phase": if waiting.is_some() { "Pending" } else { "Running" },
            "podIP": ip,
            "conditions": [ { "type": "Ready", "status": if ready { "True" } else { "False" } } ],
        }
    });
    if let Some(i) = index {
        pod["metadata"]["annotations"] =
            json!({ "batch.kubernetes.io/job-completion-index": i.to_string() });
        pod["metadata"]["name"] = json!(format!("{name}-{i}-x7k2p"));
    }
    if let Some(reason) = waiting {
        pod["status"]["containerStatuses"] = json!([{
            "name": "agent", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": { "waiting": { "reason": reason, "message": "pull access denied" } }
        }]);
    }
    pod
}

/// A fake API server: answers the executor's requests for `scenario`, recording each as
/// `METHOD path` (and the delete propagation policy).
async fn fake_api(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    scenario: Scenario,
    objects: CellObjects,
    log: Log,
    stop: Arc<AtomicBool>,
) {
    let mut polls = 0;
    let server = objects.server_pod.metadata.name.clone().unwrap();
    let job = objects.agents_job.metadata.name.clone().unwrap();
    while let Some((request, send)) = handle.next_request().await {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or("").to_string();
        let body = request.into_body().collect_bytes().await.unwrap();
        let mut entry = format!("{method} {path}");
        let reply = |status: StatusCode, body: Value| {
            Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap()
        };
        let response = match (method.as_str(), path.as_str()) {
            ("POST", p) if p.ends_with("/jobs") && scenario == Scenario::JobForbidden => reply(
                StatusCode::FORBIDDEN,
                json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                        "reason": "Forbidden",
                        "message": "jobs.batch is forbidden: User cannot create resource" }),
            ),
            ("POST", _) => {
                let object: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(object["metadata"]["namespace"], "bench-ns");
                entry.push_str(&format!(
                    " {}",
                    object["metadata"]["name"].as_str().unwrap()
                ));
                reply(StatusCode::CREATED, object)
            }
            ("GET", p) if p.ends_with("/log") => {
                assert!(query.contains("tailLines=5"), "{query}");
                entry.push_str(&format!("?{query}"));
                Response::new(Body::from(
                    b"pulling registry.example/tbench: denied\n".to_vec(),
                ))
            }
            ("GET", p) if p.ends_with(&format!("/pods/{server}")) => {
                polls += 1;
                if scenario == Scenario::Interrupted && polls == 2 {
                    stop.store(true, Ordering::SeqCst);
                }
                let ready = scenario != Scenario::Interrupted && polls >= 2;
                reply(
                    StatusCode::OK,
                    pod_json(&server, "10.0.0.2", ready, None, None),
                )
            }
            ("GET", p) if p.ends_with("/pods") => {
                assert!(query.contains("labelSelector="), "{query}");
                let ready = scenario != Scenario::Interrupted && polls >= 2;
                // Listed in reverse index order: the executor orders them by index.
                let items: Vec<Value> = (0..objects.agents)
                    .rev()
                    .map(|i| {
                        let waiting =
                            (scenario == Scenario::AgentFails && i == 1).then_some("ErrImagePull");
                        pod_json(&job, &format!("10.0.1.{}", 10 + i), ready, Some(i), waiting)
                    })
                    .collect();
                reply(
                    StatusCode::OK,
                    json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items }),
                )
            }
            ("DELETE", _) => {
                let params: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if let Some(policy) = params["propagationPolicy"].as_str() {
                    entry.push_str(&format!(" ({policy})"));
                }
                reply(
                    StatusCode::OK,
                    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" }),
                )
            }
            other => panic!("unexpected request {other:?}"),
        };
        log.lock().unwrap().push(entry);
        send.send_response(response);
    }
}

/// The agents' control channel, faked: records the endpoints it was given.
struct FakeControl {
    log: Log,
}

impl CellControl for FakeControl {
    type Output = Endpoints;
    async fn run(
        &mut self,
        endpoints: &Endpoints,
        _stop: &AtomicBool,
    ) -> anyhow::Result<Endpoints> {
        self.log
            .lock()
            .unwrap()
            .push("control: go to all, collect".into());
        Ok(endpoints.clone())
    }
}

/// Runs one cell's sequence against the fake API; returns the outcome and the log.
async fn run_scenario(scenario: Scenario) -> (anyhow::Result<Endpoints>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let exp = settings(&experiment_file(dir.path(), ""));
    let cells = experiment::plan::plan(&exp);
    let objects = kubernetes::cell_objects(&cells[0], 1);
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let api = tokio::spawn(fake_api(
        handle,
        scenario,
        objects.clone(),
        log.clone(),
        stop.clone(),
    ));
    let mut executor = KubeExecutor::new(client, &objects.namespace);
    executor.poll = std::time::Duration::from_millis(10);
    executor.ready_timeout = std::time::Duration::from_secs(20);
    let mut control = FakeControl { log: log.clone() };
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        executor.run_cell(&objects, &mut control, &stop),
    )
    .await
    .expect("the sequence ends");
    drop(executor);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), api).await;
    let log = log.lock().unwrap().clone();
    (outcome, log)
}

const NS: &str = "/api/v1/namespaces/bench-ns";
const BATCH: &str = "/apis/batch/v1/namespaces/bench-ns";

fn created() -> Vec<String> {
    vec![
        format!("POST {NS}/pods tb-k8s-render-test-c1-server"),
        format!("POST {NS}/services tb-k8s-render-test-c1-server"),
        format!("POST {NS}/services tb-k8s-render-test-c1-agents"),
        format!("POST {BATCH}/jobs tb-k8s-render-test-c1-agents"),
    ]
}

fn deleted() -> Vec<String> {
    vec![
        format!("DELETE {BATCH}/jobs/tb-k8s-render-test-c1-agents (Background)"),
        format!("DELETE {NS}/services/tb-k8s-render-test-c1-agents"),
        format!("DELETE {NS}/services/tb-k8s-render-test-c1-server"),
        format!("DELETE {NS}/pods/tb-k8s-render-test-c1-server"),
    ]
}

fn polls(log: &[String]) -> usize {
    log.iter()
        .filter(|l| l.starts_with(&format!("GET {NS}/pods/tb-")) && !l.contains("/log"))
        .count()
}

/// Create the four objects, poll until the server and all four agents are ready, start and
/// collect once with the agents in index order, then delete everything (the Job with its
/// pods), in reverse order.
#[tokio::test]
async fn executor_creates_waits_starts_collects_and_deletes() {
    let (outcome, log) = run_scenario(Scenario::Ready).await;
    let endpoints = outcome.expect("the cell succeeds");
    // The server pod's agent (the pods declare no control port here: the default).
    assert_eq!(endpoints.server, "10.0.0.2:7400");
    assert_eq!(
        endpoints.agents,
        [
            "10.0.1.10:7400",
            "10.0.1.11:7400",
            "10.0.1.12:7400",
            "10.0.1.13:7400"
        ]
    );
    assert_eq!(log[..4], created()[..], "{log:#?}");
    assert_eq!(polls(&log), 2, "{log:#?}");
    let control = log.iter().position(|l| l.starts_with("control")).unwrap();
    assert_eq!(log[control + 1..], deleted()[..], "{log:#?}");
}

/// An agent pod that cannot pull its image fails the cell with an error naming the pod, the
/// reason and its last log line; the agents are never started, and everything is deleted.
#[tokio::test]
async fn a_failing_pod_fails_the_cell_and_everything_is_deleted() {
    let (outcome, log) = run_scenario(Scenario::AgentFails).await;
    let error = format!("{:#}", outcome.expect_err("the cell fails"));
    assert!(error.contains("agent pod 1"), "{error}");
    assert!(
        error.contains("ErrImagePull: pull access denied"),
        "{error}"
    );
    assert!(
        error.contains("pulling registry.example/tbench: denied"),
        "{error}"
    );
    assert!(!log.iter().any(|l| l.starts_with("control")), "{log:#?}");
    assert_eq!(log[..4], created()[..], "{log:#?}");
    assert!(
        log.iter()
            .any(|l| l.contains("-agents-1-x7k2p/log?") && l.contains("tailLines=5")),
        "{log:#?}"
    );
    assert_eq!(log[log.len() - 4..], deleted()[..], "{log:#?}");
}

/// Ctrl-C while the pods start (the stop flag the runner's signal handler sets): the wait
/// ends at once, nothing is started, everything created is deleted.
#[tokio::test]
async fn an_interrupted_cell_deletes_everything() {
    let (outcome, log) = run_scenario(Scenario::Interrupted).await;
    let error = format!("{:#}", outcome.expect_err("the cell is interrupted"));
    assert!(error.contains("interrupted"), "{error}");
    assert!(!log.iter().any(|l| l.starts_with("control")), "{log:#?}");
    assert_eq!(polls(&log), 2, "no poll after the stop flag: {log:#?}");
    assert_eq!(log[..4], created()[..], "{log:#?}");
    assert_eq!(log[log.len() - 4..], deleted()[..], "{log:#?}");
}

/// A create the API refuses (here RBAC: the Role lacks jobs) fails the cell with the API's
/// message, and only what was created is deleted.
#[tokio::test]
async fn a_refused_create_deletes_only_what_was_created() {
    let (outcome, log) = run_scenario(Scenario::JobForbidden).await;
    let error = format!("{:#}", outcome.expect_err("the cell fails"));
    assert!(error.contains("cannot create the agents' job"), "{error}");
    assert!(error.contains("forbidden"), "{error}");
    assert_eq!(log[..3], created()[..3], "{log:#?}");
    assert_eq!(log[3], format!("POST {BATCH}/jobs"), "{log:#?}");
    assert_eq!(log[4..], deleted()[1..], "{log:#?}");
}

// ---------------------------------------------------------------------------------------
// The kubernetes executor end to end: the mock API's pods are real agents on loopback.
// ---------------------------------------------------------------------------------------

/// A ready pod at `agent` (its IP as `status.podIP`, its port as the `control` port).
fn ready_pod(name: &str, agent: std::net::SocketAddr, index: Option<u32>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "bench-ns" },
        "spec": { "containers": [ { "name": "c", "image": "i",
            "ports": [ { "name": "control", "containerPort": agent.port(), "protocol": "TCP" } ] } ] },
        "status": {
            "phase": "Running",
            "podIP": agent.ip().to_string(),
            "conditions": [ { "type": "Ready", "status": "True" } ],
        }
    });
    if let Some(i) = index {
        pod["metadata"]["annotations"] =
            json!({ "batch.kubernetes.io/job-completion-index": i.to_string() });
    }
    pod
}

/// A fake API server whose pods are the given agents: the server pod, and agent pod i; the
/// agent pod 1 of the cell `failing` cannot pull its image.
async fn pods_api(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    server: std::net::SocketAddr,
    agents: Vec<std::net::SocketAddr>,
    failing: &'static str,
    log: Log,
) {
    while let Some((request, send)) = handle.next_request().await {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or("").to_string();
        let body = request.into_body().collect_bytes().await.unwrap();
        let mut entry = format!("{method} {path}");
        let reply = |status: StatusCode, body: Value| {
            Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap()
        };
        let response = match method.as_str() {
            "POST" => {
                let object: Value = serde_json::from_slice(&body).unwrap();
                entry.push_str(&format!(
                    " {}",
                    object["metadata"]["name"].as_str().unwrap()
                ));
                reply(StatusCode::CREATED, object)
            }
            "GET" if path.ends_with("/log") => {
                Response::new(Body::from(b"pulling the image: denied\n".to_vec()))
            }
            "GET" if path.contains("/pods/") => {
                let name = path.rsplit('/').next().unwrap();
                reply(StatusCode::OK, ready_pod(name, server, None))
            }
            "GET" if path.ends_with("/pods") => {
                let fails = query.contains(&format!("{failing}%2C"));
                let items: Vec<Value> = agents
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let mut pod = ready_pod(&format!("agent-{i}"), *a, Some(i as u32));
                        if fails && i == 1 {
                            pod["status"]["phase"] = json!("Pending");
                            pod["status"]["containerStatuses"] = json!([{
                                "name": "agent", "image": "i", "imageID": "", "ready": false,
                                "restartCount": 0,
                                "state": { "waiting": { "reason": "ErrImagePull" } }
                            }]);
                        }
                        pod
                    })
                    .collect();
                reply(
                    StatusCode::OK,
                    json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items }),
                )
            }
            "DELETE" => reply(
                StatusCode::OK,
                json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" }),
            ),
            other => panic!("unexpected request {other} {path}"),
        };
        log.lock().unwrap().push(entry);
        send.send_response(response);
    }
}

/// `executor = "kubernetes"` runs whole cells: for each, the objects are created, the pods
/// (real agents on 127.0.0.2–4 standing in for them) become ready, the server pod's agent
/// starts the cell's server on its pod address and samples it, agent pods 0 and 1 send their
/// shards (`go` from the runner), the results are merged into the row, and everything the
/// cell created is deleted before the next cell. The first cell's agent pod 1 cannot pull its
/// image: that cell fails with the pod's name and reason, its objects are deleted too, and the
/// sweep goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_executor_runs_cells_end_to_end_on_agent_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    bench_core::tls::ensure_certs(&certs).unwrap();
    bench_core::tls::install_crypto_provider();
    let server = common::Agent::start_on("127.0.0.2", &certs, TOKEN);
    let agents = [
        common::Agent::start_on("127.0.0.3", &certs, TOKEN),
        common::Agent::start_on("127.0.0.4", &certs, TOKEN),
    ];
    let file = tmp.path().join("e2e.toml");
    std::fs::write(
        &file,
        r#"
name = "k8s-e2e"
executor = "kubernetes"
stacks = ["h1", "h2", "h3"]
regimes = ["reuse"]
concurrency = [4]
requests_reuse = 400
baseline_seconds = 0
k8s_namespace = "bench-ns"
k8s_agents = 2
"#,
    )
    .unwrap();
    let mut exp = settings(&file);
    exp.out = tmp.path().join("results");
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let log: Log = Arc::default();
    let api = tokio::spawn(pods_api(
        handle,
        server.socket_addr(),
        agents.iter().map(|a| a.socket_addr()).collect(),
        "tb-k8s-e2e-c1",
        log.clone(),
    ));
    let mut executor = KubeExecutor::new(client, "bench-ns");
    executor.poll = std::time::Duration::from_millis(10);
    executor.server_port = 0;
    let ca = bench_core::tls::CertPaths::new(&certs).ca_cert();
    let link = executors::agent::AgentLink::new(&ca, "localhost", TOKEN.into()).unwrap();
    let ctx = runner::run::RunContext {
        certs_dir: certs.clone(),
        client_threads: 1,
        pinning: "none".into(),
        server_cpu: None,
        target: None,
        service: None,
        service_pid: None,
        agents: None,
        executor: Some(Arc::new(executors::kubernetes::Kubernetes::new(
            executor, link,
        ))),
        argv: Vec::new(),
        live: None,
    };
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        runner::run::run(exp, ctx, None),
    )
    .await
    .expect("the run ends")
    .expect("the run succeeds");
    assert!(!outcome.interrupted);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), api).await;

    let cells = common::read_csv(&outcome.dir.join("cells.csv"));
    assert_eq!(cells.len(), 3);
    let error = &cells[0]["error"];
    assert!(
        error.contains("agent pod 1") && error.contains("ErrImagePull"),
        "{error}"
    );
    assert!(error.contains("pulling the image: denied"), "{error}");
    let rows = common::read_csv(&outcome.dir.join("agents.csv"));
    for cell in &cells[1..] {
        assert_eq!(cell["error"], "", "{cell:?}");
        assert_eq!(common::num(cell, "ok"), 400.0);
        assert_eq!(common::num(cell, "agents"), 2.0);
        // The server pod's agent measured a real server process.
        assert!(common::num(cell, "server_rss_peak_bytes") > 1e6, "{cell:?}");
        assert!(common::num(cell, "server_cpu_s") > 0.0, "{cell:?}");
        let shares: Vec<_> = rows
            .iter()
            .filter(|r| r["cell_key"] == cell["cell_key"])
            .collect();
        // Shard i went to agent pod i, and the shares add up to the row.
        let addresses: Vec<&str> = shares.iter().map(|r| r["address"].as_str()).collect();
        let expected: Vec<String> = agents.iter().map(|a| a.addr.clone()).collect();
        assert_eq!(addresses, expected);
        let ok: f64 = shares.iter().map(|r| common::num(r, "ok")).sum();
        assert_eq!(ok, 400.0);
    }

    // The token went only over the control channel: no result file holds it.
    assert_no_file_holds(&outcome.dir, TOKEN);

    // Per cell: the four objects created, then (after the pods were read) deleted in reverse.
    let log = log.lock().unwrap().clone();
    let mut expected = Vec::new();
    for c in 1..=3 {
        let id = format!("tb-k8s-e2e-c{c}");
        expected.extend([
            format!("POST {NS}/pods {id}-server"),
            format!("POST {NS}/services {id}-server"),
            format!("POST {NS}/services {id}-agents"),
            format!("POST {BATCH}/jobs {id}-agents"),
            format!("DELETE {BATCH}/jobs/{id}-agents"),
            format!("DELETE {NS}/services/{id}-agents"),
            format!("DELETE {NS}/services/{id}-server"),
            format!("DELETE {NS}/pods/{id}-server"),
        ]);
    }
    let changes: Vec<String> = log
        .iter()
        .filter(|l| !l.starts_with("GET"))
        .cloned()
        .collect();
    assert_eq!(changes, expected, "{log:#?}");
    assert!(
        log.iter()
            .any(|l| l.starts_with(&format!("GET {NS}/pods/"))),
        "{log:#?}"
    );
}

/// From the command line, the kubernetes executor refuses what it cannot do with one line and
/// exit status 2, before anything is created: agents of its own (it starts them in pods), no
/// token, and no API server to reach (none exists here, and this build has no TLS backend
/// for one).
#[test]
fn the_kubernetes_executor_refuses_bad_input_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let run = |extra: &[&str], token: Option<&str>| {
        let mut cmd = common::runner();
        cmd.args([
            "--executor",
            "kubernetes",
            "--stacks",
            "h1",
            "--regime",
            "reuse",
        ])
        .args([
            "--concurrency",
            "1",
            "--requests",
            "10",
            "--baseline-seconds",
            "0",
        ])
        .arg("--out")
        .arg(&out)
        .args(extra)
        .env("KUBECONFIG", tmp.path().join("no-such-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove(executors::agent::TOKEN_ENV);
        if let Some(t) = token {
            cmd.env(executors::agent::TOKEN_ENV, t);
        }
        let output = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(TOKEN), "{stderr}");
        stderr
    };
    let e = run(&["--agents", "127.0.0.1:7400"], Some(TOKEN));
    assert!(e.contains("executor") && e.contains("agents"), "{e}");
    let e = run(&[], None);
    assert!(e.contains("no agent token"), "{e}");
    let e = run(&[], Some(TOKEN));
    assert!(
        e.contains("executor kubernetes: cannot set up the Kubernetes API client"),
        "{e}"
    );
    assert!(!out.exists(), "nothing was created");
}

/// No file under `dir` contains `secret`.
fn assert_no_file_holds(dir: &std::path::Path, secret: &str) {
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files += 1;
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{} holds the token",
                    path.display()
                );
            }
        }
    }
    assert!(files >= 5, "only {files} result files");
}

/// A stand-in Kubernetes API server on loopback, over TLS with the suite's certificate: it
/// answers `GET /version` and refuses everything else with 403, recording each request line.
/// Enough to show the runner's API client verifies the server and speaks to it; no cluster
/// runs here.
fn https_api_server(certs: &std::path::Path) -> (u16, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let paths = bench_core::tls::ensure_certs(certs).unwrap();
    let identity = bench_core::tls::ServerIdentity::load(&paths).unwrap();
    let config = bench_core::tls::server_config(&identity, b"http/1.1", false).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // One request per connection: its head, then a Content-Length body.
                    let head_end = loop {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while buf.len() < head_end + length {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let line = head.lines().next().unwrap_or_default().to_string();
                    seen.lock().unwrap().push(line.clone());
                    let (status, body) = if line.starts_with("GET /version") {
                        (
                            "200 OK",
                            json!({"major": "1", "minor": "37", "gitVersion": "v1.37.0",
                                "gitCommit": "test", "gitTreeState": "clean",
                                "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
                                "compiler": "gc", "platform": "linux/amd64"}),
                        )
                    } else {
                        (
                            "403 Forbidden",
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "refused by the test's API server",
                                "reason": "Forbidden", "code": 403}),
                        )
                    };
                    let body = body.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    (port, log)
}

/// The kubernetes executor's API client speaks TLS and verifies the API server: with the
/// kubeconfig's CA it reaches the stand-in server (`GET /version` before the run, then the
/// cell's first create, which the server refuses and the cell's row reports); with another CA
/// the run stops before anything with one line and exit 2. The kubeconfig's bearer token
/// reaches no result file.
#[test]
fn the_kubernetes_api_client_verifies_the_servers_certificate() {
    const KUBE_TOKEN: &str = "kube-bearer-token-never-in-results";
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let (port, log) = https_api_server(&certs);
    let other = tmp.path().join("other-certs");
    bench_core::tls::ensure_certs(&other).unwrap();
    let run = |ca: &std::path::Path, out: &std::path::Path| {
        let kubeconfig = tmp.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\nusers:\n- name: t\n  user:\n    token: {KUBE_TOKEN}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\n",
                ca.display()
            ),
        )
        .unwrap();
        common::runner()
            .args([
                "--executor",
                "kubernetes",
                "--stacks",
                "h1",
                "--regime",
                "reuse",
            ])
            .args([
                "--concurrency",
                "1",
                "--requests",
                "10",
                "--baseline-seconds",
                "0",
            ])
            .arg("--out")
            .arg(out)
            .arg("--certs")
            .arg(&certs)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env(executors::agent::TOKEN_ENV, TOKEN)
            .output()
            .unwrap()
    };
    let ca = |dir: &std::path::Path| bench_core::tls::CertPaths::new(dir).ca_cert();

    let refused = tmp.path().join("refused");
    let output = run(&ca(&other), &refused);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot reach the Kubernetes API server") && stderr.contains("certificate"),
        "{stderr}"
    );
    assert!(!refused.exists(), "nothing was created");
    assert!(
        log.lock().unwrap().is_empty(),
        "no request passed the failed handshake"
    );

    let reached = tmp.path().join("reached");
    let output = run(&ca(&certs), &reached);
    let text = common::output_text(&output);
    let requests = log.lock().unwrap().clone();
    assert!(
        requests
            .first()
            .is_some_and(|l| l.starts_with("GET /version")),
        "{requests:?}"
    );
    assert!(
        requests.iter().any(|l| l.starts_with("POST ")),
        "the cell asked to create its objects: {requests:?}\n{text}"
    );
    let rows = common::read_csv(&common::results_dir(&reached).join("cells.csv"));
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0]["error"].contains("refused by the test's API server"),
        "{:?}",
        rows[0]["error"]
    );
    assert_no_file_holds(&reached, KUBE_TOKEN);
    assert_no_file_holds(&reached, TOKEN);
}
