//! Measurement: per-worker latency histograms and failure counters, merged per cell. Kept
//! apart from the socket plumbing so that what a figure means is decided in one place.

use std::time::Duration;

use std::collections::BTreeMap;

use bench_core::{ConnectTiming, Failure, FailureClass, Reply, WireBytes};
use hdrhistogram::Histogram;
use results::hlog;
/// The suite's histogram: its precision is the `.hlog` format's.
pub use results::hlog::histogram;

/// Highest latency a histogram holds: 60 s in microseconds (larger values are clamped).
pub const MAX_TRACKABLE_US: u64 = 60_000_000;

fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, MAX_TRACKABLE_US);
    h.record(us).expect("value within bounds");
}

/// One worker's gaps between the messages of the call in flight: kept apart until the call
/// is known to have succeeded, then added to the cell's ([`Measurements::add_message_gaps`]).
/// One histogram per worker, reset per call: no memory per message. It is made at the first
/// gap a worker sees, so a worker whose calls never stream (unary gRPC, every REST request)
/// holds none: made up front it was 2,048 counters (16 KiB) per worker, 8 MiB at 500 workers.
#[derive(Default)]
pub struct MessageGaps(Option<Histogram<u64>>);

impl MessageGaps {
    pub fn record(&mut self, gap: Duration) {
        record(self.0.get_or_insert_with(histogram), gap);
    }

    pub fn reset(&mut self) {
        if let Some(gaps) = self.0.as_mut().filter(|g| !g.is_empty()) {
            gaps.reset();
        }
    }
}

/// Distinct codes kept per failure class; a cell's further codes are counted together.
pub const MAX_CODES_PER_CLASS: usize = 32;
/// The code under which failures past [`MAX_CODES_PER_CLASS`] distinct codes are counted.
pub const OTHER_CODES: &str = "(other codes)";

/// From the moment the last worker issued its first request to the moment the first worker
/// found no more work: no ramp-up, no drain. `ok` counts successes answered inside it.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct SteadyWindow {
    pub elapsed_s: f64,
    pub ok: u64,
}

/// How often one code of a failure class occurred, with its first message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CodeCount {
    pub count: u64,
    pub example: String,
}

/// What one worker (or, merged, one cell) measured. Memory is constant in the request count.
/// Serialisable, so that the load-generator process can hand it to the runner.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Measurements {
    /// Successful requests, from issue (before connecting, in new-conn; on an open
    /// connection, in reuse) to validated body.
    #[serde(with = "buckets")]
    pub latency: Histogram<u64>,
    /// TCP connect of each opened connection.
    #[serde(with = "buckets")]
    pub connect: Histogram<u64>,
    /// TLS or QUIC handshake of each opened connection.
    #[serde(with = "buckets")]
    pub handshake: Histogram<u64>,
    /// Request issued on a ready connection → response head.
    #[serde(with = "buckets")]
    pub ttfb: Histogram<u64>,
    pub sent: u64,
    pub ok: u64,
    pub failures: [u64; FailureClass::ALL.len()],
    /// The first message seen for each class, to explain the counts.
    pub failure_examples: [Option<String>; FailureClass::ALL.len()],
    /// Failures that named their kind within the class ([`Failure::code`]: an HTTP status, a
    /// gRPC status code name, a missing field): class → code → count and first example.
    /// At most [`MAX_CODES_PER_CLASS`] codes per class; more go to [`OTHER_CODES`].
    #[serde(default)]
    pub failure_codes: BTreeMap<String, BTreeMap<String, CodeCount>>,
    /// Connections the load generator set out to open (`Client::connect` calls, plus those
    /// a library client reopened on its own), whether or not they were established.
    #[serde(default)]
    pub connections_attempted: u64,
    /// Connections whose setup (connect and handshake) finished.
    #[serde(alias = "connections_opened")]
    pub connections_established: u64,
    pub connections_resumed: u64,
    /// Open loop: requests that started more than `LATE_AFTER` after they were due.
    pub late: u64,
    /// Open loop: how late a free worker sent each request after its due time (the load
    /// generator's timer, not the server).
    #[serde(with = "buckets", default = "histogram")]
    pub pacing_lag: Histogram<u64>,
    pub wire: WireBytes,
    pub body_bytes: u64,
    /// Requests the server did not process (HTTP/2: above its GOAWAY's last stream id, or
    /// REFUSED_STREAM) that were sent again on a new connection, each time: not failures.
    #[serde(default)]
    pub moved: u64,
    /// Streaming calls: messages streamed by the successful calls ([`Reply::messages`]).
    #[serde(default)]
    pub messages: u64,
    /// Successful streaming calls ([`Reply::streamed`]), whatever their messages: what
    /// `messages` is averaged over, so a mix's unary calls do not count as calls of 0.
    #[serde(default)]
    pub streamed_ok: u64,
    /// Streaming answers: the time between two consecutive messages of one successful call,
    /// as they reached the client (the first message's time is the call's `ttfb`).
    #[serde(with = "buckets", default = "histogram")]
    pub message_gap: Histogram<u64>,
    /// A request mix's requests, each measured apart, in the mix's order (empty without a
    /// mix); the figures above hold all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_request: Vec<RequestMeasurements>,
}

