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

/// Lowers (or raises, up to the hard limit) this process's open-file soft limit.
pub fn set_nofile_soft_limit(soft: u64) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard)
        .with_context(|| format!("cannot set the open-file limit to {soft}"))?;
    Ok(())
}

/// Raises the open-file soft limit to the hard limit: servers should not be the side that
/// runs out of descriptors unless a study says so.
pub fn raise_nofile_soft_limit() -> anyhow::Result<()> {
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    set_nofile_soft_limit(hard)
}
