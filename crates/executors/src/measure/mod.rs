//! What a cell measures around the load engine's own figures (crate `load`: histograms,
//! process sampling, TIME_WAIT): kernel network counters, the proxies' readings and the
//! machine's environment.

pub mod environment;
pub mod netcounters;
pub mod proxies;