/// What the requests of one name of a mix measured: their count, success latency and
/// failures. Constant memory, as the cell's.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RequestMeasurements {
    pub name: String,
    pub sent: u64,
    pub ok: u64,
    #[serde(with = "buckets")]
    pub latency: Histogram<u64>,
    /// class → code (empty when the failure named none) → count and first example; at most
    /// [`MAX_CODES_PER_CLASS`] codes per class, as the cell's.
    pub failures: BTreeMap<String, BTreeMap<String, CodeCount>>,
}

impl RequestMeasurements {
    fn new(name: &str) -> Self {
        RequestMeasurements {
            name: name.to_string(),
            sent: 0,
            ok: 0,
            latency: histogram(),
            failures: BTreeMap::new(),
        }
    }

    pub fn record_ok(&mut self, latency: Duration) {
        self.sent += 1;
        self.ok += 1;
        record(&mut self.latency, latency);
    }

    pub fn record_failure(&mut self, failure: &Failure) {
        self.sent += 1;
        let code = failure.code.clone().unwrap_or_default();
        count_code(
            &mut self.failures,
            failure.class.as_str(),
            code,
            1,
            &failure.detail,
        );
    }

    fn merge(&mut self, other: &RequestMeasurements) {
        self.sent += other.sent;
        self.ok += other.ok;
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histogram");
        for (class, codes) in &other.failures {
            for (code, c) in codes {
                count_code(&mut self.failures, class, code.clone(), c.count, &c.example);
            }
        }
    }
}

/// Adds `n` failures of `class` with `code` to `codes`, past [`MAX_CODES_PER_CLASS`]
/// distinct codes under [`OTHER_CODES`].
fn count_code(
    codes: &mut BTreeMap<String, BTreeMap<String, CodeCount>>,
    class: &str,
    code: String,
    n: u64,
    example: &str,
) {
    let codes = codes.entry(class.to_string()).or_default();
    let code = if codes.contains_key(&code) || codes.len() < MAX_CODES_PER_CLASS {
        code
    } else {
        OTHER_CODES.to_string()
    };
    let entry = codes.entry(code).or_insert_with(|| CodeCount {
        count: 0,
        example: example.to_string(),
    });
    entry.count += n;
}

impl Default for Measurements {
    fn default() -> Self {
        Measurements {
            latency: histogram(),
            connect: histogram(),
            handshake: histogram(),
            ttfb: histogram(),
            sent: 0,
            ok: 0,
            failures: [0; FailureClass::ALL.len()],
            failure_examples: Default::default(),
            failure_codes: BTreeMap::new(),
            connections_attempted: 0,
            connections_established: 0,
            connections_resumed: 0,
            late: 0,
            pacing_lag: histogram(),
            wire: WireBytes::default(),
            body_bytes: 0,
            moved: 0,
            messages: 0,
            streamed_ok: 0,
            message_gap: histogram(),
            by_request: Vec::new(),
        }
    }
}

