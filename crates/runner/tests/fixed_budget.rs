//! A cell is a fixed budget of attempts (issue 46, "a fixed denominator"): its attempts
//! (`sent`) are exactly the budget, or a whole number of budgets when `min_cell_seconds` makes
//! it run the whole budget again (`budget_repeats`), never a part of one, whether its attempts
//! fail at once or succeed; the claim experiments run the analysis plan's budgets, unrepeated.

use std::collections::HashMap;

mod common;

use common::*;

/// A loopback port nothing listens on (TCP or UDP): bound, then released.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

/// One new-conn cell of `stack`: 4 workers, a budget of 12 attempts, no warm-up, every
/// timeout 0.3 s, measured however its attempts fail; `extra` adds flags.
fn cell(stack: &str, extra: &[&str]) -> HashMap<String, String> {
    let args = [
        &[
            "--stacks",
            stack,
            "--regime",
            "new-conn",
            "--concurrency",
            "4",
            "--requests",
            "12",
            "--timeout",
            "0.3",
            "--keep-going",
        ][..],
        &NO_WARMUP_ONE_REPETITION[..],
        extra,
    ]
    .concat();
    let mut rows = run_ok(&args).cells();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.pop().unwrap()
}

fn count(row: &HashMap<String, String>, key: &str) -> u64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?}: {row:?}", row[key]))
}

/// The attempts are the budget × `budget_repeats`, and each is an ok or a failure.
fn whole_budgets(row: &HashMap<String, String>) -> u64 {
    assert_eq!(row["cut_short"], "false", "{row:?}");
    assert_eq!(count(row, "requests"), 12, "{row:?}");
    let repeats = count(row, "budget_repeats");
    assert_eq!(count(row, "sent"), 12 * repeats, "{row:?}");
    assert_eq!(
        count(row, "ok") + count(row, "failed"),
        count(row, "sent"),
        "{row:?}"
    );
    assert_eq!(row["extended"], (repeats > 1).to_string(), "{row:?}");
    repeats
}

/// Against a closed port every attempt fails (refused at once over TCP; over QUIC no answer
/// comes, so the handshake times out): the cell makes exactly its 12 attempts, each one
/// failed, none established, on both transports alike; with a minimum duration the instant
/// failures repeat the whole budget, never a part of it.
#[test]
fn a_closed_port_costs_exactly_the_budget_on_every_transport() {
    let target = closed_port();
    for stack in ["h1", "h3"] {
        let row = cell(stack, &["--target", &target]);
        assert_eq!(whole_budgets(&row), 1, "{stack}: {row:?}");
        assert_eq!(count(&row, "failed"), 12, "{stack}: {row:?}");
        assert_eq!(
            count(&row, "connections_established"),
            0,
            "{stack}: {row:?}"
        );
    }
    let row = cell("h1", &["--target", &target, "--min-cell-seconds", "0.5"]);
    assert!(whole_budgets(&row) > 1, "{row:?}");
    assert_eq!(count(&row, "failed"), count(&row, "sent"), "{row:?}");
    assert!(num(&row, "elapsed_s") >= 0.5, "{row:?}");
}

/// Against a working server the same budget is the same number of attempts, each with its
/// own established connection; a minimum duration repeats the whole budget.
#[test]
fn a_working_server_gets_exactly_the_budget_or_whole_repeats_of_it() {
    for stack in ["h1", "h3"] {
        let row = cell(stack, &[]);
        assert_eq!(whole_budgets(&row), 1, "{stack}: {row:?}");
        assert_eq!(count(&row, "ok"), 12, "{stack}: {row:?}");
        assert_eq!(
            count(&row, "connections_established"),
            12,
            "{stack}: {row:?}"
        );
        let row = cell(stack, &["--min-cell-seconds", "0.3"]);
        let repeats = whole_budgets(&row);
        assert!(repeats > 1, "{stack}: {row:?}");
        assert_eq!(count(&row, "ok"), 12 * repeats, "{stack}: {row:?}");
        assert!(num(&row, "elapsed_s") >= 0.3, "{stack}: {row:?}");
    }
}

/// Every claim experiment runs the analysis plan's budget per regime (its attempts per cell),
/// in its file and every variant, and never stretches or repeats a cell (`min_cell_seconds`
/// absent or 0). Time-bound experiments (the soak) have no budget to hold.
#[test]
fn the_claim_experiments_run_the_plans_budgets_unstretched() {
    let root = workspace();
    let plan: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("experiments/study/plan.toml")).unwrap())
            .unwrap();
    let budget = |regime: &str| plan["budgets"]["attempts"][regime].as_integer().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("experiments/claims")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension() != Some("toml".as_ref()) {
            continue;
        }
        let exp: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if exp.get("duration_seconds").is_some() {
            continue;
        }
        let variants = exp
            .get("variants")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        for table in std::iter::once(&exp).chain(variants.iter()) {
            let name = table.get("name").and_then(|n| n.as_str()).unwrap_or("?");
            let min = table
                .get("min_cell_seconds")
                .map(|v| v.as_float().or(v.as_integer().map(|i| i as f64)).unwrap());
            assert!(
                min.unwrap_or(0.0) == 0.0,
                "{path:?} ({name}): min_cell_seconds = {min:?} stretches or repeats a claim cell"
            );
            for (key, regime) in [
                ("requests_new_conn", "new-conn"),
                ("requests_reuse", "reuse"),
            ] {
                if let Some(n) = table.get(key) {
                    assert_eq!(
                        n.as_integer(),
                        Some(budget(regime)),
                        "{path:?} ({name}): {key} is not the plan's budget"
                    );
                }
            }
        }
        let regimes: Vec<&str> = exp["regimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        for regime in regimes {
            let key = format!("requests_{}", regime.replace('-', "_"));
            assert!(
                exp.get(&key).is_some(),
                "{path:?}: {key} is not set, so the cell is not the plan's budget"
            );
        }
        checked += 1;
    }
    assert!(checked >= 6, "{checked} claim experiments checked");
}
