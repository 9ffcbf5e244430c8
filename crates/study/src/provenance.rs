//! Where, on what and from which code each run came, and the check that refuses a paper
//! mixing runs of different commits, machines or kernels (or of a dirty tree).

use serde_json::Value;

use crate::run::Run;
use crate::templates;
use crate::text::{plain, thousands};

/// A JSON scalar as text (strings without quotes).
pub(crate) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first non-null value under `key` anywhere in the manifest except the experiment (whose
/// keys are settings, not the environment): new environment fields may be nested.
pub(crate) fn find_first(v: &Value, key: &str) -> Option<Value> {
    find_all(v, key).into_iter().next().map(|(_, v)| v)
}

/// Every non-null value under `key`, with its JSON path, outside `experiment`.
pub(crate) fn find_all(v: &Value, key: &str) -> Vec<(String, Value)> {
    fn walk(v: &Value, key: &str, path: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let here = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if k == key && !child.is_null() && !child.is_object() {
                        out.push((here, child.clone()));
                    } else if k != "experiment" {
                        walk(child, key, &here, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, key, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, key, "", &mut out);
    out
}

/// Where, on what and from which code one run came.
pub(crate) struct Provenance {
    /// The experiment's name, for sentences.
    pub(crate) name: String,
    /// Name and directory, for the table.
    pub(crate) run: String,
    pub(crate) cpu_model: String,
    pub(crate) cpu_model_name: Option<String>,
    pub(crate) hypervisor: Option<String>,
    /// Memory size, when the manifest records it.
    pub(crate) ram: Option<String>,
    pub(crate) cores: String,
    pub(crate) kernel: String,
    pub(crate) commit: String,
    pub(crate) date: String,
    pub(crate) repetitions: String,
    pub(crate) throughput_col: &'static str,
}

impl Provenance {
    /// The most precise CPU description the manifest has.
    pub(crate) fn cpu(&self) -> String {
        match &self.cpu_model_name {
            Some(name) if name != &self.cpu_model => format!("{name} ({})", self.cpu_model),
            _ => self.cpu_model.clone(),
        }
    }
}

/// What differs between the runs, or makes one untraceable, one sentence each; empty when the
/// runs share commit, CPU model and kernel and every commit is clean.
pub(crate) fn provenance_problems(provs: &[Provenance]) -> Vec<String> {
    let mut problems = Vec::new();
    type Field = (&'static str, fn(&Provenance) -> String);
    let fields: [Field; 3] = [
        ("commit", |p| short_commit(&p.commit)),
        ("CPU model", |p| p.cpu()),
        ("kernel", |p| p.kernel.clone()),
    ];
    for (what, get) in fields {
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for p in provs {
            let value = get(p);
            match groups.iter_mut().find(|g| g.0 == value) {
                Some(g) => g.1.push(&p.name),
                None => groups.push((value, vec![&p.name])),
            }
        }
        if groups.len() > 1 {
            let parts: Vec<String> = groups
                .iter()
                .map(|(v, runs)| format!("`{v}` for {}", runs.join(", ")))
                .collect();
            problems.push(format!("the runs differ in {what}: {}", parts.join("; ")));
        }
    }
    for p in provs {
        if p.commit.ends_with("-dirty") {
            problems.push(format!(
                "{} ran on a dirty tree (`{}`): its code is in no commit",
                p.name,
                short_commit(&p.commit)
            ));
        } else if p.commit == "unknown" {
            problems.push(format!("{} has no recorded commit", p.name));
        }
    }
    problems
}

/// The machine's virtualisation as the paper names it. `systemd-detect-virt` reports the
/// innermost layer, so a container inside a VM reads `docker`; the CPU's `hypervisor` flag
/// says whether a VM is underneath, and both are told.
pub(crate) fn virtualisation(detected: &str, hypervisor_flag: Option<bool>) -> String {
    const CONTAINERS: [&str; 8] = [
        "docker",
        "podman",
        "lxc",
        "lxc-libvirt",
        "systemd-nspawn",
        "rkt",
        "openvz",
        "container-other",
    ];
    let container = CONTAINERS.contains(&detected);
    match (container, hypervisor_flag) {
        (true, Some(true)) => format!("{detected} container in a VM (CPU `hypervisor` flag)"),
        (true, Some(false)) => format!("{detected} container on bare metal"),
        (true, None) => format!("{detected} container"),
        (false, Some(true)) if matches!(detected, "none" | "unknown") => {
            "VM (CPU `hypervisor` flag)".to_string()
        }
        _ => detected.to_string(),
    }
}

/// A commit as `git log --oneline` shows it, keeping a `-dirty` mark.
pub(crate) fn short_commit(commit: &str) -> String {
    match commit.strip_suffix("-dirty") {
        Some(c) => format!("{}-dirty", &c[..c.len().min(9)]),
        None if commit.len() > 9 && commit.chars().all(|c| c.is_ascii_hexdigit()) => {
            commit[..9].to_string()
        }
        None => commit.to_string(),
    }
}

impl Run {
    pub(crate) fn provenance(&self) -> Provenance {
        let m = &self.results.manifest;
        let text = |key: &str| find_first(m, key).map(|v| scalar(&v));
        Provenance {
            name: self.name(),
            run: format!("{} (`{}`)", self.name(), self.dir.display()),
            cpu_model: text("cpu_model").unwrap_or_else(|| "unknown".into()),
            cpu_model_name: text("cpu_model_name"),
            hypervisor: text("hypervisor").map(|v| {
                virtualisation(
                    &v,
                    find_first(m, "hypervisor_flag").and_then(|f| f.as_bool()),
                )
            }),
            ram: find_first(m, "ram_bytes")
                .and_then(|v| v.as_f64())
                .map(|b| format!("{:.1} GB RAM", b / 1e9)),
            cores: cores(
                text("online_cpus"),
                text("cores"),
                text("pinning").filter(|p| p != "none"),
            ),
            kernel: text("kernel").unwrap_or_else(|| "unknown".into()),
            commit: text("git_commit").unwrap_or_else(|| "unknown".into()),
            date: text("started_utc")
                .map(|d| d.chars().take(16).collect::<String>().replace('T', " "))
                .unwrap_or_else(|| "?".into()),
            repetitions: self.repetitions(),
            throughput_col: self.throughput_col,
        }
    }
}
/// The paper's "Setup" section: the reference machine, software and workload, then the
/// provenance table of every run.
pub(crate) fn setup(out: &mut String, reference: &Run, provs: &[Provenance]) -> anyhow::Result<()> {
    let m = &reference.results.manifest;
    let rp = &provs[0];
    let versions: Vec<String> = m["crate_versions"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    let e = &m["experiment"];
    // What the reference's stress cells actually sent per regime: cells are extended to
    // `min_cell_seconds`, so the configured counts are a floor, not the figure.
    let sent_range = |regime: &str| {
        let sent: Vec<u64> = reference
            .stress()
            .iter()
            .filter(|r| r.regime == regime)
            .map(|r| r.sent)
            .collect();
        match (sent.iter().min(), sent.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => thousands(*lo as f64),
            (Some(lo), Some(hi)) => {
                format!("{}–{}", thousands(*lo as f64), thousands(*hi as f64))
            }
            _ => "none".to_string(),
        }
    };
    let runs: Vec<_> = provs
        .iter()
        .map(|p| {
            minijinja::context! {
                run => &p.run,
                cpu => p.cpu(),
                cores => &p.cores,
                ram => &p.ram,
                hypervisor => p.hypervisor.as_deref().unwrap_or("not recorded"),
                kernel => &p.kernel,
                commit => &p.commit,
                date => &p.date,
                repetitions => &p.repetitions,
                throughput_col => p.throughput_col,
            }
        })
        .collect();
    // JSON numbers are written as serde_json shows them, the warm-up as Rust shows an f64.
    templates::render(
        out,
        "setup.md",
        minijinja::context! {
            cpu => rp.cpu(),
            cores => &rp.cores,
            kernel => &rp.kernel,
            hypervisor => &rp.hypervisor,
            pinning => m["pinning"].as_str().unwrap_or("none"),
            rustc => m["rustc"].as_str().unwrap_or("?"),
            versions => versions.join(", "),
            commit => &rp.commit,
            payload => e["payload"].as_str().unwrap_or("?"),
            requests_reuse => e["requests_reuse"].to_string(),
            requests_new_conn => e["requests_new_conn"].to_string(),
            min_cell_seconds => e["min_cell_seconds"].as_f64().filter(|s| *s > 0.0).map(plain),
            sent_reuse => sent_range("reuse"),
            sent_new_conn => sent_range("new-conn"),
            warmup_pct => (e["warmup_fraction"].as_f64().unwrap_or(0.0) * 100.0).to_string(),
            repetitions => e["repetitions"].to_string(),
            runs => runs,
        },
    )
}

/// The machine's cores: `online_cpus` where the manifest has it; in older manifests `cores` was
/// the runner's usable cores, which pinning narrows, so a pinned run says so.
fn cores(online_cpus: Option<String>, cores: Option<String>, pinning: Option<String>) -> String {
    match (online_cpus, cores, pinning) {
        (Some(n), _, None) => n,
        (Some(n), _, Some(pin)) => format!("{n} (pinned: {pin})"),
        (None, Some(n), None) => n,
        (None, Some(n), Some(pin)) => format!("{n} usable by the runner (pinned: {pin})"),
        (None, None, _) => "?".into(),
    }
}

#[cfg(test)]
mod cores_tests {
    #[test]
    fn a_pinned_run_names_whose_cores_it_counts() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(super::cores(s("2"), s("1"), None), "2");
        assert_eq!(
            super::cores(s("2"), s("1"), s("server cpu 0")),
            "2 (pinned: server cpu 0)"
        );
        assert_eq!(
            super::cores(None, s("1"), s("server cpu 0, runner cpu 1")),
            "1 usable by the runner (pinned: server cpu 0, runner cpu 1)"
        );
        assert_eq!(super::cores(None, s("2"), None), "2");
        assert_eq!(super::cores(None, None, None), "?");
    }
}

#[cfg(test)]
mod virtualisation_tests {
    use super::virtualisation;

    #[test]
    fn a_container_in_a_vm_is_named_as_both() {
        assert_eq!(
            virtualisation("docker", Some(true)),
            "docker container in a VM (CPU `hypervisor` flag)"
        );
        assert_eq!(virtualisation("kvm", Some(true)), "kvm");
        assert_eq!(
            virtualisation("none", Some(true)),
            "VM (CPU `hypervisor` flag)"
        );
        assert_eq!(virtualisation("none", Some(false)), "none");
    }
}
