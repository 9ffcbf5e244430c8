//! `summary.csv`: every (variant, stage, stack, regime, concurrency, mode) aggregated across its
//! repetitions — mean, sample standard deviation and a 95 % Student-t confidence interval of
//! the mean, per figure. Read back from `cells.csv`, so a resumed run aggregates all its cells.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use crate::output::rows::{self, CellRow, Row, SummaryRow};

/// The figures aggregated, as `cells.csv` column names.
pub const FIGURES: [&str; 8] = [
    "throughput_rps",
    "throughput_steady_rps",
    "latency_p50_us",
    "latency_p95_us",
    "latency_p99_us",
    "success_rate",
    "server_rss_peak_bytes",
    "server_rss_hwm_bytes",
];

/// The per-figure statistics, as the suffixes of `summary.csv`'s `<figure>_<stat>` columns.
pub const MEAN: &str = "mean";
pub const SD: &str = "sd";
pub const CI95_LOW: &str = "ci95_low";
pub const CI95_HIGH: &str = "ci95_high";

/// The number of repetitions aggregated in a `summary.csv` row.
pub const REPETITIONS: &str = "repetitions";

/// A variant is its own condition: its cells are never pooled with another variant's.
const GROUP: [&str; 6] = ["variant", "stage", "stack", "regime", "concurrency", "mode"];

/// Two-sided 97.5 % quantile of Student's t for 1..=30 degrees of freedom; 1.96 beyond.
fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// Mean, sample standard deviation and the 95 % interval of the mean (both `None` for
/// n < 2: one repetition has no spread to report, not a spread of zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub n: usize,
    pub mean: f64,
    pub sd: Option<f64>,
    pub ci: Option<(f64, f64)>,
}

