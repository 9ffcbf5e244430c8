//! Bounds that fit a proportion (k events in n trials) and a mean of session means: the Wilson
//! score interval, Newcombe's hybrid score interval of a difference of two proportions, the
//! pooling of sessions' counts with a per-session agreement check, and the interval of a mean
//! with the exact Student-t quantile. No bound of a proportion ever leaves [0, 1], and none of a
//! difference of proportions leaves [−1, 1]: a Student t over proportions can (an interval of
//! session success rates reaching below 0 % or above 100 %), so proportions never get one here.

use crate::binomial::{clopper_pearson, clopper_pearson_lower, clopper_pearson_upper};
use crate::interval::{mean, sample_sd};
use crate::student_t::t_quantile;

/// The `p` quantile of the standard normal distribution (statrs, through the inverse error
/// function).
pub fn normal_quantile(p: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    assert!(p > 0.0 && p < 1.0, "normal_quantile({p})");
    Normal::standard().inverse_cdf(p)
}

/// Wilson's score interval of k events in n trials, with the normal quantile `z` (1.96 for a
/// two-sided 95 % interval, 1.645 for each end of a one-sided 95 % bound). (0, 1) for n = 0.
/// Always inside [0, 1]; unlike the Wald interval it does not collapse to a point at k = 0 or
/// k = n.
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let k = k.min(n);
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let denom = 1.0 + z2 / n;
    (
        ((centre - half) / denom).clamp(0.0, 1.0),
        ((centre + half) / denom).clamp(0.0, 1.0),
    )
}

/// Whether a bound is one end of a two-sided interval (each tail α / 2) or a one-sided bound
/// (α in its one tail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sided {
    One,
    Two,
}

impl Sided {
    /// The probability in each tail a bound leaves out.
    pub fn tail(self, alpha: f64) -> f64 {
        match self {
            Sided::One => alpha,
            Sided::Two => alpha / 2.0,
        }
    }
}

/// The exact (Clopper–Pearson) lower and upper bounds of k in n at confidence 1 − `alpha`:
/// with [`Sided::Two`] the two-sided interval, with [`Sided::One`] the one-sided lower bound
/// and the one-sided upper bound (each a statement of its own at 1 − α).
pub fn exact_bounds(k: u64, n: u64, alpha: f64, sided: Sided) -> (f64, f64) {
    match sided {
        Sided::Two => clopper_pearson(k, n, alpha),
        Sided::One => (
            clopper_pearson_lower(k, n, alpha),
            clopper_pearson_upper(k, n, alpha),
        ),
    }
}

/// Newcombe's hybrid score interval (his method 10, 1998) of the difference p₁ − p₂ of two
/// independent proportions k₁/n₁ and k₂/n₂, from each one's Wilson interval at the normal
/// quantile `z`. Inside [−1, 1]. `None` when either n is 0.
pub fn newcombe_difference(k1: u64, n1: u64, k2: u64, n2: u64, z: f64) -> Option<(f64, f64)> {
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (p1, p2) = (k1.min(n1) as f64 / n1 as f64, k2.min(n2) as f64 / n2 as f64);
    let (l1, u1) = wilson(k1, n1, z);
    let (l2, u2) = wilson(k2, n2, z);
    let d = p1 - p2;
    let lower = d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let upper = d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    Some((lower.clamp(-1.0, 1.0), upper.clamp(-1.0, 1.0)))
}

/// Counts of one session (or one repetition): `k` events in `n` trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub k: u64,
    pub n: u64,
}

impl Counts {
    /// k / n; `None` for n = 0.
    pub fn rate(self) -> Option<f64> {
        (self.n > 0).then(|| self.k.min(self.n) as f64 / self.n as f64)
    }
}

/// One proportion over sessions: the sessions' counts pooled (Σk in Σn) with its exact bounds,
/// and each session's own exact bounds beside it, for the agreement check.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooled {
    pub pooled: Counts,
    /// Exact bounds of the pooled counts (see [`exact_bounds`]).
    pub bounds: (f64, f64),
    /// Each session's counts and exact bounds, in the order given.
    pub sessions: Vec<(Counts, (f64, f64))>,
}

