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

/// The guide's page whose table lists every run flag and file key.
const KNOBS_PAGE: &str = "docs/running.md";

/// The guide's table of run flags and file keys (`docs/running.md`, "Knobs") lists every knob
/// of the settings model, and no key that is not one: the table is checked against the one
/// definition.
#[test]
fn the_guide_lists_every_knob_and_only_knobs() {
    let page = std::fs::read_to_string(workspace().join(KNOBS_PAGE)).expect(KNOBS_PAGE);
    let start = page
        .find("\n## Knobs\n")
        .expect("the page has a Knobs section");
    let mut documented = std::collections::BTreeSet::new();
    for line in page[start..]
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
    let knobs: std::collections::BTreeSet<String> = experiment::settings::KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    let missing: Vec<_> = knobs.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&knobs).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "{KNOBS_PAGE}'s knob table lacks {missing:?}; lists keys that are not knobs: {unknown:?}"
    );
}

/// README.md and every page under `docs/`: the Markdown files whose links are checked.
fn documentation_pages() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, pages: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/ is readable") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                walk(&path, pages);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let mut pages = vec![workspace().join("README.md")];
    walk(&workspace().join("docs"), &mut pages);
    pages.sort();
    pages
}

/// A page's text outside fenced code blocks, line by line (code blocks hold shell comments
/// that look like headings and brackets that look like links).
fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_fence = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            lines.push(line);
        }
    }
    lines
}

/// `line` with its inline code spans removed: a `[x](y)` inside backticks is not a link.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The targets of the inline links `[text](target)` in a page's prose.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            targets.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// GitHub's anchor for a heading: lower case, inline code and link syntax dropped, every
/// character that is not a letter, digit, `-`, `_` or space removed, spaces made `-`.
fn github_slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link's text stays, its target goes.
    while let Some(open) = rest.find("](") {
        text.push_str(&rest[..open]);
        rest = rest[open + 2..].split_once(')').map_or("", |(_, r)| r);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings, GitHub-style: a repeated slug gets `-1`, `-2`, …
fn heading_anchors(text: &str) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut anchors = std::collections::BTreeSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug = github_slug(line[hashes..].trim());
        let count = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    anchors
}

#[test]
fn github_slugs_are_computed_as_github_does() {
    assert_eq!(github_slug("What one cell does"), "what-one-cell-does");
    assert_eq!(
        github_slug("Client implementations (`--client lean|library`)"),
        "client-implementations---client-leanlibrary"
    );
    assert_eq!(
        github_slug("Where QUIC's cost goes: instructions per request"),
        "where-quics-cost-goes-instructions-per-request"
    );
    assert_eq!(
        github_slug("C2: HTTP/1.1 and gRPC collapse at 200 workers"),
        "c2-http11-and-grpc-collapse-at-200-workers"
    );
    assert_eq!(github_slug("`cells.csv`"), "cellscsv");
    let anchors = heading_anchors("# A\n```sh\n# not a heading\n```\n## A\n#nope\n");
    assert_eq!(
        anchors.into_iter().collect::<Vec<_>>(),
        ["a", "a-1"],
        "code blocks hold no headings; a repeated heading is numbered"
    );
}

/// Every relative link in README.md and the guide under `docs/` leads to a file or folder
/// that exists, and every `#anchor` into a Markdown page to one of its headings: moving or
/// renaming a page or a heading shows up here.
#[test]
fn every_relative_link_in_readme_and_the_guide_resolves() {
    let pages = documentation_pages();
    assert!(
        pages.len() >= 5,
        "README.md and the guide's pages under docs/: {pages:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a readable page");
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a page's folder").join(path)
            };
            let shown = page.strip_prefix(workspace()).unwrap_or(page).display();
            if !file.exists() {
                broken.push(format!("{shown}: ({target}): no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if file.extension().is_some_and(|e| e == "md") {
                let linked = std::fs::read_to_string(&file).expect("a readable page");
                if !heading_anchors(&linked).contains(anchor) {
                    broken.push(format!("{shown}: ({target}): no heading with that anchor"));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `runner stacks --json` is how scripts (compare-anchors) learn the stacks: the registry, in
/// its order, with the fields the manifest records.
#[test]
fn stacks_json_lists_the_registry() {
    let out = runner().args(["stacks", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let listed: Vec<results::manifest::StackInfo> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, runner::output::registered_stacks());
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, stacks::names());
}
