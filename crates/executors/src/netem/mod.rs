//! Private network namespaces for a cell and the network emulation on their links.

pub mod emulator;
pub mod links;
pub mod netns;
