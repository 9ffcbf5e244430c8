//! What the machine was doing and how it was set up: things that change a result without
//! being a knob of the experiment (CPU, hypervisor, frequency scaling, sysctls, limits, the
//! socket buffers the kernel actually grants), recorded in the manifest, and the load and
//! steal time around each cell, recorded in its row.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The machine and kernel settings of a run, read once as it starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Environment {
    /// `/proc/cpuinfo` `model name` (the marketing name, not only the vendor string).
    pub cpu_model: String,
    /// Whether `/proc/cpuinfo` carries the `hypervisor` flag (the kernel runs as a guest).
    pub hypervisor_flag: bool,
    /// `systemd-detect-virt` (e.g. `kvm`, `none`), else `/sys/hypervisor/type`, else `unknown`.
    pub hypervisor: String,
    /// `/proc/meminfo` `MemTotal`.
    pub ram_bytes: u64,
    /// cpu0's cpufreq governor, or `none` when the kernel exposes no cpufreq (typical of VMs).
    pub cpufreq_governor: String,
    /// `on`/`off` from intel_pstate's `no_turbo` or cpufreq's `boost`, `none` without cpufreq,
    /// `unknown` when cpufreq exists but says nothing about turbo.
    pub turbo: String,
    /// `/proc/loadavg` at the start of the run: 1, 5 and 15 minutes.
    pub loadavg: [f64; 3],
    /// Share of all CPU time since boot that the hypervisor stole (`/proc/stat`), in percent.
    pub steal_pct_since_boot: f64,
    /// The sysctls that bound sockets and ports, as the host has them (`unknown` if unreadable).
    pub sysctls: BTreeMap<String, String>,
    /// RLIMIT_NOFILE of the runner as the run starts (soft is what load generators inherit).
    pub nofile_soft: u64,
    pub nofile_hard: u64,
    /// The SO_RCVBUF/SO_SNDBUF asked of a UDP socket: the QUIC server's configured size.
    pub udp_buffer_requested_bytes: usize,
    /// What `getsockopt` returns after that request: Linux doubles the value for bookkeeping
    /// and caps the request at `rmem_max`/`wmem_max`, so a small cap shows here.
    pub udp_rcvbuf_effective_bytes: usize,
    pub udp_sndbuf_effective_bytes: usize,
    /// `getsockopt` of a fresh TCP socket left at the kernel's defaults (`tcp_rmem`/`tcp_wmem`).
    pub tcp_rcvbuf_default_bytes: usize,
    pub tcp_sndbuf_default_bytes: usize,
    /// The runner's global allocator (its servers and load generators are the same binary):
    /// `jemalloc` (the default build) or `system` (`--no-default-features`, for heap
    /// profilers). RSS figures depend on it.
    pub allocator: String,
    /// Open-loop runs: how late the machine itself ran a spinning thread on the load
    /// generator's core, probed as the run starts (the floor under pacing lag).
    pub stall_probe: Option<results::manifest::StallProbe>,
}

/// The sysctls recorded, by name and `/proc/sys` path.
const SYSCTLS: [(&str, &str); 5] = [
    ("net.core.rmem_max", "/proc/sys/net/core/rmem_max"),
    ("net.core.wmem_max", "/proc/sys/net/core/wmem_max"),
    (
        "net.ipv4.ip_local_port_range",
        "/proc/sys/net/ipv4/ip_local_port_range",
    ),
    ("net.ipv4.tcp_tw_reuse", "/proc/sys/net/ipv4/tcp_tw_reuse"),
    ("net.core.somaxconn", "/proc/sys/net/core/somaxconn"),
];

