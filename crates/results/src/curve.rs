//! `curve.csv`: the latency–throughput curve of a rate sweep (`rates`): per variant, stack,
//! regime and level, one point per offered rate (its repetitions' means) and the knee, by
//! [`knee`]'s rule. Written beside `summary.csv` when some curve has two rates or more; the
//! report and `scripts/plot.py` draw it from here, so the rule is stated once.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use crate::rows::{self, CellRow, CurveRow};

pub const FILE_NAME: &str = "curve.csv";

/// The knee rule's latency bound: a point is before the knee while its p99 is at most this many
/// times the p99 at the curve's lowest offered rate.
pub const KNEE_P99_FACTOR: f64 = 2.0;
/// The knee rule's throughput bound: a point is before the knee while it achieves at least this
/// share of its offered rate in successes.
pub const KNEE_ACHIEVED_SHARE: f64 = 0.95;

/// The knee of a curve (points by ascending offered rate): the last point of the run of
/// points from the lowest rate up that each keep p99 ≤ [`KNEE_P99_FACTOR`] × the first point's
/// p99 and achieve ≥ [`KNEE_ACHIEVED_SHARE`] of their offered rate, provided a later point
/// breaks that (else the sweep did not reach a knee). `None` also when the first point breaks
/// it. Returns the index into `points`.
pub fn knee(points: &[CurveRow]) -> Option<usize> {
    let first_p99 = points.first()?.latency_p99_us;
    let holds = |p: &CurveRow| {
        p.latency_p99_us <= KNEE_P99_FACTOR * first_p99
            && p.achieved_rps >= KNEE_ACHIEVED_SHARE * p.offered_rps
    };
    let run = points.iter().take_while(|p| holds(p)).count();
    (run > 0 && run < points.len()).then(|| run - 1)
}

/// A curve: (variant, stack, regime, concurrency).
type CurveKey = (String, String, String, u32);

/// The curves of `cells` (open-loop stress cells that ran, grouped by variant, stack, regime,
/// level and rate), each sorted by offered rate with its knee marked; only curves of two
/// rates or more.
pub fn curves(cells: &[CellRow]) -> Vec<Vec<CurveRow>> {
    let mut groups: BTreeMap<CurveKey, BTreeMap<String, Vec<&CellRow>>> = BTreeMap::new();
    for row in cells
        .iter()
        .filter(|r| r.ran() && r.stage == "stress" && r.mode == "open")
    {
        let Some(rate) = row.rate_rps else { continue };
        groups
            .entry((
                row.variant.clone(),
                row.stack.clone(),
                row.regime.clone(),
                row.concurrency,
            ))
            .or_default()
            .entry(crate::rows::rate_key(rate))
            .or_default()
            .push(row);
    }
    let mut out = Vec::new();
    for ((variant, stack, regime, concurrency), by_rate) in groups {
        if by_rate.len() < 2 {
            continue;
        }
        let mut points: Vec<CurveRow> = by_rate
            .values()
            .map(|reps| {
                let mean = |f: fn(&CellRow) -> f64| {
                    reps.iter().map(|r| f(r)).sum::<f64>() / reps.len() as f64
                };
                CurveRow {
                    variant: variant.clone(),
                    stack: stack.clone(),
                    regime: regime.clone(),
                    concurrency,
                    offered_rps: reps[0].rate_rps.unwrap_or_default(),
                    achieved_rps: mean(|r| r.throughput_rps),
                    latency_p50_us: mean(|r| r.latency_p50_us as f64),
                    latency_p99_us: mean(|r| r.latency_p99_us as f64),
                    latency_p999_us: mean(|r| r.latency_p999_us as f64),
                    success_rate: mean(|r| r.success_rate),
                    late: reps.iter().map(|r| r.late).sum(),
                    pacing_lag_p99_us: reps.iter().filter_map(|r| r.pacing_lag_p99_us).max(),
                    repetitions: reps.len(),
                    knee: false,
                }
            })
            .collect();
        points.sort_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps));
        if let Some(k) = knee(&points) {
            points[k].knee = true;
        }
        out.push(points);
    }
    out
}

