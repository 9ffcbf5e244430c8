//! The transport benchmark runner as a library. Folders by role: `exec` (how cells run: server
//! and load-generator children, the load engine), `measure` (histograms, sampling, kernel
//! counters), `netem` (namespaces and emulation), `output` (what a run writes: manifest,
//! summary, thresholds; the rows and the readers' check are crate `results`'s), `console` (what
//! a run prints). The knobs and the cells are crate `experiment`'s, the stacks crate `stacks`'s;
//! the page, charts and comparison are crate `report`'s. `main.rs` is a thin wrapper around
//! [`app::main`].

pub mod app;
pub mod capacity;
pub mod cli;
pub mod console;
pub mod exec;
pub mod measure;
pub mod netem;
pub mod output;
