//! C5's soak (`experiments/claims/soak-quic-rss.toml`): one long reuse cell whose
//! `resources.csv` series shows whether the server's (and the load generator's) memory levels
//! off or keeps rising, which the claim's second-long cells cannot show.

use std::fmt::Write;

use stats::{mean, ols};

use crate::stacks::label;

use crate::claims::SOAK_RUN;
use crate::run::{fval, Run};
use crate::text::{plain, thousands};

/// The series has levelled off when the mean RSS of its last minute is less than this much
/// above the mean of the minute that ends half-way through.
pub(crate) const LEVELLED_GROWTH: f64 = 0.05;

/// One role's RSS samples of one cell, in time order, without repeated samples (same time).
fn series(run: &Run, cell_key: &str, role: &str) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = run
        .resources
        .iter()
        .filter(|r| r.cell_key == cell_key && r.role == role)
        .map(|r| (r.t_s, r.rss_bytes as f64))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points.dedup_by(|a, b| a.0 == b.0);
    points
}

/// Mean RSS of the samples in `(end − 60 s, end]`.
fn minute_mean(points: &[(f64, f64)], end_s: f64) -> Option<f64> {
    let inside: Vec<f64> = points
        .iter()
        .filter(|p| p.0 > end_s - 60.0 && p.0 <= end_s)
        .map(|p| p.1)
        .collect();
    (!inside.is_empty()).then(|| mean(&inside))
}

/// What a series says: per-minute means, the growth over its second half against
/// [`LEVELLED_GROWTH`], and its least-squares slope over the second half.
struct Reading {
    minutes: Vec<f64>,
    growth: f64,
    slope_mb_per_min: Option<f64>,
}

fn read(points: &[(f64, f64)]) -> Option<Reading> {
    let end = points.last()?.0;
    let whole_minutes = (end / 60.0).floor() as usize;
    if whole_minutes < 2 {
        return None;
    }
    let minutes: Vec<f64> = (1..=whole_minutes)
        .filter_map(|m| minute_mean(points, m as f64 * 60.0))
        .collect();
    let half = (whole_minutes as f64 / 2.0).round() * 60.0;
    let mid = minute_mean(points, half)?;
    let last = minute_mean(points, whole_minutes as f64 * 60.0)?;
    let second_half: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.0 >= half - 60.0)
        .map(|p| (p.0 / 60.0, p.1 / 1e6))
        .collect();
    Some(Reading {
        minutes,
        growth: last / mid - 1.0,
        slope_mb_per_min: ols(&second_half).map(|f| f.slope),
    })
}

/// The soak's part of C5's section: the rule, then per stack and role the per-minute mean RSS
/// and the verdict; a line saying so when the paper has no soak run.
pub(crate) fn section(out: &mut String, claim_runs: &[Run]) {
    let Some(run) = claim_runs.iter().find(|r| r.name() == SOAK_RUN) else {
        let _ = writeln!(
            out,
            "No soak run in this paper (`experiments/claims/{SOAK_RUN}.toml`): whether the memory above levels off in a longer run is not measured here.\n"
        );
        return;
    };
    let _ = writeln!(
        out,
        "### Memory over a soak\n\nFrom `{}`: each cell below ran for its whole duration at one level, and `resources.csv` sampled both processes' RSS. Rule (not a rule of the plan, so not judged by its engine): a series has levelled off when the mean RSS of its last minute is less than {} % above the mean of the minute that ends half-way through; the least-squares slope over the second half is shown without an interval (successive samples are not independent).\n",
        run.dir.display(),
        plain(LEVELLED_GROWTH * 100.0)
    );
    let mut header_done = false;
    for cell in run.stress() {
        let elapsed = fval(cell, "elapsed_s").unwrap_or(0.0);
        let rate = fval(cell, "throughput_rps").unwrap_or(f64::NAN);
        for role in ["server", "client"] {
            let points = series(run, &cell.cell_key, role);
            let Some(r) = read(&points) else {
                let _ = writeln!(
                    out,
                    "- {} {} at {} workers: {} samples over {elapsed:.0} s, too short for a per-minute reading.",
                    label(&cell.stack),
                    role,
                    cell.concurrency,
                    points.len()
                );
                continue;
            };
            if !header_done {
                let cols = r.minutes.len();
                let _ = writeln!(
                    out,
                    "| cell | role | {} | second half | slope (MB/min) | verdict |",
                    (1..=cols)
                        .map(|m| format!("min {m} (MB)"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                let _ = writeln!(out, "|---|---|{}---:|---:|---|", "---:|".repeat(cols));
                header_done = true;
            }
            let verdict = if r.growth < LEVELLED_GROWTH {
                "levelled off"
            } else {
                "still rising"
            };
            let _ = writeln!(
                out,
                "| {} {} c={} ({elapsed:.0} s, {} req/s) | {role} | {} | {:+.1} % | {} | {verdict} |",
                label(&cell.stack),
                cell.regime,
                cell.concurrency,
                thousands(rate),
                r.minutes
                    .iter()
                    .map(|b| format!("{:.1}", b / 1e6))
                    .collect::<Vec<_>>()
                    .join(" | "),
                r.growth * 100.0,
                r.slope_mb_per_min
                    .map_or("—".to_string(), |s| format!("{s:+.2}"))
            );
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(minutes: usize, f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (1..=minutes * 60)
            .map(|s| (s as f64, f(s as f64)))
            .collect()
    }

    #[test]
    fn a_flat_series_levels_off_and_a_rising_one_does_not() {
        let flat = read(&ramp(10, |_| 100e6)).unwrap();
        assert_eq!(flat.minutes.len(), 10);
        assert!(flat.growth.abs() < 1e-12);
        // 1 MB per minute on 100 MB: +5 MB over the second half is 5 %, not below it.
        let rising = read(&ramp(10, |t| 100e6 + t / 60.0 * 1e6)).unwrap();
        assert!(rising.growth >= LEVELLED_GROWTH * 0.9, "{}", rising.growth);
        assert!((rising.slope_mb_per_min.unwrap() - 1.0).abs() < 1e-6);
        // Fast growth early, then flat: levelled off.
        let settles = read(&ramp(10, |t| 100e6 * (1.0 + (t / 60.0).min(2.0)))).unwrap();
        assert!(settles.growth < LEVELLED_GROWTH);
    }

    #[test]
    fn too_short_a_series_has_no_reading() {
        assert!(read(&ramp(1, |_| 1.0)).is_none());
        assert!(read(&[]).is_none());
    }
}
