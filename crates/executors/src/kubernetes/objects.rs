//! Kubernetes objects: what the runner creates per cell (the server pod and its headless
//! Service, an Indexed Job of agent pods and their headless Service) and the RBAC it needs;
//! [`super::api`] creates, waits for and deletes them, and [`super::yaml`] writes them for
//! `runner k8s render`.
//!
//! The objects are k8s-openapi types, so `runner k8s render` prints exactly what the
//! sequence would send. Secrets are referenced, never rendered: the agent token and the
//! certificates live in Secrets the user creates (see [`secret_commands`]).
//!
//! Every pod runs `runner agent`: the server pod's agent starts the cell's server when the
//! runner asks (the server job a local cell gives its child) and samples it; the agent pods
//! each send one shard of the load. Starting and collecting go through the agents' control
//! channel (TLS with the shared token): [`super::Kubernetes`] is the executor that runs cells
//! this way.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, ExecAction, Namespace,
    ObjectFieldSelector, Pod, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretKeySelector, SecretVolumeSource, Service, ServiceAccount,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use experiment::plan::Cell;
use experiment::settings::Experiment;

/// The port the server pod listens on (TCP and, for HTTP/3, UDP).
pub const SERVER_PORT: u16 = 8443;
/// The port each agent pod's control channel listens on.
pub const AGENT_PORT: u16 = 7400;
/// The Secret (created by the user) holding the agents' shared token under [`TOKEN_KEY`].
pub const TOKEN_SECRET: &str = "tbench-agent-token";
pub const TOKEN_KEY: &str = "token";
/// The Secret (created by the user) holding `ca.pem`, `server.pem` and `server.key`.
pub const CERTS_SECRET: &str = "tbench-certs";
/// Where the certificates are mounted in every pod.
pub const CERTS_DIR: &str = "/certs";
/// The ServiceAccount the runner's own pod runs as.
pub const SERVICE_ACCOUNT: &str = "tbench-runner";
/// The label naming the cell an object belongs to.
pub const CELL_LABEL: &str = "tbench.dev/cell";
pub(super) const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// The annotation Kubernetes puts on an Indexed Job's pods.
pub(super) const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// What the user applies once (the runner cannot grant itself rights): the namespace, and the
/// runner's ServiceAccount with the Role it needs and its binding.
pub struct RunObjects {
    pub namespace: Namespace,
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
}

/// What the runner creates for one cell, and deletes after it.
#[derive(Clone)]
pub struct CellObjects {
    /// The cell's name prefix, also its [`CELL_LABEL`] value.
    pub id: String,
    pub namespace: String,
    pub server_pod: Pod,
    pub server_service: Service,
    pub agents_service: Service,
    pub agents_job: Job,
    /// Agent pods (the Job's completions and parallelism).
    pub agents: u32,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn meta(name: &str, namespace: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

fn common_labels() -> Vec<(&'static str, &'static str)> {
    vec![
        ("app.kubernetes.io/name", "tbench"),
        ("app.kubernetes.io/managed-by", "tbench-runner"),
    ]
}

/// The namespace and the runner's RBAC: pods, services and jobs created, read, watched and
/// deleted in the namespace, and pods' logs read; nothing cluster-wide.
pub fn run_objects(exp: &Experiment) -> RunObjects {
    let ns = &exp.k8s_namespace;
    let l = labels(&common_labels());
    let verbs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let manage = verbs(&["create", "get", "list", "watch", "delete"]);
    let rule = |group: &str, resources: &[&str], verbs: Vec<String>| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs,
        ..PolicyRule::default()
    };
    RunObjects {
        namespace: Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                labels: Some(l.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        },
        service_account: ServiceAccount {
            metadata: meta(SERVICE_ACCOUNT, ns, l.clone()),
            ..ServiceAccount::default()
        },
        role: Role {
            metadata: meta(SERVICE_ACCOUNT, ns, l.clone()),
            rules: Some(vec![
                rule("", &["pods", "services"], manage.clone()),
                rule("", &["pods/log"], verbs(&["get"])),
                rule("batch", &["jobs"], manage),
            ]),
        },
        role_binding: RoleBinding {
            metadata: meta(SERVICE_ACCOUNT, ns, l),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: SERVICE_ACCOUNT.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: SERVICE_ACCOUNT.into(),
                namespace: Some(ns.clone()),
                ..Subject::default()
            }]),
        },
    }
}

/// `text` as a DNS label part: lowercase letters, digits and '-', at most `max` characters.
fn dns_part(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push('x');
    }
    out
}

/// The cell's name prefix: `tb-<experiment>-c<number>` (the number is the cell's 1-based
/// position in the plan), short enough for `<prefix>-agents-<index>` to be a pod hostname.
pub fn cell_id(exp_name: &str, cell_number: usize) -> String {
    format!("tb-{}-c{cell_number}", dns_part(exp_name, 24))
}

