//! The command line a newcomer meets: help text, flags for file keys, completions, man page.

mod common;

use common::{output_text, runner, workspace};

/// Flags in `help` (clap's long format) that have no text: a `--flag` line with nothing after
/// the flag and its value, and no description on the next line.
fn flags_without_help(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let mut bare = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let is_flag = trimmed.starts_with("--")
            || (trimmed.starts_with('-') && trimmed.get(2..4) == Some(", "));
        if !is_flag {
            continue;
        }
        // The flag and its value name end at the first run of two spaces.
        let inline = trimmed.split_once("  ").map(|(_, rest)| rest.trim());
        let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
        let described_below = !next.is_empty() && !next.starts_with('-');
        if inline.is_none_or(str::is_empty) && !described_below {
            bare.push(trimmed.to_string());
        }
    }
    bare
}

#[test]
fn every_flag_has_help_text() {
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["check", "--help"],
        &["merge", "--help"],
    ] {
        let out = runner().args(args).output().expect("runner runs");
        assert!(out.status.success(), "{args:?}: {}", output_text(&out));
        let help = String::from_utf8_lossy(&out.stdout);
        if !["serve", "merge"].contains(&args[0]) {
            assert!(help.contains("--netem <SPEC>"), "{args:?}: {help}");
        }
        let bare = flags_without_help(&help);
        assert!(
            bare.is_empty(),
            "runner {args:?}: flags without help: {bare:?}"
        );
    }
}

#[test]
fn the_help_check_catches_a_bare_flag() {
    let help =
        "Options:\n      --name <NAME>\n      --pin\n          Pin it\n  -h, --help  Print help\n";
    assert_eq!(flags_without_help(help), vec!["--name <NAME>".to_string()]);
}

#[test]
fn netem_flag_sets_the_experiment_key() {
    let smoke = workspace().join("experiments/smoke.toml");
    let out = runner()
        .args(["check"])
        .arg(&smoke)
        .args(["--netem", "rtt=fast"])
        .output()
        .expect("runner runs");
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("--netem:"),
        "the error names the flag: {}",
        output_text(&out)
    );
    let out = runner()
        .args(["check"])
        .arg(&smoke)
        .args(["--netem", "rtt=20ms,loss=1%"])
        .output()
        .expect("runner runs");
    assert!(out.status.success(), "{}", output_text(&out));
}

/// plot.py without matplotlib/pandas says what to install in one line instead of a traceback.
/// CI has the packages, so the test hides them: a module on PYTHONPATH (searched before
/// site-packages) named like each package that fails to import.
#[test]
fn plot_without_its_packages_says_what_to_install() {
    let hide = tempfile::tempdir().expect("temp dir");
    for package in ["matplotlib", "pandas"] {
        std::fs::write(
            hide.path().join(format!("{package}.py")),
            "raise ImportError('hidden by the test')\n",
        )
        .expect("write stub");
    }
    let out = std::process::Command::new("python3")
        .arg(workspace().join("scripts/plot.py"))
        .arg(workspace().join("results/reference"))
        .env("PYTHONPATH", hide.path())
        .output()
        .expect("python3 runs");
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(out.stdout.is_empty(), "{}", output_text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "plot.py needs matplotlib and pandas: pip install -r scripts/requirements.txt\n"
    );
}

#[test]
fn completions_and_man_page_print_to_stdout() {
    let out = runner()
        .args(["completions", "bash"])
        .output()
        .expect("runner runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let bash = String::from_utf8_lossy(&out.stdout);
    assert!(bash.contains("--concurrency"), "{bash}");
    for shell in ["zsh", "fish"] {
        let out = runner().args(["completions", shell]).output().unwrap();
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }

    let out = runner().arg("man").output().expect("runner runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let man = String::from_utf8_lossy(&out.stdout);
    // clap_mangen opens with two lines defining the apostrophe string (`.ie`/`.el`); the first
    // request after them is the title.
    let first_request = man
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
        .unwrap_or("");
    assert!(first_request.starts_with(".TH runner 1"), "{man}");
    assert!(man.contains("netem"), "the man page lists the run flags");
}

/// README's table of run flags and file keys lists every knob of the settings model, and no
/// key that is not one: the table is checked against the one definition.
#[test]
fn readme_lists_every_knob_and_only_knobs() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README");
    let start = readme.find("## Running experiments").expect("section");
    let mut documented = std::collections::BTreeSet::new();
    for line in readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
    {
        let line = line.replace("\\|", "/");
        let Some(keys) = line.split('|').nth(2) else {
            continue;
        };
        for part in keys.split('`').skip(1).step_by(2) {
            let key = part
                .split([' ', '='])
                .next()
                .unwrap_or("")
                .trim_matches(['[', ']']);
            if !key.is_empty() {
                documented.insert(key.to_string());
            }
        }
    }
    let knobs: std::collections::BTreeSet<String> = runner::settings::KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    let missing: Vec<_> = knobs.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&knobs).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README's table lacks {missing:?}; lists keys that are not knobs: {unknown:?}"
    );
}

/// `runner stacks --json` is how scripts (compare-anchors) learn the stacks: the registry, in
/// its order, with the fields the manifest records.
#[test]
fn stacks_json_lists_the_registry() {
    let out = runner().args(["stacks", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let listed: Vec<runner::output::StackInfo> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, runner::output::registered_stacks());
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, runner::registry::names());
}
