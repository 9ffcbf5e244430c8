//! Samples RSS and CPU of the server child and the load-generator child during the measured
//! phase, on its own OS thread so that sampling never waits behind the runner's tasks.
//!
//! The phase's figures come from readings at its two boundaries (the first reading is taken
//! before the load generator is told to go, the last one as soon as it reports `finished`),
//! not from the periodic samples: CPU time is the scheduler's nanosecond count summed over the
//! process's threads (`/proc/PID/task/*/schedstat`), and the peak RSS is the kernel's own
//! high-water mark (`VmHWM`), reset at the phase's start. The periodic samples give the
//! series in `resources.csv`, the sampled peak and the mean.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::timewait::{self, TimeWaitCounts};

/// Fewer sampling intervals than this in a phase make a mean of samples meaningless: such a
/// phase is flagged `short_phase` and its RSS mean left empty.
pub const MIN_INTERVALS_PER_PHASE: u32 = 3;

/// With only tick-based CPU time (10 ms steps, when schedstat is missing), a phase shorter
/// than this gets no CPU % (one tick would be more than 1 % of it).
const MIN_PHASE_FOR_TICKS: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Server,
    Client,
    /// The proxies beside the load generators (a sidecar path), summed.
    ProxyClient,
    /// The proxy beside the server (an edge path's, or the server-side sidecar).
    ProxyServer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::ProxyClient => "proxy-client",
            Role::ProxyServer => "proxy-server",
        }
    }
}

/// One reading.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub t: Duration,
    pub role: Role,
    pub rss_bytes: u64,
    /// CPU over the interval before this sample, from accumulated CPU time (100 % = one core).
    pub cpu_pct: f64,
}

/// A load generator's CPU at or above this share of the cores its threads may use means it was
/// saturated (the capacity search and the runner's warning judge by it).
pub const CLIENT_CPU_SATURATED_SHARE: f64 = 0.9;

/// Whether a load generator that used `cpu_pct` (100 = one core) of `cores` was saturated.
pub fn client_saturated(cpu_pct: f64, cores: usize) -> bool {
    cpu_pct >= CLIENT_CPU_SATURATED_SHARE * 100.0 * cores.max(1) as f64
}

/// Summary of one process over a measured phase.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct ResourceSummary {
    /// Largest RSS among the readings.
    pub rss_peak_bytes: u64,
    /// The kernel's peak RSS over the phase (`VmHWM`, reset at its start); `None` when the
    /// reset was refused or the process could not be read at the end.
    pub rss_hwm_bytes: Option<u64>,
    /// Mean of the readings; `None` for a short phase.
    pub rss_mean_bytes: Option<f64>,
    /// CPU time over the phase's wall time × 100 (100 = one core); `None` when the CPU time
    /// is too coarse for the phase.
    pub cpu_pct_mean: Option<f64>,
    /// CPU seconds (user + system) between the phase's boundary readings.
    pub cpu_s: f64,
    /// The phase spanned fewer than [`MIN_INTERVALS_PER_PHASE`] sampling intervals.
    pub short_phase: bool,
    /// The process was read at both ends of the phase; `false` for a server the runner has
    /// no pid of (a service measured by `[targets]`): its columns are then empty, not zero.
    #[serde(default)]
    pub sampled: bool,
    /// TCP connections in TIME_WAIT in the process's network namespace over the phase (read
    /// for the load generator only); `None` when not read.
    #[serde(default)]
    pub tcp_time_wait: Option<TimeWaitCounts>,
}

/// The latest sample of each role, for a live view (the runner's metrics endpoint): the
/// sampler keeps it up to date as it reads, and a reader takes a copy when it wants one.
#[derive(Debug, Clone, Default)]
pub struct Latest(std::sync::Arc<std::sync::Mutex<Vec<Sample>>>);

impl Latest {
    fn put(&self, sample: Sample) {
        let mut latest = self.0.lock().expect("latest samples");
        match latest.iter_mut().find(|s| s.role == sample.role) {
            Some(s) => *s = sample,
            None => latest.push(sample),
        }
    }

    /// The latest sample of each role read so far.
    pub fn get(&self) -> Vec<Sample> {
        self.0.lock().expect("latest samples").clone()
    }

    /// Forgets every sample (the processes they describe are gone).
    pub fn clear(&self) {
        self.0.lock().expect("latest samples").clear();
    }
}

