//! Exact (Clopper–Pearson) bounds of a binomial proportion: `k` events in `n` trials. Exact
//! means from the binomial distribution itself, so they stay valid at k = 0 and k = n, where
//! normal approximations fail; the study's failure rates are mostly there. Own code, not
//! statrs's `Beta::inverse_cdf`: in 0.18 it misses the closed form 0.05^(1/5000) of 5,000
//! successes in 5,000 by more than 1e-12 (`one_sided_bounds_have_the_closed_form_at_the_extremes`),
//! where the exact inversion of the binomial sum below meets it.

/// P(X ≤ k) for X ~ Binomial(n, p), summed in log space so that large n does not underflow.
pub fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    Cdf::new(k, n).at(p)
}

/// Terms more than this far below the largest (in natural log) are exactly 0 once
/// exponentiated (`exp` underflows to 0 below ≈ −745), so leaving them out changes no bit.
const NEGLIGIBLE_LN: f64 = -800.0;

/// P(X ≤ k) for one k and n at many p (a bound's bisection asks 100): the log binomial
/// coefficients are computed once, and each p sums only the terms that are not exactly 0
/// after `exp`, which lie around the distribution's mode (the log terms are concave in i).
/// Bit for bit the full sum in index order, in O(√n) per p instead of O(k) logarithms.
struct Cdf {
    n: u64,
    /// ln C(n, i) for i = 0 ..= min(k, n), accumulated as the full sum accumulates them.
    ln_choose: Vec<f64>,
}

impl Cdf {
    fn new(k: u64, n: u64) -> Cdf {
        let last = k.min(n);
        let mut ln_choose = Vec::with_capacity(last as usize + 1);
        let mut acc = 0.0;
        for i in 0..=last {
            if i > 0 {
                acc += ((n - i + 1) as f64).ln() - (i as f64).ln();
            }
            ln_choose.push(acc);
        }
        Cdf { n, ln_choose }
    }

    fn at(&self, p: f64) -> f64 {
        let n = self.n;
        let last = self.ln_choose.len() - 1;
        if p <= 0.0 {
            return 1.0;
        }
        if p >= 1.0 {
            return if last as u64 >= n { 1.0 } else { 0.0 };
        }
        let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
        let term = |i: usize| self.ln_choose[i] + i as f64 * ln_p + (n - i as u64) as f64 * ln_q;
        // Out from the mode (or from the last term, when the mode lies beyond it) while the
        // terms are not negligible against the largest seen.
        let mode = (((n + 1) as f64 * p).floor() as usize).min(last);
        let mut max = term(mode);
        let mut lo = mode;
        while lo > 0 {
            let t = term(lo - 1);
            max = max.max(t);
            if t - max < NEGLIGIBLE_LN {
                break;
            }
            lo -= 1;
        }
        let mut hi = mode;
        while hi < last {
            let t = term(hi + 1);
            max = max.max(t);
            if t - max < NEGLIGIBLE_LN {
                break;
            }
            hi += 1;
        }
        let sum: f64 = (lo..=hi).map(|i| (term(i) - max).exp()).sum();
        (max + sum.ln()).exp().min(1.0)
    }
}

