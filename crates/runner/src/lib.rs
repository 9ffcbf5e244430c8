//! The transport benchmark runner as a library: experiments, plans, load generation,
//! measurement, output and reports. `main.rs` is a thin wrapper around [`app::main`].
#![forbid(unsafe_code)]

pub mod app;
pub mod chart;
pub mod cli;
pub mod compare;
pub mod emulator;
pub mod environment;
pub mod experiment;
pub mod load;
pub mod loadgen;
pub mod memory;
pub mod netcounters;
pub mod netns;
pub mod output;
pub mod paper;
pub mod pin;
pub mod plan;
pub mod registry;
pub mod report;
pub mod run;
pub mod sampler;
pub mod serve;
pub mod stats;
pub mod summary;
pub mod thresholds;
