//! How late the machine itself runs a thread that is ready: a floor under open-loop pacing lag.
//!
//! A pacing worker that spins until its due time can only be as punctual as the kernel and the
//! hypervisor let a spinning thread be. On a shared virtual machine that thread is stopped now
//! and then for tens to thousands of microseconds (interrupts, other tenants, memory
//! monitoring). Before an open-loop run the runner spins on the load generator's core for a
//! moment and records how late a request due at a random instant would have been: pacing lag
//! at or under that floor is the machine's, not the generator's.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use results::manifest::{StallProbe, STALL_US};

/// Gaps between two clock readings shorter than this are the loop itself, not a stall.
const GAP_FLOOR: Duration = Duration::from_micros(1);

/// Spins on the calling thread for `length`, reading the clock as fast as it can; memory
/// is one histogram of gap lengths, whatever the length.
pub fn probe(length: Duration, cpu: Option<usize>) -> StallProbe {
    let mut gaps = gap_histogram();
    let started = Instant::now();
    let mut last = started;
    loop {
        let now = Instant::now();
        let gap = now - last;
        if gap >= GAP_FLOOR {
            gaps.saturating_record(gap.as_nanos() as u64);
        }
        last = now;
        if now - started >= length {
            break;
        }
    }
    from_gaps(&gaps, last - started, cpu)
}

/// The probe's figures from its gap lengths (ns) over `length`.
pub fn from_gaps(gaps: &Histogram<u64>, length: Duration, cpu: Option<usize>) -> StallProbe {
    let total_ns = length.as_nanos().max(1) as f64;
    let stall_ns = STALL_US * 1_000;
    let (mut lost_ns, mut stalls) = (0.0, 0);
    for v in gaps.iter_recorded() {
        let value = gaps.highest_equivalent(v.value_iterated_to());
        if value >= stall_ns {
            lost_ns += value as f64 * v.count_at_value() as f64;
            stalls += v.count_at_value();
        }
    }
    let lateness = |q: f64| lateness_quantile_ns(gaps, total_ns, q) / 1_000;
    StallProbe {
        probe_ms: length.as_millis() as u64,
        cpu,
        lost_pct: 100.0 * lost_ns / total_ns,
        stalls,
        longest_us: if gaps.is_empty() {
            0
        } else {
            gaps.max() / 1_000
        },
        lateness_p99_us: lateness(0.99),
        lateness_p999_us: lateness(0.999),
    }
}

/// Gap lengths in ns, 1 ns .. 100 s, 3 significant digits.
pub fn gap_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// The `q` quantile of the lateness of a uniformly random instant of a probe of `total_ns`:
/// P(lateness > x) = Σ max(0, gap − x) / total, solved for x by bisection.
fn lateness_quantile_ns(gaps: &Histogram<u64>, total_ns: f64, q: f64) -> u64 {
    let tail = |x: f64| -> f64 {
        gaps.iter_recorded()
            .map(|v| {
                let value = gaps.highest_equivalent(v.value_iterated_to()) as f64;
                (value - x).max(0.0) * v.count_at_value() as f64
            })
            .sum::<f64>()
            / total_ns
    };
    let (mut lo, mut hi) = (0.0, gaps.max() as f64);
    if tail(0.0) <= 1.0 - q {
        return 0;
    }
    for _ in 0..64 {
        let mid = (lo + hi) / 2.0;
        if tail(mid) > 1.0 - q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_long_stall_sets_the_tail_and_short_gaps_do_not() {
        // 1 s probe: a million 1 µs loop gaps and one 20 ms stall. An instant falls into the
        // stall with probability 2 %, and is then late by the rest of it: P(late > x) =
        // (20 ms − x) / 1 s, so p99 = 10 ms and p99.9 = 19 ms.
        let mut gaps = gap_histogram();
        gaps.record_n(1_000, 980_000).unwrap();
        gaps.record(20_000_000).unwrap();
        let probe = from_gaps(&gaps, Duration::from_secs(1), Some(1));
        assert_eq!(probe.stalls, 1);
        assert!((probe.lost_pct - 2.0).abs() < 0.01, "{probe:?}");
        assert!(
            probe.lateness_p99_us.abs_diff(10_000) <= 10,
            "p99 {}",
            probe.lateness_p99_us
        );
        assert!(
            probe.lateness_p999_us.abs_diff(19_000) <= 20,
            "p99.9 {}",
            probe.lateness_p999_us
        );
        assert_eq!(probe.longest_us / 1_000, 20);
    }

    #[test]
    fn a_quiet_machine_has_no_floor() {
        let mut gaps = gap_histogram();
        // Ten 3 µs interrupts in 100 ms: 0.03 % of instants are late at all.
        gaps.record_n(3_000, 10).unwrap();
        let probe = from_gaps(&gaps, Duration::from_millis(100), None);
        assert_eq!((probe.stalls, probe.lateness_p99_us), (0, 0), "{probe:?}");
        assert!(probe.describe().contains("any core"));
    }

    #[test]
    fn a_real_probe_spins_for_its_length() {
        let started = Instant::now();
        let probe = probe(Duration::from_millis(30), None);
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(probe.probe_ms >= 30, "{probe:?}");
        assert!(probe.lost_pct <= 100.0, "{probe:?}");
        assert!(probe.lateness_p99_us <= probe.longest_us, "{probe:?}");
    }
}
