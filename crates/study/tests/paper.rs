//! `study paper` on small results directories fabricated from the committed ones: it refuses
//! runs of mixed provenance, writes them with a warning under `--allow-mixed`, reports every
//! variant's outcome, and uses steady-state throughput, VmHWM and intervals when they exist.
//! No load is generated: every test only reads and writes files. And the paper regenerated from
//! the committed runs is the committed `paper/reproduction.md`, byte for byte.

mod common;

use results::rows::{self, CellRow};

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// The files `study paper` reads (latency.csv is for figures only).
const FILES: [&str; 5] = [
    "cells.csv",
    "manifest.json",
    "summary.csv",
    "resources.csv",
    "failures.csv",
];

/// Copies a committed results directory into `dest`.
fn copy_run(from: &str, dest: &Path) -> PathBuf {
    let src = workspace().join(from);
    std::fs::create_dir_all(dest).unwrap();
    for f in FILES {
        if src.join(f).is_file() {
            std::fs::copy(src.join(f), dest.join(f)).unwrap();
        }
    }
    dest.to_path_buf()
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let mut m = manifest(dir);
    edit(&mut m);
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();
}

/// Gives `dir` the reference's machine, kernel and commit, so that only what a test changes
/// differs.
fn same_provenance_as(dir: &Path, reference: &Path) {
    let r = manifest(reference);
    edit_manifest(dir, |m| {
        for key in ["git_commit", "kernel", "cpu_model", "cores"] {
            m[key] = r[key].clone();
        }
    });
}

/// Rewrites `cells.csv` in `dir`, letting `edit` change each row (as header → value pairs).
fn edit_cells(dir: &Path, edit: impl Fn(&mut Vec<(String, String)>)) {
    let path = dir.join("cells.csv");
    let mut reader = csv::Reader::from_path(&path).unwrap();
    let headers: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let mut rows: Vec<Vec<(String, String)>> = reader
        .records()
        .map(|r| {
            headers
                .iter()
                .cloned()
                .zip(r.unwrap().iter().map(String::from))
                .collect()
        })
        .collect();
    for row in &mut rows {
        edit(row);
    }
    // Columns a row gained are added to every row (empty where not set).
    let mut header: Vec<String> = Vec::new();
    for row in &rows {
        for (h, _) in row {
            if !header.contains(h) {
                header.push(h.clone());
            }
        }
    }
    let mut writer = csv::Writer::from_path(&path).unwrap();
    writer.write_record(&header).unwrap();
    for row in &rows {
        writer
            .write_record(header.iter().map(|h| get(row, h)))
            .unwrap();
    }
    writer.flush().unwrap();
}

fn set(row: &mut Vec<(String, String)>, col: &str, value: String) {
    match row.iter_mut().find(|(h, _)| h == col) {
        Some((_, v)) => *v = value,
        None => row.push((col.to_string(), value)),
    }
}

fn get(row: &[(String, String)], col: &str) -> String {
    row.iter()
        .find(|(h, _)| h == col)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

fn paper(reference: &Path, claims: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = study();
    cmd.arg("paper")
        .arg("--reference")
        .arg(reference)
        .arg("--out")
        .arg(out)
        .arg("--plan")
        .arg(workspace().join("experiments/study/plan.toml"));
    if !claims.is_empty() {
        cmd.arg("--claims").args(claims);
    }
    cmd.args(extra).output().unwrap()
}

fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no '{heading}' in the paper:\n{text}"));
    let rest = &text[start + heading.len()..];
    &rest[..rest
        .find("\n## ")
        .or_else(|| rest.find("\n### "))
        .unwrap_or(rest.len())]
}

#[test]
fn mixed_commits_are_refused_and_allowed_only_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let claim = copy_run("results/reference", &tmp.path().join("c1"));
    same_provenance_as(&claim, &reference);
    edit_manifest(&claim, |m| {
        m["experiment"]["name"] = "c1-grpc-reuse".into();
        m["git_commit"] = "0123456789abcdef0123456789abcdef01234567".into();
    });
    let out = tmp.path().join("paper");

    let refused = paper(&reference, &[&claim], &out, &[]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("differ in commit"), "{text}");
    assert!(text.contains("012345678"), "names the other commit: {text}");
    assert!(
        text.contains("--allow-mixed"),
        "says how to override: {text}"
    );
    assert!(
        !out.join("reproduction.md").exists(),
        "nothing is written when refused"
    );

    let allowed = paper(&reference, &[&claim], &out, &["--allow-mixed"]);
    let text = output_text(&allowed);
    assert!(allowed.status.success(), "{text}");
    assert!(text.contains("warning: mixed provenance allowed"), "{text}");
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    let top: String = md.lines().take(8).collect::<Vec<_>>().join("\n");
    assert!(top.contains("Warning: mixed provenance"), "{top}");
    assert!(top.contains("differ in commit"), "{top}");
    assert!(top.contains("012345678"), "{top}");
    assert!(
        !top.contains("CPU model"),
        "only the commit is mixed: {top}"
    );
    let prov = section(&md, "### Provenance");
    assert!(prov.contains("c1-grpc-reuse"), "{prov}");
    assert!(
        prov.contains("0123456789abcdef0123456789abcdef01234567"),
        "{prov}"
    );
}