/// The keys of the cells that are points of a curve (an open-loop group with two rates or
/// more): the report draws them as the curve, not as one level of a concurrency sweep.
pub fn swept_keys(cells: &[CellRow]) -> std::collections::HashSet<String> {
    let curves: std::collections::HashSet<CurveKey> = curves(cells)
        .iter()
        .map(|c| {
            (
                c[0].variant.clone(),
                c[0].stack.clone(),
                c[0].regime.clone(),
                c[0].concurrency,
            )
        })
        .collect();
    cells
        .iter()
        .filter(|r| r.stage == "stress" && r.mode == "open" && r.rate_rps.is_some())
        .filter(|r| {
            curves.contains(&(
                r.variant.clone(),
                r.stack.clone(),
                r.regime.clone(),
                r.concurrency,
            ))
        })
        .map(|r| r.cell_key.clone())
        .collect()
}

/// Writes `curve.csv` in `dir` from its `cells.csv` when it has a curve (else removes a stale
/// one, so the file always matches the cells).
pub fn write(dir: &Path) -> anyhow::Result<()> {
    let cells = rows::read_if_present::<CellRow>(&dir.join("cells.csv"))?.rows;
    let curves = curves(&cells);
    let path = dir.join(FILE_NAME);
    if curves.is_empty() {
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
        return Ok(());
    }
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    rows::write(&tmp, curves.iter().flatten())?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(offered: f64, achieved: f64, p99: f64) -> CurveRow {
        CurveRow {
            offered_rps: offered,
            achieved_rps: achieved,
            latency_p99_us: p99,
            ..CurveRow::default()
        }
    }

    #[test]
    fn the_knee_is_the_last_point_before_latency_doubles_or_throughput_falls_behind() {
        let bend = [
            point(100.0, 100.0, 1000.0),
            point(200.0, 199.0, 1500.0),
            point(400.0, 398.0, 1900.0),
            point(800.0, 790.0, 9000.0),
        ];
        assert_eq!(knee(&bend), Some(2));
        // Throughput falling behind the offered rate ends the run too.
        let behind = [point(100.0, 100.0, 1000.0), point(200.0, 150.0, 1100.0)];
        assert_eq!(knee(&behind), Some(0));
        // No bend within the sweep, or broken from the first point: no knee.
        assert_eq!(knee(&bend[..3]), None);
        assert_eq!(
            knee(&[point(100.0, 10.0, 1.0), point(200.0, 10.0, 1.0)]),
            None
        );
        assert_eq!(knee(&[]), None);
    }

    #[test]
    fn curves_average_repetitions_per_rate_and_need_two_rates() {
        let row = |stack: &str, rate: f64, rep: u32, p99: u64| CellRow {
            variant: "default".into(),
            stage: "stress".into(),
            stack: stack.into(),
            regime: "reuse".into(),
            concurrency: 10,
            repetition: rep,
            mode: "open".into(),
            rate_rps: Some(rate),
            throughput_rps: rate,
            latency_p99_us: p99,
            success_rate: 1.0,
            ..CellRow::default()
        };
        let cells = [
            row("h1", 200.0, 1, 1000),
            row("h1", 100.0, 1, 900),
            row("h1", 100.0, 2, 1100),
            row("h1", 400.0, 1, 5000),
            row("h2", 100.0, 1, 900),
        ];
        let curves = curves(&cells);
        assert_eq!(curves.len(), 1, "h2 has one rate: no curve");
        let h1 = &curves[0];
        let offered: Vec<f64> = h1.iter().map(|p| p.offered_rps).collect();
        assert_eq!(offered, [100.0, 200.0, 400.0]);
        assert_eq!(h1[0].repetitions, 2);
        assert_eq!(h1[0].latency_p99_us, 1000.0);
        let knees: Vec<bool> = h1.iter().map(|p| p.knee).collect();
        assert_eq!(knees, [false, true, false]);
    }
}
