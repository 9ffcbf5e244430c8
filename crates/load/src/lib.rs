//! The load engine and what it measures: workers against one server in a closed or open loop,
//! the regime deciding only when a worker connects ([`engine`]; [`regime`] names the regimes
//! and pacings), the cell's measurements merged from every worker's ([`measurements`]: its
//! histograms, failure counts and steady window), and what is read of the processes under
//! load ([`sampler`]: RSS and CPU; [`timewait`]: the load generator's TIME_WAIT; [`stalls`]:
//! how late the machine runs a ready thread), and a running phase's figures so far for a live
//! view ([`live`]). The runner's load child and agents run it; it
//! knows no stack (a stack's client comes in through `bench_core`'s traits) and no settings
//! file.

pub mod engine;
pub mod live;
pub mod measurements;
pub mod regime;
pub mod sampler;
pub mod stalls;
pub mod timewait;

pub use regime::{Pacing, Regime};
