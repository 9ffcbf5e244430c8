//! Statistics the claim verdicts need beyond `summary.csv`'s Student-t intervals: exact
//! binomial bounds for failure rates (C3) and the coefficient of variation (C1's stability).

use crate::output::summary::interval;

/// Two-sided 95 % Clopper–Pearson interval of a binomial proportion: `k` events in `n` trials.
/// Exact (from the binomial CDF, each tail 2.5 %), so it stays valid at k = 0, where the upper
/// end is `1 − 0.025^(1/n)` (one-sided 95 % would be `1 − 0.05^(1/n)`, smaller).
pub fn clopper_pearson_95(k: u64, n: u64) -> (f64, f64) {
    const TAIL: f64 = 0.025;
    if n == 0 {
        return (0.0, 1.0);
    }
    let k = k.min(n);
    let upper = if k == n {
        1.0
    } else {
        // P(X ≤ k; p) falls from 1 to 0 as p grows: the upper end is where it reaches 2.5 %.
        solve_decreasing(|p| binomial_cdf(k, n, p), TAIL)
    };
    let lower = if k == 0 {
        0.0
    } else {
        // P(X ≥ k; p) = 1 − P(X ≤ k − 1; p) reaches 2.5 % at the lower end.
        solve_decreasing(|p| binomial_cdf(k - 1, n, p), 1.0 - TAIL)
    };
    (lower, upper)
}

/// The p in (0, 1) where a decreasing `f` crosses `target`, by bisection to ~1e-15.
pub(super) fn solve_decreasing(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// P(X ≤ k) for X ~ Binomial(n, p), summed in log space so that large n does not underflow.
pub(super) fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if k >= n { 1.0 } else { 0.0 };
    }
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    let mut ln_choose = 0.0;
    let mut terms = Vec::with_capacity(k.min(n) as usize + 1);
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        terms.push(ln_choose + i as f64 * ln_p + (n - i) as f64 * ln_q);
    }
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}

/// Coefficient of variation (sample sd / mean) of a series; `None` below two values.
pub(super) fn cv(values: &[f64]) -> Option<f64> {
    let iv = interval(values);
    iv.sd.filter(|_| iv.mean != 0.0).map(|sd| sd / iv.mean)
}

/// Requests with no failure needed before the two-sided 95 % upper bound falls below `rate`.
pub(super) fn requests_to_bound(rate: f64) -> u64 {
    (0.025_f64.ln() / (-rate).ln_1p()).floor() as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clopper_pearson_zero_failures_has_the_closed_form() {
        let (lo, hi) = clopper_pearson_95(0, 5000);
        assert_eq!(lo, 0.0);
        assert!((hi - (1.0 - 0.025_f64.powf(1.0 / 5000.0))).abs() < 1e-12);
        assert!(hi > 0.0006, "5,000 clean requests cannot show < 0.06 %");
    }

    #[test]
    fn clopper_pearson_matches_a_table_value() {
        // 1 in 10: the exact 95 % interval is 0.0025 – 0.4450.
        let (lo, hi) = clopper_pearson_95(1, 10);
        assert!((lo - 0.002529).abs() < 1e-5, "{lo}");
        assert!((hi - 0.445016).abs() < 1e-5, "{hi}");
        assert_eq!(clopper_pearson_95(10, 10).1, 1.0);
    }

    #[test]
    fn requests_to_bound_is_the_first_n_below_the_rate() {
        let n = requests_to_bound(0.0006);
        assert!(clopper_pearson_95(0, n).1 < 0.0006);
        assert!(clopper_pearson_95(0, n - 1).1 >= 0.0006);
    }
}
