//! The `hosts` executor (needs root and iproute2, as CI has): the server in one network
//! namespace and three agents in three others, joined by a bridge with 198.18.0.0/15
//! addresses. The merged row is the agents' sum, the agents' interfaces carried the traffic,
//! and no namespace is left afterwards, also after SIGINT mid-cell; `netem` on the agents'
//! links shows in latency for its cell only.

mod common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// The namespaces of the hosts executor of the runner with `pid` (`tbench-<pid>-h-…`).
fn host_namespaces(pid: u32) -> BTreeSet<String> {
    let prefix = format!("tbench-{pid}-h-");
    std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_sweep_across_three_agent_hosts_merges_them_and_leaves_no_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let child = runner()
        .args(["--executor", "hosts", "--host-agents", "3"])
        .args([
            "--stacks",
            "h1,h3,grpc-h3",
            "--regime",
            "reuse",
            "--concurrency",
            "3",
        ])
        .args(["--requests", "90", "--baseline-seconds", "0", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let cells = read_csv(&dir.join("cells.csv"));
    let agents = read_csv(&dir.join("agents.csv"));
    // HTTP/1.1 on TCP, and REST and gRPC on QUIC (UDP) across the namespaces' bridge.
    assert_eq!(cells.len(), 3);
    for cell in &cells {
        assert_eq!(cell["error"], "");
        assert_eq!(num(cell, "ok"), 90.0);
        assert_eq!(num(cell, "agents"), 3.0);
        let rows: Vec<_> = agents
            .iter()
            .filter(|a| a["cell_key"] == cell["cell_key"])
            .collect();
        assert_eq!(rows.len(), 3);
        let sent: f64 = rows.iter().map(|r| num(r, "sent")).sum();
        assert_eq!(sent, num(cell, "sent"), "the merged row is the agents' sum");
        for r in &rows {
            assert!(r["address"].starts_with("198.18.0."), "{}", r["address"]);
            // Each agent's 30 answers (≈ 256 B bodies, with TLS and headers) crossed its
            // own interface.
            assert!(
                num(r, "link_received_bytes") > 30.0 * 256.0,
                "{}: {}",
                r["address"],
                r["link_received_bytes"]
            );
            assert!(num(r, "link_sent_bytes") > 0.0);
        }
    }
    assert!(host_namespaces(pid).is_empty(), "no namespace is left");
}

#[test]
fn sigint_mid_cell_leaves_no_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let mut child = runner()
        .args(["--executor", "hosts", "--host-agents", "2"])
        .args(["--stacks", "h1", "--regime", "reuse", "--concurrency", "2"])
        .args(["--requests", "100000000", "--max-cell-seconds", "20"])
        .args(["--baseline-seconds", "0", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the hosts exist and a cell is running, then interrupt.
    let until = Instant::now() + Duration::from_secs(20);
    let pid = child.id();
    // The bridge, the server's host and two agent hosts.
    while host_namespaces(pid).len() < 4 {
        assert!(Instant::now() < until, "the hosts were not created");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "the run did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert!(
        host_namespaces(pid).is_empty(),
        "no namespace is left after SIGINT"
    );
}

/// Spreading beyond loopback: an agent host has several addresses on the server's subnet, and
/// its connections spread over them. With 100 ephemeral ports and no TIME_WAIT reuse (the
/// cell's sysctls, set in every host), 300 new connections need more than one source address:
/// spread over 4 they all complete; from one address they run out of ports. The next cell
/// without sysctls gets the namespace's defaults back.
#[test]
fn agent_hosts_spread_connections_over_their_addresses_and_sysctls_reach_every_host() {
    let (_tmp, dir) = run_toml(
        r#"
name = "hosts-spread"
executor = "hosts"
host_agents = 1
stacks = ["h1"]
regimes = ["new-conn"]
concurrency = [10]
requests_new_conn = 300
warmup_fraction = 0
baseline_seconds = 0
source_addresses = 4
# The hosts live for the run, so the TIME_WAIT one variant leaves is the next one's: the
# planned order (spread first, on fresh ports), not a shuffle.
cell_order = "fixed"
[[variants]]
name = "spread"
port_range = "40000 40099"
tcp_tw_reuse = 0
[[variants]]
name = "one-address"
port_range = "40000 40099"
tcp_tw_reuse = 0
source_addresses = 1
[[variants]]
name = "defaults"
source_addresses = 1
"#,
    );
    let rows = read_csv(&dir.join("cells.csv"));
    let find = |variant: &str| {
        rows.iter()
            .find(|r| r["variant"] == variant)
            .unwrap_or_else(|| panic!("{variant}: {rows:?}"))
    };
    let spread = find("spread");
    assert_eq!(spread["error"], "", "{spread:?}");
    assert_eq!(num(spread, "agents"), 1.0);
    assert_eq!(num(spread, "fail_addr_unavailable"), 0.0, "{spread:?}");
    assert_eq!(num(spread, "ok"), 300.0, "{spread:?}");
    let one = find("one-address");
    assert!(num(one, "fail_addr_unavailable") > 0.0, "{one:?}");
    assert!(num(one, "ok") < 300.0, "{one:?}");
    // The default range (≈ 28,000 ports) again: one address is plenty for 300 connections.
    let defaults = find("defaults");
    assert_eq!(num(defaults, "ok"), 300.0, "{defaults:?}");
}

/// `netem` on the hosts executor: the cell's delay is on every agent's link (here the NFQUEUE
/// emulator in each agent host, the kernel having no `sch_netem`), so each request's latency
/// includes the emulated round trip, the emulator says which it was and what it delayed, and
/// the next cell, without `netem`, is back to the bridge's own latency.
#[test]
fn netem_on_the_agents_links_shows_in_latency_and_is_removed_after_the_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("links.toml");
    std::fs::write(
        &file,
        r#"
name = "links"
executor = "hosts"
host_agents = 2
stacks = ["h1"]
regimes = ["reuse"]
concurrency = [2]
requests_reuse = 40
baseline_seconds = 0

[[variants]]
name = "rtt40"
netem = "rtt=40ms"

[[variants]]
name = "plain"
"#,
    )
    .unwrap();
    let out = tmp.path().join("results");
    let child = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let cells = read_csv(&results_dir(&out).join("cells.csv"));
    assert_eq!(cells.len(), 2);
    let by = |v: &str| {
        cells
            .iter()
            .find(|c| c["variant"] == v)
            .unwrap_or_else(|| panic!("no {v} cell"))
    };
    let (slow, plain) = (by("rtt40"), by("plain"));
    for c in [slow, plain] {
        assert_eq!(c["error"], "");
        assert_eq!(num(c, "ok"), 40.0);
    }
    // Reused connections: one request is one round trip, 40 ms emulated.
    let p50 = num(slow, "latency_p50_us");
    assert!((40_000.0..80_000.0).contains(&p50), "p50 {p50} µs");
    assert!(num(slow, "latency_min_us") >= 39_000.0, "{slow:?}");
    assert!(slow["emulator"] == "nfqueue" || slow["emulator"] == "netem-qdisc");
    if slow["emulator"] == "nfqueue" {
        assert!(num(slow, "emulated_packets_delayed") >= 80.0, "{slow:?}");
    }
    // The rules went with the cell.
    assert!(num(plain, "latency_p50_us") < 20_000.0, "{plain:?}");
    assert_eq!(plain["emulator"], "");
    assert!(host_namespaces(pid).is_empty(), "no namespace is left");
}

/// What the hosts executor cannot emulate per link is refused before anything is created:
/// one line naming the key, exit status 2.
#[test]
fn a_rate_on_the_hosts_executor_is_refused_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .args(["--executor", "hosts", "--netem", "rtt=10ms,rate=10mbit"])
        .args(["--stacks", "h1", "--regime", "reuse", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--executor") && stderr.contains("rate"),
        "{stderr}"
    );
    assert!(!out.exists());
}
