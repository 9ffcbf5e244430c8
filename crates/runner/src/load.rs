//! Drives load against one server: `c` workers in a closed loop, each with its own
//! measurements; the regime decides only when a worker connects.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::{Client, Connection, Failure, FailureClass};
use tokio::sync::Mutex;

use crate::experiment::Regime;
use crate::stats::Measurements;

/// How one load phase runs.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct LoadSpec {
    pub regime: Regime,
    pub concurrency: u32,
    pub requests: u64,
    /// Reuse regime: connections shared by the workers (0 = one each).
    pub connections: u32,
    pub request_timeout: Duration,
    /// Bound on the whole connect (TCP + handshake + protocol preface).
    pub connect_bound: Duration,
    /// Workers stop taking requests after this long.
    pub max_duration: Duration,
    /// First request id, so warm-up and measured ids differ.
    pub first_id: u64,
    /// Open loop: requests per second on a fixed schedule; `None` = closed loop.
    pub rate: Option<f64>,
}

/// An open-loop request that starts this much after its scheduled time counts as late: no
/// worker was free when it was due (k6's dropped iterations, but still sent and measured).
pub const LATE_AFTER: Duration = Duration::from_millis(10);

/// Live counters for the progress display; also lets the runner stop a phase early.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub stop: AtomicBool,
}

/// The outcome of one phase.
pub struct LoadResult {
    pub measurements: Measurements,
    pub elapsed: Duration,
    /// Whether the phase ended because its time bound or a stop request cut it short.
    pub cut_short: bool,
}

/// Hands out requests until the budget, the deadline or a stop ends the phase.
struct Budget {
    next: AtomicU64,
    first: u64,
    end: u64,
    started: Instant,
    deadline: Instant,
    /// Open loop: time between scheduled starts.
    interval: Option<Duration>,
    progress: Arc<Progress>,
}

/// One request to send: its id and, in open loop, when it is due.
struct Ticket {
    id: u64,
    due: Option<Instant>,
}

impl Budget {
    fn take(&self) -> Option<Ticket> {
        if self.progress.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if id >= self.end {
            return None;
        }
        let due = self
            .interval
            .map(|i| self.started + i.mul_f64((id - self.first) as f64));
        Some(Ticket { id, due })
    }
}

impl Ticket {
    /// Waits until the request is due and returns the instant its latency counts from: the
    /// scheduled start in open loop (so a stall shows in the tail), now in closed loop.
    async fn start(&self, shard: &Shard) -> Instant {
        let Some(due) = self.due else {
            return Instant::now();
        };
        let now = Instant::now();
        if due > now {
            tokio::time::sleep_until(due.into()).await;
        } else if now - due > LATE_AFTER {
            record(shard, |m| m.late += 1);
        }
        due
    }
}

/// A connection slot: one per worker, or one per shared connection.
type Slot = Mutex<Option<Arc<dyn Connection>>>;

/// Where workers record. A few shards rather than one set per worker: a full set of
/// histograms is ≈ 0.5 MB, so 500 workers would hold 280 MB. Worker w records into shard
/// w mod S (S = 4 × runtime threads); the lock is taken only for a record, never across an
/// await, so two workers contend only when they run at the same instant on different threads.
type Shard = std::sync::Mutex<Measurements>;

fn record(shard: &Shard, f: impl FnOnce(&mut Measurements)) {
    f(&mut shard.lock().expect("measurement shard"));
}

pub async fn run(client: Arc<dyn Client>, spec: LoadSpec, progress: Arc<Progress>) -> LoadResult {
    let started = Instant::now();
    let budget = Arc::new(Budget {
        next: AtomicU64::new(spec.first_id),
        first: spec.first_id,
        end: spec.first_id.saturating_add(spec.requests),
        started,
        deadline: started + spec.max_duration,
        interval: spec.rate.map(|r| Duration::from_secs_f64(1.0 / r)),
        progress: progress.clone(),
    });
    let slot_count = match (spec.regime, spec.connections) {
        (Regime::Reuse, n) if n > 0 => n.min(spec.concurrency),
        _ => spec.concurrency,
    } as usize;
    let slots: Arc<Vec<Slot>> = Arc::new((0..slot_count).map(|_| Mutex::new(None)).collect());
    let shard_count = 4 * tokio::runtime::Handle::current()
        .metrics()
        .num_workers()
        .max(1);
    let shards: Arc<Vec<Shard>> = Arc::new((0..shard_count).map(|_| Shard::default()).collect());
    let mut workers = Vec::with_capacity(spec.concurrency as usize);
    for w in 0..spec.concurrency as usize {
        let client = client.clone();
        let budget = budget.clone();
        let slots = slots.clone();
        let progress = progress.clone();
        let shards = shards.clone();
        workers.push(tokio::spawn(async move {
            let shard = &shards[w % shards.len()];
            match spec.regime {
                Regime::Reuse => {
                    let slot = &slots[w % slots.len()];
                    reuse_worker(&*client, slot, shard, &budget, &spec, &progress).await
                }
                Regime::NewConn => {
                    new_conn_worker(&*client, shard, &budget, &spec, &progress).await
                }
            }
        }));
    }
    for w in workers {
        let _ = w.await;
    }
    let mut measurements = Measurements::default();
    for shard in shards.iter() {
        measurements.merge(&shard.lock().expect("measurement shard"));
    }
    let elapsed = started.elapsed();
    for slot in slots.iter() {
        if let Some(conn) = slot.lock().await.take() {
            measurements.add_wire(conn.wire_bytes());
            conn.close().await;
        }
    }
    let cut_short = budget.next.load(Ordering::Relaxed) < budget.end;
    LoadResult {
        measurements,
        elapsed,
        cut_short,
    }
}

