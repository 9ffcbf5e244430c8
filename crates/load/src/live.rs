//! A running phase's figures so far, for a live view (the runner's metrics endpoint): counts,
//! failures by class, bytes and a fixed-bucket latency histogram, read from the same
//! measurements the phase ends with ([`Measurements`]), so that a phase's last snapshot is
//! never above its final figures and [`LiveSnapshot::of`] those figures gives exactly what the
//! results record. Adding snapshots up ([`LiveSnapshot::add`]) is exact: the sum of several
//! load generators' is the snapshot of their merged measurements.
//!
//! How a running phase is read is the engine's (`engine::observe`); this module only holds
//! what a snapshot is.

use bench_core::FailureClass;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::measurements::{Measurements, RequestMeasurements};

/// Upper bounds (inclusive, in µs) of the live latency histogram's buckets; a last bucket
/// (+Inf) holds everything above. Fixed, so that the buckets of every cell, load generator and
/// run add up: 50 µs to 10 s in 1-2.5-5 steps.
pub const LATENCY_BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Successful requests' latency in the fixed buckets of [`LATENCY_BUCKETS_US`], read from an
/// HdrHistogram: a value counts in the first bucket whose bound is at least the lowest value
/// of its HdrHistogram bucket (so within the histogram's 0.1 % precision of the bound).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBuckets {
    /// Per bucket (not cumulative), the last one above every bound; as many as
    /// [`LATENCY_BUCKETS_US`] + 1 once anything was counted, empty before.
    pub counts: Vec<u64>,
    /// Every value counted (the successes).
    pub count: u64,
    /// The values' sum in µs, each value taken as its HdrHistogram bucket's middle (what
    /// HdrHistogram's mean uses): an integer, so sums add exactly.
    pub sum_us: u64,
}

impl LatencyBuckets {
    /// Adds every value of `h`.
    pub fn add_histogram(&mut self, h: &Histogram<u64>) {
        if h.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; LATENCY_BUCKETS_US.len() + 1];
        }
        for v in h.iter_recorded() {
            let n = v.count_at_value();
            let value = v.value_iterated_to();
            let lowest = h.lowest_equivalent(value);
            let i = LATENCY_BUCKETS_US.partition_point(|&bound| bound < lowest);
            self.counts[i] += n;
            self.count += n;
            self.sum_us = self
                .sum_us
                .saturating_add(h.median_equivalent(value).saturating_mul(n));
        }
    }

    /// Adds another's counts.
    pub fn add(&mut self, other: &LatencyBuckets) {
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; other.counts.len()];
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    /// Cumulative counts at each bound of [`LATENCY_BUCKETS_US`], then at +Inf (= `count`).
    pub fn cumulative(&self) -> Vec<u64> {
        let mut total = 0;
        (0..=LATENCY_BUCKETS_US.len())
            .map(|i| {
                total += self.counts.get(i).copied().unwrap_or(0);
                total
            })
            .collect()
    }
}

/// One request of a mix: its counts and latency so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSnapshot {
    pub name: String,
    pub sent: u64,
    pub ok: u64,
    /// Failures per class, in [`FailureClass::ALL`]'s order.
    pub failures: Vec<u64>,
    pub latency: LatencyBuckets,
}

impl RequestSnapshot {
    fn new(name: &str) -> Self {
        RequestSnapshot {
            name: name.to_string(),
            sent: 0,
            ok: 0,
            failures: vec![0; FailureClass::ALL.len()],
            latency: LatencyBuckets::default(),
        }
    }

    fn add_counts(&mut self, r: &RequestMeasurements) {
        self.sent += r.sent;
        self.ok += r.ok;
        for (class, codes) in &r.failures {
            if let Some(i) = FailureClass::ALL.iter().position(|c| c.as_str() == class) {
                self.failures[i] += codes.values().map(|c| c.count).sum::<u64>();
            }
        }
    }

    fn add(&mut self, other: &RequestSnapshot) {
        self.sent += other.sent;
        self.ok += other.ok;
        add_counts(&mut self.failures, &other.failures);
        self.latency.add(&other.latency);
    }
}

