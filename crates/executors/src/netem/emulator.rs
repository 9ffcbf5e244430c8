//! A userspace netem for one namespace's loopback, on NFQUEUE, and the choice between it and
//! the kernel's netem qdisc ([`select`]).
//!
//! Debian's cloud kernels (and this machine's) ship without `sch_netem`; there the delay,
//! jitter and loss of `--netem` are applied here: an iptables rule queues every packet arriving
//! on the namespace's loopback to this thread, which gives each its verdict after the one-way
//! delay (ACCEPT) or drops it with the loss probability. Every loopback packet crosses INPUT
//! exactly once, so a round trip costs twice the delay. INPUT, not OUTPUT: a packet held at
//! OUTPUT still belongs to its sending socket, and TCP Small Queues then lets a socket have only
//! a few packets in the delay at once (a TCP download at 10 Mbit/s with 15 ms each way reached
//! about 3 Mbit/s, QUIC's the link's rate); past the loopback device the packet is orphaned, as
//! the kernel's netem orphans what it delays. The rate limit is left to the kernel's tbf qdisc,
//! before the delay, as a link's serialization comes before its propagation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use experiment::settings::Netem;

/// The NFQUEUE number the namespace's iptables rule sends loopback packets to.
pub const QUEUE: u16 = 0;

/// Which emulator applied a cell's delay, jitter and loss (`emulator` in cells.csv and
/// manifest.json), so that a result says whether the kernel or this thread did the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmulatorKind {
    /// The kernel's `tc qdisc … netem` on the namespace's loopback.
    NetemQdisc,
    /// This module's thread behind an iptables NFQUEUE rule.
    Nfqueue,
}

impl EmulatorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EmulatorKind::NetemQdisc => "netem-qdisc",
            EmulatorKind::Nfqueue => "nfqueue",
        }
    }

    /// Where a delayed packet waits (`emulator_delays_at` in manifest.json): the qdisc holds it
    /// as it leaves, orphaned from its socket; this thread on receipt (iptables `INPUT`).
    /// Manifests without the field are of runs whose NFQUEUE emulator held packets at `OUTPUT`,
    /// where TCP Small Queues throttled a TCP sender under delay.
    pub fn delays_at(self) -> &'static str {
        match self {
            EmulatorKind::NetemQdisc => "qdisc",
            EmulatorKind::Nfqueue => "input",
        }
    }
}

/// The emulator a cell ran with and what its thread cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Emulation {
    pub kind: EmulatorKind,
    /// CPU seconds of the NFQUEUE thread over the cell (`None` for the qdisc: the kernel
    /// emulates in softirq context, charged to whichever thread it interrupts).
    pub cpu_s: Option<f64>,
}

/// The emulator for `netem`: none when it asks for no delay, jitter or loss (a rate alone is
/// the kernel's tbf); the real netem qdisc when `qdisc_works` (the probe: adding it in the
/// cell's namespace succeeded, i.e. the kernel has `sch_netem`); else the NFQUEUE fallback.
/// Pure over the probe's answer, so the choice is tested on any kernel; the probe runs only
/// when emulation is needed.
pub fn select(netem: &Netem, qdisc_works: impl FnOnce() -> bool) -> Option<EmulatorKind> {
    if netem.delay_ms <= 0.0 && netem.jitter_ms <= 0.0 && netem.loss_pct <= 0.0 {
        return None;
    }
    Some(if qdisc_works() {
        EmulatorKind::NetemQdisc
    } else {
        EmulatorKind::Nfqueue
    })
}

