//! Samples RSS and CPU of the server child and the load-generator child on a fixed interval,
//! on its own OS thread so that sampling never waits behind the runner's tasks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

/// One reading.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub t: Duration,
    pub role: Role,
    pub rss_bytes: u64,
    /// CPU over the interval before this sample, from accumulated CPU time (100 % = one core).
    pub cpu_pct: f64,
}

/// Summary of one process over a cell.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceSummary {
    pub rss_peak_bytes: u64,
    pub rss_mean_bytes: f64,
    pub cpu_pct_mean: f64,
    pub cpu_s: f64,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(Vec<Sample>, [ResourceSummary; 2])>,
}

struct Track {
    pid: Pid,
    role: Role,
    first_cpu_ms: Option<u64>,
    last_cpu_ms: u64,
    last_t: Duration,
    rss_sum: f64,
    rss_peak: u64,
    n: u64,
}

impl Sampler {
    /// Samples the server (when its pid is known) and the load generator; returns once the
    /// first reading is taken, so that what follows is inside the sampled window.
    pub fn start(server_pid: Option<u32>, client_pid: u32, interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (first_taken, first) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let Ok(mut sys) = System::new() else {
                return (Vec::new(), [ResourceSummary::default(); 2]);
            };
            let mut tracks = [
                Track::new(Pid::from_u32(server_pid.unwrap_or(u32::MAX)), Role::Server),
                Track::new(Pid::from_u32(client_pid), Role::Client),
            ];
            let pids = [tracks[0].pid, tracks[1].pid];
            let started = Instant::now();
            let mut samples = Vec::new();
            let read = |sys: &mut System, tracks: &mut [Track; 2], samples: &mut Vec<Sample>| {
                sys.refresh_processes_specifics(
                    ProcessesToUpdate::Some(&pids),
                    true,
                    ProcessRefreshKind::nothing().with_memory().with_cpu(),
                );
                let t = started.elapsed();
                for track in tracks.iter_mut() {
                    // A process that has exited reads as RSS 0: not a sample.
                    if let Some(p) = sys.process(track.pid).filter(|p| p.memory() > 0) {
                        if let Some(s) = track.observe(t, p.memory(), p.accumulated_cpu_time()) {
                            samples.push(s);
                        }
                    }
                }
            };
            read(&mut sys, &mut tracks, &mut samples);
            let _ = first_taken.send(());
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(interval);
                read(&mut sys, &mut tracks, &mut samples);
            }
            let wall = started.elapsed();
            let summaries = [tracks[0].summary(wall), tracks[1].summary(wall)];
            (samples, summaries)
        });
        let _ = first.recv();
        Sampler { stop, thread }
    }

    /// Stops sampling (after one last reading) and returns the samples and the server and
    /// client summaries.
    pub fn finish(self) -> (Vec<Sample>, ResourceSummary, ResourceSummary) {
        self.stop.store(true, Ordering::Relaxed);
        let (samples, [server, client]) = self.thread.join().expect("sampler thread");
        (samples, server, client)
    }
}

impl Track {
    fn new(pid: Pid, role: Role) -> Self {
        Track {
            pid,
            role,
            first_cpu_ms: None,
            last_cpu_ms: 0,
            last_t: Duration::ZERO,
            rss_sum: 0.0,
            rss_peak: 0,
            n: 0,
        }
    }

    fn observe(&mut self, t: Duration, rss: u64, cpu_ms: u64) -> Option<Sample> {
        self.rss_sum += rss as f64;
        self.rss_peak = self.rss_peak.max(rss);
        self.n += 1;
        let Some(_) = self.first_cpu_ms else {
            self.first_cpu_ms = Some(cpu_ms);
            self.last_cpu_ms = cpu_ms;
            self.last_t = t;
            return None;
        };
        let dt = (t - self.last_t).as_secs_f64() * 1000.0;
        let cpu_pct = if dt > 0.0 {
            (cpu_ms.saturating_sub(self.last_cpu_ms)) as f64 / dt * 100.0
        } else {
            0.0
        };
        self.last_cpu_ms = cpu_ms;
        self.last_t = t;
        Some(Sample {
            t,
            role: self.role,
            rss_bytes: rss,
            cpu_pct,
        })
    }

    fn summary(&self, wall: Duration) -> ResourceSummary {
        let cpu_s = self
            .first_cpu_ms
            .map_or(0.0, |first| (self.last_cpu_ms - first) as f64 / 1000.0);
        ResourceSummary {
            rss_peak_bytes: self.rss_peak,
            rss_mean_bytes: if self.n > 0 {
                self.rss_sum / self.n as f64
            } else {
                0.0
            },
            cpu_pct_mean: if wall.as_secs_f64() > 0.0 {
                cpu_s / wall.as_secs_f64() * 100.0
            } else {
                0.0
            },
            cpu_s,
        }
    }
}
