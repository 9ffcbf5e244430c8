//! Conditions the study left out, in a private network namespace (needs root, iproute2 and
//! iptables, which .ci/run installs): emulated RTT, resumption and 0-RTT, port exhaustion.

mod common;

use std::collections::HashMap;

use common::*;

fn run_experiment(toml: &str) -> Vec<HashMap<String, String>> {
    let (_tmp, dir) = run_toml(toml);
    let rows = read_csv(&dir.join("cells.csv"));
    for row in &rows {
        assert_eq!(row["error"], "", "{}: {}", row["cell_key"], row["error"]);
    }
    rows
}

/// Round trips of the new-connection exchange, by how many the protocol needs: TCP (1) +
/// TLS 1.3 (1) + request (1) = 3; QUIC + TLS (1) + request (1) = 2; QUIC 0-RTT: 1.
#[test]
fn emulated_rtt_shows_each_protocols_handshake_round_trips() {
    const RTT_MS: f64 = 60.0;
    let rows = run_experiment(&format!(
        r#"
name = "rtt"
regimes = ["new-conn"]
concurrency = [1]
requests_new_conn = 12
warmup_fraction = 0.1
baseline_seconds = 0
netem = "rtt={RTT_MS}ms"
[[variants]]
name = "full"
[[variants]]
name = "resumed"
handshake = "resumed"
[[variants]]
name = "zero-rtt"
handshake = "zero-rtt"
stacks = ["h3"]
"#
    ));
    assert_eq!(rows.len(), 11);
    let find = |key: &str| {
        rows.iter()
            .find(|r| r["cell_key"] == key)
            .unwrap_or_else(|| panic!("{key}"))
    };
    // The emulator delays every packet by RTT/2 (it cannot be faster), and each round trip adds
    // processing: TLS and QUIC crypto plus request handling in a debug build (a few ms), up to
    // 0.2 ms of emulator timer slack per packet, and whatever else runs on this shared
    // two-core machine (the other test of this file, say). So: at least n·RTT, at most
    // n·RTT + RTT/2, the widest bound under which 1, 2 and 3 round trips stay apart.
    let check = |key: &str, round_trips: f64| {
        let p50 = num(find(key), "latency_p50_us") / 1000.0;
        let (lo, hi) = (
            round_trips * RTT_MS - 1.0,
            round_trips * RTT_MS + RTT_MS / 2.0,
        );
        assert!(
            (lo..=hi).contains(&p50),
            "{key}: median {p50:.1} ms, expected {lo:.0}–{hi:.0} ms"
        );
        assert!(
            num(find(key), "emulated_packets_delayed") > 0.0,
            "{key}: nothing was emulated"
        );
    };
    for stack in ["h1", "h2", "grpc"] {
        check(&format!("full/{stack}/new-conn/c1/r1"), 3.0);
        check(&format!("resumed/{stack}/new-conn/c1/r1"), 3.0);
        // TCP connect and TLS handshake are one round trip each.
        let full = find(&format!("full/{stack}/new-conn/c1/r1"));
        for phase in ["connect_p50_us", "handshake_p50_us"] {
            let ms = num(full, phase) / 1000.0;
            assert!(
                (RTT_MS - 1.0..RTT_MS * 1.5).contains(&ms),
                "{stack} {phase}: {ms} ms"
            );
        }
    }
    for stack in ["h3", "grpc-h3"] {
        check(&format!("full/{stack}/new-conn/c1/r1"), 2.0);
        check(&format!("resumed/{stack}/new-conn/c1/r1"), 2.0);
    }
    check("zero-rtt/h3/new-conn/c1/r1", 1.0);
    // Resumption is really used: flagged on every connection, and over TCP no certificate
    // crosses the wire (QUIC pads its handshake datagrams, which hides the saving).
    for stack in ["h1", "h2", "h3", "grpc", "grpc-h3"] {
        let full = find(&format!("full/{stack}/new-conn/c1/r1"));
        let resumed = find(&format!("resumed/{stack}/new-conn/c1/r1"));
        assert_eq!(num(full, "connections_resumed"), 0.0, "{stack}");
        assert_eq!(
            num(resumed, "connections_resumed"),
            num(resumed, "connections_established"),
            "{stack}"
        );
        if stack.ends_with("h3") {
            continue;
        }
        assert!(
            num(resumed, "wire_received_bytes_per_request")
                < num(full, "wire_received_bytes_per_request"),
            "{stack}: a resumed handshake should receive fewer bytes"
        );
    }
}

#[test]
fn a_narrow_port_range_without_tw_reuse_exhausts_ports_and_the_sweep_goes_on() {
    // 50 ephemeral ports; the client closes first, so each connection leaves a TIME_WAIT on
    // the client's port for 60 s. tcp_tw_reuse=0 stops the kernel reusing them (its default, 2,
    // reuses them on loopback). One source address, so that 50 ports are the whole budget.
    let rows = run_experiment(
        r#"
name = "ports"
stacks = ["h1", "grpc"]
regimes = ["new-conn"]
concurrency = [10]
requests_new_conn = 200
warmup_fraction = 0
baseline_seconds = 0
port_range = "40000 40049"
tcp_tw_reuse = 0
source_addresses = 1
"#,
    );
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(num(row, "sent"), 200.0);
        // About one success per port; a few connections end without a TIME_WAIT (the server
        // closed first), so their ports come back.
        assert!(num(row, "ok") >= 1.0 && num(row, "ok") <= 75.0, "{row:?}");
        assert!(num(row, "fail_addr_unavailable") > 0.0, "{row:?}");
        assert_eq!(row["port_range"], "40000 40049");
        // Every request set out to open a connection; those refused a port were never
        // established.
        let attempted = num(row, "connections_attempted");
        let established = num(row, "connections_established");
        assert!(attempted >= 200.0, "{row:?}");
        assert!(
            established + num(row, "fail_addr_unavailable") <= attempted,
            "{row:?}"
        );
        // The namespace's TIME_WAIT count shows the budget used up: the 50 ports, less the
        // few whose connection the server closed first (its side then holds the TIME_WAIT).
        assert!(num(row, "tcp_time_wait_peak") >= 25.0, "{row:?}");
    }
}

