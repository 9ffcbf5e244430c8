//! Drives load against one server: `c` workers in a closed loop, each with its own
//! measurements; the regime decides only when a worker connects.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::{Call, Client, Connection, Failure, FailureClass, WireBytes};
use tokio::sync::Mutex;

use crate::measurements::{Measurements, MessageGaps, SteadyWindow};
use crate::Regime;

mod observe;

/// How one load phase runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
    /// The phase is meant to end at `max_duration` (a fixed-duration cell): reaching it is
    /// the plan, not a cut.
    pub ends_by_time: bool,
    /// A phase whose whole request budget ends sooner than this runs the whole budget again,
    /// as often as needed: it sends a whole number of budgets, never a part of one (zero: one
    /// budget ends it).
    #[serde(default)]
    pub min_duration: Duration,
    /// First request id, so warm-up and measured ids differ.
    pub first_id: u64,
    /// Open loop: requests per second on a fixed schedule; `None` = closed loop.
    pub rate: Option<f64>,
    /// Open loop: how a free worker waits for a request's due time.
    #[serde(default)]
    pub pacing: Pacing,
    /// A target's id range: request `seq` of the phase asks for `ids.id(seq)`; `None` =
    /// our server's item, whose id is `first_id + seq`.
    #[serde(default)]
    pub ids: Option<bench_core::user_service::IdRange>,
    /// The `seq` of this phase's first request: a shard of a cell split over several load
    /// generators continues the cell's sequence where the shard before it ends.
    #[serde(default)]
    pub seq_base: u64,
    /// A target's request mix: request `seq` is `mix.pick(seq)`, measured under its name too.
    #[serde(default)]
    pub mix: Option<bench_core::user_service::RequestMix>,
    /// Stop the phase when its first this-many requests all fail alike (0: never).
    #[serde(default)]
    pub stop_after_identical_failures: u64,
}

pub use crate::Pacing;

/// How long before its due time a pacing worker stops sleeping and starts polling: two of
/// tokio's 1 ms timer slots, so the timer's wake-up is never after the due time.
pub const SPIN_BEFORE_DUE: Duration = Duration::from_millis(2);

/// An open-loop request that starts this much after its scheduled time counts as late: no
/// worker was free when it was due (k6's dropped iterations, but still sent and measured).
pub const LATE_AFTER: Duration = Duration::from_millis(10);

/// Live counters for the progress display; also lets the runner stop a phase early.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub stop: AtomicBool,
    /// Watches the phase's first outcomes for a phase where nothing can succeed.
    pub streak: FailureStreak,
    /// The running phase, for [`Progress::live_snapshot`].
    live: observe::Attached,
}

/// The first `limit` requests a phase issued: when every one of them failed in one class with
/// one message (a refused port, an untrusted certificate), the phase has nothing to measure and
/// stops ([`the runner's `stop_after_identical_failures``]). Issue order, not
/// completion order: fast failures beside slower successes (a few file descriptors for many
/// workers) are not "everything fails". A success or a different failure among them settles
/// it for the phase; afterwards it costs one atomic load.
#[derive(Debug, Default)]
pub struct FailureStreak {
    limit: u64,
    settled: AtomicBool,
    state: std::sync::Mutex<StreakState>,
}

#[derive(Debug, Default)]
struct StreakState {
    seen: u64,
    first: Option<(FailureClass, String)>,
    verdict: Option<String>,
}

impl Progress {
    /// Fresh counters for a phase of `spec`.
    pub fn for_spec(spec: &LoadSpec) -> Self {
        Progress {
            streak: FailureStreak::new(spec.stop_after_identical_failures),
            ..Default::default()
        }
    }
}

impl FailureStreak {
    /// Stops a phase after `limit` identical failures in a row from its start; 0 never does.
    pub fn new(limit: u64) -> Self {
        FailureStreak {
            limit,
            settled: AtomicBool::new(limit == 0),
            state: Default::default(),
        }
    }

