//! The two-host contrast (experiments/claims/c2c3-two-hosts.toml) at test size, on the hosts
//! executor (needs root and iproute2): an agent host with one source address sends new-conn
//! load across the bridge to a server on a fixed port. With the hosts kept for a variant's
//! sweep, the TIME_WAIT the client closes leave behind grows from level to level; with hosts
//! made anew per cell ("as on loopback") every cell starts with none. Every row carries the
//! TIME_WAIT columns, and both QUIC endpoint patterns run.

mod common;

use std::collections::HashMap;

use common::*;

const EXPERIMENT: &str = r#"
name = "contrast-test"
executor = "hosts"
host_agents = 1
stacks = ["h1", "h3"]
regimes = ["new-conn"]
concurrency = [2, 4]
requests_new_conn = 150
warmup_fraction = 0
baseline_seconds = 0
source_addresses = 1

[[variants]]
name = "kept"
host_namespaces = "sweep"

[[variants]]
name = "kept-shared-quic"
host_namespaces = "sweep"
stacks = ["h3"]
quic_endpoint = "shared"

[[variants]]
name = "as-on-loopback"
host_namespaces = "cell"
source_addresses = 16
tcp_tw_reuse = 1
"#;

#[test]
fn time_wait_accumulates_across_levels_only_where_the_hosts_are_kept() {
    let (_tmp, dir) = run_toml(EXPERIMENT);
    let rows = read_csv(&dir.join("cells.csv"));
    for r in &rows {
        eprintln!(
            "{}: TIME_WAIT {} → {} (peak {})",
            r["cell_key"],
            r["tcp_time_wait_before"],
            r["tcp_time_wait_after"],
            r["tcp_time_wait_peak"]
        );
    }
    assert_eq!(rows.len(), 4 + 2 + 4, "{rows:?}");
    let row = |key: &str| -> &HashMap<String, String> {
        rows.iter()
            .find(|r| r["cell_key"] == key)
            .unwrap_or_else(|| panic!("{key}"))
    };
    for r in &rows {
        assert_eq!(r["error"], "", "{r:?}");
        assert_eq!(num(r, "ok"), 150.0, "{r:?}");
        for column in [
            "tcp_time_wait_before",
            "tcp_time_wait_after",
            "tcp_time_wait_peak",
        ] {
            assert!(r[column].parse::<u64>().is_ok(), "{column}: {r:?}");
        }
        let shared = r["variant"] == "kept-shared-quic";
        assert_eq!(
            r["quic_endpoint"],
            if shared { "shared" } else { "per-connection" }
        );
    }
    let tw = |key: &str, column: &str| num(row(key), &format!("tcp_time_wait_{column}"));
    // Kept hosts: the first cell starts with none; each HTTP/1.1 connection the client closed
    // first (most of them; the server closes some first, and their TIME_WAIT is the server
    // host's) is still in TIME_WAIT (60 s) when the next level starts, so the count grows.
    assert_eq!(tw("kept/h1/new-conn/c2/r1", "before"), 0.0);
    let first = tw("kept/h1/new-conn/c2/r1", "after");
    assert!(first >= 75.0, "{first} TIME_WAIT after 150 connections");
    let next_before = tw("kept/h1/new-conn/c4/r1", "before");
    assert!(next_before >= first, "{next_before} < {first}: not kept");
    assert!(
        tw("kept/h1/new-conn/c4/r1", "after") >= next_before + 75.0,
        "the second level adds its own"
    );
    // Hosts anew per cell: nothing carries over.
    for key in [
        "as-on-loopback/h1/new-conn/c4/r1",
        "as-on-loopback/h3/new-conn/c4/r1",
    ] {
        assert_eq!(tw(key, "before"), 0.0, "{key}");
    }
}
