//! How cells run: the cell loop, the server child (`runner serve`), the load-generator child
//! (`runner load`, which runs crate `load`'s engine), and the executors that place them.

pub mod agent;
pub mod executor;
pub mod hosts;
pub mod kubernetes;
pub mod load_child;
pub mod local;
pub mod parent;
pub mod pin;
pub mod proxy;
pub mod run;
pub mod serve;
pub mod shard;
pub mod target;
