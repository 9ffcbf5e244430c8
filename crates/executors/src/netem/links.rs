//! Per-link emulation for the `hosts` executor: `netem` (delay, jitter, loss) on each agent
//! host's link to the bridge, for one cell. Where the kernel has `sch_netem` the real qdisc
//! goes on both ends of the link (the agent's `eth0` for what it sends, the bridge's port for
//! what it receives); elsewhere (this machine) the NFQUEUE emulator runs once per agent host,
//! its iptables rules queueing what the agent's `eth0` sends and receives. Either way every
//! packet between an agent and the server is delayed once, so a round trip costs twice the
//! one-way delay, as `netem` promises on loopback. Removed on drop.

use std::sync::Arc;

use anyhow::Context;

use crate::netem::emulator::{select, Emulation, Emulator, EmulatorKind, QUEUE};
use experiment::settings::Netem;

use crate::netem::netns::{netem_qdisc_args, run};

/// One agent host's link, as the hosts executor names it.
pub struct Link {
    /// The agent host's namespace (its end is `eth0`).
    pub namespace: String,
    /// The bridge's namespace and the link's port there.
    pub bridge_namespace: String,
    pub bridge_port: String,
    /// The agent host's namespace handle, for the emulator thread to enter.
    pub handle: Arc<std::fs::File>,
}

/// The iptables rules that queue what an agent host's `eth0` sends and receives.
const RULES: [[&str; 4]; 2] = [
    ["OUTPUT", "-o", "eth0", "NFQUEUE"],
    ["INPUT", "-i", "eth0", "NFQUEUE"],
];

/// The queueing rule `[chain, dir, dev, target]` added (`-A`) or deleted (`-D`) in `ns`.
fn iptables_rule(ns: &str, op: &str, [chain, dir, dev, target]: [&str; 4]) -> anyhow::Result<()> {
    let queue = QUEUE.to_string();
    run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "iptables",
            op,
            chain,
            dir,
            dev,
            "-j",
            target,
            "--queue-num",
            &queue,
        ],
    )
}

/// The emulation of one cell on every agent link.
pub struct LinkEmulation {
    kind: EmulatorKind,
    links: Vec<(String, String, String)>,
    emulators: Vec<Emulator>,
    cpu_start_s: Vec<f64>,
}

impl LinkEmulation {
    /// Starts `netem`'s delay, jitter and loss on every link; `None` when it asks for none.
    pub fn start(links: &[Link], netem: &Netem) -> anyhow::Result<Option<LinkEmulation>> {
        let Some(first) = links.first() else {
            return Ok(None);
        };
        let probe = netem_qdisc_args(&first.namespace, "eth0", netem);
        let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
        let Some(kind) = select(netem, || run("tc", &probe).is_ok()) else {
            return Ok(None);
        };
        let mut emulation = LinkEmulation {
            kind,
            links: Vec::new(),
            emulators: Vec::new(),
            cpu_start_s: Vec::new(),
        };
        // From here on, dropping `emulation` removes what exists.
        for (i, link) in links.iter().enumerate() {
            emulation.links.push((
                link.namespace.clone(),
                link.bridge_namespace.clone(),
                link.bridge_port.clone(),
            ));
            // As on loopback: TCP autocorking would hold a small write while a packet is
            // queued in the host, half an RTT a real path does not add.
            run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &link.namespace,
                    "sysctl",
                    "-q",
                    "-w",
                    "net.ipv4.tcp_autocorking=0",
                ],
            )?;
            match kind {
                EmulatorKind::NetemQdisc => {
                    if i > 0 {
                        let args = netem_qdisc_args(&link.namespace, "eth0", netem);
                        run("tc", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
                    }
                    let args = netem_qdisc_args(&link.bridge_namespace, &link.bridge_port, netem);
                    run("tc", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
                }
                EmulatorKind::Nfqueue => {
                    let handle = link.handle.clone();
                    let emulator = Emulator::start(netem, move || {
                        nix::sched::setns(&*handle, nix::sched::CloneFlags::CLONE_NEWNET)
                            .context("cannot enter the agent's host")
                    })?;
                    emulation
                        .cpu_start_s
                        .push(crate::netem::emulator::thread_cpu_s(emulator.tid).unwrap_or(0.0));
                    emulation.emulators.push(emulator);
                    // Queue only once the emulator listens: an unbound queue drops packets.
                    for rule in RULES {
                        iptables_rule(&link.namespace, "-A", rule)?;
                    }
                }
            }
        }
        Ok(Some(emulation))
    }

    /// Which emulator ran, and the CPU its threads used since the cell started (summed).
    pub fn emulation(&self) -> Emulation {
        let cpu_s = match self.kind {
            EmulatorKind::NetemQdisc => None,
            EmulatorKind::Nfqueue => Some(
                self.emulators
                    .iter()
                    .zip(&self.cpu_start_s)
                    .map(|(e, start)| {
                        (crate::netem::emulator::thread_cpu_s(e.tid).unwrap_or(*start) - start)
                            .max(0.0)
                    })
                    .sum(),
            ),
        };
        Emulation {
            kind: self.kind,
            cpu_s,
        }
    }

    /// Packets delayed and dropped on all links so far (the emulators' counters; the qdiscs'
    /// are not read).
    pub fn packets(&self) -> (u64, u64) {
        self.emulators.iter().fold((0, 0), |(d, x), e| {
            (
                d + e.stats.delayed.load(std::sync::atomic::Ordering::Relaxed),
                x + e.stats.dropped.load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }
}

impl Drop for LinkEmulation {
    fn drop(&mut self) {
        for (ns, bridge, port) in &self.links {
            match self.kind {
                EmulatorKind::NetemQdisc => {
                    let _ = run("tc", &["-n", ns, "qdisc", "del", "dev", "eth0", "root"]);
                    let _ = run("tc", &["-n", bridge, "qdisc", "del", "dev", port, "root"]);
                }
                EmulatorKind::Nfqueue => {
                    for rule in RULES {
                        let _ = iptables_rule(ns, "-D", rule);
                    }
                }
            }
        }
        // After the rules are gone: no packet meets an unbound queue.
        self.emulators.clear();
    }
}