#[test]
fn a_dirty_commit_or_another_machine_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let commit = manifest(&reference)["git_commit"]
        .as_str()
        .unwrap()
        .trim_end_matches("-dirty")
        .to_string();
    edit_manifest(&reference, |m| {
        m["git_commit"] = format!("{commit}-dirty").into()
    });
    let out = tmp.path().join("paper");
    let refused = paper(&reference, &[], &out, &[]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("dirty"), "{text}");

    edit_manifest(&reference, |m| m["git_commit"] = commit.clone().into());
    let other = copy_run("results/reference", &tmp.path().join("c5"));
    same_provenance_as(&other, &reference);
    edit_manifest(&other, |m| {
        m["experiment"]["name"] = "c5-quic-rss".into();
        m["cpu_model"] = "Another CPU".into();
        m["kernel"] = "0.0.1-other".into();
    });
    let refused = paper(&reference, &[&other], &out, &[]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("CPU model") && text.contains("kernel"),
        "{text}"
    );

    same_provenance_as(&other, &reference);
    let ok = paper(&reference, &[&other], &out, &[]);
    let text = output_text(&ok);
    assert!(
        ok.status.success(),
        "one commit on one machine is accepted: {text}"
    );
    assert!(!text.contains("warning"), "{text}");
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(!md.contains("Warning: mixed provenance"));
    assert!(md.contains("## Threats to validity"));
    assert!(md.contains("study.md"));
    // The artifact section names the data commit as an ancestor of main, and no tag or branch
    // (only main is ever published).
    let commit = manifest(&reference)["git_commit"]
        .as_str()
        .unwrap()
        .trim_end_matches("-dirty")
        .to_string();
    let artifact = section(&md, "## Artifact");
    assert!(
        artifact.contains(&commit) && artifact.contains("an ancestor of `main`"),
        "{artifact}"
    );
    assert!(
        !md.contains("tagged") && !md.contains("git checkout"),
        "{artifact}"
    );
}

/// Every condition of every rule gets a row, and data measured with cells stretched by time
/// (attempts other than the plan's budget: here C1's reuse cells made to send twice it) are
/// not judged, with the reason.
#[test]
fn every_condition_of_a_rule_gets_a_row_and_stretched_cells_are_not_judged() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let c1 = copy_run("results/claims/c1-grpc-reuse", &tmp.path().join("c1"));
    let c3 = copy_run("results/claims/c3-h3-success", &tmp.path().join("c3"));
    for dir in [&c1, &c3] {
        same_provenance_as(dir, &reference);
    }
    edit_cells(&c1, |row| {
        if get(row, "stage") == "stress" && get(row, "regime") == "reuse" {
            set(row, "sent", "100000".into());
        }
    });
    let out = tmp.path().join("paper");
    let run = paper(&reference, &[&c1, &c3], &out, &[]);
    assert!(run.status.success(), "{}", output_text(&run));
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    let plan = study::plan::Plan::load(&workspace().join("experiments/study/plan.toml")).unwrap();
    let judged = section(&md, "## The claims, judged");
    for rule in &plan.rules {
        assert!(
            md.contains(&format!("<a id=\"rule-{}\"></a>", rule.id.to_lowercase())),
            "no table for {}",
            rule.id
        );
        for c in &rule.conditions {
            assert!(
                md.contains(&format!("| `{c}` |")),
                "no row for {c} of {}",
                rule.id
            );
        }
    }
    assert!(md.contains("not the plan's budget of 50000"), "{judged}");
    // The answer comes first and links every rule it rests on.
    let answer = section(&md, "## The answer");
    assert!(md.find("## The answer") < md.find("## Setup"));
    for sentence in &plan.answer {
        for r in &sentence.rules {
            assert!(
                answer.contains(&format!("(#rule-{})", r.to_lowercase())),
                "{answer}"
            );
        }
    }
}