/// Requests equal to limits (validated quantities): Guaranteed QoS, no CPU borrowing.
fn resources(
    validated: &experiment::settings::Parsed<experiment::settings::PodResources>,
) -> ResourceRequirements {
    let quantities: BTreeMap<String, Quantity> = validated
        .value()
        .0
        .clone()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect();
    ResourceRequirements {
        limits: Some(quantities.clone()),
        requests: Some(quantities),
        ..ResourceRequirements::default()
    }
}

/// Ready once `port` is bound: listening on TCP or bound on UDP (HTTP/3), read from
/// /proc/net, so the probe needs no knowledge of the stack's protocol; a probe that connected
/// would be a failed handshake in the process's log at every period.
fn listening_probe(port: u16) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "grep -qsiE ':{port:04X} 0+:0000 0A' /proc/net/tcp /proc/net/tcp6 || grep -qsiE ':{port:04X} 0+:0000 07' /proc/net/udp /proc/net/udp6"
                ),
            ]),
        }),
        period_seconds: Some(1),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn certs_volume() -> (Volume, VolumeMount) {
    (
        Volume {
            name: "certs".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(CERTS_SECRET.into()),
                default_mode: Some(0o400),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: "certs".into(),
            mount_path: CERTS_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

fn node_selector(exp: &Experiment) -> Option<BTreeMap<String, String>> {
    (!exp.k8s_node_selector.is_empty()).then(|| exp.k8s_node_selector.clone())
}

/// The objects of `cell` (number `cell_number` in the plan).
pub fn cell_objects(cell: &Cell, cell_number: usize) -> CellObjects {
    let exp = &*cell.settings;
    let ns = exp.k8s_namespace.clone();
    let id = cell_id(&exp.name, cell_number);
    let server_name = format!("{id}-server");
    let agents_name = format!("{id}-agents");
    let with = |component: &'static str| {
        let mut l = common_labels();
        l.push((COMPONENT_LABEL, component));
        l.push((CELL_LABEL, &id));
        labels(&l)
    };
    let selector =
        |component: &'static str| labels(&[(CELL_LABEL, &id), (COMPONENT_LABEL, component)]);
    let (volume, mount) = certs_volume();

    let port = |name: &str, port: u16, protocol: &str| ContainerPort {
        name: Some(name.into()),
        container_port: port.into(),
        protocol: Some(protocol.into()),
        ..ContainerPort::default()
    };
    let env_from = |name: &str, source: EnvVarSource| EnvVar {
        name: name.into(),
        value_from: Some(source),
        ..EnvVar::default()
    };
    let token_env = env_from(
        crate::agent::TOKEN_ENV,
        EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: TOKEN_SECRET.into(),
                key: TOKEN_KEY.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        },
    );
    let agent_args: Vec<String> = [
        "agent",
        "--listen",
        &format!("0.0.0.0:{AGENT_PORT}"),
        "--certs",
        CERTS_DIR,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let server_pod = Pod {
        metadata: meta(&server_name, &ns, with("server")),
        spec: Some(PodSpec {
            // A server that crashes fails its cell; it is never silently replaced.
            restart_policy: Some("Never".into()),
            node_selector: node_selector(exp),
            automount_service_account_token: Some(false),
            // The pod's agent starts the cell's server (`runner serve`, the cell's flags,
            // listening on SERVER_PORT) when the runner asks, and samples it.
            containers: vec![Container {
                name: "server".into(),
                image: Some(exp.k8s_image.clone()),
                command: Some(vec!["runner".into()]),
                args: Some(agent_args.clone()),
                env: Some(vec![token_env.clone()]),
                ports: Some(vec![
                    port("control", AGENT_PORT, "TCP"),
                    port("serve-tcp", SERVER_PORT, "TCP"),
                    port("serve-udp", SERVER_PORT, "UDP"),
                ]),
                readiness_probe: Some(listening_probe(AGENT_PORT)),
                resources: Some(resources(&exp.k8s_server_resources)),
                volume_mounts: Some(vec![mount.clone()]),
                ..Container::default()
            }],
            volumes: Some(vec![volume.clone()]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let service_port = |name: &str, port: u16, protocol: &str| ServicePort {
        name: Some(name.into()),
        port: port.into(),
        protocol: Some(protocol.into()),
        ..ServicePort::default()
    };
    // Headless: the names resolve to the pods' own addresses, no kube-proxy NAT in the path.
    let headless = |name: &str, component: &'static str, ports: Vec<ServicePort>| Service {
        metadata: meta(name, &ns, with(component)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector(component)),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let server_service = headless(
        &server_name,
        "server",
        vec![
            service_port("serve-tcp", SERVER_PORT, "TCP"),
            service_port("serve-udp", SERVER_PORT, "UDP"),
        ],
    );
    let agents_service = headless(
        &agents_name,
        "agent",
        vec![service_port("control", AGENT_PORT, "TCP")],
    );

    let affinity = exp.k8s_agents_off_server_node.then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(selector("server")),
                    ..LabelSelector::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..PodAffinityTerm::default()
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    let n = exp.k8s_agents as i32;
    let agents_job = Job {
        metadata: meta(&agents_name, &ns, with("agent")),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n),
            parallelism: Some(n),
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(with("agent")),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    // Pod i is <job>-<i>.<service>: the runner sends it shard i.
                    subdomain: Some(agents_name.clone()),
                    node_selector: node_selector(exp),
                    affinity,
                    automount_service_account_token: Some(false),
                    containers: vec![Container {
                        name: "agent".into(),
                        image: Some(exp.k8s_image.clone()),
                        command: Some(vec!["runner".into()]),
                        args: Some(agent_args),
                        env: Some(vec![
                            token_env,
                            env_from(
                                "JOB_COMPLETION_INDEX",
                                EnvVarSource {
                                    field_ref: Some(ObjectFieldSelector {
                                        field_path: format!(
                                            "metadata.annotations['{INDEX_ANNOTATION}']"
                                        ),
                                        ..ObjectFieldSelector::default()
                                    }),
                                    ..EnvVarSource::default()
                                },
                            ),
                        ]),
                        ports: Some(vec![port("control", AGENT_PORT, "TCP")]),
                        readiness_probe: Some(listening_probe(AGENT_PORT)),
                        resources: Some(resources(&exp.k8s_agent_resources)),
                        volume_mounts: Some(vec![mount]),
                        ..Container::default()
                    }],
                    volumes: Some(vec![volume]),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    CellObjects {
        id,
        namespace: ns,
        server_pod,
        server_service,
        agents_service,
        agents_job,
        agents: exp.k8s_agents,
    }
}

/// How the user creates the two Secrets the pods reference (values never pass through the
/// runner's output).
pub fn secret_commands(namespace: &str) -> Vec<String> {
    vec![
        format!(
            "kubectl -n {namespace} create secret generic {TOKEN_SECRET} --from-file={TOKEN_KEY}=PATH/TO/TOKEN"
        ),
        format!(
            "kubectl -n {namespace} create secret generic {CERTS_SECRET} --from-file=certs/ca.pem --from-file=certs/server.pem --from-file=certs/server.key"
        ),
    ]
}

/// One object as a YAML document (k8s-openapi writes its apiVersion and kind).
fn document<T: serde::Serialize>(object: &T) -> anyhow::Result<String> {
    Ok(super::yaml::to_string(&serde_json::to_value(object)?))
}

/// The manifests `runner k8s render` writes for `cell` (number `cell_number` of `cells`): a
/// header (comment lines naming the cell and how to create the Secrets), then each object as
/// (file name, YAML document): the run's namespace and RBAC, then the cell's objects in the
/// order the runner creates them.
pub fn render(
    exp: &Experiment,
    cell: &Cell,
    cell_number: usize,
    cells: usize,
) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let run = run_objects(exp);
    let objects = cell_objects(cell, cell_number);
    let mut header = format!(
        "# tbench: the manifests for cell {cell_number} of {cells} ({}) of experiment '{}'.\n",
        cell.key(),
        exp.name
    );
    header.push_str(
        "# Apply the namespace and RBAC once; the runner creates and deletes the rest per cell.\n",
    );
    header
        .push_str("# The pods reference two Secrets the runner never prints; create them with:\n");
    for c in secret_commands(&exp.k8s_namespace) {
        header.push_str(&format!("#   {c}\n"));
    }
    let id = &objects.id;
    let docs = vec![
        ("00-namespace.yaml".to_string(), document(&run.namespace)?),
        (
            "01-serviceaccount.yaml".to_string(),
            document(&run.service_account)?,
        ),
        ("02-role.yaml".to_string(), document(&run.role)?),
        (
            "03-rolebinding.yaml".to_string(),
            document(&run.role_binding)?,
        ),
        (
            format!("10-{id}-server-pod.yaml"),
            document(&objects.server_pod)?,
        ),
        (
            format!("11-{id}-server-service.yaml"),
            document(&objects.server_service)?,
        ),
        (
            format!("12-{id}-agents-service.yaml"),
            document(&objects.agents_service)?,
        ),
        (
            format!("13-{id}-agents-job.yaml"),
            document(&objects.agents_job)?,
        ),
    ];
    Ok((header, docs))
}

/// [`render`]'s output as one multi-document YAML stream.
pub fn render_stream(header: &str, docs: &[(String, String)]) -> String {
    let mut out = header.to_string();
    for (_, d) in docs {
        out.push_str("---\n");
        out.push_str(d);
    }
    out
}
