//! `runner compare BASE NEW`: the change of every cell present in both runs, with Welch's
//! t-test over the per-repetition values, written as a terminal table, `compare.csv` and
//! `compare.html`. Two parts: [`diff`] matches the cells of both runs, checks that the runs may
//! be compared at all and judges each change (the statistics are the `stats` crate's), and
//! [`render`] writes what it found (CSV, terminal, HTML with charts from
//! [`chart`](crate::chart)). Both are plain functions over parsed rows, testable
//! without running anything.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use results::exit::{Status, Stopped};
use results::labels::Stacks;
use results::rows::CellRow;

use crate::Results;

pub mod diff;
pub mod markdown;
pub mod render;

pub use diff::{check_compatible, compare, regressions, CellChange, Change, Verdict};
pub use render::{html, terminal_table, write_csv};

/// A `cells.csv` row of either run.
type Row = CellRow;

/// Fewer repetitions than this on either side give deltas only: with two values per side the
/// Welch interval has about one degree of freedom and is too wide to mean anything.
pub const MIN_REPETITIONS: usize = 3;

/// The `cells.csv` columns a cell is matched on across runs (its repetitions are pooled); the
/// offered rate too, so that a rate sweep's points are compared rate by rate (empty in closed
/// loop).
pub const KEY: [&str; 7] = [
    "variant",
    "stage",
    "stack",
    "regime",
    "concurrency",
    "mode",
    "rate_rps",
];

/// A compared figure: the `cells.csv` column read (and the one used when the first is empty
/// in some repetition), which direction is better, and how it is shown.
#[derive(Debug)]
pub struct Metric {
    /// The name in `compare.csv`, with its unit.
    pub name: &'static str,
    pub column: &'static str,
    pub fallback: Option<&'static str>,
    pub higher_is_better: bool,
    /// Terminal and HTML heading.
    pub short: &'static str,
    /// Display unit and the factor from the column's unit to it.
    pub unit: &'static str,
    pub scale: f64,
    pub decimals: usize,
}

pub const METRICS: [Metric; 9] = [
    Metric {
        name: "throughput_rps",
        column: "throughput_steady_rps",
        fallback: Some("throughput_rps"),
        higher_is_better: true,
        short: "req/s",
        unit: "req/s",
        scale: 1.0,
        decimals: 1,
    },
    Metric {
        name: "latency_p50_us",
        column: "latency_p50_us",
        fallback: None,
        higher_is_better: false,
        short: "p50",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "latency_p95_us",
        column: "latency_p95_us",
        fallback: None,
        higher_is_better: false,
        short: "p95",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "latency_p99_us",
        column: "latency_p99_us",
        fallback: None,
        higher_is_better: false,
        short: "p99",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "success_rate",
        column: "success_rate",
        fallback: None,
        higher_is_better: true,
        short: "success",
        unit: "",
        scale: 1.0,
        decimals: 4,
    },
    Metric {
        name: "server_rss_bytes",
        column: "server_rss_hwm_bytes",
        fallback: Some("server_rss_peak_bytes"),
        higher_is_better: false,
        short: "srv RSS",
        unit: "MB",
        scale: 1e-6,
        decimals: 1,
    },
    Metric {
        name: "client_rss_bytes",
        column: "client_rss_hwm_bytes",
        fallback: Some("client_rss_peak_bytes"),
        higher_is_better: false,
        short: "cli RSS",
        unit: "MB",
        scale: 1e-6,
        decimals: 1,
    },
    Metric {
        name: "server_cpu_ms_per_1k_ok",
        column: "server_cpu_ms_per_1k_ok",
        fallback: None,
        higher_is_better: false,
        short: "srv CPU",
        unit: "ms/1k",
        scale: 1.0,
        decimals: 1,
    },
    Metric {
        name: "client_cpu_ms_per_1k_ok",
        column: "client_cpu_ms_per_1k_ok",
        fallback: None,
        higher_is_better: false,
        short: "cli CPU",
        unit: "ms/1k",
        scale: 1.0,
        decimals: 1,
    },
];

// ---------------------------------------------------------------------------------------------
// The command.

