//! A private network namespace for one cell: its own loopback with netem and its own sysctls,
//! so emulated RTT, loss and port ranges never touch the host network. Created with iproute2,
//! entered by the cell's runtime threads (setns), removed on drop, also after an error.

use std::fs::File;
use std::process::Command;

use anyhow::{bail, Context};

use std::sync::Arc;

use crate::netem::emulator::{Emulator, EmulatorKind, QUEUE};
use experiment::settings::{Experiment, Netem};

pub struct Netns {
    pub name: String,
    handle: Arc<File>,
    /// Delay, jitter and loss on the namespace's loopback; dropped before the namespace.
    emulator: Option<Emulator>,
    /// Which emulator applies delay, jitter and loss (`None`: no netem, or a rate alone).
    kind: Option<EmulatorKind>,
    /// The emulator thread's CPU seconds as the cell started, subtracted at its end.
    emulator_cpu_start_s: f64,
}

/// Runs `program` with `args`; a failure is one error carrying its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program} (install iproute2 and iptables)"))?;
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
                kind: None,
                emulator_cpu_start_s: 0.0,
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
            let netem = netem.value();
            // The probe is the real thing: adding the netem qdisc succeeds exactly where the
            // kernel has sch_netem, and then it stays as the cell's emulator.
            let qdisc = netem_qdisc_args(&ns.name, "lo", netem);
            ns.kind = crate::netem::emulator::select(netem, || {
                run("tc", &qdisc.iter().map(String::as_str).collect::<Vec<_>>()).is_ok()
            });
            // The netem qdisc takes the rate itself (unless a queue is asked for, which is
            // tbf's); otherwise tbf shapes it.
            let qdisc_has_rate =
                ns.kind == Some(EmulatorKind::NetemQdisc) && netem.queue_packets.is_none();
            if let Some(rate) = netem.rate.as_ref().filter(|_| !qdisc_has_rate) {
                let mut args: Vec<String> = [
                    "-n", &ns.name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate,
                ]
                .map(String::from)
                .to_vec();
                // A shaped link carries link-sized packets: loopback's 64 KiB ones are larger
                // than the bucket (tbf drops them, and a bulk transfer crawls), and would make
                // a queue of N packets one of megabytes.
                let mtu = experiment::settings::Netem::LINK_MTU;
                run(
                    "ip",
                    &["-n", &ns.name, "link", "set", "lo", "mtu", &mtu.to_string()],
                )?;
                match netem.queue_packets {
                    Some(packets) => {
                        // The bucket holds what the kernel's timer lets through between ticks
                        // (rate / 250 Hz), at least two packets.
                        let bits = netem.rate_bits_per_s().unwrap_or(1e9);
                        let burst = ((bits / 8.0 / 250.0) as u64).max(2 * u64::from(mtu));
                        args.extend([
                            "burst".into(),
                            burst.to_string(),
                            "limit".into(),
                            (u64::from(packets) * u64::from(mtu)).to_string(),
                        ]);
                    }
                    None => args.extend(["burst", "64kb", "latency", "1s"].map(String::from)),
                }
                run("tc", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
            }
            if ns.kind.is_some() {
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
            }
            if ns.kind == Some(EmulatorKind::Nfqueue) {
                let handle = ns.handle.clone();
                let emulator = Emulator::start(netem, move || {
                    nix::sched::setns(&*handle, nix::sched::CloneFlags::CLONE_NEWNET)
                        .context("cannot enter the namespace")
                })?;
                ns.emulator_cpu_start_s =
                    crate::netem::emulator::thread_cpu_s(emulator.tid).unwrap_or(0.0);
                ns.emulator = Some(emulator);
                // Queue only once the emulator listens: an unbound queue drops packets.
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        &ns.name,
                        "iptables",
                        "-A",
                        "INPUT",
                        "-i",
                        "lo",
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        &QUEUE.to_string(),
                    ],
                )?;
            }
        }
        for s in &exp.sysctls() {
            run("ip", &["netns", "exec", &ns.name, "sysctl", "-q", "-w", s])?;
        }
        Ok(ns)
    }

    /// Moves the calling thread into the namespace; sockets it opens and processes it spawns
    /// live there.
    pub fn enter(&self) -> nix::Result<()> {
        nix::sched::setns(&*self.handle, nix::sched::CloneFlags::CLONE_NEWNET)
    }

    /// Which emulator applies the cell's delay, jitter and loss, if any.
    pub fn emulator_kind(&self) -> Option<EmulatorKind> {
        self.kind
    }

    /// CPU seconds the NFQUEUE emulator's thread has used since the cell started (`None` with
    /// the qdisc, whose work the kernel does in softirq context, attributed to no thread).
    pub fn emulator_cpu_s(&self) -> Option<f64> {
        let e = self.emulator.as_ref()?;
        Some((crate::netem::emulator::thread_cpu_s(e.tid)? - self.emulator_cpu_start_s).max(0.0))
    }

    /// Packets the emulator delayed and dropped so far: the NFQUEUE thread's counters, or the
    /// netem qdisc's sent and dropped packets (`tc -s qdisc`).
    pub fn emulated_packets(&self) -> (u64, u64) {
        if self.kind == Some(EmulatorKind::NetemQdisc) {
            let out = Command::new("tc")
                .args(["-s", "-n", &self.name, "qdisc", "show", "dev", "lo"])
                .output();
            return out.map_or((0, 0), |o| {
                qdisc_packets(&String::from_utf8_lossy(&o.stdout))
            });
        }
        self.emulator.as_ref().map_or((0, 0), |e| {
            (
                e.stats.delayed.load(std::sync::atomic::Ordering::Relaxed),
                e.stats.dropped.load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }
}

/// Sent and dropped packets from `tc -s qdisc show`'s first
/// ` Sent <bytes> bytes <pkts> pkt (dropped <n>, …)` line.
fn qdisc_packets(stats: &str) -> (u64, u64) {
    let Some(line) = stats.lines().find(|l| l.trim_start().starts_with("Sent ")) else {
        return (0, 0);
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |word: &str| {
        let at = words
            .iter()
            .position(|w| w.trim_start_matches('(') == word)?;
        words.get(at + 1)?.trim_end_matches(',').parse().ok()
    };
    let sent = words.get(3).and_then(|w| w.parse().ok()).unwrap_or(0);
    (sent, after("dropped").unwrap_or(0))
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.emulator.take();
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// `tc` arguments adding a netem qdisc with `netem`'s delay, jitter, loss and rate at the root
/// of device `dev` in namespace `ns` (the namespace's loopback, or an agent host's link). Times in µs, so that fractional milliseconds survive; a limit
/// well above netem's default 1,000 packets, which a delayed 500-connection cell would exceed
/// (the NFQUEUE emulator holds up to 65,536).
pub(crate) fn netem_qdisc_args(ns: &str, dev: &str, netem: &Netem) -> Vec<String> {
    let mut args: Vec<String> = ["-n", ns, "qdisc", "add", "dev", dev, "root", "netem"]
        .map(String::from)
        .to_vec();
    args.extend(["limit".into(), "65536".into(), "delay".into()]);
    args.push(format!("{}us", (netem.delay_ms * 1000.0).round() as u64));
    if netem.jitter_ms > 0.0 {
        args.push(format!("{}us", (netem.jitter_ms * 1000.0).round() as u64));
    }
    if netem.loss_pct > 0.0 {
        args.extend(["loss".into(), format!("{}%", netem.loss_pct)]);
    }
    if let Some(rate) = netem
        .rate
        .as_ref()
        .filter(|_| netem.queue_packets.is_none())
    {
        args.extend(["rate".into(), rate.clone()]);
    }
    args
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

/// Loopback, or the suite's namespaces' 198.18.0.0/15: where a proxy may listen and connect,
/// and where a server may listen without a warning.
pub fn suite_address(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback() || (a == 198 && (b == 18 || b == 19))
        }
        std::net::IpAddr::V6(v6) => v6.is_loopback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdisc_statistics_give_sent_and_dropped_packets() {
        let stats = "qdisc netem 8001: root refcnt 2 limit 65536 delay 10ms loss 1%\n \
                     Sent 123456 bytes 789 pkt (dropped 7, overlimits 0 requeues 0)\n";
        assert_eq!(qdisc_packets(stats), (789, 7));
        assert_eq!(qdisc_packets(""), (0, 0));
    }

    #[test]
    fn the_qdisc_carries_delay_jitter_loss_and_rate() {
        let netem = Netem::parse("rtt=20ms,jitter=0.5ms,loss=1%,rate=100mbit").unwrap();
        assert_eq!(
            netem_qdisc_args("ns", "lo", &netem).join(" "),
            "-n ns qdisc add dev lo root netem limit 65536 delay 10000us 500us loss 1% rate 100mbit"
        );
    }

    /// Proxies stay on loopback and the suite's benchmarking range; anything else is refused.
    #[test]
    fn only_loopback_and_the_benchmarking_range_are_suite_address() {
        for ok in [
            "127.0.0.1",
            "127.0.0.9",
            "198.18.0.1",
            "198.19.255.254",
            "::1",
        ] {
            assert!(suite_address(ok.parse().unwrap()), "{ok}");
        }
        for no in [
            "0.0.0.0",
            "10.0.0.1",
            "198.20.0.1",
            "198.17.0.1",
            "8.8.8.8",
            "::",
        ] {
            assert!(!suite_address(no.parse().unwrap()), "{no}");
        }
    }
}
