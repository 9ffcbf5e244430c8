//! `summary.csv`: every (variant, stage, stack, regime, concurrency, mode, rate) aggregated across its
//! repetitions — mean, sample standard deviation and a 95 % Student-t confidence interval of
//! the mean, per figure ([`stats::interval`]). Read back from `cells.csv`, so a resumed run
//! aggregates all its cells.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use stats::interval;

use crate::rows::{self, CellRow, Row, SummaryRow};

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
/// A rate sweep's points are groups of their own (`rate_rps`, empty in closed loop).
const GROUP: [&str; 7] = [
    "variant",
    "stage",
    "stack",
    "regime",
    "concurrency",
    "mode",
    "rate_rps",
];

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
        rate_rps: first.rate_rps,
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
    // The latency–throughput curve of a rate sweep is a figure of the same cells too.
    crate::curve::write(dir)?;
    // Memory per connection is a figure of the same cells, so it is refreshed with them.
    crate::memory::write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The committed runs' `memory.csv` and the reference's `summary.csv` are what this code
    /// writes from their `cells.csv`: the statistics may move between crates, the published
    /// figures may not.
    #[test]
    fn committed_summaries_regenerate_byte_for_byte() {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        let mut runs = vec![results.join("reference"), results.join("scale")];
        for e in std::fs::read_dir(results.join("claims")).unwrap() {
            runs.push(e.unwrap().path());
        }
        runs.push(results.join("client-impl"));
        let mut stale = Vec::new();
        for committed in runs {
            let dir = tempfile::tempdir().unwrap();
            std::fs::copy(committed.join("cells.csv"), dir.path().join("cells.csv")).unwrap();
            write(dir.path()).unwrap();
            // summary.csv only for the reference: the other runs' summaries predate the
            // steady-window rule (an invalid window leaves the steady rate empty) and are
            // rewritten when those runs are.
            let files: &[&str] = if committed.ends_with("reference") {
                &["summary.csv", "memory.csv"]
            } else {
                &["memory.csv"]
            };
            for file in files {
                if std::fs::read(dir.path().join(file)).unwrap()
                    != std::fs::read(committed.join(file)).unwrap()
                {
                    stale.push(committed.join(file).display().to_string());
                }
            }
        }
        assert!(
            stale.is_empty(),
            "differ from the committed files: {stale:#?}"
        );
    }

    #[test]
    fn summary_write_also_writes_memory_csv() {
        let dir = tempfile::tempdir().unwrap();
        let cells: Vec<CellRow> = [100, 200, 400]
            .into_iter()
            .map(|c| CellRow {
                cell_key: format!("h1/reuse/c{c}/r1"),
                variant: "default".into(),
                stage: "stress".into(),
                stack: "h1".into(),
                regime: "reuse".into(),
                concurrency: c,
                mode: "closed".into(),
                repetition: 1,
                server_rss_hwm_bytes: Some(10_000_000 + 20_000 * c as u64),
                ..CellRow::default()
            })
            .collect();
        rows::write(&dir.path().join("cells.csv"), &cells).unwrap();
        write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("memory.csv")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], crate::rows::MemoryRow::COLUMNS.join(","));
        // The client's RSS is flat (0 in these rows): a fit with no R², listed first.
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].starts_with("default,h1,reuse,client,"), "{text}");
        assert!(
            lines[2].starts_with("default,h1,reuse,server,server_rss_hwm_bytes,3,3,20.000,"),
            "{text}"
        );
        assert!(lines[2].contains(",10.000,1.0000"), "{text}");
    }
}