    /// Counts the outcome (`None`: a success) of the phase's request number `index` (in issue
    /// order, from 0); true when this one makes the phase hopeless.
    fn observe(&self, index: u64, failure: Option<&Failure>) -> bool {
        if index >= self.limit || self.settled.load(Ordering::Relaxed) {
            return false;
        }
        let mut state = self.state.lock().expect("failure streak");
        if state.verdict.is_some() {
            return false;
        }
        let same = match (failure, &state.first) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(f), Some((class, detail))) => f.class == *class && f.detail == *detail,
        };
        if !same {
            self.settled.store(true, Ordering::Relaxed);
            return false;
        }
        if let (Some(f), None) = (failure, &state.first) {
            state.first = Some((f.class, f.detail.clone()));
        }
        state.seen += 1;
        if state.seen < self.limit {
            return false;
        }
        let (class, detail) = state.first.as_ref().expect("recorded");
        state.verdict = Some(format!(
            "the first {} requests all failed alike ({}: {detail})",
            state.seen,
            class.as_str()
        ));
        self.settled.store(true, Ordering::Relaxed);
        true
    }

    /// Why the phase stopped, when it did.
    pub fn verdict(&self) -> Option<String> {
        self.state.lock().expect("failure streak").verdict.clone()
    }
}

/// The outcome of one phase.
pub struct LoadResult {
    pub measurements: Measurements,
    pub elapsed: Duration,
    /// Whether the phase ended because its time bound or a stop request cut it short.
    pub cut_short: bool,
    /// Whole request budgets the phase opened to meet `min_duration` (1 without a repeat);
    /// all of them were sent unless the phase was `cut_short`.
    pub budget_repeats: u64,
    /// The window in which every worker was active, if there was one.
    pub steady: Option<SteadyWindow>,
    /// The phase stopped because its first requests all failed alike ([`FailureStreak`]).
    pub hopeless: Option<String>,
}

/// Hands out requests until the budget, the deadline or a stop ends the phase.
struct Budget {
    next: AtomicU64,
    first: u64,
    /// Requests in one whole budget.
    size: u64,
    started: Instant,
    deadline: Instant,
    /// A budget that would start before this instant is opened: the phase repeats its whole
    /// budget rather than stopping (never a part of one).
    min_end: Instant,
    /// Whole budgets opened so far (1 at the start): ids below `first + opened × size` are
    /// handed out.
    opened: AtomicU64,
    /// Set once a budget past `min_end` was refused: no further budget opens.
    closed: std::sync::Mutex<bool>,
    /// Open loop: time between scheduled starts.
    interval: Option<Duration>,
    progress: Arc<Progress>,
    steady: SteadyTracker,
}

/// Finds the steady window without per-request state: workers report their first request
/// and their exit; the progress counters are read at both edges.
struct SteadyTracker {
    workers: u32,
    started_workers: AtomicU64,
    start: std::sync::Mutex<Option<(Instant, u64)>>,
    end: std::sync::Mutex<Option<(Instant, u64)>>,
}

impl SteadyTracker {
    fn ok_so_far(progress: &Progress) -> u64 {
        let failed = progress.failed.load(Ordering::SeqCst);
        progress.done.load(Ordering::SeqCst).saturating_sub(failed)
    }

    /// A worker is about to issue its first request.
    fn worker_active(&self, progress: &Progress) {
        if self.started_workers.fetch_add(1, Ordering::SeqCst) + 1 == u64::from(self.workers) {
            *self.start.lock().expect("steady start") =
                Some((Instant::now(), Self::ok_so_far(progress)));
        }
    }

    /// A worker found no more work (the first one ends the window).
    fn worker_done(&self, progress: &Progress) {
        let mut end = self.end.lock().expect("steady end");
        if end.is_none() {
            *end = Some((Instant::now(), Self::ok_so_far(progress)));
        }
    }

    fn window(&self) -> Option<SteadyWindow> {
        let (t0, ok0) = (*self.start.lock().expect("steady start"))?;
        let (t1, ok1) = (*self.end.lock().expect("steady end"))?;
        (t1 > t0).then(|| SteadyWindow {
            elapsed_s: (t1 - t0).as_secs_f64(),
            ok: ok1.saturating_sub(ok0),
        })
    }
}

