//! The study reproduced with the suite, apart from the tool: `study paper` writes the
//! reproduction write-up (Markdown) from a reference run of the default sweep and the claim
//! experiments' runs, read through the `results` crate's typed rows ([`results::Results`]). Every verdict, bound and range is computed
//! from the runs' files, never typed by hand, and the runs' provenance is checked first, so a
//! paper cannot silently compare numbers from different machines or code.
//!
//! The study's claims (which stacks, regimes, levels and figures) are data in [`claims`];
//! the other modules hold no study-specific numbers or stack names: [`run`] (the runs and
//! views of them), [`provenance`] (setup, provenance table, mixing check), [`tables`] (the
//! reference sweep), [`verdicts`] (judging each claim kind), [`contrast`] (did TCP or QUIC
//! collapse, per condition, beside the port budget), [`sessions`] (aggregation over the
//! sessions of one commit), [`scale`] (beyond 500 workers,
//! memory fits), [`breakdown`] (where QUIC's instructions go, from `scripts/quic-breakdown`),
//! [`threats`] (threats to validity) and [`text`] (figures and formats). The statistics are
//! the `stats` crate's. Prose moves into minijinja templates (`templates/`, rendered by
//! [`templates`]) section by section: so far the header, Setup with the provenance table, the
//! reference sweep's introduction and figure list, the memory-per-connection table, and the
//! introductions of "Beyond 500" and of the instruction breakdown; the claim verdicts, the
//! per-regime tables, the knee tables, the breakdown's findings and the threats still write
//! their sentences in code.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

mod breakdown;
mod claims;
pub mod engine;
mod judged;
pub mod mesh;
mod observe;
pub mod plan;
pub mod plan_paper;
mod provenance;
mod run;
mod scale;
mod sessions;
mod soak;
mod stacks;
mod tables;
mod templates;
mod text;
mod threats;
pub mod timing;

use provenance::{provenance_problems, Provenance};
use run::Run;
use threats::threats;

/// The tracked paths whose difference between the data commit and HEAD is a difference in
/// the code that measured (or computes) the results.
pub const CODE_PATHS: [&str; 6] = [
    "crates",
    "scripts",
    "experiments",
    "proto",
    "Cargo.toml",
    "Cargo.lock",
];

