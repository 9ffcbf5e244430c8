//! How cells run: the cell loop, the server child (`runner serve`), the load-generator child
//! (`runner load`) and the load engine inside it, and the executors that place them.

pub mod agent;
pub mod executor;
pub mod kubernetes;
pub mod load;
pub mod loadgen;
pub mod pin;
pub mod run;
pub mod serve;
pub mod shard;
pub mod target;
pub mod yaml;
