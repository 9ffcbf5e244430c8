//! scripts/reproduce-paper's plan (`--dry-run`, nothing is run): N sessions, each the
//! reference and every claim into its own folder labelled with its index, and a bad count
//! refused with status 2.

use std::process::Command;

mod common;

use common::*;

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

/// The soak claim (`experiments/claims/soak-quic-rss.toml`) at test size: its file runs as
/// committed but for two seconds and four workers, is time-bound (not a request budget) and
/// samples both processes' RSS once a second for the paper's per-minute reading.
#[test]
fn the_soak_claim_runs_time_bound_and_samples_rss_every_second() {
    let out = tempfile::tempdir().unwrap();
    let run = runner()
        .arg("--experiment")
        .arg(workspace().join("experiments/claims/soak-quic-rss.toml"))
        .args(["--duration", "2s", "--concurrency", "4", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", output_text(&run));
    let dir = results_dir(out.path());
    let cells = read_csv(&dir.join("cells.csv"));
    let stress: Vec<_> = cells.iter().filter(|c| c["stage"] == "stress").collect();
    assert_eq!(stress.len(), 1, "{cells:?}");
    assert_eq!(stress[0]["stack"], "h3");
    assert_eq!(stress[0]["duration_s"], "2");
    assert!(num(stress[0], "elapsed_s") >= 2.0, "{:?}", stress[0]);
    assert!(num(stress[0], "ok") > 0.0 && stress[0]["failed"] == "0");
    let samples = read_csv(&dir.join("resources.csv"));
    for role in ["server", "client"] {
        let times: Vec<f64> = samples
            .iter()
            .filter(|s| s["role"] == role && s["cell_key"] == stress[0]["cell_key"])
            .map(|s| num(s, "t_s"))
            .collect();
        assert!(times.len() >= 2, "{role}: {samples:?}");
        // The sampling interval the file sets (1 s), not the default 100 ms; the last sample
        // is the boundary reading taken when the phase ends, whenever that is.
        let periodic = &times[..times.len() - 1];
        assert!(
            periodic.windows(2).all(|w| w[1] - w[0] > 0.5),
            "{role}: {times:?}"
        );
    }
}

/// `git` in `dir`, which must succeed; its standard output.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}: {}", output_text(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Sessions stored by a later commit that adds only results are continued at their own
/// commit (from a checkout of it), not refused as "another commit"; once the code changes,
/// they are refused. A clone of this checkout with the script under test committed in it
/// stands in for the repository.
#[test]
fn sessions_of_an_earlier_commit_with_the_same_code_are_continued_there() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--shared",
            workspace().to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
    );
    let identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"];
    let commit = |message: &str| {
        git(&repo, &["add", "-A", "."]);
        let mut args = identity.to_vec();
        args.extend(["commit", "--quiet", "--allow-empty", "-m", message]);
        git(&repo, &args);
        git(&repo, &["rev-parse", "HEAD"])
    };
    std::fs::copy(
        workspace().join("scripts/reproduce-paper"),
        repo.join("scripts/reproduce-paper"),
    )
    .unwrap();
    let sessions = repo.join("results/sessions");
    let _ = std::fs::remove_dir_all(&sessions);
    let code = commit("the code of the sessions");
    std::fs::create_dir_all(sessions.join("s1/reference")).unwrap();
    std::fs::write(
        sessions.join("s1/reference/manifest.json"),
        format!("{{\"git_commit\": \"{code}\"}}"),
    )
    .unwrap();
    commit("results: session 1");

    let plan = |repo: &std::path::Path| {
        let o = Command::new(repo.join("scripts/reproduce-paper"))
            .args(["--dry-run", "--sessions", "1"])
            .current_dir(repo)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", output_text(&o));
        output_text(&o)
    };
    let text = plan(&repo);
    assert!(text.contains(&format!("at commit {code}")), "{text}");
    assert!(text.contains("session 2 → results/sessions/s2:"), "{text}");
    assert!(
        text.contains(&format!(
            "git worktree add --detach results/.checkout-{}",
            &code[..9]
        )),
        "{text}"
    );
    assert!(!text.contains("would refuse"), "{text}");

    // Other code: the sessions are another commit's.
    std::fs::write(repo.join("crates/runner/src/changed.txt"), "other code").unwrap();
    let other = commit("other code");
    let text = plan(&repo);
    assert!(text.contains(&format!("at commit {other}")), "{text}");
    assert!(text.contains("would refuse"), "{text}");
    assert!(text.contains("session 1 → results/sessions/s1:"), "{text}");
}

/// `--quick` plans one reduced session from the plan's `[budgets.quick]`: every claim at those
/// budgets into results/quick/, a one-repetition reference, and a paper marked quick; the
/// soak runs one minute.
#[test]
fn quick_plans_every_claim_at_the_plans_quick_budgets() {
    let output = script(&["--quick", "--dry-run", "--allow-dirty"]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let plan: toml::Table =
        std::fs::read_to_string(workspace().join("experiments/study/plan.toml"))
            .unwrap()
            .parse()
            .unwrap();
    let quick = &plan["budgets"]["quick"];
    let (n, r) = (
        quick["new-conn"].as_integer().unwrap(),
        quick["reuse"].as_integer().unwrap(),
    );
    let claims = std::fs::read_dir(workspace().join("experiments/claims"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("toml".as_ref()))
        .count();
    let budgets = format!("--requests-new-conn {n} --requests-reuse {r}");
    assert_eq!(
        text.matches(&format!("--no-thresholds-exit {budgets}"))
            .count(),
        claims,
        "{text}"
    );
    assert!(text.contains("--repetitions 1"), "{text}");
    assert!(text.contains("--duration 60"), "{text}");
    assert!(text.contains("study paper --quick"), "{text}");
    assert!(text.contains("expected duration: about"), "{text}");
    assert!(!text.contains("results/sessions/s"), "{text}");
}
