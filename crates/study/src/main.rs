//! `study`: the study's command line. `study paper` writes OUT/reproduction.md from the
//! committed results directories (see `scripts/reproduce-paper`); `study judge` writes the
//! paper of another plan (a second study) from its runs, with the same engine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use results::exit::Status;

#[derive(Parser, Debug)]
#[command(
    name = "study",
    version,
    about = "The study reproduced with the transport benchmark: its paper from results directories"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write OUT/reproduction.md from a reference run of the default sweep and claim runs
    /// (the study is described in paper/study.md). Refuses runs from different commits,
    /// CPU models or kernels, or a dirty tree, unless --allow-mixed.
    Paper(PaperArgs),
    /// Write the paper of a plan alone (a second study: its answer, runs, plan, verdicts and
    /// artifact) from the runs of the plan's experiments, judged by the study's engine.
    Judge {
        /// The analysis plan (e.g. experiments/bulk/plan.toml).
        #[arg(long)]
        plan: PathBuf,
        /// Results directories of the plan's experiments; an experiment's runs, in the order
        /// given, are its sessions.
        #[arg(long, num_args = 1..)]
        runs: Vec<PathBuf>,
        /// Judged at the plan's reduced budgets, in one session, and marked quick throughout.
        #[arg(long)]
        quick: bool,
        /// The command that measures the runs again, as the artifact section names it.
        #[arg(long, value_name = "COMMAND")]
        rerun: String,
        /// The Markdown file to write.
        #[arg(long)]
        out: PathBuf,
        /// Write the paper even if the runs differ in commit, CPU model or kernel, or ran on a
        /// dirty tree; it then opens with a warning saying what is mixed.
        #[arg(long)]
        allow_mixed: bool,
    },
}

/// `study paper`'s arguments.
#[derive(clap::Args, Debug)]
struct PaperArgs {
    /// Results directory of the default sweep.
    #[arg(long)]
    reference: PathBuf,
    /// Results directories of the experiments in experiments/claims/.
    #[arg(long, num_args = 0..)]
    claims: Vec<PathBuf>,
    /// Results directory of experiments/scale.toml: adds the "Beyond 500" section (each
    /// stack's knee past the study's 500 workers, and why).
    #[arg(long)]
    scale: Option<PathBuf>,
    /// `breakdown.csv` of scripts/quic-breakdown: adds the section on where QUIC's
    /// instructions go (per request, by group, both sides, both regimes).
    #[arg(long)]
    breakdown: Option<PathBuf>,
    /// Results directory of experiments/mesh.toml: adds the "Through a mesh" section
    /// (does the C2/C3 contrast survive a sidecar path, with the proxies pooling their
    /// upstream connections and without).
    #[arg(long)]
    mesh: Option<PathBuf>,
    /// The analysis plan whose rules judge the claims (relative paths are looked up in the
    /// current directory, then at the top of the git checkout holding the reference).
    #[arg(long, default_value = "experiments/study/plan.toml")]
    plan: PathBuf,
    /// A quick paper (`scripts/reproduce-paper --quick`): judged at the plan's reduced
    /// budgets on one session, and marked quick throughout.
    #[arg(long)]
    quick: bool,
    /// Directory that receives reproduction.md.
    #[arg(long, default_value = "paper")]
    out: PathBuf,
    /// Write the paper even if the runs differ in commit, CPU model or kernel, or ran on
    /// a dirty tree; it then opens with a warning saying what is mixed.
    #[arg(long)]
    allow_mixed: bool,
    /// Write the paper even if the code (crates, scripts, experiments, proto, Cargo files)
    /// at HEAD differs from the reference's data commit; the differing files are listed as
    /// a warning. Without it such a paper is refused, naming them.
    #[arg(long)]
    allow_code_drift: bool,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Status::Invalid.into()
            } else {
                Status::Success.into()
            };
        }
    };
    match cli.command {
        Command::Judge {
            plan,
            runs,
            quick,
            rerun,
            out,
            allow_mixed,
        } => judge(&plan, &runs, quick, &rerun, &out, allow_mixed),
        Command::Paper(args) => paper(args),
    }
}

/// `study paper`: the study's paper.
fn paper(args: PaperArgs) -> ExitCode {
    let PaperArgs {
        reference,
        claims,
        scale,
        breakdown,
        mesh,
        plan,
        quick,
        out,
        allow_mixed,
        allow_code_drift,
    } = args;
    let plan = study::find_plan(&plan, &reference);
    // The paper describes the code that measured its data: HEAD must be that code.
    let drift = match study::code_drift(&reference) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Status::Invalid.into();
        }
    };
    if !drift.is_empty() {
        let shown = drift
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = drift.len().saturating_sub(10);
        let list = if more > 0 {
            format!("{shown} and {more} more")
        } else {
            shown
        };
        if !allow_code_drift {
            eprintln!(
                "error: the code at HEAD differs from the data commit of {} in {} file(s): {list}. Regenerate the results at HEAD (scripts/reproduce-paper) or pass --allow-code-drift",
                reference.display(),
                drift.len()
            );
            return Status::Invalid.into();
        }
        eprintln!(
            "warning: code drift allowed: HEAD differs from the data commit in {} file(s): {list}",
            drift.len()
        );
    }
    match study::write_with_scale(
        &study::PlanChoice { file: plan, quick },
        &reference,
        &claims,
        scale.as_deref(),
        breakdown.as_deref(),
        mesh.as_deref(),
        &out,
        allow_mixed,
    ) {
        Ok(written) => {
            for w in &written.warnings {
                eprintln!("warning: {w}");
            }
            println!("paper: {}", written.path.display());
            Status::Success.into()
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            Status::Invalid.into()
        }
    }
}

/// `study judge`: the paper of a plan alone.
fn judge(
    plan: &std::path::Path,
    runs: &[PathBuf],
    quick: bool,
    rerun: &str,
    out: &std::path::Path,
    allow_mixed: bool,
) -> ExitCode {
    let choice = study::PlanChoice {
        file: plan.to_path_buf(),
        quick,
    };
    match study::plan_paper::write(&choice, runs, out, rerun, allow_mixed) {
        Ok(written) => {
            for w in &written.warnings {
                eprintln!("warning: {w}");
            }
            println!("paper: {}", written.path.display());
            Status::Success.into()
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            Status::Invalid.into()
        }
    }
}