#[test]
fn steady_throughput_vmhwm_and_intervals_are_used_when_present() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let out = tmp.path().join("paper");

    let before = paper(&reference, &[], &out, &[]);
    assert!(before.status.success(), "{}", output_text(&before));
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    let uses_steady = read_csv(&reference.join("cells.csv")).iter().any(|r| {
        r.get("throughput_steady_rps")
            .is_some_and(|v| !v.is_empty())
    });
    let prov = section(&md, "### Provenance");
    assert!(
        prov.contains(if uses_steady {
            "`throughput_steady_rps`"
        } else {
            "`throughput_rps`"
        }),
        "says which throughput column: {prov}"
    );

    // A second repetition of every stress cell, with steady-state throughput and VmHWM;
    // without summary.csv the intervals are computed from the cells.
    std::fs::remove_file(reference.join("summary.csv")).unwrap();
    let rows = read_csv(&reference.join("cells.csv"));
    let n = rows.len();
    edit_cells(&reference, |row| {
        if get(row, "stage") == "stress" {
            let rps: f64 = get(row, "throughput_rps").parse().unwrap();
            set(row, "throughput_steady_rps", format!("{:.1}", rps * 1.25));
            let rss: f64 = get(row, "server_rss_peak_bytes").parse().unwrap();
            set(row, "server_rss_hwm_bytes", format!("{:.0}", rss + 1e6));
        }
    });
    let mut cells = std::fs::read_to_string(reference.join("cells.csv")).unwrap();
    let copies: Vec<String> = cells
        .lines()
        .skip(1)
        .filter(|l| l.contains(",stress,"))
        .filter(|l| l.split(',').next().is_some_and(|key| key.ends_with("/r1")))
        .map(|l| l.replacen("/r1,", "/r6,", 1))
        .collect();
    for l in &copies {
        cells.push_str(l);
        cells.push('\n');
    }
    std::fs::write(reference.join("cells.csv"), cells).unwrap();
    // The reference has five repetitions: the copies are a sixth, which the manifest counts
    // (readers refuse more rows than the run finished).
    let manifest_path = reference.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let done = manifest["cells_done"].as_u64().unwrap() + copies.len() as u64;
    manifest["cells_done"] = done.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    // Make the added repetition differ so that the interval has a width.
    edit_cells(&reference, |row| {
        if get(row, "cell_key").ends_with("/r6") && get(row, "stage") == "stress" {
            set(row, "repetition", "6".into());
            let rps: f64 = get(row, "throughput_steady_rps").parse().unwrap();
            set(row, "throughput_steady_rps", format!("{:.1}", rps * 1.02));
        }
    });
    assert!(read_csv(&reference.join("cells.csv")).len() > n);

    let after = paper(&reference, &[], &out, &[]);
    assert!(after.status.success(), "{}", output_text(&after));
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(
        section(&md, "### Provenance").contains("`throughput_steady_rps`"),
        "{md}"
    );
    let table = section(&md, "### reuse");
    assert!(table.contains("server VmHWM (MB)"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("| 500 | gRPC |"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains('['),
        "a 95 % interval with two repetitions: {row}"
    );
}

/// A fabricated run of experiments/scale.toml in `dir`, with the reference's provenance: HTTP/3
/// (reuse) whose p99 jumps 12× at 5,000 workers while the UDP receive buffer overflows there,
/// and HTTP/1.1 with no knee. Server VmHWM grows 80 KB per connection on a 20 MB base.
fn fabricate_scale(dir: &Path, reference: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(reference.join("manifest.json"), dir.join("manifest.json")).unwrap();
    edit_manifest(dir, |m| m["experiment"]["name"] = "scale".into());
    let mut rows = Vec::new();
    // (concurrency, HTTP/3 p99 ms, HTTP/3 UDP drops, HTTP/1.1 p99 ms)
    for (c, h3_p99, drops, h1_p99) in [
        (500u32, 100.0, 0, 20.0),
        (1000, 180.0, 0, 35.0),
        (2000, 250.0, 0, 60.0),
        (5000, 3000.0, 6661, 110.0),
    ] {
        for rep in 1..=2u32 {
            for (stack, p99, udp) in [("h3", h3_p99, drops), ("h1", h1_p99, 0)] {
                let rss = 20e6 + 80_000.0 * c as f64 + rep as f64 * 2e5;
                rows.push(CellRow {
                    cell_key: format!("{stack}/reuse/c{c}/r{rep}"),
                    variant: "default".into(),
                    stage: "stress".into(),
                    stack: stack.into(),
                    regime: "reuse".into(),
                    concurrency: c,
                    repetition: rep,
                    sent: 100_000,
                    ok: 100_000,
                    success_rate: 1.0,
                    throughput_steady_rps: Some(20_000.0),
                    latency_p99_us: (p99 * 1e3) as u64,
                    server_rss_hwm_bytes: Some(rss as u64),
                    net_udp_rcvbuf_errors: Some(udp),
                    net_listen_overflows: Some(0),
                    net_counters_scope: Some("namespace".into()),
                    ..CellRow::default()
                });
            }
        }
    }
    rows::write(&dir.join("cells.csv"), &rows).unwrap();
}

#[test]
fn beyond_500_names_each_knee_and_the_counter_that_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let scale = tmp.path().join("scale");
    fabricate_scale(&scale, &reference);
    let out = tmp.path().join("paper");
    let done = paper(&reference, &[], &out, &["--scale", scale.to_str().unwrap()]);
    assert!(done.status.success(), "{}", output_text(&done));
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(section(&md, "### Provenance").contains("scale (`"), "{md}");
    let start = md.find("## Beyond 500").unwrap_or_else(|| panic!("{md}"));
    let beyond = &md[start..];
    assert!(beyond.contains("more than 2×"), "states the rule: {beyond}");
    assert!(
        beyond.contains("Knee of HTTP/3 (reuse): 5,000 workers (p99 3000 ms vs 250 ms"),
        "{beyond}"
    );
    assert!(
        beyond.contains("UDP receive buffer overflow")
            && beyond.contains("`net_udp_rcvbuf_errors` 13,322 (0 at 2000)"),
        "names the moved counter, summed over repetitions: {beyond}"
    );
    assert!(
        !beyond.contains("`net_listen_overflows`"),
        "a counter that stayed at 0 is not named: {beyond}"
    );
    assert!(
        beyond.contains("Knee of HTTP/1.1 (reuse): none up to 5,000 workers"),
        "{beyond}"
    );
    let memory = &beyond[beyond
        .find("Memory per open connection (KB)")
        .unwrap_or_else(|| panic!("{beyond}"))..];
    let h3 = memory
        .lines()
        .find(|l| l.starts_with("| default | HTTP/3 | reuse | server |"))
        .unwrap_or_else(|| panic!("{memory}"));
    assert!(h3.contains("| 80.0 ["), "slope 80 KB per connection: {h3}");
    assert!(h3.contains("| 20.3 |"), "intercept 20.3 MB: {h3}");
}

