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
#[derive(Debug, Clone, Copy)]
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
}

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

/// Hands out request ids until the budget, the deadline or a stop ends the phase.
struct Budget {
    next: AtomicU64,
    end: u64,
    deadline: Instant,
    progress: Arc<Progress>,
}

impl Budget {
    fn take(&self) -> Option<u64> {
        if self.progress.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        (id < self.end).then_some(id)
    }
}

/// A connection slot: one per worker, or one per shared connection.
type Slot = Mutex<Option<Arc<dyn Connection>>>;

pub async fn run(client: Arc<dyn Client>, spec: LoadSpec, progress: Arc<Progress>) -> LoadResult {
    let started = Instant::now();
    let budget = Arc::new(Budget {
        next: AtomicU64::new(spec.first_id),
        end: spec.first_id + spec.requests,
        deadline: started + spec.max_duration,
        progress: progress.clone(),
    });
    let slot_count = match (spec.regime, spec.connections) {
        (Regime::Reuse, n) if n > 0 => n.min(spec.concurrency),
        _ => spec.concurrency,
    } as usize;
    let slots: Arc<Vec<Slot>> = Arc::new((0..slot_count).map(|_| Mutex::new(None)).collect());
    let mut workers = Vec::with_capacity(spec.concurrency as usize);
    for w in 0..spec.concurrency as usize {
        let client = client.clone();
        let budget = budget.clone();
        let slots = slots.clone();
        let progress = progress.clone();
        workers.push(tokio::spawn(async move {
            match spec.regime {
                Regime::Reuse => {
                    reuse_worker(&*client, &slots[w % slots.len()], &budget, &spec, &progress).await
                }
                Regime::NewConn => new_conn_worker(&*client, &budget, &spec, &progress).await,
            }
        }));
    }
    let mut measurements = Measurements::default();
    for w in workers {
        if let Ok(m) = w.await {
            measurements.merge(&m);
        }
    }
    let elapsed = started.elapsed();
    for slot in slots.iter() {
        if let Some(conn) = slot.lock().await.take() {
            measurements.wire.sent += conn.wire_bytes().sent;
            measurements.wire.received += conn.wire_bytes().received;
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
    m: &mut Measurements,
) -> Result<Arc<dyn Connection>, Failure> {
    let connected = tokio::time::timeout(spec.connect_bound, client.connect())
        .await
        .map_err(|_| {
            Failure::new(
                FailureClass::HandshakeTimeout,
                "connection setup exceeded its bound",
            )
        })??;
    m.record_connect(&connected.timing);
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
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
) -> Measurements {
    let mut m = Measurements::default();
    while let Some(id) = budget.take() {
        let issued = Instant::now();
        let conn = {
            let mut guard = slot.lock().await;
            match guard.as_ref() {
                Some(c) => Ok(c.clone()),
                None => match connect(client, spec, &mut m).await {
                    Ok(c) => {
                        *guard = Some(c.clone());
                        Ok(c)
                    }
                    Err(f) => Err(f),
                },
            }
        };
        let outcome = match conn {
            Ok(conn) => match request(&*conn, id, spec).await {
                Err(f) if f.class.breaks_connection() => {
                    let mut guard = slot.lock().await;
                    if guard.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                        guard.take();
                        m.wire.sent += conn.wire_bytes().sent;
                        m.wire.received += conn.wire_bytes().received;
                    }
                    drop(guard);
                    conn.close().await;
                    Err(f)
                }
                other => other,
            },
            Err(f) => Err(f),
        };
        match outcome {
            Ok(reply) => {
                m.record_ok(issued.elapsed(), &reply);
                count(progress, false);
            }
            Err(f) => {
                m.record_failure(f);
                count(progress, true);
            }
        }
    }
    m
}

/// Every request on a connection of its own: connect (full handshake), request, close.
async fn new_conn_worker(
    client: &dyn Client,
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
) -> Measurements {
    let mut m = Measurements::default();
    while let Some(id) = budget.take() {
        let issued = Instant::now();
        let outcome = match connect(client, spec, &mut m).await {
            Ok(conn) => {
                let result = request(&*conn, id, spec).await;
                let latency = issued.elapsed();
                conn.close().await;
                let wire = conn.wire_bytes();
                m.wire.sent += wire.sent;
                m.wire.received += wire.received;
                result.map(|reply| (latency, reply))
            }
            Err(f) => Err(f),
        };
        match outcome {
            Ok((latency, reply)) => {
                m.record_ok(latency, &reply);
                count(progress, false);
            }
            Err(f) => {
                m.record_failure(f);
                count(progress, true);
            }
        }
    }
    m
}