/// CPU time a thread of this process has run, in seconds, from the first field of
/// `/proc/self/task/TID/schedstat` (ns on CPU); `None` once the thread is gone.
pub fn thread_cpu_s(tid: i32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Packets handled, for the closing check that emulation really happened.
#[derive(Debug, Default)]
pub struct EmulatorStats {
    pub delayed: AtomicU64,
    pub dropped: AtomicU64,
}

pub struct Emulator {
    /// The emulator thread's id, whose CPU time is the emulation's cost (`emulator_cpu_s`).
    pub tid: i32,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub stats: Arc<EmulatorStats>,
}

/// A tiny deterministic PRNG (xorshift64*): loss and jitter need no cryptographic quality.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Held {
    due: Instant,
    seq: u64,
    msg: nfq::Message,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

impl Emulator {
    /// Starts the emulator thread inside the namespace (`enter` moves the thread there) and
    /// returns once it is bound to the queue, so no packet meets an unbound queue.
    pub fn start(
        netem: &Netem,
        enter: impl FnOnce() -> anyhow::Result<()> + Send + 'static,
    ) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(EmulatorStats::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<i32>>();
        let delay = Duration::from_secs_f64(netem.delay_ms / 1000.0);
        let jitter = netem.jitter_ms / 1000.0;
        let loss = netem.loss_pct / 100.0;
        let (flag, counters) = (stop.clone(), stats.clone());
        let thread = std::thread::spawn(move || {
            let queue = (|| -> anyhow::Result<nfq::Queue> {
                enter()?;
                let mut q = nfq::Queue::open().context("cannot open NFQUEUE (netlink)")?;
                q.bind(QUEUE).context("cannot bind NFQUEUE 0")?;
                q.set_copy_range(QUEUE, 64)?;
                q.set_queue_max_len(QUEUE, 65_536)?;
                q.set_recv_gso(QUEUE, true)?;
                q.set_nonblocking(true);
                Ok(q)
            })();
            let mut queue = match queue {
                Ok(q) => {
                    let _ = ready_tx.send(Ok(nix::unistd::gettid().as_raw()));
                    q
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let mut held: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            let mut seq = 0u64;
            loop {
                let stopping = flag.load(Ordering::Relaxed);
                let mut received = false;
                while let Ok(mut msg) = queue.recv() {
                    received = true;
                    if loss > 0.0 && rng.next_f64() < loss {
                        msg.set_verdict(nfq::Verdict::Drop);
                        let _ = queue.verdict(msg);
                        counters.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let offset = if jitter > 0.0 {
                        (rng.next_f64() * 2.0 - 1.0) * jitter
                    } else {
                        0.0
                    };
                    let wait = (delay.as_secs_f64() + offset).max(0.0);
                    seq += 1;
                    held.push(Reverse(Held {
                        due: Instant::now() + Duration::from_secs_f64(wait),
                        seq,
                        msg,
                    }));
                }
                let now = Instant::now();
                while held.peek().is_some_and(|h| stopping || h.0.due <= now) {
                    let Reverse(h) = held.pop().expect("peeked");
                    let mut msg = h.msg;
                    msg.set_verdict(nfq::Verdict::Accept);
                    let _ = queue.verdict(msg);
                    counters.delayed.fetch_add(1, Ordering::Relaxed);
                }
                if stopping {
                    return;
                }
                if !received {
                    let until_next = held.peek().map_or(Duration::from_micros(200), |h| {
                        h.0.due.saturating_duration_since(now)
                    });
                    std::thread::sleep(until_next.min(Duration::from_micros(200)));
                }
            }
        });
        let tid = ready_rx
            .recv()
            .context("the emulator thread died before it was ready")??;
        Ok(Emulator {
            tid,
            stop,
            thread: Some(thread),
            stats,
        })
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn netem(text: &str) -> Netem {
        Netem::parse(text).expect("valid netem")
    }

    #[test]
    fn the_qdisc_is_used_where_the_probe_succeeds_else_nfqueue() {
        let delayed = netem("rtt=20ms");
        assert_eq!(select(&delayed, || true), Some(EmulatorKind::NetemQdisc));
        assert_eq!(select(&delayed, || false), Some(EmulatorKind::Nfqueue));
        assert_eq!(
            select(&netem("loss=1%"), || false),
            Some(EmulatorKind::Nfqueue)
        );
        assert_eq!(
            select(&netem("jitter=2ms"), || true),
            Some(EmulatorKind::NetemQdisc)
        );
    }

    #[test]
    fn a_rate_alone_needs_no_emulator_and_no_probe() {
        let probed = std::cell::Cell::new(false);
        let kind = select(&netem("rate=100mbit"), || {
            probed.set(true);
            true
        });
        assert_eq!(kind, None);
        assert!(
            !probed.get(),
            "the probe must not run without delay or loss"
        );
    }

    #[test]
    fn this_threads_cpu_time_is_readable() {
        let tid = nix::unistd::gettid().as_raw();
        let cpu = thread_cpu_s(tid).expect("schedstat of a live thread");
        assert!(cpu >= 0.0);
        assert_eq!(thread_cpu_s(i32::MAX), None);
    }
}