#[test]
fn a_scale_run_from_another_commit_is_mixed_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let scale = tmp.path().join("scale");
    fabricate_scale(&scale, &reference);
    edit_manifest(&scale, |m| {
        m["git_commit"] = "0123456789abcdef0123456789abcdef01234567".into()
    });
    let refused = paper(
        &reference,
        &[],
        &tmp.path().join("paper"),
        &["--scale", scale.to_str().unwrap()],
    );
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("differ in commit") && text.contains("scale"),
        "{text}"
    );
}

/// A mesh run as `experiments/mesh.toml` makes one: HTTP/1.1 and HTTP/3 direct, HTTP/1.1
/// through pooling and non-pooling sidecars; HTTP/1.1 collapses under new connections only
/// when every request is a new connection on every hop.
fn fabricate_mesh(dir: &Path, reference: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(reference.join("manifest.json"), dir.join("manifest.json")).unwrap();
    edit_manifest(dir, |m| m["experiment"]["name"] = "mesh".into());
    let mut rows = Vec::new();
    // (variant, path, pool, stack, new-conn success, reuse req/s)
    for (variant, path, pool, stack, success, rps) in [
        ("direct", "direct", None, "h1", 0.30, 9000.0),
        ("direct", "direct", None, "h3", 1.0, 5000.0),
        ("sidecar-pooled", "sidecar", Some("keep"), "h1", 1.0, 4000.0),
        (
            "sidecar-per-request",
            "sidecar",
            Some("per-request"),
            "h1",
            0.2,
            3000.0,
        ),
    ] {
        for regime in ["reuse", "new-conn"] {
            let reuse = regime == "reuse";
            rows.push(CellRow {
                cell_key: format!("{variant}/{stack}/{regime}/c500/r1"),
                variant: variant.into(),
                stage: "stress".into(),
                stack: stack.into(),
                regime: regime.into(),
                concurrency: 500,
                repetition: 1,
                sent: 1000,
                ok: if reuse {
                    1000
                } else {
                    (1000.0 * success) as u64
                },
                success_rate: if reuse { 1.0 } else { success },
                throughput_rps: if reuse { rps } else { 100.0 },
                latency_p50_us: 2_000,
                latency_p99_us: 9_000,
                path: Some(path.into()),
                proxy: pool.map(|_| "haproxy".into()),
                pool: pool.map(String::from),
                proxy_cpu_ms_per_1k_ok: pool.map(|_| 40.0),
                ..CellRow::default()
            });
        }
    }
    rows::write(&dir.join("cells.csv"), &rows).unwrap();
}

