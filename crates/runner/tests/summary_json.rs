//! `summary.json`: a real run's summary, named on stdout, holds every row of `cells.csv` (numbers
//! as numbers), the thresholds' outcomes and the verdict, and matches the committed JSON Schema
//! (`docs/summary.schema.json`).

mod common;

use common::*;
use results::rows::{CellRow, Row};

#[test]
fn a_run_writes_a_summary_json_that_matches_its_schema_and_its_csvs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    // One check that passes and one that cannot: the verdict is "fail", exit 99.
    std::fs::write(
        &file,
        "name = \"summary\"\n[[thresholds]]\nname = \"works\"\nsuccess_rate = { min = 0.5 }\n\
         [[thresholds]]\nname = \"impossible\"\nlatency_p50_us = { max = 0.5 }\n",
    )
    .unwrap();
    let out = tmp.path().join("results");
    let o = runner()
        .arg("--experiment")
        .arg(&file)
        .args(["--stacks", "h1,h2"])
        .args(ONE_TINY_CELL)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.path().join("certs"))
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(99), "{text}");
    let dir = results_dir(&out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let named: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("summary: "))
        .collect();
    let path = dir.join("summary.json");
    assert_eq!(named, [path.to_str().unwrap()], "{text}");

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    valid_against_summary_schema(&path);

    // Every row of cells.csv, with every column; numbers equal to the CSV's.
    let rows = read_csv(&dir.join("cells.csv"));
    let cells = summary["cells"].as_array().unwrap();
    assert_eq!(cells.len(), rows.len());
    assert_eq!(rows.len(), 2);
    for (cell, row) in cells.iter().zip(&rows) {
        let cell = cell.as_object().unwrap();
        assert_eq!(cell.len(), CellRow::COLUMNS.len());
        assert_eq!(cell["cell_key"].as_str(), Some(row["cell_key"].as_str()));
        for column in ["latency_p99_us", "sent", "throughput_rps", "success_rate"] {
            assert!(cell[column].is_number(), "{column}: {:?}", cell[column]);
            assert_eq!(cell[column].as_f64().unwrap(), num(row, column), "{column}");
        }
        assert!(cell["plaintext"].is_boolean());
        assert!(cell["error"].is_null());
        assert!(CellRow::numeric("rate_rps") == Some(true) && cell["rate_rps"].is_null());
    }

    // The thresholds' outcomes are thresholds.csv's; one failed, so the verdict is fail.
    let checks = summary["thresholds"].as_array().unwrap();
    let csv = read_csv(&dir.join("thresholds.csv"));
    assert_eq!(checks.len(), csv.len());
    assert_eq!(checks.len(), 4, "two thresholds × two cells");
    let failed = checks.iter().filter(|c| c["pass"] == false).count();
    assert_eq!(failed, 2, "{summary:#}");
    let verdict = &summary["verdict"];
    assert_eq!(verdict["result"], "fail");
    assert_eq!(verdict["thresholds_failed"], 2);
    assert_eq!(verdict["cells"], 2);
    assert_eq!(verdict["complete"], true);
    assert_eq!(summary["status"], "completed");
    assert!(summary.get("capacity").is_none());
}