impl Environment {
    /// Reads everything; a value that cannot be read is `unknown` or 0, never an error, since
    /// a missing file must not stop a benchmark. `allocator` is the runner binary's own
    /// (its build decides it: [`Environment::allocator`]).
    pub fn read(udp_buffer_bytes: usize, allocator: &str) -> Environment {
        let cpuinfo = read("/proc/cpuinfo");
        let (nofile_soft, nofile_hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .unwrap_or((0, 0));
        let (udp_rcv, udp_snd) = udp_buffers(udp_buffer_bytes).unwrap_or((0, 0));
        let (tcp_rcv, tcp_snd) = tcp_default_buffers().unwrap_or((0, 0));
        let (governor, turbo) = frequency_scaling(Path::new("/sys/devices/system/cpu"));
        Environment {
            cpu_model: cpu_model(&cpuinfo),
            hypervisor_flag: cpuinfo
                .lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor")),
            hypervisor: hypervisor(),
            ram_bytes: mem_total_bytes(&read("/proc/meminfo")),
            cpufreq_governor: governor,
            turbo,
            loadavg: loadavg(&read("/proc/loadavg")),
            steal_pct_since_boot: CpuTimes::now()
                .map_or(0.0, |t| t.steal_pct_since(&CpuTimes::default())),
            sysctls: SYSCTLS
                .iter()
                .map(|(name, path)| {
                    let value = std::fs::read_to_string(path)
                        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                        .unwrap_or_else(|_| "unknown".into());
                    (name.to_string(), value)
                })
                .collect(),
            nofile_soft,
            nofile_hard,
            udp_buffer_requested_bytes: udp_buffer_bytes,
            udp_rcvbuf_effective_bytes: udp_rcv,
            udp_sndbuf_effective_bytes: udp_snd,
            tcp_rcvbuf_default_bytes: tcp_rcv,
            tcp_sndbuf_default_bytes: tcp_snd,
            allocator: allocator.into(),
            stall_probe: None,
        }
    }
}

/// Load and steal around one cell: a busy or stolen-from machine explains an outlier; and the
/// network emulator it ran under, whose thread's CPU is counted neither as server nor client.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CellEnvironment {
    /// With `netem` delay, jitter or loss: which emulator applied them (set by the cell's
    /// namespace, not by [`CellSnapshot`]).
    pub emulation: Option<crate::netem::emulator::Emulation>,
    pub loadavg1_before: f64,
    pub loadavg1_after: f64,
    /// Steal time over the cell as a percentage of all CPU time in it (all cores).
    pub steal_pct: f64,
    /// The kernel's TCP/UDP counters over the measured phase, read in the cell's namespace
    /// (set by the cell itself, not by [`CellSnapshot`]); `None` when the phase did not run.
    pub net: Option<crate::measure::netcounters::CellCounters>,
}

/// A snapshot taken as a cell starts; [`CellSnapshot::finish`] turns it into the cell's figures.
pub struct CellSnapshot {
    loadavg1: f64,
    cpu: Option<CpuTimes>,
}

impl CellSnapshot {
    pub fn take() -> CellSnapshot {
        CellSnapshot {
            loadavg1: loadavg(&read("/proc/loadavg"))[0],
            cpu: CpuTimes::now(),
        }
    }