#[test]
fn a_mesh_run_adds_through_a_mesh_and_joins_the_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let mesh = tmp.path().join("mesh");
    fabricate_mesh(&mesh, &reference);
    let out = tmp.path().join("paper");
    let done = paper(&reference, &[], &out, &["--mesh", mesh.to_str().unwrap()]);
    assert!(done.status.success(), "{}", output_text(&done));
    let md = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(section(&md, "### Provenance").contains("mesh (`"), "{md}");
    let through = section(&md, "## Through a mesh");
    assert!(
        through.contains("direct: HTTP/1.1 has the highest reuse throughput; HTTP/1.1 collapse under new connections"),
        "{through}"
    );
    assert!(
        through.contains("sidecar via haproxy (pool keep): HTTP/1.1 has the highest reuse throughput; no stack collapses under new connections; not carried: HTTP/3"),
        "{through}"
    );
    assert!(
        through.contains("sidecar via haproxy (pool per-request): HTTP/1.1 has the highest reuse throughput; HTTP/1.1 collapse under new connections"),
        "{through}"
    );
    // Without --mesh there is no such section; from another commit the run is refused.
    let plain = paper(&reference, &[], &tmp.path().join("plain"), &[]);
    assert!(plain.status.success(), "{}", output_text(&plain));
    let md = std::fs::read_to_string(tmp.path().join("plain/reproduction.md")).unwrap();
    assert!(!md.contains("## Through a mesh"));
    edit_manifest(&mesh, |m| {
        m["git_commit"] = "0123456789abcdef0123456789abcdef01234567".into()
    });
    let refused = paper(
        &reference,
        &[],
        &tmp.path().join("refused"),
        &["--mesh", mesh.to_str().unwrap()],
    );
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("differ in commit") && text.contains("mesh"),
        "{text}"
    );
}

/// The committed paper is what this code writes from the committed runs, with the arguments
/// `scripts/reproduce-paper` gives (relative paths, run from the checkout's root, since the
/// paper names them): every claim experiment that has a committed run (a new experiment has
/// none until the next reproduction). The runs are reached through a symbolic link so nothing
/// is written into the checkout.
#[test]
fn the_committed_paper_regenerates_byte_for_byte() {
    let root = workspace().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root.join("results"), tmp.path().join("results")).unwrap();
    let mut claims: Vec<String> = std::fs::read_dir(root.join("experiments/claims"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            format!("results/claims/{stem}")
        })
        .filter(|dir| root.join(dir).join("manifest.json").is_file())
        .collect();
    assert!(!claims.is_empty(), "no committed claim run");
    claims.sort();
    // As scripts/reproduce-paper: the scale run only when it was measured with the others
    // (`--with-scale`, so at the reference's commit), the breakdown whenever it is there.
    let commit_of = |dir: &str| manifest(&root.join(dir))["git_commit"].clone();
    let scale: &[&str] = if root.join("results/scale/manifest.json").is_file()
        && commit_of("results/scale") == commit_of("results/reference")
    {
        &["--scale", "results/scale"]
    } else {
        &[]
    };
    // The mesh run likewise, when it ran at the reference's commit (`study paper` refuses it
    // otherwise).
    let mesh: &[&str] = if root.join("results/mesh/manifest.json").is_file()
        && commit_of("results/mesh") == commit_of("results/reference")
    {
        &["--mesh", "results/mesh"]
    } else {
        &[]
    };
    let run = |extra: &[&str]| {
        study()
            .current_dir(tmp.path())
            .args(["paper", "--reference", "results/reference", "--claims"])
            .args(&claims)
            .args(scale)
            .args(mesh)
            .args(["--breakdown", "results/quic-breakdown/breakdown.csv"])
            .args(["--out", "paper"])
            .args(extra)
            .output()
            .unwrap()
    };
    // Without --allow-code-drift the paper is refused exactly when the code at HEAD differs
    // from the data commit, and the refusal names the files.
    let drift = study::code_drift(&root.join("results/reference")).unwrap();
    let strict = run(&[]);
    if drift.is_empty() {
        assert!(strict.status.success(), "{}", output_text(&strict));
    } else {
        let text = output_text(&strict);
        assert_eq!(strict.status.code(), Some(2), "{text}");
        assert!(
            text.contains("--allow-code-drift") && text.contains(&drift[0]),
            "{text}"
        );
        assert!(!tmp.path().join("paper/reproduction.md").exists());
    }
    let out = run(&["--allow-code-drift"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let written = std::fs::read(tmp.path().join("paper/reproduction.md")).unwrap();
    let committed = std::fs::read(root.join("paper/reproduction.md")).unwrap();
    // The one line naming the generating commit (and the files changed since the data commit)
    // is the commit's own: it names the data commit's ancestry, never a number.
    let without_generated = |b: &[u8]| -> Vec<u8> {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.starts_with(study::GENERATED_AT))
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes()
    };
    for text in [&written, &committed] {
        assert_eq!(
            String::from_utf8_lossy(text)
                .lines()
                .filter(|l| l.starts_with(study::GENERATED_AT))
                .count(),
            1
        );
    }
    let (written, committed) = (without_generated(&written), without_generated(&committed));
    if written != committed {
        let (w, c) = (
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&committed),
        );
        let line = w
            .lines()
            .zip(c.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(w.lines().count().min(c.lines().count()));
        panic!(
            "paper/reproduction.md differs from what the committed runs give, first at line {}:\n  written:   {:?}\n  committed: {:?}",
            line + 1,
            w.lines().nth(line),
            c.lines().nth(line)
        );
    }
}

