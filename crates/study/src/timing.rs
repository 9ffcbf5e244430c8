//! Plan before data, from git: whether a data commit contains the analysis plan (the plan's
//! first commit is an ancestor of the data commit, or is it) and whether the plan changed after
//! the data (a commit touching it that the data commit does not contain). Any sentence about
//! timing ("stated before the sessions ran") is computed here, never written by hand.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

/// What git says about a plan file and a data commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTiming {
    /// The data commit, resolved to its full hash.
    pub data_commit: String,
    /// The first commit that added the plan file (in HEAD's history); `None`: never committed.
    pub plan_first_commit: Option<String>,
    /// The plan's first commit is an ancestor of the data commit, or is it.
    pub data_contains_plan: bool,
    /// The last commit that changed the plan file and that the data commit contains (the plan
    /// the data were judged by, as it stood when they were measured); `None` when it has none.
    pub last_before_data: Option<String>,
    /// Commits that changed the plan file and that the data commit does not contain, oldest
    /// first: the plan changed after the data.
    pub changed_after_data: Vec<String>,
}

impl PlanTiming {
    /// The plan was committed with or before the data and not changed since.
    pub fn before_data(&self) -> bool {
        self.data_contains_plan && self.changed_after_data.is_empty()
    }

    /// One sentence for the paper, naming the commits.
    pub fn sentence(&self, plan: &str) -> String {
        let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
        let data = short(&self.data_commit);
        // The plan as the data found it, where a later commit than its first made it so.
        let last = match (&self.plan_first_commit, &self.last_before_data) {
            (Some(first), Some(last)) if first != last => {
                format!(", last changed before the data in `{}`", short(last))
            }
            _ => String::new(),
        };
        match (&self.plan_first_commit, self.data_contains_plan) {
            (None, _) => format!("`{plan}` is not committed: no verdict rests on a plan stated before the data (data commit `{data}`)."),
            (Some(first), false) => format!(
                "`{plan}` was first committed in `{}`, which data commit `{data}` does not contain: the plan came after the data, and every verdict from it is marked so.",
                short(first)
            ),
            (Some(first), true) if self.changed_after_data.is_empty() => format!(
                "`{plan}` was committed in `{}`{last}, contained in data commit `{data}`, and has not changed since.",
                short(first)
            ),
            (Some(first), true) => format!(
                "`{plan}` was committed in `{}`{last}, contained in data commit `{data}`, and changed after the data in {}.",
                short(first),
                self.changed_after_data
                    .iter()
                    .map(|c| format!("`{}`", short(c)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

fn git(repo: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .context("cannot run git")
}

fn lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// See [`PlanTiming`]. `plan` is the plan file's path relative to the repository's top level;
/// history is HEAD's. An error when the data commit is not a commit of the repository.
pub fn plan_timing(repo: &Path, plan: &str, data_commit: &str) -> anyhow::Result<PlanTiming> {
    let spec = format!("{data_commit}^{{commit}}");
    let resolved = git(repo, &["rev-parse", "--verify", "--quiet", &spec])?;
    if !resolved.status.success() {
        bail!(
            "{}: data commit `{data_commit}` is not a commit of this repository",
            repo.display()
        );
    }
    let data = lines(&resolved).into_iter().next().unwrap_or_default();
    let path = format!(":/{plan}");
    let history = git(
        repo,
        &["log", "--format=%H", "--reverse", "HEAD", "--", &path],
    )?;
    if !history.status.success() {
        bail!(
            "git log failed: {}",
            String::from_utf8_lossy(&history.stderr)
        );
    }
    let first = lines(&history).into_iter().next();
    let data_contains_plan = match &first {
        Some(first) => git(repo, &["merge-base", "--is-ancestor", first, &data])?
            .status
            .success(),
        None => false,
    };
    let before = git(repo, &["log", "-1", "--format=%H", &data, "--", &path])?;
    let range = format!("{data}..HEAD");
    let after = git(
        repo,
        &["log", "--format=%H", "--reverse", &range, "--", &path],
    )?;
    Ok(PlanTiming {
        data_commit: data,
        plan_first_commit: first,
        data_contains_plan,
        last_before_data: lines(&before).into_iter().next(),
        changed_after_data: lines(&after),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fabricated history: code, then the plan, then the data, then the plan changed.
    struct Repo {
        dir: tempfile::TempDir,
    }

    impl Repo {
        fn new() -> Repo {
            let r = Repo {
                dir: tempfile::tempdir().unwrap(),
            };
            r.git(&["init", "-q", "-b", "main"]);
            r
        }
        fn git(&self, args: &[&str]) -> String {
            let out = Command::new("git")
                .arg("-C")
                .arg(self.dir.path())
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
        fn commit(&self, file: &str, text: &str) -> String {
            let path = self.dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self.git(&["add", "-A"]);
            self.git(&["commit", "-q", "-m", file]);
            self.git(&["rev-parse", "HEAD"])
        }
    }

    const PLAN: &str = "experiments/study/plan.toml";

    #[test]
    fn a_plan_before_the_data_and_one_changed_after_it_on_a_fabricated_history() {
        let r = Repo::new();
        let code = r.commit("crates/a.rs", "fn a() {}");
        let plan = r.commit(PLAN, "rule = 1");
        let data = r.commit("results/s1/cells.csv", "x");
        let t = plan_timing(r.dir.path(), PLAN, &data).unwrap();
        assert_eq!(t.plan_first_commit.as_deref(), Some(plan.as_str()));
        assert_eq!(t.last_before_data.as_deref(), Some(plan.as_str()));
        assert!(t.data_contains_plan && t.before_data(), "{t:?}");
        let s = t.sentence(PLAN);
        assert!(
            s.contains("has not changed since") && !s.contains("last changed"),
            "{s}"
        );

        // The data commit may be the plan's own commit (ancestor-or-equal).
        let same = plan_timing(r.dir.path(), PLAN, &plan).unwrap();
        assert!(same.data_contains_plan && same.before_data());

        // Data measured at a commit without the plan: named both.
        let early = plan_timing(r.dir.path(), PLAN, &code[..10]).unwrap();
        assert_eq!(early.data_commit, code, "abbreviated hashes resolve");
        assert!(!early.data_contains_plan && !early.before_data());
        let s = early.sentence(PLAN);
        assert!(s.contains(&plan[..12]) && s.contains(&code[..12]), "{s}");

        // The rule changed after the data: both commits named.
        let changed = r.commit(PLAN, "rule = 2");
        let t = plan_timing(r.dir.path(), PLAN, &data).unwrap();
        assert!(t.data_contains_plan && !t.before_data());
        assert_eq!(t.changed_after_data, vec![changed.clone()]);
        let s = t.sentence(PLAN);
        assert!(s.contains(&data[..12]) && s.contains(&changed[..12]), "{s}");
        // Data measured after the change: before the data again, and the sentence names the
        // change the data found as well as the first commit.
        let later = r.commit("results/s2/cells.csv", "y");
        let t = plan_timing(r.dir.path(), PLAN, &later).unwrap();
        assert!(t.before_data());
        assert_eq!(t.last_before_data.as_deref(), Some(changed.as_str()));
        let s = t.sentence(PLAN);
        assert!(
            s.contains(&format!(
                "last changed before the data in `{}`",
                &changed[..12]
            )),
            "{s}"
        );
    }

    #[test]
    fn no_plan_or_no_such_commit() {
        let r = Repo::new();
        let c = r.commit("README.md", "x");
        let t = plan_timing(r.dir.path(), PLAN, &c).unwrap();
        assert_eq!(t.plan_first_commit, None);
        assert!(!t.before_data());
        assert!(t.sentence(PLAN).contains("is not committed"));
        let err = plan_timing(
            r.dir.path(),
            PLAN,
            "0123456789abcdef0123456789abcdef01234567",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("is not a commit of this repository"), "{err}");
    }
}
