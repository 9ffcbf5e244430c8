//! The bulk workload (`object`) through the runner: every stack that has it downloads and
//! uploads objects, each answer's byte count checked exactly; cells.csv's goodput, bytes moved
//! and CPU per GiB agree with each other; the load generator's memory stays flat as the
//! object grows; a download above the body limit is refused before the run.

mod common;

use bench_core::user_service::Api;
use common::*;
use results::rows::{self, CellRow};

/// A stack of the gRPC API, from the registry.
fn grpc_stack() -> &'static str {
    stacks::stacks()
        .into_iter()
        .find(|s| s.api() == Api::Grpc)
        .map(|s| s.name())
        .unwrap()
}

/// The stacks that serve the bulk workload, from the registry.
fn bulk_stacks() -> Vec<&'static str> {
    stacks::stacks()
        .into_iter()
        .filter(|s| s.bulk())
        .map(|s| s.name())
        .collect()
}

fn run_object(stacks: &str, object: &str, requests: &str, extra: &[&str]) -> Vec<CellRow> {
    let run = run_ok(
        &[
            &[
                "--stacks",
                stacks,
                "--regime",
                "reuse",
                "--concurrency",
                "1",
                "--requests",
                requests,
                "--sample-interval-ms",
                "10",
                "--object",
                object,
            ][..],
            &NO_WARMUP_ONE_REPETITION[..],
            extra,
        ]
        .concat(),
    );
    rows::read::<CellRow>(&run.dir().join("cells.csv"))
        .unwrap()
        .rows
}

#[test]
fn downloads_and_uploads_move_exact_objects_with_consistent_columns() {
    let stacks = bulk_stacks();
    assert_eq!(
        stacks.len(),
        stacks::stacks().len(),
        "every stack has the bulk workload: {stacks:?}"
    );
    let object_bytes = 3 << 20;
    for object in ["download:3MiB", "upload:3MiB"] {
        let cells = run_object(&stacks.join(","), object, "4", &[]);
        assert_eq!(cells.len(), stacks.len(), "{object}");
        for row in &cells {
            assert!(
                row.ran() && row.failed == 0 && row.ok == 4,
                "{object}: {row:?}"
            );
            assert_eq!(row.object.as_deref(), Some(object));
            let grpc = stacks::find(&row.stack).unwrap().api() == Api::Grpc;
            assert_eq!(
                row.object_message_bytes,
                grpc.then_some(64 * 1024),
                "{row:?}"
            );
            // Every success moved the whole object, counted exactly.
            assert_eq!(row.object_bytes_moved, Some(4 * object_bytes), "{row:?}");
            assert_eq!(row.body_bytes_per_ok, object_bytes as f64, "{row:?}");
            let goodput = row.goodput_bytes_per_s.unwrap();
            let moved = row.object_bytes_moved.unwrap() as f64;
            // cells.csv keeps goodput to 0.1 B/s and elapsed_s to 1 µs.
            assert!(
                (goodput * row.elapsed_s - moved).abs() <= 1e-3 * moved,
                "goodput × elapsed = {} vs {moved}",
                goodput * row.elapsed_s
            );
            let gib = moved / f64::from(1u32 << 30);
            let client = row.client_cpu_s_per_gib.unwrap();
            assert!(
                (client * gib - row.client_cpu_s).abs() <= 1e-3 + 1e-3 * row.client_cpu_s,
                "{row:?}"
            );
            let server = row.server_cpu_s_per_gib.unwrap();
            let server_cpu = row.server_cpu_s.unwrap();
            assert!(
                (server * gib - server_cpu).abs() <= 1e-3 + 1e-3 * server_cpu,
                "{row:?}"
            );
            // The wire carried at least the object, in the direction it went.
            let wire = if object.starts_with("download") {
                row.wire_received_bytes
            } else {
                row.wire_sent_bytes
            };
            assert!(wire >= 4 * object_bytes, "{row:?}");
        }
    }
}

/// gRPC's messages of the largest size, and of a size whose data does not divide the object
/// (the last message is shorter): the object still arrives and leaves exactly.
#[test]
fn grpc_objects_move_in_messages_of_the_chosen_size() {
    let grpc: Vec<&str> = stacks::stacks()
        .into_iter()
        .filter(|s| s.bulk() && s.api() == Api::Grpc)
        .map(|s| s.name())
        .collect();
    assert!(!grpc.is_empty());
    for (object, message) in [
        ("download:3MiB", "1048576"),
        ("upload:3MiB", "1048576"),
        ("download:1000000", "1500"),
        ("upload:1000000", "1500"),
    ] {
        let cells = run_object(
            &grpc.join(","),
            object,
            "2",
            &["--object-message-bytes", message],
        );
        for row in &cells {
            assert!(
                row.ran() && row.ok == 2 && row.failed == 0,
                "{object}: {row:?}"
            );
            assert_eq!(row.object_message_bytes, Some(message.parse().unwrap()));
            let size: bench_core::BulkObject = object.parse().unwrap();
            assert_eq!(row.object_bytes_moved, Some(2 * size.bytes), "{row:?}");
        }
    }
}

#[test]
fn item_cells_leave_the_bulk_columns_empty() {
    let stacks = bulk_stacks();
    let run = run_ok(&[&["--stacks", stacks[0]][..], &ONE_TINY_CELL[..]].concat());
    let cells = rows::read::<CellRow>(&run.dir().join("cells.csv"))
        .unwrap()
        .rows;
    let row = &cells[0];
    assert!(row.ok > 0);
    assert_eq!(row.object, None);
    assert_eq!(row.object_bytes_moved, None);
    assert_eq!(row.goodput_bytes_per_s, None);
    assert_eq!(row.client_cpu_s_per_gib, None);
    assert_eq!(row.server_cpu_s_per_gib, None);
}

