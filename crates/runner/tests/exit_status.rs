//! Exit statuses: README's table is `runner --help`'s (one definition, `exit::Status`), and a
//! run provokes each code. Provoked here: 0, 2 (three kinds of bad input) and 3; elsewhere:
//! 1 (results_folder.rs, a full disk; compare.rs, --fail-on-regression), 99 (thresholds.rs),
//! 130 (reliability.rs, SIGINT).

mod common;

use common::*;

/// The `CODE  MEANING` lines of `runner --help`'s exit-status table.
fn help_table() -> Vec<String> {
    let o = runner().arg("--help").output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let after = text
        .split("Exit status:")
        .nth(1)
        .unwrap_or_else(|| panic!("--help has an exit-status table: {text}"));
    after
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim_end().to_string())
        .collect()
}

#[test]
fn readme_and_help_state_the_same_exit_statuses() {
    let help = help_table();
    let codes: Vec<&str> = help
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(codes, ["0", "1", "1", "2", "3", "99", "130"], "{help:?}");
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let block: Vec<String> = readme
        .split("<!-- exit statuses: `runner --help` -->")
        .nth(1)
        .expect("README marks its exit-status table")
        .split("```text\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap()
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    assert_eq!(block, help, "README's table is --help's");
}

fn status_of(args: &[&str]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let o = runner()
        .args(args)
        .arg("--out")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let made = tmp.path().join("results").exists()
        && std::fs::read_dir(tmp.path().join("results"))
            .unwrap()
            .next()
            .is_some();
    let text = output_text(&o);
    if o.status.code() == Some(2) {
        assert!(!made, "bad input leaves no results folder: {text}");
    }
    (o.status.code(), text)
}

#[test]
fn bad_input_exits_2_with_one_line_and_check_refuses_it_too() {
    let long = "n".repeat(300);
    let (code, text) = status_of(&["--name", &long, "--stacks", "h1", "--requests", "20"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--name") && text.contains("200"), "{text}");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(&file, format!("name = \"{long}\"\n")).unwrap();
    let o = runner().arg("check").arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    // `check` writes nothing, certificates included; a run whose certificate directory
    // cannot be made is bad input, before any results folder.
    std::fs::write(&file, "name = \"ok\"\nstacks = [\"h1\"]\n").unwrap();
    let fresh = tmp.path().join("fresh-certs");
    let o = runner()
        .arg("check")
        .arg(&file)
        .arg("--certs")
        .arg(&fresh)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(!fresh.exists(), "check made no certificate directory");
    let (code, text) = status_of(&[
        "--stacks",
        "h1",
        "--requests",
        "20",
        "--certs",
        "/dev/null/x",
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--certs /dev/null/x"), "{text}");
    // Not root: the hosts executor (namespaces) is refused before anything runs.
    if !nix::unistd::geteuid().is_root() {
        let (code, text) = status_of(&["--executor", "hosts", "--stacks", "h1"]);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("root"), "{text}");
    }
}

#[test]
fn a_run_done_exits_0_and_one_stopped_with_nothing_measurable_exits_3() {
    let (code, text) = status_of(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
    assert_eq!(code, Some(0), "{text}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("https://127.0.0.1:{closed}/x");
    let (code, text) = status_of(&["--url", &url, "--stacks", "h1", "--requests", "200"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("error: stopped at"), "{text}");
}
