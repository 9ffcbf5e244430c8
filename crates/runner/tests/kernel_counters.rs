//! The kernel counters of a cell's row move when the cell makes them move on purpose, in a
//! private network namespace so that they are exact (needs root and iproute2, as the
//! conditions tests do): a tiny UDP buffer for HTTP/3, a tiny listen backlog for HTTP/1.1.
//! And the report names the mechanism.

mod common;

use std::collections::HashMap;

use common::*;

fn only_row(dir: &std::path::Path) -> HashMap<String, String> {
    let rows = read_csv(&dir.join("cells.csv"));
    assert_eq!(rows.len(), 1);
    let row = rows.into_iter().next().unwrap();
    assert_eq!(row["error"], "", "{row:?}");
    // Every counter column is there and filled, and exact: the cell had its own namespace.
    for column in executors::measure::netcounters::COUNTERS.map(|c| c.column) {
        assert!(row[column].parse::<u64>().is_ok(), "{column}: {row:?}");
    }
    assert_eq!(row["net_counters_scope"], "namespace", "{row:?}");
    let moved: Vec<String> = executors::measure::netcounters::COUNTERS
        .map(|c| format!("{} {}", c.column, row[c.column]))
        .to_vec();
    eprintln!("{}: {}", row["cell_key"], moved.join(", "));
    row
}

fn report(dir: &std::path::Path) -> String {
    let output = runner().arg("report").arg(dir).output().unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    std::fs::read_to_string(dir.join("report.html")).unwrap()
}

/// `somaxconn` only puts the cell in a namespace of its own; the 4 KiB socket buffers (the
/// kernel grants 8 KiB, a handful of 1,200-byte datagrams) overflow under 200 streams.
#[test]
fn a_tiny_udp_buffer_overflows_the_quic_socket() {
    let (_tmp, dir) = run_toml(
        r#"
name = "udp-overflow"
stacks = ["h3"]
regimes = ["reuse"]
concurrency = [200]
requests_reuse = 4000
warmup_fraction = 0
baseline_seconds = 0
somaxconn = 4096
udp_buffer_bytes = 4096
max_cell_seconds = 20
"#,
    );
    let row = only_row(&dir);
    assert!(num(&row, "net_udp_rcvbuf_errors") > 0.0, "{row:?}");
    let html = report(&dir);
    assert!(
        html.contains("UDP receive buffer overflowed"),
        "no UDP note in the report"
    );
}

/// A listen backlog of 1 (somaxconn 1 caps it there too) against 200 workers that each open a
/// connection per request: the accept queue overflows, or the SYN queue answers with cookies.
#[test]
fn a_tiny_backlog_overflows_the_listen_queue() {
    let (_tmp, dir) = run_toml(
        r#"
name = "listen-overflow"
stacks = ["h1"]
regimes = ["new-conn"]
concurrency = [200]
requests_new_conn = 2000
warmup_fraction = 0
baseline_seconds = 0
somaxconn = 1
backlog = 1
max_cell_seconds = 20
"#,
    );
    let row = only_row(&dir);
    let listen: f64 = [
        "net_listen_overflows",
        "net_listen_drops",
        "net_syncookies_sent",
    ]
    .iter()
    .map(|c| num(&row, c))
    .sum();
    assert!(listen > 0.0, "nothing overflowed: {row:?}");
    let html = report(&dir);
    assert!(
        html.contains("Listen queue overflowed")
            || html.contains("Listeners dropped")
            || html.contains("SYN queue was full"),
        "no listen-queue note in the report"
    );
    assert!(html.contains("`backlog`"), "the note names the knob");
}
