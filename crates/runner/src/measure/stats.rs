//! Measurement: per-worker latency histograms and failure counters, merged per cell. Kept
//! apart from the socket plumbing so that what a figure means is decided in one place.

use std::time::Duration;

use std::collections::BTreeMap;

use bench_core::{ConnectTiming, Failure, FailureClass, Reply, WireBytes};
use hdrhistogram::Histogram;

/// Highest latency a histogram holds: 60 s in microseconds (larger values are clamped).
pub const MAX_TRACKABLE_US: u64 = 60_000_000;

/// Three significant digits; the bucket array grows with the largest latency recorded
/// (`record` clamps at [`MAX_TRACKABLE_US`]), so a cell whose answers take milliseconds
/// holds half the memory of one sized for 60 s up front.
fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid histogram bounds");
    h.auto(true);
    h
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, MAX_TRACKABLE_US);
    h.record(us).expect("value within bounds");
}

/// Distinct codes kept per failure class; a cell's further codes are counted together.
pub const MAX_CODES_PER_CLASS: usize = 32;
/// The code under which failures past [`MAX_CODES_PER_CLASS`] distinct codes are counted.
pub const OTHER_CODES: &str = "(other codes)";

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
    pub connections_opened: u64,
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
            connections_opened: 0,
            connections_resumed: 0,
            late: 0,
            pacing_lag: histogram(),
            wire: WireBytes::default(),
            body_bytes: 0,
            moved: 0,
        }
    }
}

impl Measurements {
    pub fn record_connect(&mut self, timing: &ConnectTiming) {
        self.connections_opened += 1;
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
        let codes = self.failure_codes.entry(class.to_string()).or_default();
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
        self.connections_opened += setup.connections_opened;
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
        self.connections_opened += other.connections_opened;
        self.connections_resumed += other.connections_resumed;
        self.late += other.late;
        self.pacing_lag
            .add(&other.pacing_lag)
            .expect("auto-resizing histogram");
        self.add_wire(other.wire);
        self.body_bytes += other.body_bytes;
        self.moved += other.moved;
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

    #[test]
    fn failures_stay_out_of_latency_and_merge_adds_up() {
        let mut a = Measurements::default();
        let reply = Reply {
            reopened: None,
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
            reopened: None,
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

    #[test]
    fn huge_latency_is_clamped_not_lost() {
        let mut m = Measurements::default();
        let reply = Reply::default();
        m.record_ok(Duration::from_secs(3600), &reply);
        assert_eq!(m.latency.len(), 1);
        assert!(m.latency.max() >= MAX_TRACKABLE_US - MAX_TRACKABLE_US / 1000);
    }
}
