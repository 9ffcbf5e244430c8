//! Ctrl-C during a cell of the kubernetes executor (a test binary of its own: the SIGINT it
//! raises reaches every run in the process). The mock API's pods never become ready; SIGINT
//! arrives while the runner waits for them: the run ends as interrupted, writes no row, and
//! deletes the four objects it created for the cell.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use executors::kubernetes::KubeExecutor;
use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};

const TOKEN: &str = "k8s-interrupt-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_pods_start_deletes_what_the_cell_created() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    bench_core::tls::ensure_certs(&certs).unwrap();
    bench_core::tls::install_crypto_provider();
    let file = tmp.path().join("interrupt.toml");
    std::fs::write(
        &file,
        r#"
name = "k8s-int"
executor = "kubernetes"
stacks = ["h1", "h2"]
regimes = ["reuse"]
concurrency = [2]
requests_reuse = 100
baseline_seconds = 0
k8s_namespace = "bench-ns"
k8s_agents = 1
"#,
    )
    .unwrap();
    let (_, knobs) = experiment::settings::file::read(&file).unwrap();
    let mut exp = experiment::settings::resolve(Some(&knobs), &Default::default());
    exp.validate(&stacks::names()).unwrap();
    exp.out = tmp.path().join("results");

    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let api = {
        let (log, polls) = (log.clone(), polls.clone());
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_string();
                let body = request.into_body().collect_bytes().await.unwrap();
                let reply = |body: Value| {
                    Response::builder()
                        .status(StatusCode::OK)
                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap()
                };
                let mut entry = format!("{method} {path}");
                let response = match method.as_str() {
                    "POST" => {
                        let object: Value = serde_json::from_slice(&body).unwrap();
                        entry.push_str(&format!(
                            " {}",
                            object["metadata"]["name"].as_str().unwrap()
                        ));
                        reply(object)
                    }
                    "GET" if path.ends_with("/pods") => reply(
                        json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [] }),
                    ),
                    "GET" => {
                        // The third look at the (never ready) server pod: Ctrl-C.
                        if polls.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
                            nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
                        }
                        reply(json!({
                            "apiVersion": "v1", "kind": "Pod",
                            "metadata": { "name": path.rsplit('/').next().unwrap(), "namespace": "bench-ns" },
                            "spec": { "containers": [ { "name": "c", "image": "i" } ] },
                            "status": { "phase": "Pending", "podIP": "127.0.0.2",
                                "conditions": [ { "type": "Ready", "status": "False" } ] }
                        }))
                    }
                    "DELETE" => reply(
                        json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" }),
                    ),
                    other => panic!("unexpected request {other} {path}"),
                };
                log.lock().unwrap().push(entry);
                send.send_response(response);
            }
        })
    };
    let mut executor = KubeExecutor::new(client, "bench-ns");
    executor.poll = std::time::Duration::from_millis(50);
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
        std::time::Duration::from_secs(60),
        runner::run::run(exp, ctx, None),
    )
    .await
    .expect("the run ends")
    .expect("the run ends cleanly");
    assert!(outcome.interrupted);
    assert!(outcome.results.is_empty());
    assert!(common::read_csv(&outcome.dir.join("cells.csv")).is_empty());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), api).await;

    let ns = "/api/v1/namespaces/bench-ns";
    let batch = "/apis/batch/v1/namespaces/bench-ns";
    let id = "tb-k8s-int-c1";
    let changes: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| !l.starts_with("GET"))
        .cloned()
        .collect();
    assert_eq!(
        changes,
        [
            format!("POST {ns}/pods {id}-server"),
            format!("POST {ns}/services {id}-server"),
            format!("POST {ns}/services {id}-agents"),
            format!("POST {batch}/jobs {id}-agents"),
            format!("DELETE {batch}/jobs/{id}-agents"),
            format!("DELETE {ns}/services/{id}-agents"),
            format!("DELETE {ns}/services/{id}-server"),
            format!("DELETE {ns}/pods/{id}-server"),
        ],
        "the second cell never started, the first cell's objects are gone"
    );
    // The wait ends at the flag Ctrl-C sets (at most the poll already under way follows).
    let polls = polls.load(Ordering::SeqCst);
    assert!((3..=4).contains(&polls), "{polls} polls");
}