pub struct Sampler {
    stop: mpsc::Sender<Duration>,
    thread: JoinHandle<(Vec<Sample>, [ResourceSummary; 2])>,
}

/// What one reading of `/proc` gives for a process.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub rss_bytes: u64,
    pub hwm_bytes: u64,
    pub cpu_ns: u64,
    /// CPU time came from schedstat (ns) rather than `stat` (clock ticks).
    cpu_precise: bool,
}

/// Reads RSS, VmHWM and CPU time of `pid`; `None` once it has exited.
pub fn read_proc(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|v| v * 1024)
    };
    // A zombie has no memory lines: not a reading.
    let rss_bytes = kb("VmRSS:").filter(|&v| v > 0)?;
    let hwm_bytes = kb("VmHWM:").unwrap_or(rss_bytes);
    let (cpu_ns, cpu_precise) = match schedstat_ns(pid) {
        Some(ns) => (ns, true),
        None => (stat_ticks_ns(pid)?, false),
    };
    Some(Reading {
        rss_bytes,
        hwm_bytes,
        cpu_ns,
        cpu_precise,
    })
}

/// CPU time of all live threads of `pid` in nanoseconds, from the scheduler's own accounting.
fn schedstat_ns(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            total += ns;
            any = true;
        }
    }
    any.then_some(total)
}

/// utime + stime of `pid` from `/proc/PID/stat`, in nanoseconds (10 ms steps).
fn stat_ticks_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks_per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    Some((utime + stime) * 1_000_000_000 / ticks_per_s)
}

/// Resets the process's RSS high-water mark to its current RSS (Linux ≥ 4.0).
pub fn reset_hwm(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

struct Track {
    pid: Option<u32>,
    role: Role,
    hwm_reset: bool,
    first: Option<Reading>,
    last: Option<Reading>,
    last_t: Duration,
    rss_sum: f64,
    rss_peak: u64,
    n: u64,
    /// The load generator's namespace's TIME_WAIT counts (client role only).
    time_wait: Option<TimeWaitCounts>,
}

impl Sampler {
    /// Resets both processes' RSS high-water marks and takes the first reading; returns once
    /// it is taken, so that what follows is inside the sampled window.
    pub fn start(server_pid: Option<u32>, client_pid: Option<u32>, interval: Duration) -> Self {
        Self::start_with(server_pid, client_pid, interval, None)
    }

    /// [`Sampler::start`], also keeping `latest` up to date with each reading when given.
    pub fn start_with(
        server_pid: Option<u32>,
        client_pid: Option<u32>,
        interval: Duration,
        latest: Option<Latest>,
    ) -> Self {
        let (stop, stopped) = mpsc::channel::<Duration>();
        let (first_taken, first) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut tracks = [
                Track::new(server_pid, Role::Server),
                Track::new(client_pid, Role::Client),
            ];
            let started = Instant::now();
            let mut samples = Vec::new();
            let read = |tracks: &mut [Track; 2], samples: &mut Vec<Sample>| {
                let t = started.elapsed();
                for track in tracks.iter_mut() {
                    if let Some(s) = track.observe(t) {
                        if let Some(latest) = &latest {
                            latest.put(s);
                        }
                        samples.push(s);
                    }
                }
            };
            for track in tracks.iter_mut() {
                track.hwm_reset = track.pid.is_some_and(reset_hwm);
            }
            read(&mut tracks, &mut samples);
            let _ = first_taken.send(());
            // The finishing call wakes this thread at once for the boundary reading.
            let phase = loop {
                match stopped.recv_timeout(interval) {
                    Err(mpsc::RecvTimeoutError::Timeout) => read(&mut tracks, &mut samples),
                    Ok(phase) => break phase,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break started.elapsed(),
                }
            };
            read(&mut tracks, &mut samples);
            let short = phase < interval * MIN_INTERVALS_PER_PHASE;
            let summaries = [
                tracks[0].summary(phase, short),
                tracks[1].summary(phase, short),
            ];
            (samples, summaries)
        });
        let _ = first.recv();
        Sampler { stop, thread }
    }

    /// Takes the boundary reading at once and returns the samples and the server and client
    /// summaries over `phase` (the measured phase's wall time, as the load generator timed it).
    pub fn finish(self, phase: Duration) -> (Vec<Sample>, ResourceSummary, ResourceSummary) {
        let _ = self.stop.send(phase);
        let (samples, [server, client]) = self.thread.join().expect("sampler thread");
        (samples, server, client)
    }
}