/// One request to send: its id and, in open loop, when it is due.
struct Ticket {
    id: u64,
    due: Option<Instant>,
}

impl Budget {
    /// Whether request `id` belongs to an opened budget. The first request of a budget not
    /// yet opened decides, once for the whole budget, whether it opens (before `min_end`) or
    /// the phase ends: so a phase sends a whole number of budgets.
    fn open(&self, id: u64) -> bool {
        let Some(budget) = (id - self.first).checked_div(self.size) else {
            return false;
        };
        if budget < self.opened.load(Ordering::SeqCst) {
            return true;
        }
        let mut closed = self.closed.lock().expect("budget");
        if budget < self.opened.load(Ordering::SeqCst) {
            return true;
        }
        if *closed || Instant::now() >= self.min_end {
            *closed = true;
            return false;
        }
        // Every id below this one was handed out already, so budgets skipped here (their
        // first request still on its way to this lock) open whole too.
        self.opened.store(budget + 1, Ordering::SeqCst);
        true
    }

    /// Ids the opened budgets hold.
    fn end(&self) -> u64 {
        self.first
            .saturating_add(self.size.saturating_mul(self.opened.load(Ordering::SeqCst)))
    }

    fn take(&self) -> Option<Ticket> {
        if self.progress.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if !self.open(id) {
            return None;
        }
        let due = self
            .interval
            .map(|i| self.started + i.mul_f64((id - self.first) as f64));
        Some(Ticket { id, due })
    }
}

impl Ticket {
    /// This request's place in the phase's sequence (continued across shards).
    fn seq(&self, spec: &LoadSpec) -> u64 {
        spec.seq_base + (self.id - spec.first_id)
    }

    /// With a mix: which of its requests this ticket sends, and the mix's names.
    fn request<'a>(&self, spec: &'a LoadSpec) -> Option<(usize, &'a [String])> {
        spec.mix
            .as_ref()
            .map(|mix| (mix.pick(self.seq(spec)), mix.names.as_slice()))
    }

    /// The call this ticket makes from `worker`.
    fn call(&self, spec: &LoadSpec, worker: u32) -> Call {
        let seq = self.seq(spec);
        Call {
            id: spec.ids.map_or(self.id, |ids| ids.id(seq)),
            seq,
            worker,
        }
    }

    /// Waits until the request is due and returns the instant its latency counts from: the
    /// scheduled start in open loop (so a stall shows in the tail), now in closed loop. A
    /// worker that was free before the due time records how late it actually sent (the
    /// generator's pacing lag); one that took the request after it was due was not free, and
    /// counts as `late` past [`LATE_AFTER`].
    async fn start(&self, shard: &Shard, pacing: Pacing) -> Instant {
        let Some(due) = self.due else {
            return Instant::now();
        };
        let now = Instant::now();
        if due > now {
            match pacing {
                Pacing::Timer => tokio::time::sleep_until(due.into()).await,
                Pacing::Spin => {
                    if due - now > SPIN_BEFORE_DUE {
                        tokio::time::sleep_until((due - SPIN_BEFORE_DUE).into()).await;
                    }
                    while Instant::now() < due {
                        tokio::task::yield_now().await;
                    }
                }
            }
            let lag = Instant::now().saturating_duration_since(due);
            record(shard, |m| m.record_pacing_lag(lag));
        } else if now - due > LATE_AFTER {
            record(shard, |m| m.late += 1);
        }
        due
    }
}

/// An open connection in a slot, with its byte counters when the current phase began, so
/// that a connection kept across phases charges each phase only its own bytes.
struct Open {
    conn: Arc<dyn Connection>,
    wire_at_phase_start: WireBytes,
}

impl Open {
    fn wire_this_phase(&self) -> WireBytes {
        let now = self.conn.wire_bytes();
        WireBytes {
            sent: now.sent.saturating_sub(self.wire_at_phase_start.sent),
            received: now
                .received
                .saturating_sub(self.wire_at_phase_start.received),
        }
    }
}

/// A connection slot: one per worker, or one per shared connection.
type Slot = Mutex<Option<Open>>;