pub fn interval(values: &[f64]) -> Interval {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return Interval {
            n,
            mean,
            sd: None,
            ci: None,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let half = t_975(n - 1) * sd / (n as f64).sqrt();
    Interval {
        n,
        mean,
        sd: Some(sd),
        ci: Some((mean - half, mean + half)),
    }
}

/// The statistics of one figure as `summary.csv` writes them: all empty when no repetition
/// has a value (e.g. no steady window), sd and interval empty for one repetition.
fn stats(rows: &[&CellRow], figure: &str) -> [Option<f64>; 4] {
    // A steady rate stands for the group only if every repetition's window was long enough;
    // else it is left empty and readers take `throughput_rps`, as without a window.
    if figure == "throughput_steady_rps" && !rows.iter().all(|r| r.steady_valid()) {
        return [None; 4];
    }
    let values: Vec<f64> = rows.iter().filter_map(|r| r.number(figure)).collect();
    if values.is_empty() {
        return [None; 4];
    }
    let iv = interval(&values);
    [Some(iv.mean), iv.sd, iv.ci.map(|c| c.0), iv.ci.map(|c| c.1)]
}

/// The `summary.csv` row of one group of cells (its repetitions).
pub fn summary_row(rows: &[&CellRow]) -> SummaryRow {
    let first = rows[0];
    let [throughput_rps_mean, throughput_rps_sd, throughput_rps_ci95_low, throughput_rps_ci95_high] =
        stats(rows, FIGURES[0]);
    let [throughput_steady_rps_mean, throughput_steady_rps_sd, throughput_steady_rps_ci95_low, throughput_steady_rps_ci95_high] =
        stats(rows, FIGURES[1]);
    let [latency_p50_us_mean, latency_p50_us_sd, latency_p50_us_ci95_low, latency_p50_us_ci95_high] =
        stats(rows, FIGURES[2]);
    let [latency_p95_us_mean, latency_p95_us_sd, latency_p95_us_ci95_low, latency_p95_us_ci95_high] =
        stats(rows, FIGURES[3]);
    let [latency_p99_us_mean, latency_p99_us_sd, latency_p99_us_ci95_low, latency_p99_us_ci95_high] =
        stats(rows, FIGURES[4]);
    let [success_rate_mean, success_rate_sd, success_rate_ci95_low, success_rate_ci95_high] =
        stats(rows, FIGURES[5]);
    let [server_rss_peak_bytes_mean, server_rss_peak_bytes_sd, server_rss_peak_bytes_ci95_low, server_rss_peak_bytes_ci95_high] =
        stats(rows, FIGURES[6]);
    let [server_rss_hwm_bytes_mean, server_rss_hwm_bytes_sd, server_rss_hwm_bytes_ci95_low, server_rss_hwm_bytes_ci95_high] =
        stats(rows, FIGURES[7]);
    SummaryRow {
        variant: first.variant.clone(),
        stage: first.stage.clone(),
        stack: first.stack.clone(),
        regime: first.regime.clone(),
        concurrency: first.concurrency,
        mode: first.mode.clone(),
        repetitions: rows.len(),
        throughput_rps_mean,
        throughput_rps_sd,
        throughput_rps_ci95_low,
        throughput_rps_ci95_high,
        throughput_steady_rps_mean,
        throughput_steady_rps_sd,
        throughput_steady_rps_ci95_low,
        throughput_steady_rps_ci95_high,
        latency_p50_us_mean,
        latency_p50_us_sd,
        latency_p50_us_ci95_low,
        latency_p50_us_ci95_high,
        latency_p95_us_mean,
        latency_p95_us_sd,
        latency_p95_us_ci95_low,
        latency_p95_us_ci95_high,
        latency_p99_us_mean,
        latency_p99_us_sd,
        latency_p99_us_ci95_low,
        latency_p99_us_ci95_high,
        success_rate_mean,
        success_rate_sd,
        success_rate_ci95_low,
        success_rate_ci95_high,
        server_rss_peak_bytes_mean,
        server_rss_peak_bytes_sd,
        server_rss_peak_bytes_ci95_low,
        server_rss_peak_bytes_ci95_high,
        server_rss_hwm_bytes_mean,
        server_rss_hwm_bytes_sd,
        server_rss_hwm_bytes_ci95_low,
        server_rss_hwm_bytes_ci95_high,
    }
}

/// Writes `summary.csv` in `dir` from its `cells.csv`.
pub fn write(dir: &Path) -> anyhow::Result<()> {
    let cells = dir.join("cells.csv");
    if !cells.exists() {
        return Ok(());
    }
    let table = rows::read::<CellRow>(&cells)?;
    // Grouped by the key as text, so groups keep the order they always had in the file.
    let mut groups: BTreeMap<Vec<String>, Vec<&CellRow>> = BTreeMap::new();
    for row in table.rows.iter().filter(|r| r.ran()) {
        let key = GROUP
            .iter()
            .map(|g| row.text(g).unwrap_or_default())
            .collect();
        groups.entry(key).or_default().push(row);
    }
    let summary: Vec<SummaryRow> = groups.values().map(|g| summary_row(g)).collect();
    let tmp = dir.join("summary.csv.tmp");
    rows::write(&tmp, &summary)?;
    std::fs::rename(&tmp, dir.join("summary.csv")).context("cannot write summary.csv")?;
    // Memory per connection is a figure of the same cells, so it is refreshed with them.
    crate::report::memory::write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_matches_a_hand_computation() {
        let iv = interval(&[10.0, 12.0, 14.0]);
        assert_eq!(iv.n, 3);
        assert!((iv.mean - 12.0).abs() < 1e-12);
        assert!((iv.sd.unwrap() - 2.0).abs() < 1e-12);
        let (lo, hi) = iv.ci.unwrap();
        // 12 ± 4.303 · 2 / √3
        assert!((hi - 12.0 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!((12.0 - lo - (hi - 12.0)).abs() < 1e-9);
        let single = interval(&[5.0]);
        assert_eq!((single.mean, single.sd, single.ci), (5.0, None, None));
    }

    /// `summary.csv`'s columns are the group, the count and every figure × statistic, and
    /// every figure is a numeric `cells.csv` column.
    #[test]
    fn summary_columns_are_the_figures_of_cells_csv() {
        let mut expected: Vec<String> = GROUP.iter().map(|s| s.to_string()).collect();
        expected.push(REPETITIONS.into());
        for f in FIGURES {
            assert_eq!(CellRow::numeric(f), Some(true), "{f}");
            for s in [MEAN, SD, CI95_LOW, CI95_HIGH] {
                expected.push(format!("{f}_{s}"));
            }
        }
        assert_eq!(SummaryRow::COLUMNS, expected);
    }

    /// The committed reference summary is what this code writes from the committed cells.
    #[test]
    fn committed_summary_regenerates_byte_for_byte() {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/reference");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(committed.join("cells.csv"), dir.path().join("cells.csv")).unwrap();
        write(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("summary.csv")).unwrap(),
            std::fs::read_to_string(committed.join("summary.csv")).unwrap()
        );
    }
}