impl Track {
    fn new(pid: Option<u32>, role: Role) -> Self {
        Track {
            pid,
            role,
            hwm_reset: false,
            first: None,
            last: None,
            last_t: Duration::ZERO,
            rss_sum: 0.0,
            rss_peak: 0,
            n: 0,
            time_wait: None,
        }
    }

    fn observe(&mut self, t: Duration) -> Option<Sample> {
        let pid = self.pid?;
        if self.role == Role::Client {
            if let Some(tw) = timewait::of_pid(pid) {
                match &mut self.time_wait {
                    Some(counts) => counts.observe(tw),
                    None => self.time_wait = Some(TimeWaitCounts::first(tw)),
                }
            }
        }
        let reading = read_proc(pid)?;
        self.rss_sum += reading.rss_bytes as f64;
        self.rss_peak = self.rss_peak.max(reading.rss_bytes);
        self.n += 1;
        let previous = self.last.replace(reading);
        self.first.get_or_insert(reading);
        let previous = previous?;
        let dt_ns = (t - self.last_t).as_nanos() as f64;
        self.last_t = t;
        let cpu_pct = if dt_ns > 0.0 {
            reading.cpu_ns.saturating_sub(previous.cpu_ns) as f64 / dt_ns * 100.0
        } else {
            0.0
        };
        Some(Sample {
            t,
            role: self.role,
            rss_bytes: reading.rss_bytes,
            cpu_pct,
        })
    }

    fn summary(&self, phase: Duration, short_phase: bool) -> ResourceSummary {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return ResourceSummary {
                short_phase,
                ..Default::default()
            };
        };
        let cpu_s = last.cpu_ns.saturating_sub(first.cpu_ns) as f64 / 1e9;
        let precise = first.cpu_precise && last.cpu_precise;
        let cpu_pct_mean = (phase > Duration::ZERO && (precise || phase >= MIN_PHASE_FOR_TICKS))
            .then(|| cpu_s / phase.as_secs_f64() * 100.0);
        ResourceSummary {
            rss_peak_bytes: self.rss_peak,
            rss_hwm_bytes: self.hwm_reset.then_some(last.hwm_bytes),
            rss_mean_bytes: (!short_phase && self.n > 0).then(|| self.rss_sum / self.n as f64),
            cpu_pct_mean,
            cpu_s,
            short_phase,
            sampled: true,
            tcp_time_wait: self.time_wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's CPU time as schedstat reports it matches its own CPU clock to well under
    /// the 10 ms tick that `/proc/PID/stat` would give, and the process sum includes it.
    #[test]
    fn cpu_time_reads_with_sub_tick_precision() {
        let pid = std::process::id();
        let before = schedstat_ns(pid).expect("schedstat readable");
        let (done_tx, done_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = mpsc::channel::<()>();
        let spinner = std::thread::spawn(move || {
            let own = || {
                Duration::from(
                    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap(),
                )
            };
            while own() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            let tid = nix::unistd::gettid();
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).unwrap();
            let schedstat: u64 = text.split_whitespace().next().unwrap().parse().unwrap();
            done_tx.send((own(), schedstat)).unwrap();
            // Alive until read: schedstat counts live threads.
            let _ = exit_rx.recv();
        });
        let (clock, schedstat) = done_rx.recv().unwrap();
        let after = schedstat_ns(pid).expect("schedstat readable");
        exit_tx.send(()).unwrap();
        spinner.join().unwrap();
        let diff_ms = (schedstat as f64 - clock.as_nanos() as f64).abs() / 1e6;
        assert!(
            diff_ms < 1.0,
            "schedstat and the thread clock differ by {diff_ms} ms"
        );
        // The process sum counts live threads only: other tests' threads that ended since
        // `before` leave it, so compare against the spinner's own share, not the difference.
        assert!(
            after >= schedstat && schedstat >= 30_000_000,
            "process {before} -> {after}, spinner {schedstat}"
        );
    }

    #[test]
    fn hwm_resets_to_current_rss() {
        let pid = std::process::id();
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        drop(big);
        let before = read_proc(pid).unwrap();
        assert!(reset_hwm(pid), "clear_refs writable for our own process");
        let after = read_proc(pid).unwrap();
        assert!(
            after.hwm_bytes < before.hwm_bytes,
            "{} -> {}",
            before.hwm_bytes,
            after.hwm_bytes
        );
    }
}
