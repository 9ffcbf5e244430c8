//! The runner's end-to-end tests that need nothing of the machine to themselves, as modules of
//! one test binary: each of them once linked kube, quinn and tonic into a binary of its own.
//! Tests that time themselves, count sockets or sysctls in namespaces, or drive a browser
//! stay in binaries of their own beside this folder, so that they never share two cores
//! with an unrelated test. Run one module: `cargo test -p runner --test suite cli::`.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod compare;
mod fifth_stack;
mod first_look;
mod grpc_h3;
mod grpc_h3_targets;
mod hlog;
mod invalid_input;
mod quic_breakdown;
mod rate_sweep;
mod report;
mod reproduce_paper;
mod request_mix;
mod results_folder;
mod schema;
mod serve;
mod summary_json;
mod sweep;
mod targets;
mod thresholds;
mod your_service;
