//! Welch's two-sample t-test (unequal variances), for comparing two runs' repetitions.

use crate::interval::{mean, sample_variance};
use crate::student_t::{t_cdf, t_quantile};

/// Two-sided significance level of [`Welch::significant`] (the 95 % interval excludes zero).
pub const ALPHA: f64 = 0.05;

/// Welch's two-sample t-test of `new − base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// Difference of the means, new − base.
    pub diff: f64,
    /// 95 % confidence interval of the difference.
    pub ci: (f64, f64),
    /// Welch–Satterthwaite degrees of freedom (infinite when neither side varies).
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

impl Welch {
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

/// Welch's test; `None` unless both sides have at least two values (a variance).
pub fn welch(base: &[f64], new: &[f64]) -> Option<Welch> {
    let (va, vb) = (sample_variance(base)?, sample_variance(new)?);
    let diff = mean(new) - mean(base);
    let (qa, qb) = (va / base.len() as f64, vb / new.len() as f64);
    let se2 = qa + qb;
    if se2 <= 0.0 {
        // Neither side varies: the repetitions reproduce exactly, so any difference is real.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch {
            diff,
            ci: (diff, diff),
            df: f64::INFINITY,
            p,
        });
    }
    let se = se2.sqrt();
    let df = se2 * se2 / (qa * qa / (base.len() - 1) as f64 + qb * qb / (new.len() - 1) as f64);
    let t = diff / se;
    let p = (2.0 * t_cdf(-t.abs(), df)).min(1.0);
    let half = t_quantile(1.0 - ALPHA / 2.0, df) * se;
    Some(Welch {
        diff,
        ci: (diff - half, diff + half),
        df,
        p,
    })
}

/// Bounds of the difference of two means, mean(a) − mean(b), by Welch's t at confidence
/// 1 − `alpha` (`sided`: one-sided bounds or the two-sided interval), with the Welch–
/// Satterthwaite degrees of freedom: (difference, (lower, upper), df). `None` below two values
/// on either side. Between sessions, `a` and `b` are each side's session means.
pub fn welch_difference(
    a: &[f64],
    b: &[f64],
    alpha: f64,
    sided: crate::Sided,
) -> Option<(f64, (f64, f64), f64)> {
    let (va, vb) = (sample_variance(a)?, sample_variance(b)?);
    let diff = mean(a) - mean(b);
    let (qa, qb) = (va / a.len() as f64, vb / b.len() as f64);
    let se2 = qa + qb;
    if se2 <= 0.0 {
        return Some((diff, (diff, diff), f64::INFINITY));
    }
    let df = se2 * se2 / (qa * qa / (a.len() - 1) as f64 + qb * qb / (b.len() - 1) as f64);
    let half = t_quantile(1.0 - sided.tail(alpha), df) * se2.sqrt();
    Some((diff, (diff - half, diff + half), df))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_difference_is_welchs_interval_turned_round() {
        let (a, b) = ([10.0, 12.0, 14.0, 11.0], [20.0, 23.0, 19.0]);
        let w = welch(&b, &a).unwrap();
        let (d, (lo, hi), df) = welch_difference(&a, &b, ALPHA, crate::Sided::Two).unwrap();
        assert!((d - w.diff).abs() < 1e-12 && (df - w.df).abs() < 1e-12);
        assert!((lo - w.ci.0).abs() < 1e-9 && (hi - w.ci.1).abs() < 1e-9);
        let (_, (one_lo, one_hi), _) = welch_difference(&a, &b, ALPHA, crate::Sided::One).unwrap();
        assert!(one_lo > lo && one_hi < hi, "one-sided bounds are nearer");
        assert_eq!(welch_difference(&[1.0], &b, ALPHA, crate::Sided::Two), None);
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn welch_matches_a_hand_computation() {
        // base mean 12, var 4; new mean 20, var 16; n = 3 each.
        let w = welch(&[10.0, 12.0, 14.0], &[16.0, 20.0, 24.0]).unwrap();
        assert!(close(w.diff, 8.0, 1e-12));
        // se² = 4/3 + 16/3 = 20/3; df = (20/3)² / ((4/3)²/2 + (16/3)²/2) = 400/136.
        assert!(close(w.df, 400.0 / 136.0, 1e-12), "{}", w.df);
        let half = t_quantile(0.975, 400.0 / 136.0) * (20.0f64 / 3.0).sqrt();
        assert!(close(w.ci.0, 8.0 - half, 1e-9) && close(w.ci.1, 8.0 + half, 1e-9));
        // t = 8 / √(20/3) ≈ 3.098 at ≈ 2.94 df: p ≈ 0.054, just not significant.
        assert!(w.p > 0.05 && w.p < 0.06, "{}", w.p);
        assert!(!w.significant());
        // The interval excludes zero exactly when p < 0.05.
        assert_eq!(w.ci.0 > 0.0, w.significant());
    }

    /// Equal sizes and equal variances: Welch's df is the pooled test's 2(n − 1), and its t
    /// the pooled t.
    #[test]
    fn equal_variances_give_the_pooled_degrees_of_freedom() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [3.0, 4.0, 5.0, 6.0, 7.0];
        let w = welch(&a, &b).unwrap();
        assert!(close(w.df, 8.0, 1e-12), "{}", w.df);
        // t = 2 / √(2.5/5 + 2.5/5) = 2; two-sided p at 8 df = 0.0805 (t tables).
        assert!(close(w.p, 0.080516, 1e-5), "{}", w.p);
    }

    #[test]
    fn identical_samples_are_not_significant() {
        let a = [100.0, 103.0, 98.0, 101.0];
        let w = welch(&a, &a).unwrap();
        assert_eq!(w.diff, 0.0);
        assert!(close(w.p, 1.0, 1e-12));
        assert!(w.ci.0 < 0.0 && w.ci.1 > 0.0);
        // Constant on both sides and equal: no change either.
        let c = welch(&[5.0; 3], &[5.0; 3]).unwrap();
        assert_eq!((c.p, c.ci), (1.0, (0.0, 0.0)));
        // Constant but different: reproducible exactly, so the difference is real.
        assert!(welch(&[1.0; 3], &[0.99; 3]).unwrap().significant());
        assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
    }
}
