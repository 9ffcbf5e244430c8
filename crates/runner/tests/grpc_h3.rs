//! The gRPC-over-HTTP/3 stack through the runner: the smoke sweep with `--stacks grpc-h3`
//! runs both regimes, every request validated, and the report and plot.py draw it in the
//! style of its registry position (the fifth: colour, dash and marker), not one of the other
//! four stacks', in every chart; thresholds and `runner compare` judge its cells; the
//! Kubernetes executor renders its cells with the server's UDP port. (The hosts executor runs
//! it in tests/hosts.rs, `[targets.grpc]` over HTTP/3 is tests/grpc_h3_targets.rs.)

mod common;

use common::*;
use results::rows::{self, CellRow};

#[test]
fn grpc_h3_runs_both_regimes_validated_and_has_the_fifth_style() {
    let smoke = workspace().join("experiments/smoke.toml");
    let run = run_ok(&[
        "--experiment",
        smoke.to_str().unwrap(),
        "--stacks",
        "grpc-h3",
    ]);
    let dir = run.dir();
    let cells = rows::read::<CellRow>(&dir.join("cells.csv")).unwrap().rows;
    let mut regimes: Vec<&str> = cells.iter().map(|r| r.regime.as_str()).collect();
    regimes.sort();
    regimes.dedup();
    assert_eq!(regimes, ["new-conn", "reuse"]);
    for row in &cells {
        assert_eq!(row.stack, "grpc-h3");
        assert!(row.ran() && row.ok > 0, "{row:?}");
        assert_eq!(row.failed, 0, "every call validated: {row:?}");
        assert_eq!(row.ok, row.sent, "{row:?}");
        assert_eq!(row.client.as_deref(), Some("lean"), "{row:?}");
    }

    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let names: Vec<&str> = manifest["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let position = names.iter().position(|n| *n == "grpc-h3");
    assert_eq!(
        position,
        Some(4),
        "registered after the four stacks: {names:?}"
    );

    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("gRPC/HTTP/3"),
        "the registry's label is shown"
    );
    let fifth = report::chart::style(4);
    assert!(html.contains(&format!("stroke=\"{}\"", fifth.colour)));
    assert!(html.contains(&format!("stroke-dasharray=\"{}\"", fifth.dash)));
    for other in 0..4 {
        let style = report::chart::style(other);
        assert_ne!(style.colour, fifth.colour);
        assert_ne!(style.dash, fifth.dash);
        assert_ne!(style.marker, fifth.marker, "a marker of its own");
        assert!(
            !html.contains(&format!("stroke=\"{}\"", style.colour)),
            "no other stack's colour is drawn for grpc-h3 alone"
        );
    }
    // Every chart that draws series draws grpc-h3's in the fifth colour and dash.
    let charts: Vec<&str> = html
        .split("<svg")
        .skip(1)
        .filter(|svg| svg.contains("<polyline"))
        .collect();
    assert!(
        charts.len() >= 3,
        "the report's line charts: {}",
        charts.len()
    );
    let line = format!(
        "stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"{}\"",
        fifth.colour, fifth.dash
    );
    for chart in &charts {
        let title = chart
            .split("<title>")
            .nth(1)
            .and_then(|t| t.split('<').next());
        assert!(
            chart.contains(&line),
            "chart {title:?} lacks the fifth style"
        );
    }

    // plot.py: matplotlib's C4 (registry position 4) in every figure of the stacks, and
    // none of C0 to C3.
    let figures = tempfile::tempdir().unwrap();
    let plot = std::process::Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(&dir)
        .arg("--out")
        .arg(figures.path())
        .output()
        .unwrap();
    assert!(plot.status.success(), "{}", output_text(&plot));
    let others = [
        [0x1f, 0x77, 0xb4],
        [0xff, 0x7f, 0x0e],
        [0x2c, 0xa0, 0x2c],
        [0xd6, 0x27, 0x28],
    ];
    for figure in [
        "throughput",
        "latency_p95",
        "success_rate",
        "server_resources",
        "latency_cdf",
    ] {
        let png = figures.path().join(format!("{figure}.png"));
        assert!(has_colour(&png, [0x94, 0x67, 0xbd]), "C4 in {figure}");
        for rgb in others {
            assert!(
                !has_colour(&png, rgb),
                "{figure}: no other stack's colour {rgb:?}"
            );
        }
    }
}