/// The p in (0, 1) where a decreasing `f` crosses `target`, by bisection to ~1e-15.
fn solve_decreasing(f: impl Fn(f64) -> f64, target: f64) -> f64 {
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

/// The p at which `k` or fewer events in `n` trials have probability `tail`: the upper end.
fn upper_end(k: u64, n: u64, tail: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    // P(X ≤ k; p) falls from 1 to 0 as p grows.
    let cdf = Cdf::new(k, n);
    solve_decreasing(|p| cdf.at(p), tail)
}

/// The p at which `k` or more events in `n` trials have probability `tail`: the lower end.
fn lower_end(k: u64, n: u64, tail: f64) -> f64 {
    if k == 0 {
        return 0.0;
    }
    // P(X ≥ k; p) = 1 − P(X ≤ k − 1; p) reaches `tail` where P(X ≤ k − 1; p) is 1 − tail.
    let cdf = Cdf::new(k - 1, n);
    solve_decreasing(|p| cdf.at(p), 1.0 - tail)
}

/// Two-sided Clopper–Pearson interval at confidence 1 − `alpha` (each tail `alpha` / 2).
/// (0, 1) for n = 0: no trials say nothing.
pub fn clopper_pearson(k: u64, n: u64, alpha: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let k = k.min(n);
    let tail = alpha / 2.0;
    (lower_end(k, n, tail), upper_end(k, n, tail))
}

/// Two-sided 95 % Clopper–Pearson interval. At k = 0 its upper end is `1 − 0.025^(1/n)`
/// (the one-sided 95 % bound, [`clopper_pearson_upper`], is `1 − 0.05^(1/n)`, smaller).
pub fn clopper_pearson_95(k: u64, n: u64) -> (f64, f64) {
    clopper_pearson(k, n, 0.05)
}

/// One-sided Clopper–Pearson upper bound at confidence 1 − `alpha`: the proportion is below
/// it with that confidence (1 for n = 0). For a claim "the failure rate is below r".
pub fn clopper_pearson_upper(k: u64, n: u64, alpha: f64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    upper_end(k.min(n), n, alpha)
}

/// One-sided Clopper–Pearson lower bound at confidence 1 − `alpha`: the proportion is above
/// it with that confidence (0 for n = 0). For a claim "the success rate is above s"; it equals
/// 1 − [`clopper_pearson_upper`] of the failures.
pub fn clopper_pearson_lower(k: u64, n: u64, alpha: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    lower_end(k.min(n), n, alpha)
}

/// The fewest trials without a single event whose upper bound (one tail of probability
/// `tail`: 0.025 for the two-sided 95 % interval, 0.05 for the one-sided 95 % bound) falls
/// below `rate`: the n a claim "rate < r" needs before it can be shown at all.
pub fn zero_failure_trials_below(rate: f64, tail: f64) -> u64 {
    (tail.ln() / (-rate).ln_1p()).floor() as u64 + 1
}

/// The fewest trials, at the observed event rate, whose one-sided upper bound at confidence
/// 1 − `alpha` ([`clopper_pearson_upper`] of `round(observed · n)` events) falls below `rate`:
/// the n a claim "rate < r" would need given what was seen. `None` when the observed rate is
/// not below `rate` (no n shows it) or the n would exceed 10⁹. For no event it is
/// [`zero_failure_trials_below`].
pub fn trials_to_show_below(observed: f64, rate: f64, alpha: f64) -> Option<u64> {
    const MAX_TRIALS: u64 = 1_000_000_000;
    if observed.is_nan() || observed >= rate || observed < 0.0 {
        return None;
    }
    if observed == 0.0 {
        return Some(zero_failure_trials_below(rate, alpha));
    }
    let shows =
        |n: u64| clopper_pearson_upper((observed * n as f64).round() as u64, n, alpha) < rate;
    // Doubling to a shown n, then bisection between the last n that did not show it and it.
    let mut hi = zero_failure_trials_below(rate, alpha);
    while !shows(hi) {
        if hi > MAX_TRIALS {
            return None;
        }
        hi *= 2;
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if shows(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn zero_events_have_the_closed_form() {
        let (lo, hi) = clopper_pearson_95(0, 5000);
        assert_eq!(lo, 0.0);
        assert!(close(hi, 1.0 - 0.025_f64.powf(1.0 / 5000.0), 1e-12));
        // 0 in 5,000 cannot show a failure rate below 0.06 %; 0 in 20,000 can.
        assert!(hi > 0.0006);
        assert!(clopper_pearson_95(0, 20_000).1 < 0.0006);
        assert_eq!(clopper_pearson_95(10, 10).1, 1.0);
        assert_eq!(clopper_pearson_95(0, 0), (0.0, 1.0));
    }

    /// Exact 95 % intervals as published in binomial confidence-interval tables.
    #[test]
    fn two_sided_bounds_match_table_values() {
        for (k, n, lo, hi) in [
            (1, 10, 0.002529, 0.445016),
            (3, 100, 0.00622, 0.08518),
            (5, 20, 0.08657, 0.49105),
            (10, 10, 0.69150, 1.0),
        ] {
            let (l, h) = clopper_pearson_95(k, n);
            assert!(close(l, lo, 5e-5), "{k}/{n}: lower {l} vs {lo}");
            assert!(close(h, hi, 5e-5), "{k}/{n}: upper {h} vs {hi}");
        }
    }

    /// One-sided 95 %: all 5,000 successes bound the success rate below by 0.05^(1/5000), so
    /// the failure rate is below 1 − 0.05^(1/5000) ≈ 0.0599 %, under the study's 0.06 %.
    #[test]
    fn one_sided_bounds_have_the_closed_form_at_the_extremes() {
        let lower = clopper_pearson_lower(5000, 5000, 0.05);
        assert!(close(lower, 0.05_f64.powf(1.0 / 5000.0), 1e-12), "{lower}");
        let upper = clopper_pearson_upper(0, 5000, 0.05);
        assert!(
            close(upper, 1.0 - 0.05_f64.powf(1.0 / 5000.0), 1e-12),
            "{upper}"
        );
        assert!(upper < 0.0006 && clopper_pearson_95(0, 5000).1 > 0.0006);
        assert_eq!(clopper_pearson_lower(0, 10, 0.05), 0.0);
        assert_eq!(clopper_pearson_upper(10, 10, 0.05), 1.0);
    }

    /// A one-sided bound at α is the matching end of the two-sided interval at 2α, and the
    /// lower bound of successes mirrors the upper bound of failures.
    #[test]
    fn one_sided_bounds_are_the_ends_of_the_two_sided_interval_at_twice_alpha() {
        for (k, n) in [(1, 10), (3, 100), (5, 20), (4990, 5000)] {
            let (lo, hi) = clopper_pearson(k, n, 0.10);
            assert!(close(clopper_pearson_lower(k, n, 0.05), lo, 1e-12));
            assert!(close(clopper_pearson_upper(k, n, 0.05), hi, 1e-12));
            let mirrored = 1.0 - clopper_pearson_upper(n - k, n, 0.05);
            assert!(close(clopper_pearson_lower(k, n, 0.05), mirrored, 1e-9));
        }
        // 1 in 10 one-sided 95 % upper bound (tables): 0.3942.
        assert!(close(clopper_pearson_upper(1, 10, 0.05), 0.39416, 5e-5));
    }

    #[test]
    fn zero_failure_trials_are_the_first_n_below_the_rate() {
        for tail in [0.025, 0.05] {
            let n = zero_failure_trials_below(0.0006, tail);
            let upper = |n| clopper_pearson_upper(0, n, tail);
            assert!(upper(n) < 0.0006, "{tail}");
            assert!(upper(n - 1) >= 0.0006, "{tail}");
        }
        assert_eq!(zero_failure_trials_below(0.0006, 0.05), 4992);
    }

    #[test]
    fn trials_to_show_a_rate_grow_as_the_observed_rate_nears_it() {
        assert_eq!(trials_to_show_below(0.0, 0.0006, 0.05), Some(4992));
        let n = trials_to_show_below(0.0003, 0.0006, 0.05).unwrap();
        let upper = |n: u64| clopper_pearson_upper((0.0003 * n as f64).round() as u64, n, 0.05);
        assert!(upper(n) < 0.0006 && upper(n - 1) >= 0.0006, "{n}");
        assert!(n > 4992);
        assert!(trials_to_show_below(0.0005, 0.0006, 0.05).unwrap() > n);
        assert_eq!(trials_to_show_below(0.0006, 0.0006, 0.05), None);
        assert_eq!(trials_to_show_below(0.05, 0.0006, 0.05), None);
    }

    /// The full sum in index order, every term computed: what [`Cdf`] must equal bit for bit.
    fn full_sum(k: u64, n: u64, p: f64) -> f64 {
        let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
        let mut ln_choose = 0.0;
        let mut terms = Vec::new();
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

    #[test]
    fn the_windowed_sum_is_the_full_sum_bit_for_bit() {
        let mut checked = 0;
        for n in [1u64, 7, 100, 5_000, 123_457, 2_000_000] {
            for k in [0, 1, n / 1000, n / 10, n / 2, n.saturating_sub(3), n] {
                for p in [1e-9, 1e-6, 0.0006, 0.01, 0.3, 0.5, 0.97, 1.0 - 1e-9] {
                    let (fast, full) = (binomial_cdf(k, n, p), full_sum(k, n, p));
                    assert_eq!(fast.to_bits(), full.to_bits(), "k {k} n {n} p {p}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 6 * 7 * 8);
    }

    #[test]
    fn binomial_cdf_sums_to_one_and_matches_small_cases() {
        assert!(close(binomial_cdf(10, 10, 0.3), 1.0, 1e-12));
        // P(X ≤ 1) for n = 3, p = 0.5 is 4/8.
        assert!(close(binomial_cdf(1, 3, 0.5), 0.5, 1e-12));
        assert_eq!(binomial_cdf(2, 5, 0.0), 1.0);
        assert_eq!(binomial_cdf(2, 5, 1.0), 0.0);
    }
}