/// A process's latest resource reading ([`crate::sampler::Sample`]'s figures).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub rss_bytes: u64,
    /// CPU over the reading's interval (100 = one core).
    pub cpu_pct: f64,
}

/// A phase's figures so far (or, from [`LiveSnapshot::of`], its final figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    /// Attempts whose outcome is recorded (`sent` of cells.csv).
    pub sent: u64,
    /// Validated successes (`ok`).
    pub ok: u64,
    /// Failures per class, in [`FailureClass::ALL`]'s order (`fail_<class>`).
    pub failures: Vec<u64>,
    /// Bytes at the client's sockets (`wire_sent_bytes`, `wire_received_bytes`): the closed
    /// connections' and, while the phase runs, the open pooled connections' so far.
    pub wire_sent_bytes: u64,
    pub wire_received_bytes: u64,
    /// Successes' latency.
    pub latency: LatencyBuckets,
    /// Requests a worker holds whose due time has come and whose outcome is not recorded yet
    /// (0 in final figures).
    pub in_flight: u64,
    /// The reuse regime's pooled connections open now; `None` where the engine does not
    /// track them (new-conn: a connection per request, closed with it) and in final figures.
    pub connections_open: Option<u64>,
    /// A request mix's requests, in the mix's order (empty without a mix).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_request: Vec<RequestSnapshot>,
    /// The load generator's latest resource reading, where the process that relays its
    /// figures samples it (an agent); not added up by [`LiveSnapshot::add`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_generator: Option<Reading>,
}

impl Default for LiveSnapshot {
    fn default() -> Self {
        LiveSnapshot {
            sent: 0,
            ok: 0,
            failures: vec![0; FailureClass::ALL.len()],
            wire_sent_bytes: 0,
            wire_received_bytes: 0,
            latency: LatencyBuckets::default(),
            in_flight: 0,
            connections_open: None,
            by_request: Vec::new(),
            load_generator: None,
        }
    }
}

fn add_counts(mine: &mut Vec<u64>, theirs: &[u64]) {
    if mine.len() < theirs.len() {
        mine.resize(theirs.len(), 0);
    }
    for (m, t) in mine.iter_mut().zip(theirs) {
        *m += t;
    }
}

impl LiveSnapshot {
    /// The final figures of a phase (or a cell) that measured `m`: what its results record.
    pub fn of(m: &Measurements) -> Self {
        let mut snapshot = LiveSnapshot::default();
        snapshot.add_measurements(m);
        snapshot
    }

    /// Adds what `m` holds (a whole phase, or one shard of a running phase): counts,
    /// failures, the bytes of its closed connections and its latency histograms.
    pub fn add_measurements(&mut self, m: &Measurements) {
        self.add_counts(m);
        self.latency.add_histogram(&m.latency);
        for r in &m.by_request {
            self.add_request_latency(&r.name, &r.latency);
        }
    }

    /// [`LiveSnapshot::add_measurements`] but for the latency histograms, which a reader of
    /// a running phase adds up apart and reads once ([`LiveSnapshot::add_request_latency`]):
    /// reading a histogram into buckets takes a pass over all its counts.
    pub fn add_counts(&mut self, m: &Measurements) {
        self.sent += m.sent;
        self.ok += m.ok;
        add_counts(&mut self.failures, &m.failures);
        self.wire_sent_bytes += m.wire.sent;
        self.wire_received_bytes += m.wire.received;
        for r in &m.by_request {
            self.request_mut(&r.name).add_counts(r);
        }
    }

    /// Adds `h` to the latency of the mix's request `name`.
    pub fn add_request_latency(&mut self, name: &str, h: &Histogram<u64>) {
        self.request_mut(name).latency.add_histogram(h);
    }

    /// Adds another load generator's snapshot of the same phase: counts and gauges add up
    /// (open connections only when both know them).
    pub fn add(&mut self, other: &LiveSnapshot) {
        self.sent += other.sent;
        self.ok += other.ok;
        add_counts(&mut self.failures, &other.failures);
        self.wire_sent_bytes += other.wire_sent_bytes;
        self.wire_received_bytes += other.wire_received_bytes;
        self.latency.add(&other.latency);
        self.in_flight += other.in_flight;
        self.connections_open = self
            .connections_open
            .zip(other.connections_open)
            .map(|(a, b)| a + b);
        for r in &other.by_request {
            self.request_mut(&r.name).add(r);
        }
    }