/// A run whose target's certificate was not verified did not provably measure what it names:
/// the paper refuses it.
#[test]
fn an_insecure_run_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    edit_manifest(&reference, |m| {
        m["service"] = serde_json::json!({ "insecure": true, "targets": [] });
    });
    let out = tmp.path().join("paper");
    let refused = paper(&reference, &[], &out, &[]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("insecure run"), "{text}");
    assert!(!out.join("reproduction.md").exists());
}

/// Two sessions at one commit (fabricated from the committed runs, the second with C1's
/// throughput cut to a fifth): the paper names the sessions, gives C1's figure an interval
/// over the session means, and says the verdict held in one of two sessions; with the second
/// session at another commit there are no sessions to aggregate.
/// Bounds such as "[0.120 %, 3.456 %]" in a text: every pair of percentages in brackets.
fn percent_bounds(text: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for part in text.split('[').skip(1) {
        let Some(inner) = part.split(']').next() else {
            continue;
        };
        let nums: Vec<f64> = inner
            .split(',')
            .filter_map(|x| x.trim().strip_suffix(" %")?.trim().parse().ok())
            .collect();
        if nums.len() == 2 {
            out.push((nums[0], nums[1]));
        }
    }
    out
}

/// Three sessions whose claim cells are exactly the plan's budget are judged: the bounds of
/// proportions stay in [0, 100 %], each label is the one its bounds give, whole verdicts are
/// compared between sessions and a part that moved is named.
#[test]
fn three_sessions_at_the_budget_are_judged_by_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    let plan = study::plan::Plan::load(&workspace().join("experiments/study/plan.toml")).unwrap();
    for k in [1, 2, 3] {
        let s = root.join(format!("s{k}"));
        copy_run("results/reference", &s.join("reference"));
        for claim in ["c1-grpc-reuse", "c3-h3-success"] {
            let dir = copy_run(
                &format!("results/claims/{claim}"),
                &s.join("claims").join(claim),
            );
            // Each cell exactly the plan's budget, its success rate kept.
            edit_cells(&dir, |row| {
                let budget = plan.budgets.attempts[&get(row, "regime")];
                let rate: f64 = get(row, "success_rate").parse().unwrap();
                let ok = (rate * budget as f64).round() as u64;
                set(row, "sent", budget.to_string());
                set(row, "ok", ok.to_string());
                set(row, "failed", (budget - ok).to_string());
                if k == 2 && claim == "c1-grpc-reuse" {
                    // Session 2 five times slower: C1's throughput verdict moves.
                    let e: f64 = get(row, "elapsed_s").parse().unwrap();
                    set(row, "elapsed_s", format!("{}", e * 5.0));
                }
            });
        }
    }
    let out = tmp.path().join("out");
    let s1 = root.join("s1");
    let done = paper(
        &s1.join("reference"),
        &[
            &s1.join("claims/c1-grpc-reuse"),
            &s1.join("claims/c3-h3-success"),
        ],
        &out,
        &[],
    );
    assert!(done.status.success(), "{}", output_text(&done));
    let text = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(text.contains("these data hold 3 sessions"), "{text}");
    let bounds = percent_bounds(&text);
    assert!(!bounds.is_empty());
    for (lo, hi) in &bounds {
        assert!(
            (0.0..=100.0).contains(lo) && (0.0..=100.0).contains(hi) && lo <= hi,
            "[{lo}, {hi}]"
        );
    }
    // C3's rows: judged, agreed in all 3 sessions (they are copies), and each label the one its
    // bounds give against "> 99.94 %" (one-sided: the lower bound decides a hold).
    let rule_table = |id: &str| {
        let t = section(&text, &format!("<a id=\"rule-{id}\"></a>"));
        &t[..t.find("<a id=").unwrap_or(t.len())]
    };
    let c3 = rule_table("c3-h3");
    let rows: Vec<&str> = c3
        .lines()
        .filter(|l| l.starts_with("| `c3-h3-success/"))
        .collect();
    assert!(!rows.is_empty(), "{c3}");
    for row in rows {
        assert!(!row.contains("not judged"), "{row}");
        assert!(row.contains("3 of 3 agree"), "{row}");
        let (lo, hi) = *percent_bounds(row)
            .first()
            .unwrap_or_else(|| panic!("no bounds in {row}"));
        let label = if lo > 99.94 {
            "above 99.94 %"
        } else if hi <= 99.94 {
            "at or below 99.94 %"
        } else {
            "undecided"
        };
        assert!(row.contains(&format!("| {label}")), "{row}");
    }
    // C1's throughput moved in session 2: the sessions column names what moved.
    let c1 = rule_table("c1-throughput");
    assert!(c1.contains("moved: "), "{c1}");
    // The answer's sentences rest on verdicts, and say what ran out when they list it.
    let answer = section(&text, "## The answer");
    assert!(answer.contains("[C3-h3](#rule-c3-h3)"), "{answer}");
}

