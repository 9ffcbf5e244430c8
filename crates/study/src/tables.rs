//! The reference sweep's tables (one per regime): every stack and level with its latency,
//! throughput, failures, memory and CPU, means with intervals over repetitions.

use std::fmt::Write;
use std::path::Path;

use stats::{between_sessions, Interval};

use results::labels::{levels, ms, regimes};

use crate::stacks::{label, order as stack_order};

use crate::run::{fval, Run};
use crate::sessions::repetition_rate;
use crate::templates;
use crate::text::{fallback_note, show, show_rps, show_tput, throughput_note};
use results::rows::CellRow as Row;

/// One regime's table of the reference sweep; with two or more sessions' references, also
/// throughput and p99 with their intervals over the session means.
fn stress_table(out: &mut String, run: &Run, sessions: &[Run], rows: &[&Row], regime: &str) {
    let start = out.len();
    let has = |col: &str| rows.iter().any(|r| fval(r, col).is_some());
    let hwm = has("server_rss_hwm_bytes");
    let between = sessions.len() >= 2;
    let _ = writeln!(
        out,
        "| users | stack | median (ms) | p95 (ms) | p99 (ms) | req/s | failed % | server RSS peak (MB) |{} server CPU (%) | client CPU (%) | client CPU ms / 1k | cell (s) |{}",
        if hwm { " server VmHWM (MB) |" } else { "" },
        if between {
            " req/s between sessions | p99 (ms) between sessions |"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|{}---:|---:|---:|---:|{}",
        if hwm { "---:|" } else { "" },
        if between { "---:|---:|" } else { "" }
    );
    let opt = |iv: Option<Interval>, f: &dyn Fn(&Interval) -> String| {
        iv.map_or_else(|| "—".to_string(), |iv| f(&iv))
    };
    for c in levels(rows, regime) {
        for s in stack_order(rows) {
            let st = |col: &str| run.stat(None, &s, regime, c, col);
            let Some(ok) = st("success_rate") else {
                continue;
            };
            let lat = |iv: &Interval| show(iv, 1e-3, 3);
            let mut line = format!(
                "| {c} | {} | {} | {} | {} | {} | {:.2} | {} |",
                label(&s),
                opt(st("latency_p50_us"), &|iv| ms(iv.mean)),
                opt(st("latency_p95_us"), &lat),
                opt(st("latency_p99_us"), &lat),
                run.tput(None, &s, regime, c)
                    .map_or_else(|| "—".to_string(), |t| show_tput(&t)),
                (1.0 - ok.mean) * 100.0,
                opt(st("server_rss_peak_bytes"), &|iv| show(iv, 1e-6, 1)),
            );
            if hwm {
                let _ = write!(
                    line,
                    " {} |",
                    opt(st("server_rss_hwm_bytes"), &|iv| show(iv, 1e-6, 1))
                );
            }
            let _ = write!(
                line,
                " {} | {} | {} | {} |",
                opt(st("server_cpu_pct_mean"), &|iv| format!("{:.0}", iv.mean)),
                opt(st("client_cpu_pct_mean"), &|iv| format!("{:.0}", iv.mean)),
                opt(st("client_cpu_ms_per_1k_ok"), &|iv| format!(
                    "{:.0}",
                    iv.mean
                )),
                opt(st("elapsed_s"), &|iv| format!("{:.2}", iv.mean)),
            );
            if between {
                let per_session = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<Vec<f64>> {
                    sessions
                        .iter()
                        .map(|r| {
                            r.rows(None)
                                .into_iter()
                                .filter(|x| {
                                    x.stack == s && x.regime == regime && x.concurrency as u64 == c
                                })
                                .filter_map(f)
                                .collect()
                        })
                        .collect()
                };
                let rps = nonnegative(between_sessions(&per_session(&|r| repetition_rate(r))));
                let p99 = nonnegative(between_sessions(&per_session(&|r| {
                    fval(r, "latency_p99_us")
                })));
                let _ = write!(
                    line,
                    " {} (n = {}) | {} |",
                    show_rps(&rps),
                    rps.n,
                    show(&p99, 1e-3, 3)
                );
            }
            let _ = writeln!(out, "{line}");
        }
    }
    if out[start..].contains(" †") {
        let _ = writeln!(out, "\n{}", fallback_note());
    }
    if between {
        let _ = writeln!(
            out,
            "\n_Between sessions: the 95 % Student t interval over the session means (n = the sessions with the cell, as the req/s column states; the same n for p99). Neither quantity can be negative: a lower bound below 0 is shown as 0._"
        );
    }
    out.push('\n');
}

/// The "Reference sweep" section: a table per regime, then the figures `plot.py` draws
/// into `out_dir/figures`.
pub(crate) fn reference_sweep(
    out: &mut String,
    reference: &Run,
    sessions: &[Run],
    out_dir: &Path,
) -> anyhow::Result<()> {
    templates::render(
        out,
        "reference_sweep.md",
        minijinja::context! { throughput => throughput_note(reference.throughput_col) },
    )?;
    let stress = reference.stress();
    for regime in regimes(&stress) {
        let _ = writeln!(out, "### {regime}\n");
        stress_table(out, reference, sessions, &stress, &regime);
    }
    let figures: Vec<_> = [
        ("throughput.png", "Throughput vs concurrency"),
        ("latency_p95.png", "p95 latency vs concurrency"),
        ("success_rate.png", "Success rate vs concurrency"),
        ("server_resources.png", "Server RSS and CPU"),
        ("latency_cdf.png", "Latency CDF at the highest concurrency"),
        ("new_conn_breakdown.png", "New-connection latency by phase"),
    ]
    .into_iter()
    .map(|(file, caption)| minijinja::context! { file, caption })
    .collect();
    templates::render(
        out,
        "figures.md",
        minijinja::context! {
            reference => reference.dir.display().to_string(),
            out_dir => out_dir.display().to_string(),
            figures => figures,
        },
    )
}

/// An interval of a quantity that cannot be negative, its lower bound clamped at 0: a Student
/// t over three session means can reach below 0, which no throughput or latency can.
fn nonnegative(mut iv: Interval) -> Interval {
    iv.ci = iv.ci.map(|(lo, hi)| (lo.max(0.0), hi));
    iv
}

#[cfg(test)]
mod nonnegative_tests {
    #[test]
    fn a_bound_below_zero_is_shown_as_zero() {
        let iv = super::nonnegative(stats::interval(&[1.0, 100.0, 2.0]));
        let (lo, hi) = iv.ci.unwrap();
        assert_eq!(lo, 0.0);
        assert!(hi > 100.0);
        let iv = super::nonnegative(stats::interval(&[10.0, 11.0, 12.0]));
        assert!(iv.ci.unwrap().0 > 0.0);
    }
}
