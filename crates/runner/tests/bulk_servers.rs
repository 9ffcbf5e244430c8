//! The bulk workload's downloads answered by servers nobody here wrote (`server = "caddy"`,
//! `"nginx"`, from Debian's packages; a missing one skips with a note unless
//! TBENCH_REQUIRE_CADDY / _NGINX is 1, as scripts/test sets them): every REST stack each one
//! serves moves exact objects, the program is sampled as the server (its CPU per GiB), the
//! manifest names it, and none is left running after the run.

mod common;

use common::*;
use experiment::settings::ServerKind;
use results::rows::{self, CellRow};

/// Whether `kind`'s program is installed; a missing one is skipped with a note (a failure
/// when its TBENCH_REQUIRE_* is 1).
fn installed(kind: ServerKind) -> bool {
    let program = kind.program().expect("a program nobody here wrote");
    let here = executors::proxy::installed(program);
    if !here {
        test_servers::skip(
            program.as_str(),
            &format!("TBENCH_REQUIRE_{}", program.as_str().to_uppercase()),
            "apt-get install nginx-light caddy",
        );
    }
    here
}

/// Processes still running from program directories of the runner with `pid`.
fn programs_left_by(pid: u32) -> Vec<String> {
    let marker = format!("tbench-proxy-{pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect()
}

#[test]
fn caddy_and_nginx_serve_every_rest_stacks_downloads_measured_as_the_server() {
    const OBJECT_BYTES: u64 = 3 << 20;
    const REQUESTS: u64 = 4;
    for kind in [ServerKind::Caddy, ServerKind::Nginx] {
        if !installed(kind) {
            continue;
        }
        let served: Vec<&str> = stacks::stacks()
            .into_iter()
            .filter(|s| s.bulk() && kind.serves(*s).is_ok())
            .map(|s| s.name())
            .collect();
        assert!(!served.is_empty(), "{kind:?} serves some stack");
        let run = run_ok(
            &[
                &[
                    "--stacks",
                    &served.join(","),
                    "--regime",
                    "reuse",
                    "--concurrency",
                    "1",
                    "--requests",
                    &REQUESTS.to_string(),
                    "--sample-interval-ms",
                    "10",
                    "--object",
                    "download:3MiB",
                    "--server",
                    kind.as_str(),
                ][..],
                &NO_WARMUP_ONE_REPETITION[..],
            ]
            .concat(),
        );
        let cells = rows::read::<CellRow>(&run.dir().join("cells.csv"))
            .unwrap()
            .rows;
        assert_eq!(cells.len(), served.len(), "{kind:?}");
        for row in &cells {
            assert!(
                row.ran() && row.ok == REQUESTS && row.failed == 0,
                "{kind:?}: {row:?}"
            );
            assert_eq!(row.server.as_deref(), Some(kind.as_str()), "{row:?}");
            assert_eq!(row.object_bytes_moved, Some(REQUESTS * OBJECT_BYTES));
            // Sampled as the server: its own process's CPU and memory.
            assert!(
                row.server_cpu_s_per_gib.is_some_and(|c| c > 0.0),
                "{kind:?}: {row:?}"
            );
            assert!(
                row.server_rss_hwm_bytes.is_some_and(|b| b > 0),
                "{kind:?}: {row:?}"
            );
            // On the direct path: no proxy's CPU.
            assert_eq!(row.proxy_cpu_ms_per_1k_ok, None, "{row:?}");
        }
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.dir().join("manifest.json")).unwrap(),
        )
        .unwrap();
        let records = manifest["proxies"]
            .as_array()
            .expect("the manifest records the server");
        assert_eq!(records.len(), served.len(), "{records:?}");
        for record in records {
            assert_eq!(record["role"], "origin-server", "{record}");
            assert_eq!(record["proxy"], kind.as_str(), "{record}");
            assert_ne!(record["version"], "not installed", "{record}");
            assert!(
                record["config"]
                    .as_str()
                    .is_some_and(|c| !c.contains("PRIVATE KEY")),
                "{record}"
            );
        }
    }
}

#[test]
fn no_server_outlives_its_run() {
    if !installed(ServerKind::Caddy) {
        return;
    }
    let rest = stacks::stacks()
        .into_iter()
        .find(|s| s.bulk() && ServerKind::Caddy.serves(*s).is_ok())
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let child = runner()
        .args([
            "--stacks",
            rest.name(),
            "--object",
            "download:1MiB",
            "--server",
            "caddy",
        ])
        .args(ONE_TINY_CELL)
        .arg("--out")
        .arg(out.path())
        .arg("--certs")
        .arg(certs.path())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    assert_eq!(programs_left_by(pid), Vec::<String>::new());
}

/// The bulk study's experiment (experiments/bulk/goodput.toml) validates here, every variant
/// with its link, object and server, as `scripts/reproduce-bulk` checks it before running;
/// skipped without root (its links need namespaces) or without Caddy and nginx.
#[test]
fn the_bulk_study_experiment_validates() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the bulk study's shaped links need root");
        return;
    }
    if !installed(ServerKind::Caddy) || !installed(ServerKind::Nginx) {
        return;
    }
    let file = workspace().join("experiments/bulk/goodput.toml");
    let output = runner().arg("check").arg(&file).output().unwrap();
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    // The plan's budget: 5 objects a cell; the quick one: 1.
    let quick = runner()
        .arg("check")
        .arg(&file)
        .args(["--requests-reuse", "1"])
        .output()
        .unwrap();
    assert!(quick.status.success(), "{}", output_text(&quick));
}
