//! scripts/reproduce-paper's plan (`--dry-run`, nothing is run): N sessions, each the
//! reference and every claim into its own folder labelled with its index, and a bad count
//! refused with status 2.

use std::process::Command;

use crate::common::*;

fn script(args: &[&str]) -> std::process::Output {
    Command::new(workspace().join("scripts/reproduce-paper"))
        .args(args)
        .output()
        .expect("the script runs")
}

#[test]
fn the_plan_has_one_folder_per_session_with_the_reference_and_every_claim() {
    let output = script(&["--dry-run", "--allow-dirty", "--sessions", "2"]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let claims = std::fs::read_dir(workspace().join("experiments/claims"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("toml".as_ref()))
        .count();
    // The sessions already committed at this commit are continued: count from the first
    // index the plan names.
    let first: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("session "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("no session in the plan: {text}"));
    for k in [first, first + 1] {
        assert!(
            text.contains(&format!("session {k} → results/sessions/s{k}:")),
            "{text}"
        );
    }
    assert!(!text.contains(&format!("session {}", first + 2)), "{text}");
    assert_eq!(
        text.matches("--name reference").count(),
        2,
        "one reference per session: {text}"
    );
    assert_eq!(
        text.matches("runner --experiment experiments/claims/")
            .count(),
        2 * claims,
        "every claim in every session: {text}"
    );
    assert!(text.contains("for 2 session(s)"), "{text}");
}

#[test]
fn a_session_count_that_is_not_a_positive_integer_is_refused() {
    for bad in ["0", "x", "-1"] {
        let output = script(&["--dry-run", "--sessions", bad]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{bad}: {}",
            output_text(&output)
        );
        assert!(
            output_text(&output).contains("--sessions must be a positive integer"),
            "{bad}"
        );
    }
}