/// The reuse regime's connections. They outlive a phase: opened before the clock starts
/// (and used by the warm-up), so that no measured request pays for a handshake unless its
/// connection broke and had to be opened again.
pub struct Pool {
    slots: Vec<Slot>,
}

impl Pool {
    /// The slots a phase of `spec` uses (none for new-conn, which opens per request).
    pub fn for_spec(spec: &LoadSpec) -> Arc<Pool> {
        let count = match (spec.regime, spec.connections) {
            (Regime::NewConn, _) => 0,
            (Regime::Reuse, n) if n > 0 => n.min(spec.concurrency),
            (Regime::Reuse, _) => spec.concurrency,
        } as usize;
        Arc::new(Pool {
            slots: (0..count).map(|_| Mutex::new(None)).collect(),
        })
    }

    /// Opens every slot's connection at once, recording each setup's timing. A slot whose
    /// connect fails stays empty; its first request connects again (and is measured so).
    pub async fn open_all(&self, client: Arc<dyn Client>, spec: &LoadSpec) -> Measurements {
        let shard = Shard::default();
        let opens = self.slots.iter().map(|slot| {
            let (client, shard) = (client.clone(), &shard);
            async move {
                if let Ok(conn) = connect(&*client, spec, shard).await {
                    let wire_at_phase_start = conn.wire_bytes();
                    *slot.lock().await = Some(Open {
                        conn,
                        wire_at_phase_start,
                    });
                }
            }
        });
        futures::future::join_all(opens).await;
        shard.into_inner().expect("measurement shard")
    }

    /// Starts a phase: bytes moved so far belong to the phase before.
    async fn begin_phase(&self) {
        for slot in &self.slots {
            if let Some(open) = slot.lock().await.as_mut() {
                open.wire_at_phase_start = open.conn.wire_bytes();
            }
        }
    }

    /// Bytes the open connections moved in the phase now ending.
    async fn phase_wire(&self) -> WireBytes {
        let mut total = WireBytes::default();
        for slot in &self.slots {
            if let Some(open) = slot.lock().await.as_ref() {
                let w = open.wire_this_phase();
                total.sent += w.sent;
                total.received += w.received;
            }
        }
        total
    }

    /// Closes every connection (after the last phase).
    pub async fn close(&self) {
        for slot in &self.slots {
            if let Some(open) = slot.lock().await.take() {
                open.conn.close().await;
            }
        }
    }
}

/// Where workers record. A few shards rather than one set per worker: a full set of
/// histograms per worker would make memory grow with the worker count. Worker w records into
/// shard w mod S (S = 4 × runtime threads); the lock is taken only for a record, never across an
/// await, so two workers contend only when they run at the same instant on different threads.
type Shard = std::sync::Mutex<Measurements>;

fn record(shard: &Shard, f: impl FnOnce(&mut Measurements)) {
    f(&mut shard.lock().expect("measurement shard"));
}

