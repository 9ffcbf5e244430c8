//! Streaming gRPC calls of our own workload through the runner (`grpc_call`): both gRPC
//! stacks, both regimes, every message validated; cells.csv counts the messages and their
//! gaps, latency.csv has the gaps' quantiles beside the latency's, and the cell's hlog has
//! the `message_gap` histogram the columns come from.

mod common;

use common::*;
use results::hlog;
use results::rows::{self, CellRow};

/// A smoke run of the two gRPC stacks making `grpc_call`s (kept until dropped).
fn streamed(grpc_call: &str, messages: u32) -> Run {
    let smoke = workspace().join("experiments/smoke.toml");
    let messages = messages.to_string();
    run_ok(&[
        "--experiment",
        smoke.to_str().unwrap(),
        "--stacks",
        "grpc,grpc-h3",
        "--concurrency",
        "4",
        "--baseline-seconds",
        "0",
        "--grpc-call",
        grpc_call,
        "--stream-messages",
        &messages,
    ])
}

#[test]
fn server_streaming_cells_count_messages_and_their_gaps() {
    let run = streamed("server-stream", 7);
    let dir = run.dir();
    let cells = rows::read::<CellRow>(&dir.join("cells.csv")).unwrap().rows;
    assert_eq!(cells.len(), 4, "two stacks × two regimes");
    let latency = read_csv(&dir.join("latency.csv"));
    for row in &cells {
        assert!(row.ran() && row.ok > 0 && row.failed == 0, "{row:?}");
        assert_eq!(row.grpc_call.as_deref(), Some("server-stream"));
        assert_eq!(row.stream_messages, Some(7));
        assert_eq!(row.messages_per_call_mean, Some(7.0), "{row:?}");
        let per_s = row.messages_per_s.unwrap();
        let expected = 7.0 * row.ok as f64 / row.elapsed_s;
        assert!(
            (per_s - expected).abs() <= 1e-3 + 1e-5 * expected,
            "{per_s} vs {expected}"
        );
        let (p50, p99, max) = (
            row.message_gap_p50_us.unwrap(),
            row.message_gap_p99_us.unwrap(),
            row.message_gap_max_us.unwrap(),
        );
        assert!(p50 >= 1 && p50 <= p99 && p99 <= max, "{row:?}");
        assert!(
            max <= row.latency_max_us,
            "a gap lies inside its call: {row:?}"
        );
        // Seven items of the small profile's padding each.
        let padding = bench_core::PayloadProfile::Small.padding_bytes() as f64;
        assert!(row.body_bytes_per_ok >= 7.0 * padding, "{row:?}");
        let gaps: Vec<_> = latency
            .iter()
            .filter(|r| r["cell_key"] == row.cell_key && r["metric"] == "message_gap")
            .collect();
        assert_eq!(gaps.len(), 30, "the gaps' quantiles in latency.csv");
        let median = gaps.iter().find(|r| r["quantile"] == "0.5").unwrap();
        assert_eq!(median["latency_us"].parse::<u64>().unwrap(), p50);
        let log = hlog::read(&hlog::path(&dir, &row.cell_key)).unwrap();
        // Six gaps per call of seven messages, every call a success.
        assert_eq!(log.message_gap.len(), 6 * row.ok, "{}", row.cell_key);
        assert_eq!(log.message_gap.value_at_quantile(0.99), p99);
    }
}

#[test]
fn client_streaming_and_bidi_calls_run_validated() {
    for (call, gaps) in [("client-stream", false), ("bidi", true)] {
        let run = streamed(call, 3);
        let dir = run.dir();
        let cells = rows::read::<CellRow>(&dir.join("cells.csv")).unwrap().rows;
        for row in &cells {
            assert!(
                row.ran() && row.ok > 0 && row.failed == 0,
                "{call}: {row:?}"
            );
            assert_eq!(row.grpc_call.as_deref(), Some(call));
            assert_eq!(row.messages_per_call_mean, Some(3.0), "{call}: {row:?}");
            assert_eq!(row.message_gap_p50_us.is_some(), gaps, "{call}: {row:?}");
        }
    }
}
