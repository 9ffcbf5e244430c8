//! No request waits for a delayed ACK: one user, a new connection per request, against Node's
//! `http2.createSecureServer({ allowHTTP1: true })` (HTTP/1.1 and HTTP/2 by ALPN, Nagle on),
//! a third-party server. When the client's last handshake flight (its TLS Finished) and its
//! request reach such a server in two segments, the server sends its session tickets on the
//! Finished alone and then holds the answer behind them until the client's delayed ACK fires
//! (Nagle): a time to first byte at Linux's 40 ms delayed-ACK floor for a good share of the
//! requests, where the others take under a millisecond.
//!
//! Whether a request stalls is a race (the request must leave after the server read the
//! Finished, and before the tickets came back), so an idle machine may show none even with
//! the two segments. The first assertion is therefore structural: Node logs, for each
//! connection, whether the request came in the same read as the Finished, and every one must.
//! The second counts the requests whose time to first byte sits at or above the delayed-ACK
//! floor, from the runner's own histograms; it compares no latency with a threshold of its
//! own. Skipped with a note when node is missing, unless TBENCH_REQUIRE_NODE=1 requires it
//! (CI).

mod common;

use common::*;
use results::hlog;
use test_servers::node::Node;

/// Linux's shortest delayed ACK (TCP_DELACK_MIN), and its longest (TCP_DELACK_MAX) plus a
/// margin: a request held until the client's delayed ACK got its first byte in between.
const DELAYED_ACK_US: std::ops::Range<u64> = 40_000..240_000;
const REQUESTS: usize = 300;

#[test]
fn no_request_waits_for_a_delayed_ack_at_one_user_on_new_connections_to_node() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let Some(node) = Node::start(tmp.path()) else {
        return;
    };
    let out = tmp.path().join("results");
    let output = runner()
        .arg("--url")
        .arg(format!(
            "https://localhost:{}/items/{{{{id}}}}",
            node.addr.port()
        ))
        .arg("--ca")
        .arg(certs.ca_cert())
        .args([
            "--stacks",
            "h1,h2",
            "--regime",
            "new-conn",
            "--concurrency",
            "1",
        ])
        .args(["--requests", &REQUESTS.to_string()])
        .args(["--baseline-seconds", "0", "--repetitions", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("runner runs");
    assert!(
        output.status.success(),
        "runner failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Before the fix: about two connections in three apart. One in a hundred is left to a
    // busy machine, where the kernel may send a held Finished before the request comes.
    let (together, apart) = node.handshake_turns();
    assert!(
        together >= REQUESTS && apart * 100 <= together + apart,
        "HTTP/1.1: {apart} of {} connections sent their request in a later segment than the \
         client's TLS Finished",
        together + apart
    );
    let dir = results_dir(&out);
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 2, "one cell per stack: {cells:?}");
    for cell in &cells {
        let key = &cell["cell_key"];
        assert_eq!(cell["failed"], "0", "{key}: every request answered");
        let ok: u64 = cell["ok"].parse().unwrap();
        let log = hlog::read(&hlog::path(&dir, key)).unwrap();
        assert_eq!(
            log.ttfb.len(),
            ok,
            "{key}: one time to first byte per answer"
        );
        let stalled = log
            .ttfb
            .count_between(DELAYED_ACK_US.start, DELAYED_ACK_US.end - 1);
        // None is expected; one in a hundred is left to a busy machine's scheduler. Before
        // the fix, HTTP/1.1 had a tenth of its requests here.
        assert!(
            stalled * 100 <= ok,
            "{key}: {stalled} of {ok} requests got their first byte after a delayed ACK \
             ({} to {} µs); time to first byte p50 {} µs, p90 {} µs, p99 {} µs, max {} µs",
            DELAYED_ACK_US.start,
            DELAYED_ACK_US.end,
            log.ttfb.value_at_quantile(0.5),
            log.ttfb.value_at_quantile(0.9),
            log.ttfb.value_at_quantile(0.99),
            log.ttfb.max(),
        );
    }
}
