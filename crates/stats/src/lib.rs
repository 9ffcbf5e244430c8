//! The suite's statistics, each written once: Student's t ([`t_cdf`], [`t_quantile`],
//! [`t_975_table`]; the distributions from statrs, the quantiles by exact inversion where
//! statrs misses published values), the interval of a mean and between sessions ([`interval`],
//! [`between_sessions`]), Welch's two-sample test ([`welch`]), ordinary least squares with an
//! interval of the slope ([`ols`]) and exact binomial bounds ([`clopper_pearson`] and its
//! one-sided forms), and what fits a proportion between sessions ([`wilson`],
//! [`newcombe_difference`], [`pool_sessions`]) and a mean of session means ([`mean_bounds`]). Plain functions over `f64` slices: no I/O, no knowledge of the suite's
//! files, so every layer above (the runner's `summary.csv`, `runner compare`, the memory
//! fits, the study's paper) can use them.

mod binomial;
mod interval;
mod ols;
mod proportion;
mod student_t;
mod welch;

pub use binomial::{
    binomial_cdf, clopper_pearson, clopper_pearson_95, clopper_pearson_lower,
    clopper_pearson_upper, trials_to_show_below, zero_failure_trials_below,
};
pub use interval::{
    between_sessions, cv, interval, mean, median, sample_sd, sample_variance, Interval,
};
pub use ols::{ols, Fit, MIN_LEVELS};
pub use proportion::{
    exact_bounds, mean_bounds, newcombe_difference, normal_quantile, pool_sessions, wilson, Counts,
    MeanBounds, Pooled, Sided,
};
pub use student_t::{inc_beta, ln_gamma, t_975_table, t_cdf, t_quantile};
pub use welch::{welch, welch_difference, Welch, ALPHA};
