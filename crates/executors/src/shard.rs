//! A cell's load split over several load generators (agents), and their results put back
//! together exactly: workers, requests, connections and rate are divided in proportion to
//! workers, each shard continues the cell's request sequence, and the histograms are added
//! (HdrHistogram `add`: the merged percentiles are those of one histogram of every request).

use crate::load_child::{Finished, LoadJob};
use load::engine::LoadSpec;
pub use load::measurements::AgentOutcome;
use load::measurements::LatencySummary;
use load::measurements::SteadyWindow;
use load::sampler::ResourceSummary;

/// `total` split into `parts` as evenly as integers allow, the larger parts first.
fn split(total: u64, parts: u64) -> Vec<u64> {
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

fn shard_spec(spec: &LoadSpec, workers: &[u64], i: usize) -> LoadSpec {
    let total_workers: u64 = workers.iter().sum();
    let share = |total: u64| -> u64 {
        // In proportion to workers, the remainder to the first shards.
        let exact: Vec<u64> = workers.iter().map(|w| total * w / total_workers).collect();
        let rest = total - exact.iter().sum::<u64>();
        exact[i] + u64::from((i as u64) < rest)
    };
    let requests = share(spec.requests);
    let before: u64 = (0..i)
        .map(|j| {
            let exact: Vec<u64> = workers
                .iter()
                .map(|w| spec.requests * w / total_workers)
                .collect();
            let rest = spec.requests - exact.iter().sum::<u64>();
            exact[j] + u64::from((j as u64) < rest)
        })
        .sum();
    LoadSpec {
        concurrency: workers[i] as u32,
        requests,
        connections: if spec.connections == 0 {
            0
        } else {
            share(u64::from(spec.connections)).max(1) as u32
        },
        rate: spec
            .rate
            .map(|r| r * workers[i] as f64 / total_workers as f64),
        first_id: spec.first_id + before,
        seq_base: spec.seq_base + before,
        ..spec.clone()
    }
}

/// The job for each of `n` load generators (fewer when the cell has fewer workers: a shard
/// has at least one).
pub fn shard_jobs(job: &LoadJob, n: usize) -> Vec<LoadJob> {
    let workers = u64::from(job.measured.concurrency);
    let n = (n as u64).clamp(1, workers.max(1));
    let worker_split = split(workers, n);
    (0..n as usize)
        .map(|i| {
            let warmup = job.warmup.as_ref().map(|w| {
                let ws = split(u64::from(w.concurrency), n);
                shard_spec(w, &ws, i)
            });
            LoadJob {
                warmup,
                measured: shard_spec(&job.measured, &worker_split, i),
                ..job.clone()
            }
        })
        .collect()
}

/// One load generator's outcome.
pub struct ShardResult {
    pub finished: Finished,
    pub client: ResourceSummary,
    /// Where it ran (`local`, or the agent's address).
    pub label: String,
}

/// The shards as one cell: histograms and counts added; the phase lasts as long as the
/// longest shard (they all start at the same `go`); the steady-state rate is the sum of the
/// shards' steady-state rates; resources are the sum of the load generators'.
pub fn combine(shards: Vec<ShardResult>) -> (Finished, ResourceSummary, Vec<AgentOutcome>) {
    let outcomes = shards
        .iter()
        .map(|s| AgentOutcome {
            label: s.label.clone(),
            sent: s.finished.measured.sent,
            ok: s.finished.measured.ok,
            failed: s.finished.measured.failed(),
            latency: LatencySummary::of(&s.finished.measured.latency),
            elapsed_s: s.finished.elapsed.as_secs_f64(),
            client: s.client,
            link: None,
            measured: s.finished.measured.clone(),
        })
        .collect();
    let mut iter = shards.into_iter();
    let first = iter.next().expect("at least one shard");
    let mut rates = first
        .finished
        .steady
        .map(|s| (s.ok as f64 / s.elapsed_s, s.elapsed_s));
    let mut finished = first.finished;
    let mut client = first.client;
    for shard in iter {
        let f = shard.finished;
        finished.measured.merge(&f.measured);
        finished.warmup.merge(&f.warmup);
        finished.elapsed = finished.elapsed.max(f.elapsed);
        finished.cut_short |= f.cut_short;
        // Each load generator repeats its own share: the most any repeated.
        finished.budget_repeats = finished.budget_repeats.max(f.budget_repeats);
        finished.hopeless = finished.hopeless.or(f.hopeless);
        rates = match (rates, f.steady) {
            (Some((rate, elapsed)), Some(s)) => {
                Some((rate + s.ok as f64 / s.elapsed_s, elapsed.min(s.elapsed_s)))
            }
            _ => None,
        };
        client = add(client, shard.client);
    }
    finished.steady = rates.map(|(rate, elapsed_s)| SteadyWindow {
        elapsed_s,
        ok: (rate * elapsed_s).round() as u64,
    });
    (finished, client, outcomes)
}

/// Two processes' resources as one: RSS and CPU add up.
fn add(a: ResourceSummary, b: ResourceSummary) -> ResourceSummary {
    let both = |x: Option<f64>, y: Option<f64>| Some(x? + y?);
    ResourceSummary {
        rss_peak_bytes: a.rss_peak_bytes + b.rss_peak_bytes,
        rss_hwm_bytes: a.rss_hwm_bytes.zip(b.rss_hwm_bytes).map(|(x, y)| x + y),
        rss_mean_bytes: both(a.rss_mean_bytes, b.rss_mean_bytes),
        cpu_pct_mean: both(a.cpu_pct_mean, b.cpu_pct_mean),
        cpu_s: a.cpu_s + b.cpu_s,
        short_phase: a.short_phase || b.short_phase,
        sampled: a.sampled && b.sampled,
        tcp_time_wait: a.tcp_time_wait.zip(b.tcp_time_wait).map(|(x, y)| x.plus(y)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiment::settings::Regime;
    use std::time::Duration;

    /// The shards' requests, for checks: they add up to the cell's.
    pub fn total_requests(jobs: &[LoadJob]) -> u64 {
        jobs.iter().map(|j| j.measured.requests).sum()
    }

    fn spec(concurrency: u32, requests: u64) -> LoadSpec {
        LoadSpec {
            regime: Regime::Reuse,
            concurrency,
            requests,
            connections: 0,
            request_timeout: Duration::from_secs(1),
            connect_bound: Duration::from_secs(1),
            max_duration: Duration::from_secs(10),
            ends_by_time: false,
            min_duration: Duration::ZERO,
            first_id: 1_000_000,
            rate: Some(300.0),
            pacing: Default::default(),
            ids: None,
            seq_base: 0,
            mix: None,
            stop_after_identical_failures: 0,
        }
    }

    fn job(concurrency: u32, requests: u64) -> LoadJob {
        LoadJob {
            stack: "h1".into(),
            target: "127.0.0.1:1".parse().unwrap(),
            server_name: "localhost".into(),
            tls: None,
            connect_timeout_ms: 1000,
            handshake_timeout_ms: 1000,
            payload: Default::default(),
            tuning: Default::default(),
            client_threads: 1,
            busy_poll: false,
            service: None,
            live: false,
            warmup: Some(spec(concurrency, requests / 10)),
            measured: spec(concurrency, requests),
        }
    }

    #[test]
    fn shards_divide_workers_requests_and_rate_and_continue_the_sequence() {
        let jobs = shard_jobs(&job(10, 1001), 3);
        let workers: Vec<u32> = jobs.iter().map(|j| j.measured.concurrency).collect();
        assert_eq!(workers, [4, 3, 3]);
        assert_eq!(total_requests(&jobs), 1001);
        let rate: f64 = jobs.iter().map(|j| j.measured.rate.unwrap()).sum();
        assert!((rate - 300.0).abs() < 1e-9);
        // Each shard's sequence starts where the one before it ends.
        let mut next = 0;
        for j in &jobs {
            assert_eq!(j.measured.seq_base, next);
            assert_eq!(j.measured.first_id, 1_000_000 + next);
            next += j.measured.requests;
        }
        // Never more shards than workers.
        assert_eq!(shard_jobs(&job(1, 50), 3).len(), 1);
    }
}