/// Runs one phase on `pool`'s connections (reuse) or on a connection per request (new-conn).
/// The pool stays open afterwards; the caller closes it after the last phase.
pub async fn run(
    client: Arc<dyn Client>,
    spec: LoadSpec,
    pool: Arc<Pool>,
    progress: Arc<Progress>,
) -> LoadResult {
    pool.begin_phase().await;
    // Shared by the workers: a mix makes it more than a few words.
    let spec = Arc::new(spec);
    let started = Instant::now();
    let budget = Arc::new(Budget {
        next: AtomicU64::new(spec.first_id),
        first: spec.first_id,
        size: spec.requests,
        started,
        deadline: started + spec.max_duration,
        min_end: started + spec.min_duration.min(spec.max_duration),
        opened: AtomicU64::new(1),
        closed: std::sync::Mutex::new(false),
        interval: spec.rate.map(|r| Duration::from_secs_f64(1.0 / r)),
        progress: progress.clone(),
        steady: SteadyTracker {
            workers: spec.concurrency,
            started_workers: AtomicU64::new(0),
            start: Default::default(),
            end: Default::default(),
        },
    });
    let shard_count = 4 * tokio::runtime::Handle::current()
        .metrics()
        .num_workers()
        .max(1);
    let shards: Arc<Vec<Shard>> = Arc::new((0..shard_count).map(|_| Shard::default()).collect());
    progress.live.attach(observe::Parts {
        shards: shards.clone(),
        budget: budget.clone(),
        pool: pool.clone(),
        pooled: matches!(spec.regime, Regime::Reuse),
    });
    let mut workers = Vec::with_capacity(spec.concurrency as usize);
    for w in 0..spec.concurrency as usize {
        let client = client.clone();
        let budget = budget.clone();
        let pool = pool.clone();
        let progress = progress.clone();
        let shards = shards.clone();
        let spec = spec.clone();
        workers.push(tokio::spawn(async move {
            let shard = &shards[w % shards.len()];
            match spec.regime {
                Regime::Reuse => {
                    let slot = &pool.slots[w % pool.slots.len()];
                    reuse_worker(&*client, slot, shard, &budget, &spec, &progress, w as u32).await
                }
                Regime::NewConn => {
                    new_conn_worker(&*client, shard, &budget, &spec, &progress, w as u32).await
                }
            }
            budget.steady.worker_done(&progress);
        }));
    }
    for w in workers {
        let _ = w.await;
    }
    progress.live.detach();
    let elapsed = started.elapsed();
    let mut measurements = Measurements::default();
    for shard in shards.iter() {
        measurements.merge(&shard.lock().expect("measurement shard"));
    }
    measurements.add_wire(pool.phase_wire().await);
    let budget_left = budget.next.load(Ordering::Relaxed) < budget.end();
    let stopped = progress.stop.load(Ordering::Relaxed);
    LoadResult {
        measurements,
        elapsed,
        cut_short: stopped || (budget_left && !spec.ends_by_time),
        budget_repeats: budget.opened.load(Ordering::SeqCst),
        steady: budget.steady.window(),
        hopeless: progress.streak.verdict(),
    }
}