async fn connect(
    client: &dyn Client,
    spec: &LoadSpec,
    shard: &Shard,
) -> Result<Arc<dyn Connection>, Failure> {
    let connected = tokio::time::timeout(spec.connect_bound, client.connect())
        .await
        .map_err(|_| {
            Failure::new(
                FailureClass::HandshakeTimeout,
                "connection setup exceeded its bound",
            )
        })??;
    record(shard, |m| m.record_connect(&connected.timing));
    Ok(connected.conn)
}

async fn request(
    conn: &dyn Connection,
    id: u64,
    spec: &LoadSpec,
) -> Result<bench_core::Reply, Failure> {
    tokio::time::timeout(spec.request_timeout, conn.request(id))
        .await
        .map_err(|_| {
            Failure::new(
                FailureClass::RequestTimeout,
                "no complete answer within the request timeout",
            )
        })?
}

fn count(progress: &Progress, failed: bool) {
    progress.done.fetch_add(1, Ordering::Relaxed);
    if failed {
        progress.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sends every request on the slot's connection, (re)connecting only when it is missing or
/// broken. A failed connect counts as that request's failure.
async fn reuse_worker(
    client: &dyn Client,
    slot: &Slot,
    shard: &Shard,
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
) {
    while let Some(ticket) = budget.take() {
        let issued = ticket.start(shard).await;
        let conn = {
            let mut guard = slot.lock().await;
            match guard.as_ref() {
                Some(c) => Ok(c.clone()),
                None => match connect(client, spec, shard).await {
                    Ok(c) => {
                        *guard = Some(c.clone());
                        Ok(c)
                    }
                    Err(f) => Err(f),
                },
            }
        };
        let outcome = match conn {
            Ok(conn) => match request(&*conn, ticket.id, spec).await {
                Err(f) if f.class.breaks_connection() => {
                    let mut guard = slot.lock().await;
                    if guard.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                        guard.take();
                        let wire = conn.wire_bytes();
                        record(shard, |m| m.add_wire(wire));
                    }
                    drop(guard);
                    conn.close().await;
                    Err(f)
                }
                other => other,
            },
            Err(f) => Err(f),
        };
        let answered = Instant::now();
        record_outcome(
            shard,
            progress,
            issued,
            outcome.map(|reply| (reply, answered)),
        );
    }
}

/// Every request on a connection of its own: connect (full handshake), request, close.
async fn new_conn_worker(
    client: &dyn Client,
    shard: &Shard,
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
) {
    while let Some(ticket) = budget.take() {
        let issued = ticket.start(shard).await;
        let outcome = match connect(client, spec, shard).await {
            Ok(conn) => {
                let result = request(&*conn, ticket.id, spec).await;
                // Latency ends with the validated answer; the close is not part of it.
                let answered = Instant::now();
                conn.close().await;
                let wire = conn.wire_bytes();
                record(shard, |m| m.add_wire(wire));
                result.map(|reply| (reply, answered))
            }
            Err(f) => Err(f),
        };
        record_outcome(shard, progress, issued, outcome);
    }
}

/// Records a request's outcome: a success with its latency from `issued` to when it was
/// answered, or a failure under its class.
fn record_outcome(
    shard: &Shard,
    progress: &Progress,
    issued: Instant,
    outcome: Result<(bench_core::Reply, Instant), Failure>,
) {
    match outcome {
        Ok((reply, answered)) => {
            record(shard, |m| m.record_ok(answered - issued, &reply));
            count(progress, false);
        }
        Err(f) => {
            record(shard, |m| m.record_failure(f));
            count(progress, true);
        }
    }
}
