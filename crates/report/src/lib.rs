//! The HTML report of a results directory (`runner report`, the seed-000-shaped page in
//! [`page`], its charts in [`chart`] and [`chart_curve`]) and the comparison of two runs
//! ([`compare`]). Both read a run through [`Results`] (crate `results`): typed rows and the
//! manifest, whose stacks name and order what the pages show ([`labels`]). Nothing here knows
//! a stack crate or the runner.

pub mod chart;
pub mod chart_curve;
pub mod compare;
pub mod labels;
pub mod page;
pub mod path;
pub mod requests;
pub mod service;
pub mod streaming;

pub use labels::{label, stack_order};
pub use results::labels::{levels, mean_of, ms, regimes};
pub use results::Results;