/// The load generator's peak RSS with one connection moving 64 MiB objects against moving
/// 1 MiB ones, in the same test: the body is counted, never held, so the peak does not grow
/// with the object (a held 64 MiB body would add at least 64 MiB).
#[test]
fn load_generator_memory_stays_flat_as_the_object_grows() {
    const SLACK: u64 = 8 << 20;
    for stack in bulk_stacks() {
        let plaintext = stacks::find(stack).unwrap().supports_plaintext();
        let extra: &[&str] = if plaintext { &["--plaintext"] } else { &[] };
        let mut peaks = Vec::new();
        for object in ["download:1MiB", "download:64MiB", "upload:64MiB"] {
            let cells = run_object(
                stack,
                object,
                "3",
                &[&["--response-body-max-bytes", "67108864"][..], extra].concat(),
            );
            let row = &cells[0];
            assert!(
                row.ran() && row.ok == 3 && row.failed == 0,
                "{object}: {row:?}"
            );
            peaks.push((object, row.client_rss_peak_bytes));
        }
        let small = peaks[0].1;
        for (object, peak) in &peaks[1..] {
            assert!(
                *peak <= small + SLACK,
                "{stack}: load generator peak RSS {peak} B for {object} against {small} B for download:1MiB"
            );
        }
    }
}

#[test]
fn a_download_above_the_body_limit_is_refused_before_the_run() {
    let stacks = bulk_stacks();
    let out = tempfile::tempdir().unwrap();
    let output = runner()
        .args([
            "--stacks",
            stacks[0],
            "--object",
            "download:8MiB",
            "--response-body-max-bytes",
            "4194304",
        ])
        .args(ONE_TINY_CELL)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("object"), "{text}");
    assert!(
        text.contains("raise response_body_max_bytes to at least 8388608"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "no results folder"
    );
    // An upload is not held to the answer limit: the same size runs.
    let cells = run_object(stacks[0], "upload:8MiB", "1", &[]);
    assert_eq!(cells[0].ok, 1, "{:?}", cells[0]);
}

#[test]
fn bad_objects_and_limits_are_refused_before_the_run() {
    let without: Vec<&str> = stacks::stacks()
        .into_iter()
        .filter(|s| !s.bulk())
        .map(|s| s.name())
        .collect();
    let mut cases = vec![
        (vec!["--object", "sideways:1MiB"], "unknown direction"),
        (vec!["--object", "download:1TiB"], "unknown size unit"),
        (
            vec!["--object", "download:1MiB", "--client", "library"],
            "client = \"lean\"",
        ),
        (
            vec!["--object", "download:1MiB", "--tcp-congestion", "nosuch"],
            "'nosuch' is not in /proc/sys/net/ipv4/tcp_available_congestion_control",
        ),
        (
            vec![
                "--object",
                "download:1MiB",
                "--netem",
                "rate=10mbit,queue=1",
            ],
            "queue '1' must be 2 to 100000 packets",
        ),
        (
            vec!["--object", "download:1MiB", "--object-message-bytes", "100"],
            "must be 1024 to 1048576, got 100",
        ),
        (
            vec![
                "--object",
                "download:1MiB",
                "--object-message-bytes",
                "1048576",
                "--grpc-max-receive-message-bytes",
                "65536",
                "--stacks",
                grpc_stack(),
            ],
            "raise grpc_max_receive_message_bytes to at least 1048576",
        ),
    ];
    if let Some(stack) = without.first() {
        cases.push((
            vec!["--object", "download:1MiB", "--stacks", stack],
            "no bulk workload",
        ));
    }
    // A server nobody here wrote serves REST downloads as static files, and nginx 1.22 no
    // HTTP/3 (refused before the installed check: the same on every machine).
    let rest_over_quic = stacks::stacks()
        .into_iter()
        .find(|s| s.bulk() && s.api() == Api::Rest && s.http_version().over_quic())
        .map(|s| s.name());
    cases.extend([
        (
            vec!["--object", "upload:1MiB", "--server", "caddy"],
            "set object = \"download:<size>\"",
        ),
        (
            vec!["--server", "nginx"],
            "set object = \"download:<size>\"",
        ),
        (
            vec![
                "--object",
                "download:1MiB",
                "--server",
                "caddy",
                "--stacks",
                grpc_stack(),
            ],
            "is a gRPC API",
        ),
        (
            vec![
                "--object",
                "download:1MiB",
                "--server",
                "caddy",
                "--plaintext",
            ],
            "server = \"caddy\": it serves over TLS 1.3",
        ),
    ]);
    if let Some(h3) = rest_over_quic {
        cases.push((
            vec![
                "--object",
                "download:1MiB",
                "--server",
                "nginx",
                "--stacks",
                h3,
            ],
            "nginx 1.22 has no HTTP/3",
        ));
    }
    for (args, expected) in cases {
        let out = tempfile::tempdir().unwrap();
        let mut command = runner();
        command.args(&args);
        if !args.contains(&"--stacks") {
            command.args(["--stacks", bulk_stacks()[0]]);
        }
        let output = command
            .args(ONE_TINY_CELL)
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap();
        let text = output_text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(expected), "{args:?}: {text}");
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }
}
