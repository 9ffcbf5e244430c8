//! Reads a running phase for a live view ([`crate::live`]) without touching its request path:
//! the phase's measurement shards (each under the lock its workers already take for a record,
//! held while its counts are read and its latency counts added to the reader's, a memory copy
//! of a few µs), its budget's and progress counters (atomic loads), and its pool's open
//! connections (`try_lock`: a slot a worker holds is skipped, never waited for). Nothing here
//! runs unless someone asks for a snapshot.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;

use super::{Budget, Pool, Progress, Shard};
use crate::live::LiveSnapshot;

/// What a phase shows of itself while it runs; attached when the phase starts and detached
/// when it ends (the budget refers back to the progress, so it is not kept past the phase).
#[derive(Default)]
pub(super) struct Attached(std::sync::Mutex<Option<Parts>>);

pub(super) struct Parts {
    pub(super) shards: Arc<Vec<Shard>>,
    pub(super) budget: Arc<Budget>,
    pub(super) pool: Arc<Pool>,
    /// Whether the phase sends on the pool's connections (reuse) or opens one per request.
    pub(super) pooled: bool,
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attached = self.0.lock().is_ok_and(|p| p.is_some());
        f.debug_struct("Attached")
            .field("attached", &attached)
            .finish()
    }
}

impl Attached {
    pub(super) fn attach(&self, parts: Parts) {
        *self.0.lock().expect("live parts") = Some(parts);
    }

    pub(super) fn detach(&self) {
        self.0.lock().expect("live parts").take();
    }
}

impl Progress {
    /// The running phase's figures so far; `None` when no phase runs on this progress.
    ///
    /// Counts, failures and latency never go down from one snapshot to the next, and the
    /// phase's final measurements are never below its last snapshot: the shards only grow.
    /// Bytes are never counted twice, but a snapshot can miss some: the bytes of a pooled
    /// connection move into a shard when it closes, read here before the pool (a connection
    /// taken out between the two reads is missed by that snapshot), and a slot a worker holds
    /// at that instant (on another thread, for the few instructions of taking the connection
    /// out) is skipped. A reader that must show a counter ([`LiveSnapshot::wire_sent_bytes`])
    /// keeps the larger of what it showed and what it reads.
    pub fn live_snapshot(&self) -> Option<LiveSnapshot> {
        let attached = self.live.0.lock().expect("live parts");
        let parts = attached.as_ref()?;
        // Outcomes recorded so far, read just before the requests handed out, so that the
        // difference is never negative.
        let done = self.done.load(Ordering::SeqCst);
        let in_flight = in_flight(&parts.budget, done, Instant::now());
        let mut snapshot = LiveSnapshot::default();
        // Under each shard's lock only counts and a copy of its latency counts (a memory
        // copy); the pass over the counts that buckets them is made once, outside any lock.
        let mut latency = crate::measurements::histogram();
        let mut by_request: Vec<(String, Histogram<u64>)> = Vec::new();
        for shard in parts.shards.iter() {
            let m = shard.lock().expect("measurement shard");
            snapshot.add_counts(&m);
            latency.add(&m.latency).expect("auto-resizing histogram");
            for r in &m.by_request {
                let i = match by_request.iter().position(|(name, _)| *name == r.name) {
                    Some(i) => i,
                    None => {
                        let h = crate::measurements::histogram();
                        by_request.push((r.name.clone(), h));
                        by_request.len() - 1
                    }
                };
                by_request[i]
                    .1
                    .add(&r.latency)
                    .expect("auto-resizing histogram");
            }
        }
        snapshot.latency.add_histogram(&latency);
        for (name, h) in &by_request {
            snapshot.add_request_latency(name, h);
        }
        let mut open = 0;
        for slot in &parts.pool.slots {
            if let Ok(guard) = slot.try_lock() {
                if let Some(conn) = guard.as_ref() {
                    let wire = conn.wire_this_phase();
                    snapshot.wire_sent_bytes += wire.sent;
                    snapshot.wire_received_bytes += wire.received;
                    open += 1;
                }
            }
        }
        snapshot.connections_open = parts.pooled.then_some(open);
        snapshot.in_flight = in_flight;
        Some(snapshot)
    }
}

