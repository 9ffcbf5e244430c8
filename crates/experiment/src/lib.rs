//! What a run is asked to do: the knobs ([`settings`]: each defined once, layered defaults <
//! file < variant < flags, and their validation) and the cells they plan ([`plan`]). Nothing
//! here starts a process or writes a file: the runner and the executors read it.

pub mod plan;
pub mod settings;
