//! `study`: the study's command line. `study paper` writes OUT/reproduction.md from the
//! committed results directories (see `scripts/reproduce-paper`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use runner::exit::Status;

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
    Paper {
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
        /// Directory that receives reproduction.md.
        #[arg(long, default_value = "paper")]
        out: PathBuf,
        /// Write the paper even if the runs differ in commit, CPU model or kernel, or ran on
        /// a dirty tree; it then opens with a warning saying what is mixed.
        #[arg(long)]
        allow_mixed: bool,
    },
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
    let Command::Paper {
        reference,
        claims,
        scale,
        breakdown,
        out,
        allow_mixed,
    } = cli.command;
    match study::write_with_scale(
        &reference,
        &claims,
        scale.as_deref(),
        breakdown.as_deref(),
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