/// Only results go into the paper: a folder or file that is not a results directory, as the
/// reference, a claim run or the breakdown, is refused with status 2 and one line naming it.
#[test]
fn inputs_that_are_not_results_are_refused_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let notes = tmp.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("figures.md"), "| a | 355 MB |\n").unwrap();
    let note_file = notes.join("figures.md");
    let out = tmp.path().join("out");
    let cases: [(&std::path::Path, Vec<&str>, &[&std::path::Path]); 3] = [
        (&notes, vec![], &[]),
        (&reference, vec![], &[&notes]),
        (
            &reference,
            vec!["--breakdown", note_file.to_str().unwrap()],
            &[],
        ),
    ];
    for (reference, extra, claims) in cases {
        let done = paper(reference, claims, &out, &extra);
        let text = output_text(&done);
        assert_eq!(done.status.code(), Some(2), "{text}");
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        assert!(text.contains("notes"), "{text}");
        assert!(!out.join("reproduction.md").exists(), "{text}");
    }
}

/// The soak (a claim run named `soak-quic-rss`): a server series that grows by a tenth over
/// its second half is "still rising", a flat client series "levelled off", each with its
/// per-minute means; without a soak run the C5 section says none was measured.
#[test]
fn the_soak_reads_rss_over_time_by_its_stated_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = copy_run("results/reference", &tmp.path().join("ref"));
    let soak = copy_run("results/claims/c5-quic-rss", &tmp.path().join("soak"));
    same_provenance_as(&soak, &reference);
    edit_manifest(&soak, |m| {
        m["experiment"]["name"] = Value::String("soak-quic-rss".into());
    });
    let key = csv::Reader::from_path(soak.join("cells.csv"))
        .unwrap()
        .deserialize::<std::collections::HashMap<String, String>>()
        .next()
        .unwrap()
        .unwrap()["cell_key"]
        .clone();
    // Four minutes, one sample a second: the server grows from 100 to 120 MB linearly, the
    // client stays at 30 MB.
    let mut csv = String::from("cell_key,t_s,role,rss_bytes,cpu_pct\n");
    for t in 1..=240u64 {
        let server = 100_000_000 + t * 20_000_000 / 240;
        csv.push_str(&format!("{key},{t}.000,server,{server},90.00\n"));
        csv.push_str(&format!("{key},{t}.000,client,30000000,80.00\n"));
    }
    std::fs::write(soak.join("resources.csv"), csv).unwrap();
    let out = tmp.path().join("out");
    let done = paper(&reference, &[&soak], &out, &[]);
    assert!(done.status.success(), "{}", output_text(&done));
    let text = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    let soak = section(&text, "### Memory over a soak");
    let server = soak
        .lines()
        .find(|l| l.contains("| server |"))
        .unwrap_or_else(|| panic!("{soak}"));
    // Minute 4's mean (mean of 100 + 20·t/240 MB over t in 181..=240) and the verdict.
    assert!(server.contains("| 117.5 |"), "{server}");
    assert!(server.contains("still rising"), "{server}");
    let client = soak.lines().find(|l| l.contains("| client |")).unwrap();
    assert!(
        client.contains("levelled off") && client.contains("| 30.0 |"),
        "{client}"
    );

    let done = paper(&reference, &[], &out, &[]);
    assert!(done.status.success(), "{}", output_text(&done));
    let text = std::fs::read_to_string(out.join("reproduction.md")).unwrap();
    assert!(text.contains("No soak run in this paper"), "{text}");
}

