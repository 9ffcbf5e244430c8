//! The mean of repeated measurements with its 95 % interval: within one session (over
//! repetitions, what `summary.csv` writes) and between sessions (over each session's mean).

use crate::student_t::t_975_table;

/// Arithmetic mean; 0 for no values (callers check emptiness where it matters).
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Median: the middle value, or the mean of the two middle values of an even count; `None`
/// for no values. NaNs sort last (`total_cmp`).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Sample variance (n − 1 in the denominator); `None` below two values.
pub fn sample_variance(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let m = mean(values);
    Some(values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64)
}

/// Sample standard deviation; `None` below two values (one value has no spread to report,
/// not a spread of zero).
pub fn sample_sd(values: &[f64]) -> Option<f64> {
    sample_variance(values).map(f64::sqrt)
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

/// The mean of `values` with its two-sided 95 % Student-t interval, `mean ± t · sd / √n` with
/// t from [`t_975_table`] at n − 1 degrees of freedom (the values `summary.csv` was written
/// with).
pub fn interval(values: &[f64]) -> Interval {
    let n = values.len();
    let mean = mean(values);
    let Some(sd) = sample_sd(values) else {
        return Interval {
            n,
            mean,
            sd: None,
            ci: None,
        };
    };
    let half = t_975_table(n - 1) * sd / (n as f64).sqrt();
    Interval {
        n,
        mean,
        sd: Some(sd),
        ci: Some((mean - half, mean + half)),
    }
}

/// The between-session interval of a figure: each session's values are averaged first, and the
/// interval is that of those session means ([`interval`], n = the sessions that have a value).
/// It covers the drift between sessions (machine state, time of day) that an interval over one
/// session's repetitions cannot show.
pub fn between_sessions<S: AsRef<[f64]>>(sessions: &[S]) -> Interval {
    let means: Vec<f64> = sessions
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| !s.is_empty())
        .map(mean)
        .collect();
    interval(&means)
}

/// Coefficient of variation (sample sd / mean) of a series; `None` below two values or for a
/// zero mean.
pub fn cv(values: &[f64]) -> Option<f64> {
    let iv = interval(values);
    iv.sd.filter(|_| iv.mean != 0.0).map(|sd| sd / iv.mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_its_middle_two() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

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

    #[test]
    fn between_sessions_is_the_interval_of_the_session_means() {
        // Session means 10, 12 and 14, whatever the spread inside each session.
        let sessions = [vec![9.0, 11.0], vec![12.0], vec![13.0, 14.0, 15.0], vec![]];
        let iv = between_sessions(&sessions);
        assert_eq!(iv.n, 3, "the empty session does not count");
        assert_eq!(iv, interval(&[10.0, 12.0, 14.0]));
        // One session: a mean, no interval.
        let one = between_sessions(&[[1.0, 3.0]]);
        assert_eq!((one.n, one.mean, one.ci), (1, 2.0, None));
    }

    #[test]
    fn cv_is_sd_over_mean() {
        assert!((cv(&[10.0, 12.0, 14.0]).unwrap() - 2.0 / 12.0).abs() < 1e-12);
        assert_eq!(cv(&[1.0]), None);
        assert_eq!(cv(&[-1.0, 1.0]), None);
        assert_eq!(sample_sd(&[3.0]), None);
        assert_eq!(sample_variance(&[1.0, 3.0]), Some(2.0));
    }
}
