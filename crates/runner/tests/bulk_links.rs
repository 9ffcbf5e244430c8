//! The bulk workload on shaped links, in a private network namespace (needs root, iproute2
//! and iptables, as `tests/conditions.rs`): a TCP stack's download keeps to the shaped rate,
//! and a cell runs with its own congestion control and the interop runner's goodput shape.

mod common;

use common::*;
use results::rows::{self, CellRow};

fn cells(args: &[&str]) -> Vec<CellRow> {
    let run = run_ok(
        &[
            &["--regime", "reuse", "--concurrency", "1"][..],
            &NO_WARMUP_ONE_REPETITION[..],
            args,
        ]
        .concat(),
    );
    let rows = rows::read::<CellRow>(&run.dir().join("cells.csv"))
        .unwrap()
        .rows;
    for row in &rows {
        assert!(row.ran() && row.failed == 0 && row.ok > 0, "{row:?}");
    }
    rows
}

/// The TCP stacks (from the registry): the rate is shaped by tbf on the namespace's loopback.
fn tcp_stacks() -> String {
    stacks::stacks()
        .into_iter()
        .filter(|s| s.bulk() && !s.http_version().over_quic())
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_tcp_download_keeps_to_the_shaped_rate() {
    const RATE: f64 = 50e6;
    for row in cells(&[
        "--stacks",
        &tcp_stacks(),
        "--netem",
        "rate=50mbit",
        "--object",
        "download:4MiB",
        "--requests",
        "4",
    ]) {
        // What crossed the link (TLS records and framing included) against the link's rate,
        // over the measured phase; goodput, the objects alone, below it.
        let wire_bits_per_s = row.wire_received_bytes as f64 * 8.0 / row.elapsed_s;
        assert!(
            (0.9 * RATE..=1.1 * RATE).contains(&wire_bits_per_s),
            "{}: {wire_bits_per_s} bit/s on a 50 Mbit/s link",
            row.stack
        );
        let goodput_bits = row.goodput_bytes_per_s.unwrap() * 8.0;
        assert!(goodput_bits <= wire_bits_per_s, "{row:?}");
        assert_eq!(row.netem.as_deref(), Some("rate=50mbit"));
    }
}

#[test]
fn congestion_control_and_the_interop_goodput_shape_apply_per_cell() {
    let stack = tcp_stacks();
    let stack = stack.split(',').next().unwrap();
    let rows = cells(&[
        "--stacks",
        stack,
        "--netem",
        "interop-goodput",
        "--tcp-congestion",
        "bbr",
        "--object",
        "download:1MiB",
        "--requests",
        "2",
    ]);
    let row = &rows[0];
    assert_eq!(row.tcp_congestion.as_deref(), Some("bbr"));
    assert_eq!(row.netem.as_deref(), Some("interop-goodput"));
    // 10 Mbit/s is the ceiling; two 1 MiB objects take at least 1.6 s through it.
    let goodput_bits = row.goodput_bytes_per_s.unwrap() * 8.0;
    assert!(goodput_bits <= 10e6 * 1.1, "{row:?}");
    assert!(goodput_bits > 1e6, "{row:?}");
}

/// A TCP download under emulated delay keeps to the link: the delay is applied past the
/// loopback device, where the packet no longer counts against its socket (held before it, TCP
/// Small Queues capped a 10 Mbit/s link with 15 ms each way at about 3 Mbit/s).
#[test]
fn a_tcp_download_under_emulated_delay_keeps_to_the_link() {
    const RATE: f64 = 10e6;
    for row in cells(&[
        "--stacks",
        &tcp_stacks(),
        "--netem",
        "rate=10mbit,delay=15ms",
        "--object",
        "download:2MiB",
        "--requests",
        "2",
    ]) {
        let goodput_bits = row.goodput_bytes_per_s.unwrap() * 8.0;
        assert!(
            (0.6 * RATE..=1.1 * RATE).contains(&goodput_bits),
            "{}: {goodput_bits} bit/s of objects on a 10 Mbit/s link with 15 ms each way",
            row.stack
        );
    }
}