/// The code files that differ between the commit a reference run recorded and HEAD of the
/// repository holding it (`git diff --name-only <commit> HEAD -- CODE_PATHS`). Empty when the
/// run is not inside a git work tree (a copy: there is no HEAD to compare with). An error when
/// the recorded commit is not in the repository's history.
pub fn code_drift(reference: &Path) -> anyhow::Result<Vec<String>> {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(reference.join("manifest.json"))
            .with_context(|| format!("cannot read {}/manifest.json", reference.display()))?,
    )
    .with_context(|| format!("{}/manifest.json is not JSON", reference.display()))?;
    let commit = manifest["git_commit"]
        .as_str()
        .unwrap_or("unknown")
        .trim_end_matches("-dirty")
        .to_string();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(reference)
            .args(args)
            .output()
    };
    match git(&["rev-parse", "--show-toplevel"]) {
        Ok(o) if o.status.success() => {}
        _ => return Ok(Vec::new()),
    }
    // `:/` makes each path relative to the top level, whatever folder git runs in.
    let paths: Vec<String> = CODE_PATHS.iter().map(|p| format!(":/{p}")).collect();
    let mut args = vec![
        "--no-pager",
        "diff",
        "--name-only",
        commit.as_str(),
        "HEAD",
        "--",
    ];
    args.extend(paths.iter().map(String::as_str));
    let out = git(&args).context("cannot run git")?;
    if !out.status.success() {
        bail!(
            "{}: its data commit `{commit}` is not in this repository's history, so its code cannot be compared with HEAD",
            reference.display()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// The analysis plan a paper is judged by, and whether at its quick budgets.
#[derive(Debug, Clone)]
pub struct PlanChoice {
    pub file: PathBuf,
    pub quick: bool,
}

/// The paper file and what the caller should tell the user (mixed provenance it was allowed).
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub warnings: Vec<String>,
}

/// Writes `out_dir/reproduction.md` from the reference run and the claim runs. Refuses runs of
/// mixed provenance (commit, CPU model, kernel) or dirty commits unless `allow_mixed`, in which
/// case the paper opens with a warning naming what is mixed.
pub fn write(
    plan: &PlanChoice,
    reference: &Path,
    claims: &[PathBuf],
    out_dir: &Path,
    allow_mixed: bool,
) -> anyhow::Result<Written> {
    write_with_scale(
        plan,
        reference,
        claims,
        None,
        None,
        None,
        out_dir,
        allow_mixed,
    )
}

/// [`write`], plus the "Beyond 500" section from a run of `experiments/scale.toml`; that run
/// joins the provenance table and the mixed-provenance check like any claim run. With
/// `breakdown` (a `breakdown.csv` of `scripts/quic-breakdown`), the instruction breakdown
/// section too: its counts are deterministic, so it is not part of the timing provenance
/// check, and the section names the commit it was measured at. With `mesh` (a run of
/// `experiments/mesh.toml`), the "Through a mesh" section; that run joins the provenance
/// table and check as well.
#[allow(clippy::too_many_arguments)]
pub fn write_with_scale(
    plan_choice: &PlanChoice,
    reference: &Path,
    claims: &[PathBuf],
    scale: Option<&Path>,
    breakdown: Option<&Path>,
    mesh: Option<&Path>,
    out_dir: &Path,
    allow_mixed: bool,
) -> anyhow::Result<Written> {
    let plan_file = plan_choice.file.as_path();
    let plan = plan::Plan::load(plan_file)?;
    let plan = if plan_choice.quick {
        plan.quick()?
    } else {
        plan
    };
    let reference = Run::load(reference)?;
    let scale_run = scale.map(Run::load).transpose()?;
    let mesh_run = mesh.map(Run::load).transpose()?;
    let breakdown_data = breakdown
        .map(|p| breakdown::Breakdown::load(p).map(|b| (b, p)))
        .transpose()?;
    let claim_runs: Vec<Run> = claims
        .iter()
        .map(|d| Run::load(d))
        .collect::<anyhow::Result<_>>()?;
    let runs: Vec<&Run> = std::iter::once(&reference)
        .chain(claim_runs.iter())
        .chain(scale_run.iter())
        .chain(mesh_run.iter())
        .collect();
    // The paper reproduces a study on our own servers; a run whose target's certificate
    // was not verified did not provably measure what it names.
    if let Some(run) = runs.iter().find(|r| {
        results::manifest::ServiceRecord::of(&r.results.manifest).is_some_and(|s| s.insecure)
    }) {
        bail!(
            "{}: an insecure run (a target's certificate was not verified) cannot go into the paper",
            run.dir.display()
        );
    }
    let provs: Vec<Provenance> = runs.iter().map(|r| r.provenance()).collect();
    let problems = provenance_problems(&provs);
    if !problems.is_empty() && !allow_mixed {
        bail!(
            "mixed or untraceable provenance: {}. Re-run all experiments at one clean commit on one machine (scripts/reproduce-paper), or pass --allow-mixed to write the paper with a warning",
            problems.join("; ")
        );
    }

    let sessions = sessions::Sessions::discover(&reference, &provs[0]);
    let session_claims: Vec<Vec<Run>> = match &sessions {
        Some(s) => {
            // claim_runs gives each run in every session: turn it session-major.
            let mut by_session: Vec<Vec<Run>> = s.dirs.iter().map(|_| Vec::new()).collect();
            for run in &claim_runs {
                for (k, r) in s.claim_runs(run) {
                    if let Some(i) = s.dirs.iter().position(|(d, _)| *d == k) {
                        by_session[i].push(r);
                    }
                }
            }
            by_session
        }
        None => vec![claim_runs
            .iter()
            .map(|r| Run::load(&r.dir))
            .collect::<anyhow::Result<_>>()?],
    };
    let data = observe::ClaimData::new(&plan, &session_claims);
    let judged = judged::judge_all(&plan, &data);
    let (plan_shown, timing) = plan_timing(plan_file, &provs[0].commit);
    let marks = plan_marks(plan_file, &plan, &plan_shown, &timing, plan_choice.quick);

    let mut out = String::new();
    templates::render(
        &mut out,
        "header.md",
        minijinja::context! {
            title => &plan.study,
            quick => plan_choice.quick,
            problems => &problems,
            reference => reference.dir.display().to_string(),
            claim_runs => claim_runs.len(),
        },
    )?;
    judged::answer_section(&mut out, &plan, &data, &judged, &marks);

    provenance::setup(&mut out, &reference, &provs)?;
    judged::plan_section(
        &mut out,
        &plan,
        &data,
        &plan_shown,
        &timing,
        data.sessions(),
    );
    judged::claims_section(&mut out, &plan, &data, &judged, &marks);
    judged::limits_section(&mut out, &plan, &data);
    soak::section(&mut out, &claim_runs);

    let session_references = sessions
        .as_ref()
        .map(|s| s.reference_runs())
        .unwrap_or_default();
    tables::reference_sweep(&mut out, &reference, &session_references, out_dir)?;
    let machines = sessions.as_ref().map(|s| s.machines()).unwrap_or_default();
    let machines_differ = sessions::machines_differ(&machines);
    if let Some(s) = &sessions {
        let _ = writeln!(
            out,
            "## Sessions\n\nThe judged part above pools the {} sessions at one commit ({}) by the plan's rules; the reference tables above read session 1 and give throughput and p99 an interval over the session means (\"between sessions\") beside the one over session 1's repetitions.\n",
            s.count(),
            s.shown
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (session, machine) in &machines {
            let _ = writeln!(out, "- `{session}`: {machine}");
        }
        out.push('\n');
        if let Some(differ) = &machines_differ {
            let _ = writeln!(out, "{differ}\n");
        }
    }
    if let Some(run) = &mesh_run {
        mesh::section(&mut out, &run.results.cells, &run.dir.display().to_string());
    }
    if let Some(run) = &scale_run {
        scale::section(&mut out, run, &reference)?;
    }
    if let Some((b, path)) = &breakdown_data {
        let measured = breakdown::reference_cpu(&reference, b.concurrency.unwrap_or(0));
        breakdown::section(&mut out, b, path, &measured, &claims::breakdown_focus())?;
    }
    // The threats count cells over every session's runs, the paper's own (session 1's) first.
    let other_sessions = sessions
        .as_ref()
        .map(|s| s.other_sessions_runs(&reference, &claim_runs))
        .unwrap_or_default();
    let pooled: Vec<&Run> = runs.iter().copied().chain(other_sessions.iter()).collect();
    threats(
        &mut out,
        &pooled,
        &provs,
        &problems,
        &threats::SessionScope {
            count: sessions.as_ref().map(|s| s.count()),
            machines_differ: machines_differ.is_some(),
            machines: &machines,
            single_runs: &scale_run
                .iter()
                .chain(mesh_run.iter())
                .map(|r| r.name())
                .collect::<Vec<_>>(),
        },
    );
    let generated_by = generated(&reference.dir, &provs[0].commit);
    artifact(&mut out, &provs[0], &generated_by, STUDY_RERUN);
    let mut inputs = vec![format!("--reference {}", reference.dir.display())];
    inputs.push(format!(
        "--claims {}",
        claims
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let named = [
        ("--scale", scale),
        ("--mesh", mesh),
        ("--breakdown", breakdown),
    ];
    for (flag, path) in named {
        if let Some(p) = path {
            inputs.push(format!("{flag} {}", p.display()));
        }
    }
    if plan_choice.quick {
        inputs.push("--quick".into());
    }
    rerun_exactly(
        &mut out,
        &reference.dir,
        &provs[0].commit,
        &generated_by,
        mesh.is_some(),
        &inputs,
        out_dir,
    );

    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let path = out_dir.join("reproduction.md");
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Written {
        path,
        warnings: problems
            .into_iter()
            .map(|p| format!("mixed provenance allowed: {p}"))
            .collect(),
    })
}

/// The artifact section: the data commit and how to rerun the study from main (no tag or
/// branch other than main is ever published), then on a line of its own the commit that
/// generated the paper and the files under `crates/` changed since the data commit.
/// How the study's paper says it is rerun.
const STUDY_RERUN: &str = "`scripts/reproduce-paper --sessions 3 --replace-sessions --with-mesh` as root (it prints its plan and expected duration first, and `--dry-run` shows them only; `--replace-sessions` removes the committed sessions where they are of other code than the checkout's, which without it the script refuses to mix with new ones; `--with-mesh` also runs `experiments/mesh.toml`, the mesh section's data; `--quick` runs every claim experiment at reduced size for a first look, into a paper marked quick)";

fn artifact(out: &mut String, reference: &Provenance, generated: &Generated, rerun: &str) {
    let _ = writeln!(
        out,
        "## Artifact\n\nThe data of this paper were measured at commit `{commit}` of this repository, an ancestor of `main` (licensed MIT OR Apache-2.0: LICENSE-MIT, LICENSE-APACHE; cite with CITATION.cff); its results directories are committed beside the code. To rerun the study from `main`: {rerun}.\n",
        commit = reference.commit,
    );
    let changed = if generated.crates_changed.is_empty() {
        "no file under `crates/` changed since the data commit".to_string()
    } else {
        format!(
            "{} file(s) under `crates/` changed since the data commit: {}",
            generated.crates_changed.len(),
            generated
                .crates_changed
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let dirty = if generated.uncommitted > 0 {
        format!(
            " plus uncommitted changes to {} file(s) of `crates/`, `experiments/` or Cargo.lock",
            generated.uncommitted
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{GENERATED_AT} `{}`{dirty}; {changed}.\n",
        generated.commit
    );
}

/// How the line naming the generating commit starts (the committed paper's regeneration test
/// compares every other line byte for byte).
pub const GENERATED_AT: &str = "This paper was generated at commit";

/// The commit that generates the paper (HEAD) and the code files under `crates/` that differ
/// between the data commit and it; "unknown" and none outside a git repository.
struct Generated {
    commit: String,
    /// Files of `crates/`, `experiments/` or Cargo.lock changed but not committed.
    uncommitted: usize,
    crates_changed: Vec<String>,
}

/// The files that measure the study, whose change between the data commit and the generating
/// commit decides whether `main` reruns the same study as the data commit.
const STUDY_RUN_FILES: [&str; 3] = [
    ":/scripts/reproduce-paper",
    ":/experiments/claims",
    ":/experiments/study",
];

/// How to rerun the measured code itself, and the command that writes this paper again from
/// the committed data alone; what differs between the two commits comes from git.
fn rerun_exactly(
    out: &mut String,
    checkout: &Path,
    data_commit: &str,
    generated: &Generated,
    with_mesh: bool,
    inputs: &[String],
    out_dir: &Path,
) {
    let commit = data_commit.trim_end_matches("-dirty");
    let short = commit.get(..9).unwrap_or(commit);
    let mut diff = vec!["--no-pager", "diff", "--name-only", commit, "HEAD", "--"];
    diff.extend(STUDY_RUN_FILES);
    let changed: Option<Vec<String>> =
        git_stdout(checkout, &diff).map(|s| s.lines().map(str::to_string).collect());
    let same = match &changed {
        Some(files) if files.is_empty() => "`scripts/reproduce-paper`, `experiments/claims/` and `experiments/study/` are the same there as at the generating commit: rerunning there measures the same experiments with the measured code, rerunning from `main` with `main`'s".to_string(),
        Some(files) => format!(
            "between it and the generating commit these files that define the runs changed: {}",
            files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
        ),
        None => "whether the files that define the runs changed since cannot be told here (no git)".to_string(),
    };
    let mesh = if with_mesh {
        " --with-mesh` (as root: `--with-mesh` also runs `experiments/mesh.toml`, the mesh section's data)"
    } else {
        "`"
    };
    // The data commit's own tree may hold sessions measured before it, which the script there
    // refuses to mix with new ones unless told to replace them.
    let replace = if git_stdout(
        checkout,
        &["cat-file", "-e", &format!("{commit}:results/sessions")],
    )
    .is_some()
    {
        " --replace-sessions"
    } else {
        ""
    };
    let mesh = format!("{replace}{mesh}");
    let replace_why = if replace.is_empty() {
        ""
    } else {
        " (`--replace-sessions`: that commit's tree still holds sessions of earlier code, which the script there would otherwise refuse to mix with the new ones)"
    };
    let drift =
        !generated.crates_changed.is_empty() || changed.as_ref().is_none_or(|c| !c.is_empty());
    let _ = writeln!(
        out,
        "To rerun exactly the measured code: `git worktree add ../data {short}`, then in `../data`: `scripts/reproduce-paper --sessions 3{mesh}{replace_why}; {same}.\n\nTo write this paper again from the committed data alone{}:\n\n```sh\ncargo run --release -p study -- paper {} --out {}{}\n```",
        if drift { " (with `--allow-code-drift`, since the code changed after the data)" } else { "" },
        inputs.join(" "),
        out_dir.display(),
        if drift { " --allow-code-drift" } else { "" },
    );
}

/// What a git command run in `dir` printed, if it succeeded.
fn git_stdout(dir: &Path, args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
}

fn generated(reference: &Path, data_commit: &str) -> Generated {
    let git = |args: &[&str]| git_stdout(reference, args);
    let commit = data_commit.trim_end_matches("-dirty");
    let head = git(&["rev-parse", "HEAD"])
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    // Code changed but not committed: the paper says so rather than name a commit that could
    // not have written it.
    let uncommitted = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ":/crates",
        ":/experiments",
        ":/Cargo.lock",
    ])
    .map(|s| s.lines().count())
    .unwrap_or(0);
    Generated {
        commit: head,
        uncommitted,
        crates_changed: git(&[
            "--no-pager",
            "diff",
            "--name-only",
            commit,
            "HEAD",
            "--",
            ":/crates",
        ])
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default(),
    }
}

/// Where the plan is: `plan` as given when it exists (or is absolute), else the same relative
/// path at the top of the git checkout that holds `reference`.
pub fn find_plan(plan: &Path, reference: &Path) -> PathBuf {
    if plan.is_absolute() || plan.exists() {
        return plan.to_path_buf();
    }
    std::process::Command::new("git")
        .arg("-C")
        .arg(reference)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join(plan))
        .filter(|p| p.exists())
        .unwrap_or_else(|| plan.to_path_buf())
}

/// Which verdicts the plan's timing marks: all when the data commit does not contain the plan
/// (or git cannot tell); when the plan changed after the data, the rules whose definition
/// changed (read from the plan at the data commit), with both commits named.
fn plan_marks(
    plan_file: &Path,
    plan: &plan::Plan,
    shown: &str,
    timing: &Option<timing::PlanTiming>,
    quick: bool,
) -> judged::Marks {
    let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
    let Some(t) = timing else {
        return judged::Marks {
            all: true,
            rules: Vec::new(),
            why: "whether these data were measured under this plan cannot be checked (not in a git repository): every verdict is marked †".into(),
        };
    };
    if !t.data_contains_plan {
        return judged::Marks {
            all: true,
            rules: Vec::new(),
            why: format!(
                "These data (commit `{}`) were measured before this plan was committed: every verdict is marked †, and the answer is not the study's until sessions measured under the plan replace them",
                short(&t.data_commit)
            ),
        };
    }
    if t.changed_after_data.is_empty() {
        return judged::Marks::none();
    }
    let old = std::process::Command::new("git")
        .arg("-C")
        .arg(
            plan_file
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_default(),
        )
        .args(["show", &format!("{}:{shown}", t.data_commit)])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| plan::Plan::parse(&String::from_utf8_lossy(&o.stdout)).ok())
        .map(|p| {
            if quick {
                p.quick().unwrap_or_else(|_| plan.clone())
            } else {
                p
            }
        });
    let rules = judged::changed_rules(old.as_ref(), plan);
    let commits = t
        .changed_after_data
        .iter()
        .map(|c| format!("`{}`", short(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let why = if rules.is_empty() {
        format!(
            "The plan changed after these data (commit `{}`) in {commits}, in wording only (the answer's sentences, labels or statements): no rule's definition changed, so no verdict is marked",
            short(&t.data_commit)
        )
    } else {
        format!(
            "The plan changed after these data (commit `{}`) in {commits}: the rules whose definition changed are marked † ({})",
            short(&t.data_commit),
            rules.join(", ")
        )
    };
    judged::Marks {
        all: false,
        rules,
        why,
    }
}

/// The plan's path as the paper shows it (relative to the repository's top level) and what git
/// says of it against the data commit; `None` outside a git repository.
fn plan_timing(plan_file: &Path, data_commit: &str) -> (String, Option<timing::PlanTiming>) {
    let shown = plan_file.display().to_string();
    let Ok(real) = plan_file.canonicalize() else {
        return (shown, None);
    };
    let dir = real.parent().unwrap_or(Path::new("."));
    let top = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let Some(top) = top else {
        return (shown, None);
    };
    let Ok(rel) = real.strip_prefix(&top) else {
        return (shown, None);
    };
    let rel = rel.display().to_string();
    let commit = data_commit.trim_end_matches("-dirty");
    let timing = timing::plan_timing(&top, &rel, commit).ok();
    (rel, timing)
}
