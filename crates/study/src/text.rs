//! Number and sentence formats of the paper: one definition each, so every section writes a
//! figure, an interval or a throughput note alike.

use stats::Interval;

use crate::run::{BothRates, STEADY_RPS};

/// `12345.6` → `12,346`.
pub(crate) fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// `n` and its noun, singular for one: `1 session`, `3 sessions`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Mean with its 95 % interval when there are repetitions: `12.4 [11.9, 12.9]`.
pub(crate) fn show(iv: &Interval, scale: f64, decimals: usize) -> String {
    match iv.ci {
        Some((lo, hi)) => format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            iv.mean * scale,
            lo * scale,
            hi * scale,
            d = decimals
        ),
        None => format!("{:.d$}", iv.mean * scale, d = decimals),
    }
}

pub(crate) fn show_rps(iv: &Interval) -> String {
    match iv.ci {
        Some((lo, hi)) => format!(
            "{} [{}, {}]",
            thousands(iv.mean),
            thousands(lo),
            thousands(hi)
        ),
        None => thousands(iv.mean),
    }
}

/// Throughput with its interval; `†` marks a cell measured as `ok / elapsed_s` because it had
/// no steady window or one too short to stand for the cell.
pub(crate) fn show_tput((iv, fallback): &(Interval, bool)) -> String {
    format!("{}{}", show_rps(iv), if *fallback { " †" } else { "" })
}

/// Both throughput figures of a cell, as printed beside verdicts and knees: "steady 2,078
/// (window too short) · ok/elapsed 461 req/s".
pub(crate) fn show_both(rates: &BothRates) -> String {
    let steady = match rates.steady {
        Some((rps, true)) => format!("steady {}", thousands(rps)),
        Some((rps, false)) => format!("steady {} (window too short: invalid)", thousands(rps)),
        None => "no steady window".to_string(),
    };
    let elapsed = rates.elapsed.map_or("—".to_string(), thousands);
    format!("{steady} · ok/elapsed {elapsed} req/s")
}

/// Footnote for `†`, with the runner's validity rule ([`results::rows::steady_window_valid_for`]).
pub(crate) fn fallback_note() -> String {
    use results::rows::{MIN_STEADY_FRACTION_OF_ELAPSED, MIN_STEADY_OK_PER_WORKER};
    format!(
        "† no steady window in this cell, or one too short to stand for it (under {} successes per worker or under {} % of the phase): `ok / elapsed_s` instead.",
        plain(MIN_STEADY_OK_PER_WORKER),
        plain(MIN_STEADY_FRACTION_OF_ELAPSED * 100.0)
    )
}

/// A claimed figure as the study wrote it: up to six decimals, trailing zeros dropped
/// (`25.0` → `25`, a 0.0006 rate × 100 → `0.06`).
pub(crate) fn plain(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A fraction as a percentage with `digits` decimals (bounds near a claimed 0.06 % need four).
pub(crate) fn pct_digits(x: f64, digits: usize) -> String {
    format!("{:.digits$} %", x * 100.0)
}

pub(crate) fn throughput_note(col: &str) -> &'static str {
    if col == STEADY_RPS {
        "steady-state req/s (`throughput_steady_rps`: the window in which all workers are active)"
    } else {
        "req/s as `ok / elapsed_s` (`throughput_rps`, ramp-up and drain included: this run has no steady-state column)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rates_mark_an_invalid_steady_window() {
        let both = |steady, elapsed| show_both(&BothRates { steady, elapsed });
        assert_eq!(
            both(Some((2078.0, false)), Some(461.0)),
            "steady 2,078 (window too short: invalid) · ok/elapsed 461 req/s"
        );
        assert_eq!(
            both(Some((2589.0, true)), Some(2614.0)),
            "steady 2,589 · ok/elapsed 2,614 req/s"
        );
        assert_eq!(
            both(None, Some(965.0)),
            "no steady window · ok/elapsed 965 req/s"
        );
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }

    #[test]
    fn plain_drops_trailing_zeros() {
        assert_eq!(plain(25.0), "25");
        assert_eq!(plain(0.0006 * 100.0), "0.06");
        assert_eq!(plain(0.01 * 100.0), "1");
    }
}
