//! How the reports show memory per open connection; the fits themselves, and `memory.csv`,
//! are results ([`crate::output::memory`]).

use stats::Fit;

pub use crate::output::memory::{fits, open_connections, write, MemoryFit, MIN_LEVELS};

/// A fit as the reports show it: `slope [low, high]` KB per connection, intercept in MB.
pub fn describe(f: &Fit) -> (String, String) {
    (
        format!(
            "{:.1} [{:.1}, {:.1}]",
            f.slope / 1e3,
            f.slope_ci95.0 / 1e3,
            f.slope_ci95.1 / 1e3
        ),
        format!("{:.1}", f.intercept / 1e6),
    )
}

/// What a fit's 95 % interval says about memory per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// The interval lies above 0: a per-connection cost, shown with its interval.
    Growth,
    /// The interval includes 0: the cells cannot tell a per-connection cost from noise.
    Unresolved,
    /// The interval lies below 0: RSS fell as connections rose, which no per-connection cost
    /// explains (allocator reuse, another process's effect, or a service that freed memory).
    Falling,
}

pub fn resolved(f: &Fit) -> Resolved {
    let (lo, hi) = f.slope_ci95;
    if lo > 0.0 {
        Resolved::Growth
    } else if hi < 0.0 {
        Resolved::Falling
    } else {
        Resolved::Unresolved
    }
}

/// The slope as the report's table shows it: `slope [low, high]` KB per connection when the
/// interval lies above 0, else what the interval says instead of a per-connection figure
/// that would read as negative memory (`memory.csv` keeps the fitted numbers).
pub fn slope_shown(f: &Fit) -> String {
    match resolved(f) {
        Resolved::Growth => describe(f).0,
        Resolved::Unresolved => format!(
            "not resolved: 95 % CI spans 0 (± {:.1} KB)",
            (f.slope_ci95.1 - f.slope_ci95.0) / 2e3
        ),
        Resolved::Falling => "none: RSS fell as connections rose".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::rows::{self, CellRow, MemoryRow, Row};

    #[test]
    fn fewer_than_three_levels_give_no_fit() {
        let row = |c: u32, rss: u64| CellRow {
            stage: "stress".into(),
            variant: "default".into(),
            stack: "h3".into(),
            regime: "reuse".into(),
            concurrency: c,
            server_rss_peak_bytes: Some(rss),
            ..CellRow::default()
        };
        let two = [row(10, 1000), row(20, 2000)];
        assert!(fits(&two).is_empty());
        let three = [row(10, 1000), row(20, 2000), row(40, 4000)];
        let got: Vec<MemoryFit> = fits(&three)
            .into_iter()
            .filter(|m| m.role == "server")
            .collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].rss_column, "server_rss_peak_bytes");
        assert!((got[0].fit.slope - 100.0).abs() < 1e-9);
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
        crate::output::summary::write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("memory.csv")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], MemoryRow::COLUMNS.join(","));
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
