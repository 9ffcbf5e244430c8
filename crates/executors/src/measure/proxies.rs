//! The proxies of an edge or sidecar path, measured like the server: RSS and CPU over the
//! measured phase, summed per role (the proxies beside the load generators, the one beside
//! the server) over every process of each proxy's process group (nginx's master and workers).
//! Readings at the phase's boundaries give the figures, periodic ones the samples.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use load::sampler::{read_proc, reset_hwm, Role, Sample};

/// One running proxy process group to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyGroup {
    /// [`Role::ProxyClient`] or [`Role::ProxyServer`].
    pub role: Role,
    /// The process group's id (its leader's pid).
    pub pgid: u32,
}

/// One role's proxies over the measured phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProxyUsage {
    /// The kernel's RSS high-water marks (VmHWM, reset at the phase's start), summed over
    /// the role's processes.
    pub rss_hwm_bytes: u64,
    /// CPU seconds (user + system) of the role's processes between the phase's boundaries.
    pub cpu_s: f64,
}

/// What a cell's proxies did: client-side and server-side usage (`None`: no proxy in that
/// role), and what ran (for the manifest).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProxyReadings {
    pub client: Option<ProxyUsage>,
    pub server: Option<ProxyUsage>,
    pub records: Vec<ProxyRecord>,
}

/// One proxy of a cell as the manifest records it: no private key, only paths to them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProxyRecord {
    /// `edge`, `client-sidecar` or `server-sidecar`; `origin-server` for a server nobody
    /// here wrote that answered the cell (`server`), measured as the server.
    pub role: String,
    /// The program (`haproxy`, `nginx`, `caddy`).
    pub proxy: String,
    /// Its version line, as the program prints it.
    pub version: String,
    /// The configuration it ran, as written.
    pub config: String,
}

/// The pids whose process group is `pgid` (its leader first when alive).
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // Fields after the command name's closing parenthesis: state, ppid, pgrp.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
        .collect();
    pids.sort_unstable_by_key(|p| (*p != pgid, *p));
    pids
}

/// A role's processes at one reading: CPU ns per pid, and summed RSS and VmHWM.
#[derive(Debug, Clone, Default)]
struct RoleReading {
    cpu_ns: std::collections::BTreeMap<u32, u64>,
    rss_bytes: u64,
    hwm_bytes: u64,
}

fn read_role(groups: &[ProxyGroup], role: Role) -> RoleReading {
    let mut reading = RoleReading::default();
    for g in groups.iter().filter(|g| g.role == role) {
        for pid in group_members(g.pgid) {
            if let Some(r) = read_proc(pid) {
                reading.cpu_ns.insert(pid, r.cpu_ns);
                reading.rss_bytes += r.rss_bytes;
                reading.hwm_bytes += r.hwm_bytes;
            }
        }
    }
    reading
}

/// CPU ns between two readings, over the processes alive at both.
fn cpu_between(a: &RoleReading, b: &RoleReading) -> u64 {
    b.cpu_ns
        .iter()
        .filter_map(|(pid, ns)| Some(ns.saturating_sub(*a.cpu_ns.get(pid)?)))
        .sum()
}

/// Samples proxies on a thread of its own during the measured phase.
pub struct ProxySampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<(Vec<Sample>, Option<ProxyUsage>, Option<ProxyUsage>)>,
}

impl ProxySampler {
    /// Resets the proxies' high-water marks and takes the first reading before returning.
    pub fn start(groups: Vec<ProxyGroup>, interval: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let (first_taken, first) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let roles = [Role::ProxyClient, Role::ProxyServer];
            for g in &groups {
                for pid in group_members(g.pgid) {
                    reset_hwm(pid);
                }
            }
            let started = Instant::now();
            let firsts = roles.map(|r| read_role(&groups, r));
            let _ = first_taken.send(());
            let mut previous = firsts.clone();
            let mut last_t = Duration::ZERO;
            let mut samples = Vec::new();
            loop {
                let done = !matches!(
                    stopped.recv_timeout(interval),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                let t = started.elapsed();
                let now = roles.map(|r| read_role(&groups, r));
                let dt_ns = (t - last_t).as_nanos().max(1) as f64;
                for (i, role) in roles.iter().enumerate() {
                    if groups.iter().any(|g| g.role == *role) {
                        samples.push(Sample {
                            t,
                            role: *role,
                            rss_bytes: now[i].rss_bytes,
                            cpu_pct: cpu_between(&previous[i], &now[i]) as f64 / dt_ns * 100.0,
                        });
                    }
                }
                last_t = t;
                if done {
                    let usage = |i: usize| {
                        groups
                            .iter()
                            .any(|g| g.role == roles[i])
                            .then(|| ProxyUsage {
                                rss_hwm_bytes: now[i].hwm_bytes,
                                cpu_s: cpu_between(&firsts[i], &now[i]) as f64 / 1e9,
                            })
                    };
                    return (samples, usage(0), usage(1));
                }
                previous = now;
            }
        });
        let _ = first.recv();
        ProxySampler { stop, thread }
    }

    /// The boundary reading at once: the samples and the client- and server-side usage.
    pub fn finish(self) -> (Vec<Sample>, Option<ProxyUsage>, Option<ProxyUsage>) {
        let _ = self.stop.send(());
        self.thread.join().expect("proxy sampler thread")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process group of two busy shells: both are found as members (the leader first), and
    /// the group's CPU, RSS and samples come out under its role only.
    #[test]
    fn a_groups_processes_are_found_and_their_cpu_summed() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sh -c 'while :; do :; done' & while :; do :; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        let mut members = Vec::new();
        for _ in 0..100 {
            members = group_members(pgid);
            if members.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let sampler = ProxySampler::start(
            vec![ProxyGroup {
                role: Role::ProxyServer,
                pgid,
            }],
            Duration::from_millis(50),
        );
        std::thread::sleep(Duration::from_millis(300));
        let (samples, client, server) = sampler.finish();
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        assert_eq!(members[0], pgid, "the leader first");
        assert!(members.len() >= 2, "{members:?}");
        assert!(client.is_none());
        let server = server.unwrap();
        assert!(server.cpu_s > 0.0 && server.rss_hwm_bytes > 0, "{server:?}");
        assert!(samples.iter().all(|s| s.role == Role::ProxyServer));
        assert!(!samples.is_empty());
    }
}