    /// The request of the mix named `name`, added at the end the first time.
    fn request_mut(&mut self, name: &str) -> &mut RequestSnapshot {
        let i = match self.by_request.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                self.by_request.push(RequestSnapshot::new(name));
                self.by_request.len() - 1
            }
        };
        &mut self.by_request[i]
    }

    /// Takes [`LiveSnapshot::load_generator`] from the latest sample of the load generator
    /// (the client role) in `latest`: what an agent adds to the figures it relays, since the
    /// runner cannot sample a process on another host.
    pub fn take_reading(&mut self, latest: &crate::sampler::Latest) {
        self.load_generator = latest
            .get()
            .into_iter()
            .find(|s| s.role == crate::sampler::Role::Client)
            .map(|s| Reading {
                rss_bytes: s.rss_bytes,
                cpu_pct: s.cpu_pct,
            });
    }

    /// Failed attempts, all classes.
    pub fn failed(&self) -> u64 {
        self.failures.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bench_core::{Failure, Reply};

    use super::*;

    fn ok(m: &mut Measurements, us: u64) {
        m.record_ok(Duration::from_micros(us), &Reply::default());
    }

    #[test]
    fn buckets_hold_each_value_at_its_bound_and_add_up() {
        let mut m = Measurements::default();
        for us in [1, 50, 51, 100, 2_500, 2_501, 9_999_999, 30_000_000] {
            ok(&mut m, us);
        }
        let b = LiveSnapshot::of(&m).latency;
        assert_eq!(b.count, 8);
        let cumulative = b.cumulative();
        // 1 and 50 at ≤ 50 µs; 51 and 100 at ≤ 100 µs; 2,500 µs at its bound (and 2,501 µs,
        // which shares its HdrHistogram bucket [2500, 2501]); 9.999999 s at ≤ 10 s; 30 s
        // only at +Inf.
        assert_eq!(cumulative[0], 2);
        assert_eq!(cumulative[1], 4);
        let at =
            |bound: u64| cumulative[LATENCY_BUCKETS_US.iter().position(|&b| b == bound).unwrap()];
        assert_eq!(at(1_000), 4);
        assert_eq!(at(2_500), 6);
        assert_eq!(at(5_000_000), 6);
        assert_eq!(at(10_000_000), 7);
        assert_eq!(*cumulative.last().unwrap(), 8);
        // The sum is HdrHistogram's mean × count, to the microsecond.
        let mean_sum = m.latency.mean() * m.latency.len() as f64;
        assert!(
            (b.sum_us as f64 - mean_sum).abs() <= 8.0,
            "{} vs {mean_sum}",
            b.sum_us
        );

        // Split over two "load generators", added up: the same as the whole.
        let (mut a, mut c) = (Measurements::default(), Measurements::default());
        for (i, us) in [1, 50, 51, 100, 2_500, 2_501, 9_999_999, 30_000_000]
            .into_iter()
            .enumerate()
        {
            ok(if i % 2 == 0 { &mut a } else { &mut c }, us);
        }
        a.record_failure(Failure::new(FailureClass::BadStatus, "500"));
        m.record_failure(Failure::new(FailureClass::BadStatus, "500"));
        let mut sum = LiveSnapshot::of(&a);
        sum.add(&LiveSnapshot::of(&c));
        assert_eq!(sum, LiveSnapshot::of(&m));
        assert_eq!((sum.sent, sum.ok, sum.failed()), (9, 8, 1));
    }

    #[test]
    fn a_snapshot_crosses_the_wire_unchanged() {
        let mut m = Measurements::default();
        ok(&mut m, 300);
        let names = ["get".to_string(), "put".to_string()];
        m.request_mut(1, &names)
            .record_ok(Duration::from_micros(300));
        let mut s = LiveSnapshot::of(&m);
        s.connections_open = Some(3);
        s.in_flight = 2;
        s.load_generator = Some(Reading {
            rss_bytes: 1 << 20,
            cpu_pct: 12.5,
        });
        let back: LiveSnapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            back.by_request
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>(),
            ["get", "put"]
        );
    }
}
