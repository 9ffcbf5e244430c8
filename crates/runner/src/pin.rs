//! CPU pinning, so that on a small machine the server and the load generator do not compete
//! for the same core. Threads created afterwards inherit the mask.

use anyhow::Context;
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

pub fn pin_current_thread(cpu: usize) -> anyhow::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .with_context(|| format!("CPU {cpu} is out of range"))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("cannot pin to CPU {cpu}"))?;
    Ok(())
}

/// Cores this process may run on.
pub fn usable_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