/// A tiny grpc-h3 run: reuse at c = 2, three repetitions of 60 calls, no baseline.
const TINY: [&str; 12] = [
    "--stacks",
    "grpc-h3",
    "--regime",
    "reuse",
    "--concurrency",
    "2",
    "--requests",
    "60",
    "--repetitions",
    "3",
    "--baseline-seconds",
    "0",
];

#[test]
fn thresholds_and_compare_judge_grpc_h3_cells() {
    let base = run_ok(&TINY);
    // Thresholds that name grpc-h3: one met, one that no run can meet (exit 99).
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(
        &file,
        "name = \"grpc-h3-thresholds\"\n[[thresholds]]\nname = \"ok\"\nstacks = [\"grpc-h3\"]\nsuccess_rate = { min = 0.99 }\n[[thresholds]]\nname = \"impossible\"\nstacks = [\"grpc-h3\"]\nthroughput_rps = { min = 1e12 }\n",
    )
    .unwrap();
    let out = tmp.path().join("results");
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .args(TINY)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(99), "{text}");
    let new = results_dir(&out);
    let rows = read_csv(&new.join("thresholds.csv"));
    assert!(!rows.is_empty());
    for row in &rows {
        assert!(row["cell_key"].starts_with("grpc-h3/reuse/c2/"), "{row:?}");
        let expected = if row["threshold"] == "ok" {
            "true"
        } else {
            "false"
        };
        assert_eq!(row["pass"], expected, "{row:?}");
    }
    // compare: the stack's cells are paired and judged, its bars in the fifth colour.
    let compared = tmp.path().join("compared");
    let compare = runner()
        .arg("compare")
        .arg(base.dir())
        .arg(&new)
        .arg("--out")
        .arg(&compared)
        .output()
        .unwrap();
    let text = output_text(&compare);
    assert!(compare.status.success(), "{text}");
    assert!(text.contains("grpc-h3 reuse c2"), "{text}");
    let html = std::fs::read_to_string(compared.join("compare.html")).unwrap();
    let fifth = report::chart::style(4);
    assert!(
        html.contains(&format!("fill=\"{}\"", fifth.colour)),
        "{html}"
    );
    for other in 0..4 {
        let colour = report::chart::style(other).colour;
        assert!(!html.contains(colour), "no other stack's colour {colour}");
    }
}

#[test]
fn kubernetes_renders_grpc_h3_cells_with_the_udp_port() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("k8s.toml");
    std::fs::write(
        &file,
        "name = \"grpc-h3-k8s\"\nstacks = [\"grpc-h3\"]\nregimes = [\"reuse\", \"new-conn\"]\nconcurrency = [10]\nbaseline_seconds = 0\nk8s_image = \"registry.example/tbench/runner:1\"\nk8s_namespace = \"bench-ns\"\n",
    )
    .unwrap();
    let out = runner()
        .args(["k8s", "render"])
        .arg(&file)
        .env(
            executors::agent::TOKEN_ENV,
            "k8s-test-token-0123456789abcdef",
        )
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(grpc-h3/reuse/c10/r1)"), "{stderr}");
    let stream = String::from_utf8_lossy(&out.stdout);
    // The server pod's port and its Service's: HTTP/3 is on UDP.
    assert_eq!(
        stream.matches("protocol: \"UDP\"").count(),
        2,
        "the server's HTTP/3 port is UDP: {stream}"
    );
}