impl Measurements {
    /// The histograms by `.hlog` tag ([`hlog::TAGS`]), as a log is written from them.
    pub fn tagged(&self) -> hlog::Tagged<'_> {
        hlog::tagged([
            &self.latency,
            &self.ttfb,
            &self.connect,
            &self.handshake,
            &self.pacing_lag,
            &self.message_gap,
        ])
    }

    /// Puts a log's histograms in place of these.
    pub fn take_histograms(&mut self, h: hlog::Histograms) {
        self.latency = h.latency;
        self.ttfb = h.ttfb;
        self.connect = h.connect;
        self.handshake = h.handshake;
        self.pacing_lag = h.pacing_lag;
        self.message_gap = h.message_gap;
    }

    /// A connection about to be opened.
    pub fn record_attempt(&mut self) {
        self.connections_attempted += 1;
    }

    /// A connection established (its attempt recorded apart, [`Measurements::record_attempt`]).
    pub fn record_connect(&mut self, timing: &ConnectTiming) {
        self.connections_established += 1;
        if timing.resumed {
            self.connections_resumed += 1;
        }
        if !timing.tcp_connect.is_zero() {
            record(&mut self.connect, timing.tcp_connect);
        }
        if !timing.handshake.is_zero() {
            record(&mut self.handshake, timing.handshake);
        }
    }

    /// Pacing lag has the same 1 µs floor as latency: a send on time records 1 µs.
    pub fn record_pacing_lag(&mut self, lag: Duration) {
        record(&mut self.pacing_lag, lag);
    }

    pub fn record_ok(&mut self, latency: Duration, reply: &Reply) {
        self.sent += 1;
        self.ok += 1;
        self.body_bytes += reply.body_bytes;
        record(&mut self.latency, latency);
        record(&mut self.ttfb, reply.ttfb);
        self.messages += u64::from(reply.messages);
        self.streamed_ok += u64::from(reply.streamed);
    }

    /// The message gaps of a successful call.
    pub fn add_message_gaps(&mut self, gaps: &MessageGaps) {
        if let Some(gaps) = gaps.0.as_ref().filter(|g| !g.is_empty()) {
            self.message_gap.add(gaps).expect("auto-resizing histogram");
        }
    }

    pub fn record_failure(&mut self, failure: Failure) {
        self.sent += 1;
        let i = failure.class.index();
        self.failures[i] += 1;
        if let Some(code) = failure.code {
            self.count_code(failure.class.as_str(), code, 1, &failure.detail);
        }
        if self.failure_examples[i].is_none() {
            self.failure_examples[i] = Some(failure.detail);
        }
    }

    fn count_code(&mut self, class: &str, code: String, n: u64, example: &str) {
        count_code(&mut self.failure_codes, class, code, n, example);
    }

    /// The measurements of request `i` of a mix named `names` (created for every name on
    /// first use, so all workers hold them in the mix's order).
    pub fn request_mut(&mut self, i: usize, names: &[String]) -> &mut RequestMeasurements {
        if self.by_request.is_empty() {
            self.by_request = names.iter().map(|n| RequestMeasurements::new(n)).collect();
        }
        &mut self.by_request[i]
    }

    /// Adds the bytes one connection moved over its lifetime.
    pub fn add_wire(&mut self, wire: WireBytes) {
        self.wire.sent += wire.sent;
        self.wire.received += wire.received;
    }

    pub fn failed(&self) -> u64 {
        self.failures.iter().sum()
    }

    /// Adds the setup of connections opened before the phase for its use (the reuse
    /// regime's pool): their connect and handshake timings count, no request does.
    pub fn merge_setup(&mut self, setup: &Measurements) {
        self.connect
            .add(&setup.connect)
            .expect("auto-resizing histogram");
        self.handshake
            .add(&setup.handshake)
            .expect("auto-resizing histogram");
        self.connections_attempted += setup.connections_attempted;
        self.connections_established += setup.connections_established;
        self.connections_resumed += setup.connections_resumed;
    }

    pub fn merge(&mut self, other: &Measurements) {
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histogram");
        self.connect
            .add(&other.connect)
            .expect("auto-resizing histogram");
        self.handshake
            .add(&other.handshake)
            .expect("auto-resizing histogram");
        self.ttfb.add(&other.ttfb).expect("auto-resizing histogram");
        self.sent += other.sent;
        self.ok += other.ok;
        for (class, codes) in &other.failure_codes {
            for (code, c) in codes {
                self.count_code(class, code.clone(), c.count, &c.example);
            }
        }
        for (i, n) in other.failures.iter().enumerate() {
            self.failures[i] += n;
            if self.failure_examples[i].is_none() {
                self.failure_examples[i] = other.failure_examples[i].clone();
            }
        }
        self.connections_attempted += other.connections_attempted;
        self.connections_established += other.connections_established;
        self.connections_resumed += other.connections_resumed;
        self.late += other.late;
        self.pacing_lag
            .add(&other.pacing_lag)
            .expect("auto-resizing histogram");
        self.add_wire(other.wire);
        self.body_bytes += other.body_bytes;
        self.moved += other.moved;
        self.messages += other.messages;
        self.streamed_ok += other.streamed_ok;
        self.message_gap
            .add(&other.message_gap)
            .expect("auto-resizing histogram");
        for theirs in &other.by_request {
            match self.by_request.iter_mut().find(|r| r.name == theirs.name) {
                Some(ours) => ours.merge(theirs),
                None => self.by_request.push(theirs.clone()),
            }
        }
    }
}