/// Every committed claim cell measured under the plan (its data commit contains the plan) is
/// exactly the plan's budget of attempts; data measured before the plan are marked as such in
/// the committed paper.
#[test]
fn committed_claim_cells_under_the_plan_are_exactly_its_budget() {
    let root = workspace().canonicalize().unwrap();
    let plan = study::plan::Plan::load(&root.join("experiments/study/plan.toml")).unwrap();
    let paper = std::fs::read_to_string(root.join("paper/reproduction.md")).unwrap();
    let mut experiments: Vec<&str> = plan
        .conditions
        .iter()
        .map(|c| c.experiment.as_str())
        .collect();
    experiments.dedup();
    for file in experiments {
        let stem = Path::new(file).file_stem().unwrap().to_str().unwrap();
        let dir = root.join("results/claims").join(stem);
        if !dir.join("manifest.json").is_file() {
            continue;
        }
        let commit = manifest(&dir)["git_commit"].as_str().unwrap().to_string();
        let Ok(timing) = study::timing::plan_timing(&root, "experiments/study/plan.toml", &commit)
        else {
            // A clone without that history cannot tell; nothing to hold the cells to.
            continue;
        };
        if !timing.data_contains_plan {
            assert!(
                paper.contains("were measured before this plan was committed"),
                "{stem}: measured before the plan, and the paper does not say so"
            );
            continue;
        }
        for row in read_csv(&dir.join("cells.csv")) {
            if row["stage"] != "stress" {
                continue;
            }
            let budget = plan.budgets.attempts[&row["regime"]];
            assert_eq!(
                row["sent"].parse::<u64>().unwrap(),
                budget,
                "{stem} {}",
                row["cell_key"]
            );
        }
    }
}

/// `study judge`: a second study is a plan file judged by the same engine, with no code of
/// its own. A plan written here judges a committed claim run: the paper opens with its
/// answer, names its runs, its plan and its verdicts, says how to rerun it, and has no "What
/// ran out" when the plan names no failure column. No run given is refused with exit 2.
#[test]
fn judge_writes_the_paper_of_another_plan_with_the_same_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let run = workspace().join("results/claims/c4-h3-cap");
    // The plan's budget is the committed run's own (it is the run's, not this test's).
    let budget = read_csv(&run.join("cells.csv"))
        .into_iter()
        .find(|r| r["stage"] == "stress" && r["regime"] == "new-conn")
        .map(|r| r["sent"].clone())
        .expect("a new-connection cell");
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"study = "A second study"
question = "Is HTTP/3 capped under new connections?"
confidence = 0.95
[budgets]
column = "sent"
[budgets.attempts]
new-conn = BUDGET
[min_sample]
repetitions = 3
sessions = 1
[quantities.throughput]
kind = "mean"
unit = "req/s"
definition = "ok ÷ elapsed_s"
source = { value = "ok", per = "elapsed_s" }
[[conditions]]
name = "c4-h3-cap/default"
experiment = "experiments/claims/c4-h3-cap.toml"
mechanism = "loopback"
can_refute = true
[[claims]]
id = "X"
statement = "HTTP/3 is capped at 39 req/s."
hypothesis = "At most 42.9 req/s at every level."
[[rules]]
id = "X-cap"
claim = "X"
hypothesis = "HTTP/3's new-connection throughput is at most 42.9 req/s."
quantity = "throughput"
subject = { stack = "h3", regime = "new-conn", workers = "every" }
conditions = ["c4-h3-cap/default"]
test = { op = "<=", value = 42.9, sided = "one" }
labels = { holds = "capped", fails = "not capped", undecided = "undecided" }
[[answer]]
rules = ["X-cap"]
all_hold = "Capped ({holds})."
none_hold = "Not capped: {fails}{undecided}."
some_hold = "In part: {holds}; not in {fails}{undecided}."
"#
        .replace("BUDGET", &budget),
    )
    .unwrap();
    let out = tmp.path().join("second.md");
    let done = study()
        .args(["judge", "--plan"])
        .arg(&plan)
        .arg("--runs")
        .arg(&run)
        .args(["--rerun", "`scripts/rerun-second`", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", output_text(&done));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("# A second study\n"), "{text}");
    let answer = section(&text, "## The answer");
    assert!(
        answer.contains("Is HTTP/3 capped under new connections?"),
        "{answer}"
    );
    // Every level of the committed run is far above 42.9 req/s: the engine says so.
    assert!(answer.contains("Not capped:"), "{answer}");
    assert!(section(&text, "## Runs").contains("c4-h3-cap"), "{text}");
    assert!(
        section(&text, "## The claims, judged").contains("X-cap"),
        "{text}"
    );
    assert!(!text.contains("## What ran out"), "{text}");
    assert!(
        section(&text, "## Artifact").contains("`scripts/rerun-second`"),
        "{text}"
    );
    let none = study()
        .args(["judge", "--plan"])
        .arg(&plan)
        .args(["--rerun", "x", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2), "{}", output_text(&none));
}