async fn connect(
    client: &dyn Client,
    spec: &LoadSpec,
    shard: &Shard,
) -> Result<Arc<dyn Connection>, Failure> {
    record(shard, Measurements::record_attempt);
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

/// One request on `conn`, bounded by the request timeout; the gaps between a streaming
/// answer's messages go to `gaps` (the worker's, added to the cell's if the call succeeds).
async fn request(
    conn: &dyn Connection,
    call: Call,
    spec: &LoadSpec,
    gaps: &mut MessageGaps,
) -> Result<bench_core::Reply, Failure> {
    gaps.reset();
    let mut on_message = |gap: Duration| gaps.record(gap);
    tokio::time::timeout(
        spec.request_timeout,
        conn.request_observed(call, &mut on_message),
    )
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

/// A request the server did not process (see [`Failure::unprocessed`]) is sent again on a new
/// connection at most this often; then it counts as the failure it was.
const MAX_MOVES: u32 = 3;

/// Sends every request on the slot's connection (opened before the phase), reconnecting only
/// when it is missing or broken. A failed connect counts as that request's failure. A request
/// the server did not process (HTTP/2 GOAWAY, REFUSED_STREAM) moves to a new connection and
/// is counted as moved, not failed; its latency still runs from when it was first issued.
async fn reuse_worker(
    client: &dyn Client,
    slot: &Slot,
    shard: &Shard,
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
    worker: u32,
) {
    let mut first = true;
    let mut gaps = MessageGaps::default();
    while let Some(ticket) = budget.take() {
        if std::mem::take(&mut first) {
            budget.steady.worker_active(progress);
        }
        let issued = ticket.start(shard, spec.pacing).await;
        let mut moves = 0;
        let outcome = loop {
            let call = ticket.call(spec, worker);
            let outcome = reuse_attempt(client, slot, shard, spec, call, &mut gaps).await;
            match outcome {
                Err(f) if f.is_unprocessed() && moves < MAX_MOVES => {
                    moves += 1;
                    record(shard, |m| m.moved += 1);
                }
                other => break other,
            }
        };
        let answered = Instant::now();
        record_outcome(
            shard,
            progress,
            (ticket.id - spec.first_id, issued),
            ticket.request(spec),
            outcome.map(|reply| (reply, answered)),
            &gaps,
        );
    }
}

/// One try of a request on the slot's connection, opening it if missing; a failure that
/// breaks the connection takes it out of the slot and closes it.
async fn reuse_attempt(
    client: &dyn Client,
    slot: &Slot,
    shard: &Shard,
    spec: &LoadSpec,
    call: Call,
    gaps: &mut MessageGaps,
) -> Result<bench_core::Reply, Failure> {
    let conn = {
        let mut guard = slot.lock().await;
        match guard.as_ref() {
            Some(open) => open.conn.clone(),
            None => {
                let conn = connect(client, spec, shard).await?;
                // Opened inside this phase: all its bytes are this phase's.
                *guard = Some(Open {
                    conn: conn.clone(),
                    wire_at_phase_start: WireBytes::default(),
                });
                conn
            }
        }
    };
    match request(&*conn, call, spec, gaps).await {
        Err(f) if f.breaks_connection() => {
            let mut guard = slot.lock().await;
            if guard.as_ref().is_some_and(|o| Arc::ptr_eq(&o.conn, &conn)) {
                let open = guard.take().expect("checked above");
                let wire = open.wire_this_phase();
                record(shard, |m| m.add_wire(wire));
            }
            drop(guard);
            if f.is_unprocessed() {
                // The server is going away gracefully: requests of other workers sharing the
                // connection may still be answered on it, so it closes once they are done.
                tokio::spawn(close_when_unused(conn, spec.request_timeout));
            } else {
                conn.close().await;
            }
            Err(f)
        }
        other => other,
    }
}

/// Closes a connection once no other worker holds it (or after `bound`).
async fn close_when_unused(conn: Arc<dyn Connection>, bound: Duration) {
    let until = Instant::now() + bound;
    while Arc::strong_count(&conn) > 1 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    conn.close().await;
}

/// Every request on a connection of its own: connect (full handshake), request, close. A
/// request the server did not process is sent again on another new connection (counted as
/// moved).
async fn new_conn_worker(
    client: &dyn Client,
    shard: &Shard,
    budget: &Budget,
    spec: &LoadSpec,
    progress: &Progress,
    worker: u32,
) {
    let mut first = true;
    let mut gaps = MessageGaps::default();
    while let Some(ticket) = budget.take() {
        if std::mem::take(&mut first) {
            budget.steady.worker_active(progress);
        }
        let issued = ticket.start(shard, spec.pacing).await;
        let mut moves = 0;
        let outcome = loop {
            let outcome = match connect(client, spec, shard).await {
                Ok(conn) => {
                    let call = ticket.call(spec, worker);
                    let result = request(&*conn, call, spec, &mut gaps).await;
                    // Latency ends with the validated answer; the close is not part of it.
                    let answered = Instant::now();
                    conn.close().await;
                    let wire = conn.wire_bytes();
                    record(shard, |m| m.add_wire(wire));
                    result.map(|reply| (reply, answered))
                }
                Err(f) => Err(f),
            };
            match outcome {
                Err(f) if f.is_unprocessed() && moves < MAX_MOVES => {
                    moves += 1;
                    record(shard, |m| m.moved += 1);
                }
                other => break other,
            }
        };
        record_outcome(
            shard,
            progress,
            (ticket.id - spec.first_id, issued),
            ticket.request(spec),
            outcome,
            &gaps,
        );
    }
}

/// Records a request's outcome (the phase's request number `index`): a success with its
/// latency from `issued` to when it was answered, or a failure under its class.
fn record_outcome(
    shard: &Shard,
    progress: &Progress,
    (index, issued): (u64, Instant),
    request: Option<(usize, &[String])>,
    outcome: Result<(bench_core::Reply, Instant), Failure>,
    gaps: &MessageGaps,
) {
    match outcome {
        Ok((reply, answered)) => {
            record(shard, |m| {
                m.add_message_gaps(gaps);
                if let Some(timing) = &reply.reopened {
                    m.record_attempt();
                    m.record_connect(timing);
                }
                if let Some((i, names)) = request {
                    m.request_mut(i, names).record_ok(answered - issued);
                }
                m.record_ok(answered - issued, &reply)
            });
            count(progress, false);
            progress.streak.observe(index, None);
        }
        Err(f) => {
            if progress.streak.observe(index, Some(&f)) {
                progress.stop.store(true, Ordering::Relaxed);
            }
            record(shard, |m| {
                if let Some((i, names)) = request {
                    m.request_mut(i, names).record_failure(&f);
                }
                m.record_failure(f)
            });
            count(progress, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use async_trait::async_trait;
    use bench_core::{ConnectTiming, Connected, Reply};

    use super::*;

    /// Connections whose first `refused` requests in all the server did not process (as after
    /// a GOAWAY), each on a connection of its own.
    struct Refusing {
        connects: AtomicU32,
        refused: AtomicU32,
    }

    struct RefusingConn {
        client: Arc<Refusing>,
        dead: AtomicBool,
    }

    struct RefusingClient(Arc<Refusing>);

    #[async_trait]
    impl Client for RefusingClient {
        async fn connect(&self) -> Result<Connected, Failure> {
            self.0.connects.fetch_add(1, Ordering::SeqCst);
            Ok(Connected {
                conn: Arc::new(RefusingConn {
                    client: self.0.clone(),
                    dead: AtomicBool::new(false),
                }),
                timing: ConnectTiming::default(),
            })
        }
    }

    #[async_trait]
    impl Connection for RefusingConn {
        async fn request(&self, _call: bench_core::Call) -> Result<Reply, Failure> {
            assert!(
                !self.dead.load(Ordering::SeqCst),
                "request on a refusing connection"
            );
            let left = self.client.refused.load(Ordering::SeqCst);
            if left > 0 {
                self.client.refused.store(left - 1, Ordering::SeqCst);
                self.dead.store(true, Ordering::SeqCst);
                return Err(Failure::unprocessed("GOAWAY"));
            }
            Ok(Reply::default())
        }
        fn wire_bytes(&self) -> WireBytes {
            WireBytes::default()
        }
        async fn close(&self) {}
    }

    fn spec(regime: Regime) -> LoadSpec {
        LoadSpec {
            regime,
            concurrency: 1,
            requests: 10,
            connections: 0,
            request_timeout: Duration::from_secs(5),
            connect_bound: Duration::from_secs(5),
            max_duration: Duration::from_secs(30),
            ends_by_time: false,
            min_duration: Duration::ZERO,
            first_id: 0,
            rate: None,
            pacing: Pacing::Spin,
            ids: None,
            seq_base: 0,
            mix: None,
            stop_after_identical_failures: 0,
        }
    }

    #[tokio::test]
    async fn unprocessed_requests_move_to_a_new_connection_and_are_not_failures() {
        for regime in [Regime::Reuse, Regime::NewConn] {
            let client = Arc::new(Refusing {
                connects: AtomicU32::new(0),
                refused: AtomicU32::new(2),
            });
            let spec = spec(regime);
            let result = run(
                Arc::new(RefusingClient(client.clone())),
                spec.clone(),
                Pool::for_spec(&spec),
                Arc::new(Progress::default()),
            )
            .await;
            let m = &result.measurements;
            assert_eq!((m.ok, m.failed(), m.moved), (10, 0, 2), "{regime:?}");
            let connects = client.connects.load(Ordering::SeqCst);
            match regime {
                Regime::Reuse => assert_eq!(connects, 3),
                Regime::NewConn => assert_eq!(connects, 12),
            }
        }
    }

    #[tokio::test]
    async fn a_request_refused_again_and_again_fails_in_the_end() {
        let client = Arc::new(Refusing {
            connects: AtomicU32::new(0),
            refused: AtomicU32::new(100),
        });
        let mut spec = spec(Regime::Reuse);
        spec.requests = 1;
        let result = run(
            Arc::new(RefusingClient(client.clone())),
            spec.clone(),
            Pool::for_spec(&spec),
            Arc::new(Progress::default()),
        )
        .await;
        let m = &result.measurements;
        assert_eq!((m.ok, m.moved), (0, u64::from(MAX_MOVES)));
        assert_eq!(m.failures[FailureClass::ConnReset.index()], 1);
    }

    /// Fails every connect at once, as a closed port does.
    struct Closed;

    #[async_trait]
    impl Client for Closed {
        async fn connect(&self) -> Result<Connected, Failure> {
            Err(Failure::new(
                FailureClass::ConnectRefused,
                "Connection refused",
            ))
        }
    }

    /// A phase's attempts are a whole number of budgets: exactly one without a minimum
    /// duration, and whole repeats of a tiny budget (more workers than the budget, on two
    /// threads, so that workers race for its last requests) when its budget ends too soon.
    /// Instant failures and instant successes count alike.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn attempts_are_a_whole_number_of_budgets_never_a_part() {
        for (closed, regime) in [
            (true, Regime::NewConn),
            (true, Regime::Reuse),
            (false, Regime::NewConn),
            (false, Regime::Reuse),
        ] {
            let client: Arc<dyn Client> = if closed {
                Arc::new(Closed)
            } else {
                Arc::new(RefusingClient(Arc::new(Refusing {
                    connects: AtomicU32::new(0),
                    refused: AtomicU32::new(0),
                })))
            };
            for (min_ms, requests) in [(0, 7), (30, 3), (30, 7)] {
                let mut spec = spec(regime);
                spec.concurrency = 5;
                spec.requests = requests;
                spec.min_duration = Duration::from_millis(min_ms);
                let result = run(
                    client.clone(),
                    spec.clone(),
                    Pool::for_spec(&spec),
                    Arc::new(Progress::default()),
                )
                .await;
                let m = &result.measurements;
                let what = format!("closed {closed}, {regime:?}, {min_ms} ms, budget {requests}");
                assert!(!result.cut_short, "{what}");
                assert_eq!(m.sent, requests * result.budget_repeats, "{what}");
                assert_eq!(m.ok + m.failed(), m.sent, "{what}");
                if closed {
                    assert_eq!((m.ok, m.connections_established), (0, 0), "{what}");
                } else {
                    assert_eq!(m.failed(), 0, "{what}");
                }
                if min_ms == 0 {
                    assert_eq!(result.budget_repeats, 1, "{what}");
                } else {
                    // Each repeat of the budget started before the minimum had passed.
                    assert!(result.budget_repeats > 1, "{what}");
                    assert!(result.elapsed >= spec.min_duration, "{what}");
                }
            }
        }
    }

    #[test]
    fn a_streak_of_identical_failures_makes_the_phase_hopeless_at_its_limit() {
        let refused = Failure::new(FailureClass::ConnectRefused, "Connection refused");
        let streak = FailureStreak::new(3);
        // Requests 0 to 2 in any order of completion; request 5's outcome is not among them.
        assert!(!streak.observe(2, Some(&refused)));
        assert!(!streak.observe(5, None));
        assert!(!streak.observe(0, Some(&refused)));
        assert!(
            streak.observe(1, Some(&refused)),
            "the third identical failure"
        );
        let verdict = streak.verdict().unwrap();
        assert!(verdict.contains("first 3 requests"), "{verdict}");
        assert!(
            verdict.contains("connect_refused: Connection refused"),
            "{verdict}"
        );
        // Said once.
        assert!(!streak.observe(1, Some(&refused)));
    }

    #[test]
    fn a_success_or_a_different_failure_settles_the_streak() {
        let refused = Failure::new(FailureClass::ConnectRefused, "Connection refused");
        let other = Failure::new(FailureClass::ConnectRefused, "No route to host");
        let timeout = Failure::new(FailureClass::RequestTimeout, "Connection refused");
        for breaker in [None, Some(&other), Some(&timeout)] {
            let streak = FailureStreak::new(3);
            streak.observe(0, Some(&refused));
            streak.observe(1, breaker);
            for i in 0..10 {
                assert!(!streak.observe(i, Some(&refused)));
            }
            assert_eq!(streak.verdict(), None);
        }
        let never = FailureStreak::new(0);
        for i in 0..10 {
            assert!(!never.observe(i, Some(&refused)));
        }
        assert_eq!(never.verdict(), None);
    }
}