impl Pooled {
    /// The per-session agreement check: the indices of the sessions whose own interval excludes
    /// the pooled rate. Empty when every session's interval holds it, which is what pooling
    /// their counts assumes.
    pub fn disagreeing(&self) -> Vec<usize> {
        let Some(rate) = self.pooled.rate() else {
            return Vec::new();
        };
        self.sessions
            .iter()
            .enumerate()
            .filter(|(_, (c, (lo, hi)))| c.n > 0 && (rate < *lo || rate > *hi))
            .map(|(i, _)| i)
            .collect()
    }
}

/// Pools sessions' counts (the between-session statistic of a proportion): exact bounds of Σk
/// in Σn at 1 − `alpha`, and each session's own, never a Student t over the session rates.
pub fn pool_sessions(sessions: &[Counts], alpha: f64, sided: Sided) -> Pooled {
    let pooled = Counts {
        k: sessions.iter().map(|c| c.k.min(c.n)).sum(),
        n: sessions.iter().map(|c| c.n).sum(),
    };
    Pooled {
        pooled,
        bounds: exact_bounds(pooled.k, pooled.n, alpha, sided),
        sessions: sessions
            .iter()
            .map(|c| (*c, exact_bounds(c.k, c.n, alpha, sided)))
            .collect(),
    }
}

/// The mean of `values` with its Student-t bounds at 1 − `alpha` and the exact quantile at
/// n − 1 degrees of freedom ([`t_quantile`]), stating n. Between sessions, `values` are the
/// session means (n = the number of sessions). `bounds` is `None` below two values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanBounds {
    pub n: usize,
    pub mean: f64,
    pub sd: Option<f64>,
    /// The t quantile used (1 − tail, n − 1 degrees of freedom).
    pub t: Option<f64>,
    pub bounds: Option<(f64, f64)>,
}