/// Requests handed to a worker, due by `now` and without a recorded outcome among `done`. In
/// an open loop a free worker takes its next request ahead of its due time and waits for
/// it: such a request is not in flight yet. A worker holds one request at a time: a worker
/// that recorded an outcome and took its next request between the two counters' loads would
/// otherwise count twice.
fn in_flight(budget: &Budget, done: u64, now: Instant) -> u64 {
    let handed_out = budget.next.load(Ordering::SeqCst).min(budget.end()) - budget.first;
    let due = match budget.interval {
        // Request k (from 0) is due at started + k × interval.
        Some(interval) if !interval.is_zero() => {
            let elapsed = now.saturating_duration_since(budget.started);
            (elapsed.as_nanos() / interval.as_nanos()) as u64 + 1
        }
        _ => u64::MAX,
    };
    handed_out
        .min(due)
        .saturating_sub(done)
        .min(u64::from(budget.steady.workers))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use bench_core::{
        Call, Client, ConnectTiming, Connected, Connection, Failure, FailureClass, Reply, WireBytes,
    };

    use crate::engine::{run, LoadSpec, Pool, Progress};
    use crate::live::{LatencyBuckets, LiveSnapshot};
    use crate::{Pacing, Regime};

    /// Answers after a short wait, 100 bytes out and 1,000 back per request; every fifth
    /// request is a bad status.
    struct Slow;

    struct SlowConn {
        sent: AtomicU64,
    }

    #[async_trait]
    impl Client for Slow {
        async fn connect(&self) -> Result<Connected, Failure> {
            Ok(Connected {
                conn: Arc::new(SlowConn {
                    sent: AtomicU64::new(0),
                }),
                timing: ConnectTiming::default(),
            })
        }
    }

    #[async_trait]
    impl Connection for SlowConn {
        async fn request(&self, call: Call) -> Result<Reply, Failure> {
            tokio::time::sleep(Duration::from_micros(300)).await;
            self.sent.fetch_add(1, Ordering::SeqCst);
            if call.seq % 5 == 4 {
                return Err(Failure::new(FailureClass::BadStatus, "500"));
            }
            Ok(Reply::default())
        }
        fn wire_bytes(&self) -> WireBytes {
            let n = self.sent.load(Ordering::SeqCst);
            WireBytes {
                sent: 100 * n,
                received: 1_000 * n,
            }
        }
        async fn close(&self) {}
    }

    fn spec(regime: Regime, rate: Option<f64>) -> LoadSpec {
        LoadSpec {
            regime,
            concurrency: 8,
            requests: 400,
            connections: 0,
            request_timeout: Duration::from_secs(5),
            connect_bound: Duration::from_secs(5),
            max_duration: Duration::from_secs(30),
            ends_by_time: false,
            min_duration: Duration::ZERO,
            first_id: 0,
            rate,
            pacing: Pacing::Timer,
            ids: None,
            seq_base: 0,
            mix: None,
            stop_after_identical_failures: 0,
        }
    }

    /// The counters that never go down from one snapshot to the next, by name (a mix's
    /// requests under theirs).
    fn counters(s: &LiveSnapshot) -> std::collections::BTreeMap<String, u64> {
        let mut c = std::collections::BTreeMap::new();
        let mut add = |prefix: &str, sent, ok, failures: &[u64], latency: &LatencyBuckets| {
            c.insert(format!("{prefix}sent"), sent);
            c.insert(format!("{prefix}ok"), ok);
            c.insert(format!("{prefix}latency count"), latency.count);
            c.insert(format!("{prefix}latency sum"), latency.sum_us);
            for (i, n) in failures.iter().enumerate() {
                c.insert(format!("{prefix}failures {i}"), *n);
            }
            for (i, n) in latency.cumulative().into_iter().enumerate() {
                c.insert(format!("{prefix}bucket {i}"), n);
            }
        };
        add("", s.sent, s.ok, &s.failures, &s.latency);
        for r in &s.by_request {
            add(
                &format!("{} ", r.name),
                r.sent,
                r.ok,
                &r.failures,
                &r.latency,
            );
        }
        c
    }

    /// Snapshots taken while a phase runs (on two threads, a reader beside the workers) never
    /// go down (bytes: never above the final figure), never exceed the phase's final
    /// measurements, and the final snapshot is exactly those measurements; gauges stay
    /// within the workers and the pool.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshots_grow_and_end_at_the_phase_measurements() {
        let mix =
            bench_core::user_service::RequestMix::new(7, &[("get", 3), ("put", 1)], "mix").unwrap();
        for (regime, rate, mix) in [
            (Regime::Reuse, None, None),
            (Regime::NewConn, None, None),
            (Regime::Reuse, Some(4_000.0), None),
            (Regime::Reuse, None, Some(mix)),
        ] {
            let mut spec = spec(regime, rate);
            spec.mix = mix;
            let progress = Arc::new(Progress::for_spec(&spec));
            assert!(progress.live_snapshot().is_none(), "no phase yet");
            let pool = Pool::for_spec(&spec);
            let client: Arc<dyn Client> = Arc::new(Slow);
            pool.open_all(client.clone(), &spec).await;
            let reader = {
                let progress = progress.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    loop {
                        if let Some(s) = progress.live_snapshot() {
                            seen.push(s);
                        } else if !seen.is_empty() {
                            return seen;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                })
            };
            let result = run(client, spec.clone(), pool, progress.clone()).await;
            let seen = reader.await.unwrap();
            let what = format!("{regime:?}, rate {rate:?}, mix {:?}", spec.mix.is_some());
            assert!(seen.len() >= 3, "{what}: {} snapshots", seen.len());
            let last = LiveSnapshot::of(&result.measurements);
            assert_eq!((last.sent, last.failed()), (400, 80), "{what}");
            assert_eq!(last.wire_received_bytes, 1_000 * 400, "{what}");
            for pair in seen.windows(2).chain(std::iter::once(
                [seen.last().unwrap().clone(), last.clone()].as_slice(),
            )) {
                let (a, b) = (counters(&pair[0]), counters(&pair[1]));
                for (name, x) in &a {
                    let y = b.get(name).copied().unwrap_or(0);
                    assert!(*x <= y, "{what}: {name} {x} then {y}");
                }
            }
            for s in &seen {
                assert!(s.wire_sent_bytes <= last.wire_sent_bytes, "{what}");
                assert!(s.wire_received_bytes <= last.wire_received_bytes, "{what}");
                assert!(s.in_flight <= 8, "{what}: {} in flight", s.in_flight);
                match regime {
                    Regime::Reuse => assert!(s.connections_open.unwrap() <= 8, "{what}"),
                    Regime::NewConn => assert_eq!(s.connections_open, None, "{what}"),
                }
            }
            assert!(
                seen.iter().any(|s| s.sent > 0 && s.sent < 400),
                "{what}: a snapshot mid-phase"
            );
            if spec.mix.is_some() {
                let sum = |f: fn(&crate::live::RequestSnapshot) -> u64| {
                    last.by_request.iter().map(f).sum::<u64>()
                };
                assert_eq!(last.by_request.len(), 2, "{what}");
                assert_eq!(sum(|r| r.sent), 400, "{what}");
                assert_eq!(sum(|r| r.latency.count), last.ok, "{what}");
                // Every snapshot has seen both requests once the phase is well under way.
                assert!(seen.iter().any(|s| s.by_request.len() == 2), "{what}");
            }
            assert!(progress.live_snapshot().is_none(), "{what}: detached");
        }
    }

    /// In an open loop a free worker holds its next request before it is due: not in flight.
    #[tokio::test]
    async fn requests_waiting_for_their_due_time_are_not_in_flight() {
        let mut spec = spec(Regime::Reuse, Some(10.0));
        spec.requests = 3;
        let progress = Arc::new(Progress::for_spec(&spec));
        let pool = Pool::for_spec(&spec);
        let client: Arc<dyn Client> = Arc::new(Slow);
        pool.open_all(client.clone(), &spec).await;
        let reader = {
            let progress = progress.clone();
            tokio::spawn(async move {
                // Request 0 is due at once and answered in 0.3 ms; 1 and 2 are held by
                // workers until 100 and 200 ms.
                tokio::time::sleep(Duration::from_millis(50)).await;
                progress.live_snapshot().unwrap()
            })
        };
        let result = run(client, spec.clone(), pool, progress).await;
        let mid = reader.await.unwrap();
        assert_eq!((mid.sent, mid.in_flight), (1, 0));
        assert_eq!(result.measurements.sent, 3);
    }
}
