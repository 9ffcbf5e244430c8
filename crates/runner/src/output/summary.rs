//! `summary.csv`: every (variant, stage, stack, regime, concurrency, mode) aggregated across its
//! repetitions — mean, sample standard deviation and a 95 % Student-t confidence interval of
//! the mean, per figure. Read back from `cells.csv`, so a resumed run aggregates all its cells.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

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

/// Writes `summary.csv` in `dir` from its `cells.csv`.
pub fn write(dir: &Path) -> anyhow::Result<()> {
    let cells = dir.join("cells.csv");
    if !cells.exists() {
        return Ok(());
    }
    let mut reader = csv::Reader::from_path(&cells)
        .with_context(|| format!("cannot read {}", cells.display()))?;
    let headers = reader.headers()?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let group_cols: Vec<usize> = GROUP.iter().filter_map(|g| col(g)).collect();
    let mut groups: BTreeMap<Vec<String>, Vec<Vec<f64>>> = BTreeMap::new();
    for record in reader.records() {
        let record = record?;
        if col("error").is_some_and(|i| !record[i].is_empty()) {
            continue;
        }
        let key: Vec<String> = group_cols.iter().map(|i| record[*i].to_string()).collect();
        let values: Vec<f64> = FIGURES
            .iter()
            .map(|f| {
                col(f)
                    .and_then(|i| record[i].parse().ok())
                    .unwrap_or(f64::NAN)
            })
            .collect();
        groups.entry(key).or_default().push(values);
    }
    let tmp = dir.join("summary.csv.tmp");
    let mut out = csv::Writer::from_path(&tmp)?;
    let mut header: Vec<String> = GROUP.iter().map(|s| s.to_string()).collect();
    header.push(REPETITIONS.into());
    for f in FIGURES {
        for suffix in [MEAN, SD, CI95_LOW, CI95_HIGH] {
            header.push(format!("{f}_{suffix}"));
        }
    }
    out.write_record(&header)?;
    for (key, rows) in &groups {
        let mut record = key.clone();
        record.push(rows.len().to_string());
        for (i, _) in FIGURES.iter().enumerate() {
            let values: Vec<f64> = rows
                .iter()
                .map(|r| r[i])
                .filter(|v| v.is_finite())
                .collect();
            if values.is_empty() {
                // The column is absent or empty in every repetition (e.g. no steady window).
                record.extend(std::iter::repeat_n(String::new(), 4));
                continue;
            }
            let iv = interval(&values);
            record.push(format!("{:.6}", iv.mean));
            record.push(iv.sd.map(|sd| format!("{sd:.6}")).unwrap_or_default());
            match iv.ci {
                Some((lo, hi)) => {
                    record.push(format!("{lo:.6}"));
                    record.push(format!("{hi:.6}"));
                }
                None => {
                    record.push(String::new());
                    record.push(String::new());
                }
            }
        }
        out.write_record(&record)?;
    }
    out.flush()?;
    drop(out);
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
}
