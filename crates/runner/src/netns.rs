//! A private network namespace for one cell: its own loopback with netem and its own sysctls,
//! so emulated RTT, loss and port ranges never touch the host network. Created with iproute2,
//! entered by the cell's runtime threads (setns), removed on drop, also after an error.

use std::fs::File;
use std::process::Command;

use anyhow::{bail, Context};

use std::sync::Arc;

use crate::emulator::{Emulator, QUEUE};
use crate::experiment::{Experiment, Netem};

pub struct Netns {
    pub name: String,
    handle: Arc<File>,
    /// Delay, jitter and loss on the namespace's loopback; dropped before the namespace.
    emulator: Option<Emulator>,
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program} (install iproute2)"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Why this process cannot create namespaces, if it cannot.
pub fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("network emulation and namespace sysctls need root (ip netns, tc)".into());
    }
    for tool in ["ip", "tc", "iptables"] {
        let found = Command::new(tool).arg("-V").output().is_ok();
        if !found {
            return Some(format!(
                "network emulation needs '{tool}' (apt-get install iproute2 iptables)"
            ));
        }
    }
    None
}

impl Netns {
    /// Creates `tbench-<pid>-<n>` with loopback up, netem and the experiment's sysctls.
    pub fn create(exp: &Experiment, n: usize) -> anyhow::Result<Self> {
        let name = format!("tbench-{}-{n}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let handle = File::open(format!("/var/run/netns/{name}"));
        let ns = match handle {
            Ok(handle) => Netns {
                name,
                handle: Arc::new(handle),
                emulator: None,
            },
            Err(e) => {
                let _ = run("ip", &["netns", "del", &name]);
                return Err(e).context("cannot open the new network namespace");
            }
        };
        // From here on, dropping `ns` removes the namespace.
        let mut ns = ns;
        run("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        if let Some(netem) = &exp.netem {
            let netem = Netem::parse(netem).map_err(anyhow::Error::msg)?;
            if let Some(rate) = &netem.rate {
                run(
                    "tc",
                    &[
                        "-n", &ns.name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate,
                        "burst", "64kb", "latency", "1s",
                    ],
                )?;
            }
            if netem.delay_ms > 0.0 || netem.jitter_ms > 0.0 || netem.loss_pct > 0.0 {
                let handle = ns.handle.clone();
                ns.emulator = Some(Emulator::start(&netem, move || {
                    nix::sched::setns(&*handle, nix::sched::CloneFlags::CLONE_NEWNET)
                        .context("cannot enter the namespace")
                })?);
                // A queued packet still counts as in the host, and TCP autocorking would hold
                // the next small write (a request after the TLS Finished) until it leaves: half
                // an RTT that a real path does not add. netem on lo has the same artefact.
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        &ns.name,
                        "sysctl",
                        "-q",
                        "-w",
                        "net.ipv4.tcp_autocorking=0",
                    ],
                )?;
                // Queue only once the emulator listens: an unbound queue drops packets.
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        &ns.name,
                        "iptables",
                        "-A",
                        "OUTPUT",
                        "-o",
                        "lo",
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        &QUEUE.to_string(),
                    ],
                )?;
            }
        }
        let mut sysctls = Vec::new();
        if let Some(range) = &exp.port_range {
            sysctls.push(format!("net.ipv4.ip_local_port_range={range}"));
        }
        if let Some(v) = exp.tcp_tw_reuse {
            sysctls.push(format!("net.ipv4.tcp_tw_reuse={v}"));
        }
        if let Some(v) = exp.somaxconn {
            sysctls.push(format!("net.core.somaxconn={v}"));
        }
        for s in &sysctls {
            run("ip", &["netns", "exec", &ns.name, "sysctl", "-q", "-w", s])?;
        }
        Ok(ns)
    }

    /// Moves the calling thread into the namespace; sockets it opens and processes it spawns
    /// live there.
    pub fn enter(&self) -> nix::Result<()> {
        nix::sched::setns(&*self.handle, nix::sched::CloneFlags::CLONE_NEWNET)
    }

    /// Packets the emulator delayed and dropped so far.
    pub fn emulated_packets(&self) -> (u64, u64) {
        self.emulator.as_ref().map_or((0, 0), |e| {
            (
                e.stats.delayed.load(std::sync::atomic::Ordering::Relaxed),
                e.stats.dropped.load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.emulator.take();
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// Removes namespaces left by runners that were killed before they could clean up.
pub fn remove_stale() {
    let Ok(entries) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("tbench-")
            .and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run("ip", &["netns", "del", &name]);
        }
    }
}
