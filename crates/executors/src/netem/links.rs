//! Per-link emulation for the `hosts` executor: `netem` (delay, jitter, loss) on each agent
//! host's link to the bridge, for one cell. Where the kernel has `sch_netem` the real qdisc
//! goes on both ends of the link (the agent's `eth0` for what it sends, the bridge's port for
//! what it receives); elsewhere (this machine) the NFQUEUE emulator runs in each agent host,
//! delaying what its `eth0` receives from the server, and once in the server's host, delaying
//! what its `eth0` receives from the agents. Either way every packet between an agent and the
//! server is delayed once, so a round trip costs twice the one-way delay, as `netem` promises on
//! loopback. On receipt, not as the agent sends (INPUT, not OUTPUT): a packet held before it
//! leaves still counts against its socket, and TCP Small Queues would then throttle an upload
//! (see [`crate::netem::emulator`]). Removed on drop.

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

/// The server's host, where the NFQUEUE emulator delays what the agents send.
pub struct ServerHost {
    pub namespace: String,
    pub handle: Arc<std::fs::File>,
}

/// The queueing rule (what a host's `eth0` receives) added (`-A`) or deleted (`-D`) in `ns`.
fn iptables_rule(ns: &str, op: &str) -> anyhow::Result<()> {
    let queue = QUEUE.to_string();
    run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "iptables",
            op,
            "INPUT",
            "-i",
            "eth0",
            "-j",
            "NFQUEUE",
            "--queue-num",
            &queue,
        ],
    )
}

/// An emulator thread in the host behind `handle`, then its queueing rule in `ns`.
fn start_in_host(
    emulation: &mut LinkEmulation,
    ns: &str,
    handle: &Arc<std::fs::File>,
    netem: &Netem,
) -> anyhow::Result<()> {
    let handle = handle.clone();
    let emulator = Emulator::start(netem, move || {
        nix::sched::setns(&*handle, nix::sched::CloneFlags::CLONE_NEWNET)
            .context("cannot enter a host's namespace")
    })?;
    emulation
        .cpu_start_s
        .push(crate::netem::emulator::thread_cpu_s(emulator.tid).unwrap_or(0.0));
    emulation.emulators.push(emulator);
    // Queue only once the emulator listens: an unbound queue drops packets.
    iptables_rule(ns, "-A")?;
    emulation.queued_hosts.push(ns.to_string());
    Ok(())
}

/// The emulation of one cell on every agent link.
pub struct LinkEmulation {
    kind: EmulatorKind,
    links: Vec<(String, String, String)>,
    /// The hosts with a queueing rule (NFQUEUE).
    queued_hosts: Vec<String>,
    emulators: Vec<Emulator>,
    cpu_start_s: Vec<f64>,
}

impl LinkEmulation {
    /// Starts `netem`'s delay, jitter and loss on every link; `None` when it asks for none.
    pub fn start(
        links: &[Link],
        server: &ServerHost,
        netem: &Netem,
    ) -> anyhow::Result<Option<LinkEmulation>> {
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
            queued_hosts: Vec::new(),
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
                    start_in_host(&mut emulation, &link.namespace, &link.handle, netem)?;
                }
            }
        }
        if kind == EmulatorKind::Nfqueue {
            start_in_host(&mut emulation, &server.namespace, &server.handle, netem)?;
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
        if self.kind == EmulatorKind::NetemQdisc {
            for (ns, bridge, port) in &self.links {
                let _ = run("tc", &["-n", ns, "qdisc", "del", "dev", "eth0", "root"]);
                let _ = run("tc", &["-n", bridge, "qdisc", "del", "dev", port, "root"]);
            }
        }
        for ns in &self.queued_hosts {
            let _ = iptables_rule(ns, "-D");
        }
        // After the rules are gone: no packet meets an unbound queue.
        self.emulators.clear();
    }
}