/// See [`MeanBounds`].
pub fn mean_bounds(values: &[f64], alpha: f64, sided: Sided) -> MeanBounds {
    let n = values.len();
    let m = mean(values);
    let sd = sample_sd(values);
    let t = sd.map(|_| t_quantile(1.0 - sided.tail(alpha), (n - 1) as f64));
    let bounds = sd.zip(t).map(|(sd, t)| {
        let half = t * sd / (n as f64).sqrt();
        (m - half, m + half)
    });
    MeanBounds {
        n,
        mean: m,
        sd,
        t,
        bounds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Standard normal table values.
    #[test]
    fn normal_quantiles_match_the_table() {
        for (p, z) in [
            (0.975, 1.959_964),
            (0.95, 1.644_854),
            (0.995, 2.575_829),
            (0.90, 1.281_552),
            (0.5, 0.0),
            (0.001, -3.090_232),
        ] {
            assert!(
                close(normal_quantile(p), z, 1e-6),
                "{p}: {}",
                normal_quantile(p)
            );
        }
    }

    /// Newcombe (1998), "Two-sided confidence intervals for the single proportion", Stat. Med.
    /// 17:857–872, Table I: the examples 81/263, 15/148, 0/20 and 1/29 with the Wilson score
    /// interval (method 3) and the exact Clopper–Pearson interval (method 5), 95 %.
    #[test]
    fn wilson_and_clopper_pearson_match_newcombe_1998_table() {
        let z = normal_quantile(0.975);
        for (k, n, wilson_lo, wilson_hi, exact_lo, exact_hi) in [
            (81, 263, 0.2553, 0.3662, 0.2527, 0.3676),
            (15, 148, 0.0624, 0.1605, 0.0578, 0.1617),
            (0, 20, 0.0, 0.1611, 0.0, 0.1684),
            (1, 29, 0.0061, 0.1718, 0.0009, 0.1776),
        ] {
            let (lo, hi) = wilson(k, n, z);
            assert!(close(lo, wilson_lo, 5e-5), "{k}/{n} Wilson lower {lo}");
            assert!(close(hi, wilson_hi, 5e-5), "{k}/{n} Wilson upper {hi}");
            let (lo, hi) = exact_bounds(k, n, 0.05, Sided::Two);
            assert!(close(lo, exact_lo, 5e-5), "{k}/{n} exact lower {lo}");
            assert!(close(hi, exact_hi, 5e-5), "{k}/{n} exact upper {hi}");
        }
    }

    /// Newcombe (1998), "Interval estimation for the difference between independent
    /// proportions", Stat. Med. 17:873–890, Table II, method 10 (hybrid score, no continuity
    /// correction), 95 %.
    #[test]
    fn differences_match_newcombe_1998_method_10() {
        let z = normal_quantile(0.975);
        for (k1, n1, k2, n2, lo, hi) in [
            (56, 70, 48, 80, 0.0524, 0.3339),
            (9, 10, 3, 10, 0.1705, 0.8090),
            (5, 56, 0, 29, -0.0381, 0.1926),
        ] {
            let (l, h) = newcombe_difference(k1, n1, k2, n2, z).unwrap();
            assert!(close(l, lo, 5e-5), "{k1}/{n1} − {k2}/{n2}: lower {l}");
            assert!(close(h, hi, 5e-5), "{k1}/{n1} − {k2}/{n2}: upper {h}");
        }
        assert_eq!(newcombe_difference(1, 0, 1, 2, z), None);
    }

    /// The committee's case: three sessions' success rates 3 %, 8.5 % and 14 % (about 1,000
    /// attempts each) gave a Student-t interval over the session rates of [−7.5 %, 24.6 %];
    /// pooled counts cannot leave [0, 1], nor can any bound here at the extremes.
    #[test]
    fn no_proportion_bound_leaves_zero_to_one() {
        let sessions = [
            Counts { k: 30, n: 1000 },
            Counts { k: 85, n: 1000 },
            Counts { k: 140, n: 1000 },
        ];
        let rates: Vec<f64> = sessions.iter().map(|c| c.rate().unwrap()).collect();
        let t = crate::interval::interval(&rates).ci.unwrap();
        assert!(t.0 < 0.0, "the t interval over rates leaves [0, 1]: {t:?}");
        for sided in [Sided::One, Sided::Two] {
            let p = pool_sessions(&sessions, 0.05, sided);
            assert_eq!(p.pooled, Counts { k: 255, n: 3000 });
            assert!(p.bounds.0 > 0.0 && p.bounds.1 < 1.0);
            // 3 % and 14 % are far from the pooled 8.5 %: sessions 0 and 2 disagree.
            assert_eq!(p.disagreeing(), vec![0, 2]);
        }
        for n in [1u64, 2, 7, 100, 5000] {
            for k in [0, 1, n / 2, n - 1, n] {
                for z in [1.0, 1.96, 3.5] {
                    let (lo, hi) = wilson(k, n, z);
                    assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi));
                    assert!(lo <= hi);
                }
                for sided in [Sided::One, Sided::Two] {
                    let (lo, hi) = exact_bounds(k, n, 0.05, sided);
                    assert!(
                        (0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi),
                        "{k}/{n}"
                    );
                }
                let (lo, hi) = newcombe_difference(k, n, n - k, n, 1.96).unwrap();
                assert!((-1.0..=1.0).contains(&lo) && (-1.0..=1.0).contains(&hi));
            }
        }
        // Sessions that agree: none is named.
        let same = [Counts { k: 50, n: 1000 }, Counts { k: 52, n: 1000 }];
        assert!(pool_sessions(&same, 0.05, Sided::Two)
            .disagreeing()
            .is_empty());
    }

    /// t over session means with the exact quantile: n = 3 gives t(0.975, 2) = 4.302653 (table).
    #[test]
    fn mean_bounds_use_the_exact_quantile_and_state_n() {
        let b = mean_bounds(&[10.0, 12.0, 14.0], 0.05, Sided::Two);
        assert_eq!(b.n, 3);
        assert!(close(b.t.unwrap(), 4.302_653, 1e-6));
        let (lo, hi) = b.bounds.unwrap();
        assert!(close(hi - 12.0, 4.302_653 * 2.0 / 3f64.sqrt(), 1e-5));
        assert!(close(12.0 - lo, hi - 12.0, 1e-12));
        // One-sided 95 %: t(0.95, 2) = 2.919986 (table).
        let one = mean_bounds(&[10.0, 12.0, 14.0], 0.05, Sided::One);
        assert!(close(one.t.unwrap(), 2.919_986, 1e-6));
        let single = mean_bounds(&[5.0], 0.05, Sided::Two);
        assert_eq!((single.n, single.bounds, single.t), (1, None, None));
    }
}
