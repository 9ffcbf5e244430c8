//! Ordinary least squares of y against x, with the 95 % interval of the slope.

use crate::student_t::t_quantile;

/// Fewer distinct x values cannot tell a slope from noise around two points.
pub const MIN_LEVELS: usize = 3;

/// A least-squares line `y = intercept + slope · x`, in the units of the points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Points fitted.
    pub n: usize,
    /// Distinct x values among them.
    pub levels: usize,
    pub slope: f64,
    /// 95 % interval of the slope: `slope ± t(0.975, n − 2) · se(slope)`.
    pub slope_ci95: (f64, f64),
    pub intercept: f64,
    /// Coefficient of determination; `None` when y did not vary at all (nothing to explain).
    pub r_squared: Option<f64>,
}

/// Fits `y = intercept + slope · x` to `(x, y)` points; `None` with fewer than
/// [`MIN_LEVELS`] distinct x values.
pub fn ols(points: &[(f64, f64)]) -> Option<Fit> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let levels = xs.len();
    let n = points.len();
    if levels < MIN_LEVELS {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let sse: f64 = points
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let df = (n - 2) as f64;
    let se = (sse / df / sxx).sqrt();
    let half = t_quantile(0.975, df) * se;
    Some(Fit {
        n,
        levels,
        slope,
        slope_ci95: (slope - half, slope + half),
        intercept,
        r_squared: (syy > 0.0).then(|| 1.0 - sse / syy),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_slope_with_an_interval_around_it() {
        // 36,000 per x on a base of 20e6, ±2e5 of deterministic "noise".
        let mut points = Vec::new();
        for (i, c) in [500.0, 1000.0, 2000.0, 5000.0].iter().enumerate() {
            for rep in 0..3 {
                let noise = [(-2e5), 0.0, 2e5][(rep + i) % 3];
                points.push((*c, 20e6 + 36_000.0 * c + noise));
            }
        }
        let f = ols(&points).unwrap();
        assert_eq!((f.n, f.levels), (12, 4));
        assert!((f.slope - 36_000.0).abs() < 100.0, "{f:?}");
        let (lo, hi) = f.slope_ci95;
        assert!(lo < 36_000.0 && 36_000.0 < hi && hi - lo < 1_000.0, "{f:?}");
        assert!((f.intercept - 20e6).abs() < 3e5, "{f:?}");
        assert!(f.r_squared.unwrap() > 0.999);
        // An exact line: zero-width interval, R² = 1.
        let exact = ols(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]).unwrap();
        assert!((exact.slope - 2.0).abs() < 1e-12);
        assert!((exact.intercept - 1.0).abs() < 1e-12);
        let (lo, hi) = exact.slope_ci95;
        assert!((hi - lo).abs() < 1e-9);
    }

    /// Worked by hand: x = 1..5, y = 2, 4, 5, 4, 5 give Sxx = 10, Sxy = 6, Syy = 6 and
    /// SSE = 2.4, so slope 0.6, intercept 2.2, R² = 0.6 and se(slope) = √(2.4 / 3 / 10).
    #[test]
    fn matches_a_worked_example() {
        let f = ols(&[(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)]).unwrap();
        assert!((f.slope - 0.6).abs() < 1e-12);
        assert!((f.intercept - 2.2).abs() < 1e-12);
        assert!((f.r_squared.unwrap() - 0.6).abs() < 1e-12);
        // t(0.975, 3) = 3.1824 (tables); se = √(SSE / 3 / Sxx) = √(2.4 / 3 / 10).
        let half = 3.182446 * (2.4f64 / 3.0 / 10.0).sqrt();
        assert!((f.slope_ci95.1 - 0.6 - half).abs() < 1e-5, "{f:?}");
    }

    #[test]
    fn fewer_than_three_levels_give_no_fit() {
        assert!(ols(&[(100.0, 1.0), (100.0, 2.0), (200.0, 3.0), (200.0, 4.0)]).is_none());
        assert!(ols(&[]).is_none());
    }
}