    pub fn finish(&self) -> CellEnvironment {
        let steal_pct = match (&self.cpu, CpuTimes::now()) {
            (Some(before), Some(after)) => after.steal_pct_since(before),
            _ => 0.0,
        };
        CellEnvironment {
            emulation: None,
            loadavg1_before: self.loadavg1,
            loadavg1_after: loadavg(&read("/proc/loadavg"))[0],
            steal_pct,
            net: None,
        }
    }
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuTimes {
    total_ticks: u64,
    steal_ticks: u64,
}

impl CpuTimes {
    fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&read("/proc/stat"))
    }

    fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal guest guest_nice; guest time is
        // already counted in user and nice, so the total stops at steal.
        Some(CpuTimes {
            total_ticks: ticks.iter().take(8).sum(),
            steal_ticks: *ticks.get(7).unwrap_or(&0),
        })
    }

    fn steal_pct_since(&self, before: &CpuTimes) -> f64 {
        let total = self.total_ticks.saturating_sub(before.total_ticks);
        if total == 0 {
            return 0.0;
        }
        self.steal_ticks.saturating_sub(before.steal_ticks) as f64 * 100.0 / total as f64
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// This machine's CPU model, as `/proc/cpuinfo` names it (`unknown` when it does not).
pub fn this_cpu_model() -> String {
    cpu_model(&read("/proc/cpuinfo"))
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`), which pinning does not change.
pub fn online_cpus() -> Option<usize> {
    cpu_list_len(&read("/sys/devices/system/cpu/online"))
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    (n > 0).then_some(n)
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total_bytes(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn loadavg(text: &str) -> [f64; 3] {
    let mut out = [0.0; 3];
    for (slot, v) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = v.parse().unwrap_or(0.0);
    }
    out
}

fn hypervisor() -> String {
    let detected = std::process::Command::new("systemd-detect-virt")
        .output()
        .ok()
        // It exits 1 when it finds no virtualisation and still prints `none`.
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    detected
        .or_else(|| {
            std::fs::read_to_string("/sys/hypervisor/type")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// cpu0's governor and the turbo setting below `cpu_dir` (`/sys/devices/system/cpu`).
fn frequency_scaling(cpu_dir: &Path) -> (String, String) {
    if !cpu_dir.join("cpu0/cpufreq").is_dir() {
        return ("none".into(), "none".into());
    }
    let value = |rel: &str| {
        std::fs::read_to_string(cpu_dir.join(rel))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let governor = value("cpu0/cpufreq/scaling_governor").unwrap_or_else(|| "unknown".into());
    let turbo = match (value("intel_pstate/no_turbo"), value("cpufreq/boost")) {
        (Some(no_turbo), _) => if no_turbo == "1" { "off" } else { "on" }.to_string(),
        (None, Some(boost)) => if boost == "1" { "on" } else { "off" }.to_string(),
        (None, None) => "unknown".into(),
    };
    (governor, turbo)
}

/// SO_RCVBUF/SO_SNDBUF of a loopback UDP socket after asking for `bytes`, as read back.
fn udp_buffers(bytes: usize) -> std::io::Result<(usize, usize)> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let s = socket2::SockRef::from(&socket);
    s.set_recv_buffer_size(bytes)?;
    s.set_send_buffer_size(bytes)?;
    Ok((s.recv_buffer_size()?, s.send_buffer_size()?))
}

/// SO_RCVBUF/SO_SNDBUF of a fresh TCP socket, untouched.
fn tcp_default_buffers() -> std::io::Result<(usize, usize)> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    Ok((socket.recv_buffer_size()?, socket.send_buffer_size()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_list_counts_ranges_and_singles() {
        assert_eq!(cpu_list_len("0-1\n"), Some(2));
        assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_len("0"), Some(1));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len("x"), None);
    }

    #[test]
    fn steal_is_a_share_of_the_ticks_in_between() {
        let before = CpuTimes::parse("cpu  100 0 100 700 0 0 0 100 50 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(before.total_ticks, 1000);
        let after = CpuTimes::parse("cpu  200 0 100 1550 0 0 0 150 90 0\n").unwrap();
        // 1,000 ticks passed, 50 of them stolen; guest ticks are not counted twice.
        assert!((after.steal_pct_since(&before) - 5.0).abs() < 1e-9);
        assert_eq!(before.steal_pct_since(&before), 0.0);
    }

    #[test]
    fn proc_files_parse() {
        assert_eq!(loadavg("1.96 0.77 0.29 4/103 11135\n"), [1.96, 0.77, 0.29]);
        assert_eq!(
            mem_total_bytes("MemTotal:       2048 kB\nMemFree: 1 kB\n"),
            2048 * 1024
        );
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"),
            "AMD EPYC 7B13 64-Core Processor"
        );
    }

    #[test]
    fn no_cpufreq_reads_none_and_turbo_is_read_where_present() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            frequency_scaling(dir.path()),
            ("none".into(), "none".into())
        );
        std::fs::create_dir_all(dir.path().join("cpu0/cpufreq")).unwrap();
        std::fs::create_dir_all(dir.path().join("intel_pstate")).unwrap();
        std::fs::write(
            dir.path().join("cpu0/cpufreq/scaling_governor"),
            "performance\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("intel_pstate/no_turbo"), "1\n").unwrap();
        assert_eq!(
            frequency_scaling(dir.path()),
            ("performance".into(), "off".into())
        );
    }

    #[test]
    fn socket_buffers_are_read_back_from_the_kernel() {
        let env = Environment::read(1 << 20, "system");
        // Linux reports twice what it grants; whatever the cap, a granted buffer is non-zero.
        assert!(env.udp_rcvbuf_effective_bytes > 0, "{env:?}");
        assert!(env.tcp_rcvbuf_default_bytes > 0, "{env:?}");
        assert_eq!(env.sysctls.len(), SYSCTLS.len());
        assert!(env.nofile_soft > 0 && env.nofile_soft <= env.nofile_hard);
    }
}
