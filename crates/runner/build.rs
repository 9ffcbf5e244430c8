//! Records the compiler version and the source commit for the run manifest. The commit is
//! built in, so a binary's results name the code it was built from, not whatever checkout
//! it happens to run next to: `git rev-parse HEAD`, with `-dirty` when tracked files differ
//! from it; `TBENCH_GIT_COMMIT` stands in where there is no repository (a container build
//! from a copy without `.git`); "unknown" otherwise.

use std::path::Path;
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RUNNER_RUSTC_VERSION={version}");
    println!("cargo:rustc-env=RUNNER_GIT_COMMIT={}", commit());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TBENCH_GIT_COMMIT");
}

/// The output of `git args` in this crate's directory, trimmed; `None` when git fails.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn commit() -> String {
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return std::env::var("TBENCH_GIT_COMMIT").unwrap_or_else(|_| "unknown".into());
    };
    watch_checkout();
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head}-dirty"),
        _ => head,
    }
}

/// Reruns this script when the commit or the tracked tree may have changed: HEAD, the branch
/// it names, packed refs, the index, and every tracked file (an edit makes the tree dirty
/// without touching the index).
fn watch_checkout() {
    let mut paths = vec!["HEAD".to_string(), "index".into(), "packed-refs".into()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.push(branch);
    }
    for p in paths {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &p]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let (Some(top), Some(files)) = (
        git(&["rev-parse", "--show-toplevel"]),
        git(&["ls-files", "-z"]),
    ) else {
        return;
    };
    for file in files.split('\0').filter(|f| !f.is_empty()) {
        let path = Path::new(&top).join(file);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
