//! Student's t distribution, for any positive degrees of freedom (Welch–Satterthwaite gives
//! fractional ones), from statrs, and the two-sided 95 % critical value as printed tables give it.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// ln Γ(x) for x > 0 (statrs's Lanczos approximation).
pub fn ln_gamma(x: f64) -> f64 {
    statrs::function::gamma::ln_gamma(x)
}

/// The regularized incomplete beta function I_x(a, b) (statrs), 0 below x = 0 and 1 above 1.
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    statrs::function::beta::beta_reg(a, b, x)
}

/// Standard Student's t with `df` > 0 degrees of freedom (not necessarily an integer).
fn student(df: f64) -> StudentsT {
    StudentsT::new(0.0, 1.0, df).unwrap_or_else(|e| panic!("Student's t with df = {df}: {e}"))
}

/// P(T ≤ t) for Student's t with `df` > 0 degrees of freedom (not necessarily an integer).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    student(df).cdf(t)
}

/// The `p` quantile of Student's t with `df` degrees of freedom, by bisection on [`t_cdf`]
/// (monotone, so bisection cannot miss; 200 halvings reach f64 precision). Not statrs's
/// `inverse_cdf`: in 0.18 it gives 1.8266 for the 0.975 quantile at df = 10⁷ (1.9600 in every
/// table; `t_quantile_matches_published_table_values`).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "t_quantile({p}, {df})");
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while t_cdf(hi, df) < p && hi < 1e300 {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-14 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Degrees of freedom beyond which [`t_975_table`] gives the normal value, as printed tables do.
const TABLE_DF: usize = 30;

/// The two-sided 95 % critical value of Student's t (its 0.975 quantile) as a printed table
/// gives it: [`t_quantile`] rounded to three decimals for 1..=30 degrees of freedom, 1.96 (the
/// normal value) beyond. `summary.csv`'s intervals have always used these table values, so its
/// committed figures stay reproducible digit for digit; exact quantiles are [`t_quantile`].
pub fn t_975_table(df: usize) -> f64 {
    if df == 0 || df > TABLE_DF {
        return 1.96;
    }
    (t_quantile(0.975, df as f64) * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Two-sided 95 % critical values, as printed in Student's t tables (e.g. NIST/SEMATECH
    /// e-Handbook of Statistical Methods, table 1.3.6.7.2, to four decimals).
    #[test]
    fn t_quantile_matches_published_table_values() {
        for (df, t) in [
            (1.0, 12.7062),
            (2.0, 4.3027),
            (3.0, 3.1824),
            (4.0, 2.7764),
            (5.0, 2.5706),
            (10.0, 2.2281),
            (30.0, 2.0423),
            (120.0, 1.9799),
            (1e7, 1.9600),
        ] {
            let q = t_quantile(0.975, df);
            assert!(close(q, t, 1e-4), "df {df}: {q} vs {t}");
        }
        // One-sided 99 % and 90 %, and a lower quantile.
        assert!(close(t_quantile(0.99, 5.0), 3.3649, 1e-4));
        assert!(close(t_quantile(0.90, 8.0), 1.3968, 1e-4));
        assert!(close(t_quantile(0.025, 4.0), -2.7764, 1e-4));
    }

    /// The three-decimal table that `summary.csv` was written with, entry for entry.
    #[test]
    fn t_975_table_is_the_printed_three_decimal_table() {
        const PRINTED: [f64; 30] = [
            12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
            2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
            2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
        ];
        for (i, t) in PRINTED.iter().enumerate() {
            assert_eq!(t_975_table(i + 1), *t, "df {}", i + 1);
        }
        assert_eq!(t_975_table(31), 1.96);
        assert_eq!(t_975_table(1000), 1.96);
    }

    #[test]
    fn t_cdf_matches_closed_forms() {
        // df = 1 (Cauchy) and df = 2 have closed forms.
        for t in [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0] {
            let cauchy = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!(close(t_cdf(t, 1.0), cauchy, 1e-12), "df 1, t {t}");
            let two = 0.5 + t / (2.0 * (t * t + 2.0).sqrt());
            assert!(close(t_cdf(t, 2.0), two, 1e-12), "df 2, t {t}");
        }
    }

    /// Non-integer degrees of freedom (what Welch–Satterthwaite gives): checked against a
    /// numerical integral of the t density, independent of the incomplete beta function.
    #[test]
    fn t_cdf_matches_the_integrated_density_for_fractional_df() {
        for df in [1.5, 2.7, 4.35, 9.9] {
            let ln_c = ln_gamma((df + 1.0) / 2.0)
                - ln_gamma(df / 2.0)
                - 0.5 * (df * std::f64::consts::PI).ln();
            let density = |x: f64| (ln_c - (df + 1.0) / 2.0 * (1.0 + x * x / df).ln()).exp();
            let t = 2.1;
            // Simpson's rule on [0, t]; P(T ≤ t) = 0.5 + ∫₀ᵗ f.
            let n = 20_000;
            let h = t / n as f64;
            let mut sum = density(0.0) + density(t);
            for i in 1..n {
                sum += density(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            let integral = 0.5 + sum * h / 3.0;
            assert!(
                close(t_cdf(t, df), integral, 1e-9),
                "df {df}: {} vs {integral}",
                t_cdf(t, df)
            );
            // And the quantile inverts the distribution function.
            let q = t_quantile(0.975, df);
            assert!(close(t_cdf(q, df), 0.975, 1e-12), "df {df}");
            // Between the neighbouring integer table values.
            assert!(q < t_quantile(0.975, df.floor()) && q > t_quantile(0.975, df.ceil()));
        }
    }
}
