//! Where and how cells execute: the server child (`runner serve`), the load-generator child
//! (`runner load`, which runs crate `load`'s engine), agents, and the executors that place them
//! (local, hosts, Kubernetes); the proxies of a mesh path, namespaces and network emulation
//! ([`netem`]); what a cell measures around the load engine ([`measure`]); and what one cell
//! measured ([`cell_result`]). The children are the `runner` binary itself (its subcommands
//! call the entry points here); the cell loop that drives them is the runner's.

pub mod agent;
pub mod cell_result;
pub mod executor;
pub mod hosts;
pub mod kubernetes;
pub mod load_child;
pub mod local;
pub mod measure;
pub mod netem;
pub mod parent;
pub mod pin;
pub mod proxy;
pub mod serve;
pub mod shard;
pub mod target;