/// What `runner compare` wrote and found.
pub struct Outcome {
    pub out: PathBuf,
    pub warnings: Vec<String>,
    pub cells: Vec<CellChange>,
    /// The stacks of both runs (the base's, then any only the new run has), to name them.
    pub stacks: Stacks,
}

/// Reads both runs, refuses incompatible ones (`Err` with `refused = true`), writes
/// `compare.csv` and `compare.html` into `out` (default `NEW/compare/`).
pub fn run(base_dir: &Path, new_dir: &Path, out: Option<&Path>) -> Result<Outcome, (bool, String)> {
    let load = |d: &Path| Results::load(d).map_err(|e| (true, format!("{e:#}")));
    let (base, new) = (load(base_dir)?, load(new_dir)?);
    let mut stacks = base.stacks();
    stacks.extend(new.stacks());
    crate::labels::with(stacks.clone(), || {
        write_comparison(base_dir, new_dir, out, (&base, &new))
    })
    .map(|(out, warnings, cells)| Outcome {
        out,
        warnings,
        cells,
        stacks,
    })
}

type Written = (PathBuf, Vec<String>, Vec<CellChange>);

fn write_comparison(
    base_dir: &Path,
    new_dir: &Path,
    out: Option<&Path>,
    (base, new): (&Results, &Results),
) -> Result<Written, (bool, String)> {
    let warnings = check_compatible(base, new).map_err(|e| (true, e))?;
    let cells = compare(&base.cells, &new.cells);
    let out = out.map_or_else(|| new_dir.join("compare"), Path::to_path_buf);
    let write = || -> anyhow::Result<()> {
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        write_csv(&out.join("compare.csv"), &cells)?;
        let page = html((base_dir, base), (new_dir, new), &cells, &warnings)?;
        let path = out.join("compare.html");
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    };
    write().map_err(|e| (false, format!("{e:#}")))?;
    Ok((out, warnings, cells))
}

/// What `runner compare` prints on stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The terminal table, then the paths written.
    #[default]
    Terminal,
    /// A Markdown table for a pull-request comment, alone on stdout (warnings and the paths
    /// written go to stderr), so that `runner compare … --format markdown > comment.md` works.
    Markdown,
}

/// `runner compare`: exit 0, 1 with `--fail-on-regression` exceeded, 2 when refused (the
/// error is the caller's to print).
pub fn command(
    base: &Path,
    new: &Path,
    out: Option<&Path>,
    fail_pct: Option<f64>,
    format: Format,
) -> Result<ExitCode, Stopped> {
    if let Some(p) = fail_pct {
        if !(p.is_finite() && p >= 0.0) {
            return Err(Stopped::invalid(format!(
                "--fail-on-regression: {p} is not a percentage ≥ 0"
            )));
        }
    }
    let outcome = run(base, new, out).map_err(|(refused, e)| {
        if refused {
            Stopped::invalid(e)
        } else {
            Stopped::failed(e)
        }
    })?;
    Ok(crate::labels::with(outcome.stacks.clone(), || {
        print(&outcome, (base, new), fail_pct, format)
    }))
}

/// What `runner compare` prints of a written comparison, and its status.
fn print(
    outcome: &Outcome,
    (base, new): (&Path, &Path),
    fail_pct: Option<f64>,
    format: Format,
) -> ExitCode {
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    let written = format!(
        "compare: {} and {}",
        outcome.out.join("compare.csv").display(),
        outcome.out.join("compare.html").display()
    );
    match format {
        Format::Terminal => {
            println!("{}", terminal_table(&outcome.cells));
            println!("{written}");
        }
        Format::Markdown => {
            let name = |p: &Path| {
                p.file_name()
                    .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
            };
            print!(
                "{}",
                markdown::table(&name(base), &name(new), &outcome.cells, &outcome.warnings)
            );
            eprintln!("{written}");
        }
    }
    if let Some(limit) = fail_pct {
        let found = regressions(&outcome.cells, limit);
        if !found.is_empty() {
            for r in &found {
                eprintln!("regression: {r}");
            }
            eprintln!(
                "{} significant regression(s) larger than {limit} %",
                found.len()
            );
            return Status::Regression.into();
        }
    }
    Status::Success.into()
}
