//! The gRPC-over-HTTP/3 stack through the runner: the smoke sweep with `--stacks grpc-h3`
//! runs both regimes, every request validated, and the report draws it in the style of its
//! registry position (the fifth), not one of the other four stacks'.

use crate::common::*;
use runner::output::rows::{self, CellRow};

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
    let fifth = runner::report::chart::style(4);
    assert!(html.contains(&format!("stroke=\"{}\"", fifth.colour)));
    assert!(html.contains(&format!("stroke-dasharray=\"{}\"", fifth.dash)));
    for other in 0..4 {
        let style = runner::report::chart::style(other);
        assert_ne!(style.colour, fifth.colour);
        assert!(
            !html.contains(&format!("stroke=\"{}\"", style.colour)),
            "no other stack's colour is drawn for grpc-h3 alone"
        );
    }
}