/// A histogram as its non-empty buckets, `[value, count]` pairs: recording each bucket's
/// value again lands in the same bucket, so the copy has the same counts, min, max and
/// percentiles as the original.
mod buckets {
    use hdrhistogram::Histogram;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            h.iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value()]),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let pairs = Vec::<[u64; 2]>::deserialize(d)?;
        let mut h = super::histogram();
        for [value, count] in pairs {
            h.record_n(value.clamp(1, super::MAX_TRACKABLE_US), count)
                .map_err(serde::de::Error::custom)?;
        }
        Ok(h)
    }
}

/// What one agent measured of a cell, for `agents.csv`.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub label: String,
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    pub latency: LatencySummary,
    pub elapsed_s: f64,
    pub client: crate::sampler::ResourceSummary,
    /// With the hosts executor: bytes its host's interface received and sent in the cell.
    pub link: Option<(u64, u64)>,
    /// Its own histograms and counts (written as its `.hlog`; the cell's are their sum).
    pub measured: Measurements,
}

/// Summary figures of one histogram in microseconds (0 when it is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            min: h.min(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's message gaps hold no histogram until a call streams (a load generator's
    /// memory must not carry one per worker for calls that never stream); once one does,
    /// its gaps reach the cell's, and a reset empties it for the next call.
    #[test]
    fn message_gaps_hold_nothing_until_a_call_streams() {
        let mut gaps = MessageGaps::default();
        gaps.reset();
        assert!(gaps.0.is_none());
        let mut cell = Measurements::default();
        cell.add_message_gaps(&gaps);
        assert!(gaps.0.is_none());
        assert_eq!(cell.message_gap.len(), 0);
        gaps.record(Duration::from_micros(40));
        gaps.record(Duration::from_micros(60));
        cell.add_message_gaps(&gaps);
        assert_eq!(cell.message_gap.len(), 2);
        gaps.reset();
        cell.add_message_gaps(&gaps);
        assert_eq!(cell.message_gap.len(), 2);
    }

    #[test]
    fn failures_stay_out_of_latency_and_merge_adds_up() {
        let mut a = Measurements::default();
        let reply = Reply {
            messages: 0,
            reopened: None,
            streamed: false,
            ttfb: Duration::from_micros(100),
            total: Duration::from_micros(150),
            body_bytes: 256,
        };
        for us in [100, 200, 300] {
            a.record_ok(Duration::from_micros(us), &reply);
        }
        a.record_failure(Failure::new(FailureClass::BadStatus, "500"));
        let mut b = Measurements::default();
        b.record_failure(Failure::new(FailureClass::BadStatus, "503"));
        b.record_failure(Failure::new(FailureClass::ConnReset, "reset"));
        a.merge(&b);
        assert_eq!(a.sent, 6);
        assert_eq!(a.ok, 3);
        assert_eq!(a.failed(), 3);
        assert_eq!(a.latency.len(), 3);
        assert_eq!(a.failures[FailureClass::BadStatus.index()], 2);
        assert_eq!(
            a.failure_examples[FailureClass::BadStatus.index()].as_deref(),
            Some("500")
        );
        let s = LatencySummary::of(&a.latency);
        assert!(s.min <= s.p50 && s.p50 <= s.p99 && s.p99 <= s.max);
        assert!((199..=201).contains(&s.p50), "{s:?}");
    }

    #[test]
    fn measurements_survive_the_trip_to_the_runner_exactly() {
        let mut m = Measurements::default();
        let reply = Reply {
            messages: 0,
            reopened: None,
            streamed: false,
            ttfb: Duration::from_micros(90),
            total: Duration::from_micros(100),
            body_bytes: 300,
        };
        let mut x: u64 = 7;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            m.record_ok(Duration::from_micros(1 + (x >> 40) % 2_000_000), &reply);
        }
        m.record_ok(Duration::from_secs(3600), &reply);
        m.record_failure(Failure::new(FailureClass::ConnReset, "reset by peer"));
        m.add_wire(WireBytes {
            sent: 11,
            received: 22,
        });
        let json = serde_json::to_string(&m).expect("serialises");
        let back: Measurements = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back.latency.len(), m.latency.len());
        assert_eq!(
            LatencySummary::of(&back.latency),
            LatencySummary::of(&m.latency)
        );
        assert_eq!(LatencySummary::of(&back.ttfb), LatencySummary::of(&m.ttfb));
        for q in [0.1, 0.5, 0.75, 0.9, 0.999, 0.99999] {
            assert_eq!(
                back.latency.value_at_quantile(q),
                m.latency.value_at_quantile(q)
            );
        }
        assert_eq!(
            (back.sent, back.ok, back.failed()),
            (m.sent, m.ok, m.failed())
        );
        assert_eq!(back.failure_examples, m.failure_examples);
        assert_eq!(back.wire, m.wire);
        assert_eq!(back.body_bytes, m.body_bytes);
        assert!(json.len() < 200_000, "{} bytes", json.len());
    }

    /// xorshift64*: the property test's samples, reproducible from the seed.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// Uniform in (0, 1].
        fn unit(&mut self) -> f64 {
            ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
        }
    }

    /// A latency in µs over the whole range and past it: a dense low band (exact buckets),
    /// log-uniform 1 µs .. 60 s, a Pareto tail (α = 1.1, past 60 s now and then: clamped),
    /// and a cluster around `base`.
    fn latency_us(rng: &mut XorShift, base: u64) -> u64 {
        match rng.below(4) {
            0 => 1 + rng.below(3_000),
            1 => 10f64.powf(rng.unit() * 7.78) as u64,
            2 => (200.0 / rng.unit().powf(1.0 / 1.1)).min(1e9) as u64,
            _ => base + rng.below(base / 4 + 1),
        }
    }

    /// Every figure cells.csv and latency.csv report of a `Measurements`, and its buckets.
    #[derive(Debug, PartialEq)]
    struct Figures {
        /// Per histogram: count, min, p50, p90, p95, p99, p99.9, max and mean (exactly).
        histograms: Vec<(&'static str, u64, LatencySummary)>,
        /// latency.csv's quantiles of the latency histogram, and its every (value, count)
        /// bucket (the other histograms' buckets cost too much time in a debug build).
        cdf: Vec<u64>,
        buckets: Vec<(u64, u64)>,
        counts: (u64, u64, [u64; FailureClass::ALL.len()], u64, u64),
        /// Per code the count (exact while a class has at most MAX_CODES_PER_CLASS codes:
        /// which ones fold into OTHER_CODES past that depends on arrival order), not the
        /// example (the first message one agent saw need not be the first of all).
        codes: Vec<(String, String, u64)>,
        connections: (u64, u64, u64, WireBytes, u64),
    }

    fn figures(m: &Measurements) -> Figures {
        let histograms = [
            ("latency", &m.latency),
            ("ttfb", &m.ttfb),
            ("connect", &m.connect),
            ("handshake", &m.handshake),
            ("pacing_lag", &m.pacing_lag),
        ]
        .into_iter()
        .map(|(name, h)| (name, h.len(), LatencySummary::of(h)))
        .collect();
        Figures {
            histograms,
            cdf: results::rows::CDF_QUANTILES
                .iter()
                .map(|q| m.latency.value_at_quantile(*q))
                .collect(),
            buckets: m
                .latency
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
            counts: (m.sent, m.ok, m.failures, m.late, m.moved),
            codes: m
                .failure_codes
                .iter()
                .flat_map(|(class, codes)| {
                    codes
                        .iter()
                        .map(move |(code, c)| (class.clone(), code.clone(), c.count))
                })
                .collect(),
            connections: (
                m.connections_attempted,
                m.connections_established,
                m.connections_resumed,
                m.wire,
                m.body_bytes,
            ),
        }
    }

    /// Issue 16's exact merge: random samples split at random over 1..=8 agents, merged, give
    /// the figures of one `Measurements` fed every sample, also after each agent's trip
    /// through JSON (how agents ship them) and through its `.hlog` file.
    #[test]
    fn merged_agents_report_exactly_what_one_histogram_of_all_samples_reports() {
        const ITERATIONS: usize = 64;
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let started = std::time::Instant::now();
        for iteration in 0..ITERATIONS {
            let agents = 1 + rng.below(8) as usize;
            let samples = match iteration % 10 {
                0 => rng.below(3),
                _ => rng.below(2_000),
            };
            let base = 1 + rng.below(100_000);
            let mut all = Measurements::default();
            let mut parts: Vec<Measurements> = vec![Measurements::default(); agents];
            for _ in 0..samples {
                let part = &mut parts[rng.below(agents as u64) as usize];
                let roll = rng.below(100);
                if roll < 85 {
                    let latency = Duration::from_micros(latency_us(&mut rng, base));
                    let reply = Reply {
                        ttfb: Duration::from_micros(latency_us(&mut rng, base / 2 + 1)),
                        body_bytes: rng.below(4096),
                        ..Reply::default()
                    };
                    all.record_ok(latency, &reply);
                    part.record_ok(latency, &reply);
                } else if roll < 95 {
                    let class =
                        FailureClass::ALL[rng.below(FailureClass::ALL.len() as u64) as usize];
                    let mut failure = Failure::new(class, format!("detail {}", rng.below(5)));
                    if rng.below(2) == 0 {
                        failure = failure.with_code(format!("{}", 400 + rng.below(30)));
                    }
                    all.record_failure(failure.clone());
                    part.record_failure(failure);
                } else {
                    let timing = ConnectTiming {
                        tcp_connect: Duration::from_micros(rng.below(2) * latency_us(&mut rng, 50)),
                        handshake: Duration::from_micros(latency_us(&mut rng, 900)),
                        resumed: rng.below(3) == 0,
                    };
                    all.record_attempt();
                    part.record_attempt();
                    all.record_connect(&timing);
                    part.record_connect(&timing);
                    let lag = Duration::from_micros(latency_us(&mut rng, 5));
                    all.record_pacing_lag(lag);
                    part.record_pacing_lag(lag);
                    let wire = WireBytes {
                        sent: rng.below(10_000),
                        received: rng.below(10_000),
                    };
                    all.add_wire(wire);
                    part.add_wire(wire);
                }
            }
            let merge = |parts: &[Measurements]| {
                let mut merged = Measurements::default();
                for p in parts {
                    merged.merge(p);
                }
                merged
            };
            let what = format!("iteration {iteration}: {samples} samples over {agents} agents");
            let expected = figures(&all);
            assert_eq!(figures(&merge(&parts)), expected, "{what}");

            let shipped: Vec<Measurements> = parts
                .iter()
                .map(|p| serde_json::from_str(&serde_json::to_string(p).unwrap()).unwrap())
                .collect();
            assert_eq!(figures(&merge(&shipped)), expected, "{what}, via JSON");

            let logged: Vec<Measurements> = parts
                .iter()
                .map(|p| {
                    let window = hlog::Window {
                        start_unix_s: 1_764_000_000.0,
                        duration_s: 10.0,
                    };
                    let text = hlog::encode("h1/reuse/c8/r1", p.tagged(), window).unwrap();
                    // Counts as shipped; every histogram replaced by the log's.
                    let mut back = p.clone();
                    back.take_histograms(hlog::decode(&text).unwrap());
                    back
                })
                .collect();
            assert_eq!(figures(&merge(&logged)), expected, "{what}, via .hlog");
        }
        eprintln!(
            "exact merge: {ITERATIONS} iterations in {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn huge_latency_is_clamped_not_lost() {
        let mut m = Measurements::default();
        let reply = Reply::default();
        m.record_ok(Duration::from_secs(3600), &reply);
        assert_eq!(m.latency.len(), 1);
        assert!(m.latency.max() >= MAX_TRACKABLE_US - MAX_TRACKABLE_US / 1000);
    }

    #[test]
    fn a_mix_is_measured_per_name_and_merges_by_name() {
        let names = ["get".to_string(), "create".to_string()];
        let mut a = Measurements::default();
        let mut b = Measurements::default();
        a.request_mut(0, &names)
            .record_ok(Duration::from_micros(100));
        a.request_mut(1, &names).record_failure(
            &Failure::new(FailureClass::BadStatus, "HTTP status 500").with_code("500"),
        );
        b.request_mut(1, &names)
            .record_ok(Duration::from_micros(900));
        b.request_mut(1, &names)
            .record_failure(&Failure::new(FailureClass::RequestTimeout, "no answer"));
        let b: Measurements = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        a.merge(&b);
        let [get, create] = &a.by_request[..] else {
            panic!("{:?}", a.by_request)
        };
        assert_eq!((get.name.as_str(), get.sent, get.ok), ("get", 1, 1));
        assert_eq!(
            (create.name.as_str(), create.sent, create.ok),
            ("create", 3, 1)
        );
        assert_eq!(create.latency.len(), 1);
        assert_eq!(create.latency.max(), 900);
        assert_eq!(create.failures["bad_status"]["500"].count, 1);
        assert_eq!(create.failures["request_timeout"][""].count, 1);
        // A cell without a mix has none, and says nothing about them when serialised.
        assert!(!serde_json::to_string(&Measurements::default())
            .unwrap()
            .contains("by_request"));
    }

    #[test]
    fn a_log_reads_back_as_the_histograms_and_window_written() {
        let mut m = Measurements::default();
        let reply = bench_core::Reply {
            messages: 0,
            ttfb: Duration::from_micros(80),
            ..Reply::default()
        };
        for us in [90, 150, 2_000, 45_000, 59_000_000] {
            m.record_ok(Duration::from_micros(us), &reply);
        }
        m.record_connect(&bench_core::ConnectTiming {
            tcp_connect: Duration::from_micros(40),
            handshake: Duration::from_micros(900),
            resumed: false,
        });
        let window = hlog::Window {
            start_unix_s: 1_764_000_000.25,
            duration_s: 12.5,
        };
        let text = hlog::encode("h2/reuse/c2/r1", m.tagged(), window).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("#[StartTime: 1764000000.250 "), "{text}");
        assert!(text.contains("Tag=latency,0.000,12.500,59"), "{text}");
        assert!(text.contains("Tag=handshake,"), "{text}");
        assert!(
            !text.contains("Tag=pacing_lag"),
            "empty and optional: {text}"
        );
        let back = hlog::decode(text.as_bytes()).unwrap();
        assert_eq!(back.window, Some(window));
        for (tag, h) in m.tagged() {
            let got = back.get(tag).unwrap();
            assert_eq!(got.len(), h.len(), "{tag}");
            assert_eq!(LatencySummary::of(got), LatencySummary::of(h), "{tag}");
        }
    }
}
