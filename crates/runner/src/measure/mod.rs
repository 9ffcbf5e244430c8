//! What a cell measures besides request latency: histogram summaries, process sampling
//! (RSS, CPU), TCP TIME_WAIT in the load generator's namespace, kernel network counters and the machine's environment.

pub mod environment;
pub mod netcounters;
pub mod proxies;
pub mod sampler;
pub mod stalls;
pub mod stats;
pub mod timewait;
