//! The transport benchmark runner as a library: command dispatch (`app`, `cli`), the cell loop
//! (`run`), `runner capacity`'s search (`capacity`), what a run writes (`output`: manifest,
//! summary, thresholds; the rows and the readers' check are crate `results`'s), what it
//! prints (`console`) and what it tells the live metrics endpoint of a cell (`live`). The knobs and cells are crate `experiment`'s, where and how cells execute
//! crate `executors`'s, the stacks crate `stacks`'s; the page, charts and comparison are crate
//! `report`'s. `main.rs` is a thin wrapper around [`app::main`].

pub mod app;
pub mod capacity;
pub mod cli;
pub mod console;
pub mod live;
pub mod output;
pub mod run;