/// 100 ephemeral ports and no TIME_WAIT reuse: each closed connection holds its client port for
/// 60 s, so one source address runs out after ≈ 100 of the 300 connections. Spread over 8
/// addresses (127.0.0.1 … 127.0.0.8, each with its own 100 ports per server 4-tuple) the same
/// cell completes; the `one-address` variant turns spreading off and hits the port budget.
#[test]
fn source_address_spreading_lifts_the_port_budget_of_one_address() {
    let rows = run_experiment(
        r#"
name = "spread"
stacks = ["h1"]
regimes = ["new-conn"]
concurrency = [10]
requests_new_conn = 300
warmup_fraction = 0
baseline_seconds = 0
port_range = "40000 40099"
tcp_tw_reuse = 0
source_addresses = 8
[[variants]]
name = "spread"
[[variants]]
name = "one-address"
source_addresses = 1
"#,
    );
    assert_eq!(rows.len(), 2);
    let find = |key: &str| {
        rows.iter()
            .find(|r| r["cell_key"] == key)
            .unwrap_or_else(|| panic!("{key}"))
    };
    let spread = find("spread/h1/new-conn/c10/r1");
    assert_eq!(spread["source_addresses"], "8");
    assert_eq!(num(spread, "sent"), 300.0);
    assert_eq!(num(spread, "fail_addr_unavailable"), 0.0, "{spread:?}");
    assert_eq!(num(spread, "ok"), 300.0, "{spread:?}");
    let one = find("one-address/h1/new-conn/c10/r1");
    assert_eq!(one["source_addresses"], "1");
    assert!(num(one, "fail_addr_unavailable") > 0.0, "{one:?}");
    assert!(num(one, "ok") < 300.0, "{one:?}");
}

/// Reuse latency is the request on an open connection: under a 60 ms emulated RTT each
/// request costs one round trip, and no measured request pays for a handshake (which would
/// add at least one more round trip on QUIC, two on TCP + TLS). The connections' setup is
/// still reported, in the handshake columns.
#[test]
fn reuse_latency_holds_no_handshake() {
    const RTT_MS: f64 = 60.0;
    let rows = run_experiment(&format!(
        r#"
name = "reuse-rtt"
stacks = ["h1", "h3"]
regimes = ["reuse"]
concurrency = [3]
requests_reuse = 12
warmup_fraction = 0
baseline_seconds = 0
netem = "rtt={RTT_MS}ms"
"#
    ));
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let stack = &row["stack"];
        let max_ms = num(row, "latency_max_us") / 1000.0;
        assert!(
            (RTT_MS - 1.0..1.5 * RTT_MS).contains(&max_ms),
            "{stack}: slowest reuse request {max_ms:.1} ms; one round trip is {RTT_MS} ms"
        );
        assert_eq!(num(row, "connections_established"), 3.0, "{stack}");
        assert!(
            num(row, "handshake_min_us") / 1000.0 >= RTT_MS - 1.0,
            "{stack}: the connections' setup is reported"
        );
        assert_eq!(num(row, "ok"), 12.0, "{stack}");
    }
}

/// Whether this kernel takes a netem qdisc, tried in a throwaway namespace of the test's own
/// (named so that a runner's stale-namespace sweep leaves it alone).
fn kernel_has_netem() -> bool {
    let ns = format!("tbtest-netem-{}", std::process::id());
    let ok = |cmd: &[&str]| {
        std::process::Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(ok(&["ip", "netns", "add", &ns]), "cannot create {ns}");
    let has = ok(&[
        "tc", "-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
    ]);
    ok(&["ip", "netns", "del", &ns]);
    has
}

/// The emulator is chosen by probing the kernel, and the choice is recorded: here (no
/// sch_netem) the NFQUEUE fallback, whose thread's CPU gets its own column.
#[test]
fn the_emulator_chosen_is_recorded_with_its_cpu() {
    let expected = if kernel_has_netem() {
        "netem-qdisc"
    } else {
        "nfqueue"
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .args(["--stacks", "h1", "--regime", "reuse", "--concurrency", "1"])
        .args([
            "--requests",
            "20",
            "--baseline-seconds",
            "0",
            "--netem",
            "rtt=4ms",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let rows = read_csv(&dir.join("cells.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["emulator"], expected);
    assert!(num(&rows[0], "emulated_packets_delayed") > 0.0);
    if expected == "nfqueue" {
        assert!(num(&rows[0], "emulator_cpu_s") > 0.0, "{:?}", rows[0]);
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["emulator"], expected);
    // Where a delayed packet waited: the thread on receipt, past the sender's socket.
    let delays_at = if expected == "nfqueue" {
        "input"
    } else {
        "qdisc"
    };
    assert_eq!(manifest["emulator_delays_at"], delays_at);
}
