//! Server processing time per item request, one definition for every stack: real services do
//! work per request, and protocol differences shrink as that work grows.
//!
//! A request's time is a wait (a sleep: the thread serves other requests meanwhile, like a call
//! to a database), fixed or drawn from an exponential distribution, plus optional busy CPU work
//! (a spin on the handler's thread). The draw is a pure function of the seed and the request
//! id, so a run's service times do not depend on which request the scheduler serves first.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// The seed used unless the experiment sets `service_time_seed`.
pub const DEFAULT_SERVICE_TIME_SEED: u64 = 1;

/// Longest accepted wait (fixed or mean) and CPU time, so a typo cannot stall a run for hours.
pub const MAX_SERVICE: Duration = Duration::from_secs(60);

/// How a request's wait is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceTime {
    /// Every request waits this long.
    Fixed(Duration),
    /// Exponentially distributed waits with this mean (memoryless service, as in M/M/c).
    Exponential(Duration),
}

impl ServiceTime {
    /// The configured value: the fixed wait or the mean.
    pub fn mean(self) -> Duration {
        match self {
            ServiceTime::Fixed(d) | ServiceTime::Exponential(d) => d,
        }
    }
}

/// `<number><unit>` with unit `ns`, `us`, `ms` or `s`, e.g. `2ms`, `500us`, `0.25ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let units = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
    let Some((number, ns_per_unit)) = units
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
    else {
        return Err(format!("'{text}' needs a unit: us, ms or s"));
    };
    let ns = number
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| (n * ns_per_unit).round())
        .ok_or_else(|| format!("'{text}' is not a duration like 2ms or 500us"))?;
    if ns > MAX_SERVICE.as_nanos() as f64 {
        return Err(format!(
            "'{text}' is longer than {}s",
            MAX_SERVICE.as_secs()
        ));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// The shortest of `2ms`, `500us`, `1500ns` that states `d` exactly.
fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{}ns", ns)
    }
}

impl FromStr for ServiceTime {
    type Err = String;

    /// `fixed:<duration>` or `exp:<mean>`; zero is refused (leave the knob unset for none).
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, value) = s.split_once(':').ok_or_else(|| {
            format!("'{s}' must be fixed:<duration> or exp:<mean>, e.g. fixed:2ms")
        })?;
        let d = parse_duration(value.trim())?;
        if d.is_zero() {
            return Err(format!("'{s}' must be positive (leave it unset for none)"));
        }
        match kind.trim() {
            "fixed" => Ok(ServiceTime::Fixed(d)),
            "exp" => Ok(ServiceTime::Exponential(d)),
            other => Err(format!(
                "unknown service time distribution '{other}', expected fixed or exp"
            )),
        }
    }
}

impl fmt::Display for ServiceTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceTime::Fixed(d) => write!(f, "fixed:{}", format_duration(*d)),
            ServiceTime::Exponential(d) => write!(f, "exp:{}", format_duration(*d)),
        }
    }
}

/// What each item request costs the server; the default costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceTimeSpec {
    /// The wait; `None` answers at once.
    pub time: Option<ServiceTime>,
    /// Seed of the exponential draws.
    pub seed: u64,
    /// Busy CPU work on the handler's thread before the wait.
    pub cpu: Duration,
}

impl Default for ServiceTimeSpec {
    fn default() -> Self {
        ServiceTimeSpec {
            time: None,
            seed: DEFAULT_SERVICE_TIME_SEED,
            cpu: Duration::ZERO,
        }
    }
}

/// splitmix64's output function: a cheap, well-mixed bijection of 64-bit values.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl ServiceTimeSpec {
    /// Whether requests cost anything (servers skip the clock otherwise).
    pub fn is_none(&self) -> bool {
        self.time.is_none() && self.cpu.is_zero()
    }

    /// The wait of request `id`: a function of the seed and the id alone.
    pub fn wait(&self, id: u64) -> Duration {
        match self.time {
            None => Duration::ZERO,
            Some(ServiceTime::Fixed(d)) => d,
            Some(ServiceTime::Exponential(mean)) => {
                let bits = splitmix64(self.seed ^ splitmix64(id));
                // 53 random bits → u in (0, 1], so -ln(u) is finite (at most ≈ 36.7).
                let u = ((bits >> 11) + 1) as f64 / (1u64 << 53) as f64;
                mean.mul_f64(-u.ln())
            }
        }
    }

    /// Runs the CPU part of request `id` on the calling thread (a spin, not a sleep) and
    /// returns the wait still due, which the caller sleeps together with any injected delay.
    pub fn begin(&self, id: u64) -> Duration {
        if self.is_none() {
            return Duration::ZERO;
        }
        if !self.cpu.is_zero() {
            spin_cpu(self.cpu);
        }
        self.wait(id)
    }
}

/// Spins until the calling thread has used `cpu` of CPU time (its own CPU clock, not the
/// wall clock), so a request costs the same CPU however often the thread is pre-empted.
fn spin_cpu(cpu: Duration) {
    let thread_cpu = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(Duration::from)
            .ok()
    };
    let Some(start) = thread_cpu() else {
        // No thread CPU clock: the wall clock is the nearest bound.
        let start = Instant::now();
        while start.elapsed() < cpu {
            std::hint::spin_loop();
        }
        return;
    };
    while thread_cpu().is_some_and(|now| now.saturating_sub(start) < cpu) {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_print_and_reject() {
        let t: ServiceTime = "fixed:2ms".parse().unwrap();
        assert_eq!(t, ServiceTime::Fixed(Duration::from_millis(2)));
        assert_eq!(t.to_string(), "fixed:2ms");
        let t: ServiceTime = "exp:500us".parse().unwrap();
        assert_eq!(t, ServiceTime::Exponential(Duration::from_micros(500)));
        assert_eq!(t.to_string(), "exp:500us");
        assert_eq!(
            "exp:0.25ms".parse::<ServiceTime>().unwrap().to_string(),
            "exp:250us"
        );
        // What the runner hands its servers parses back to the same value.
        for text in ["exp:0.0015ms", "fixed:0.3ms", "fixed:1.25s", "exp:7us"] {
            let t: ServiceTime = text.parse().unwrap();
            assert_eq!(t.to_string().parse::<ServiceTime>().unwrap(), t, "{text}");
        }
        for bad in [
            "2ms",
            "fixed:2",
            "fixed:-1ms",
            "fixed:0ms",
            "normal:2ms",
            "exp:xms",
            "fixed:2h",
            "fixed:61s",
        ] {
            assert!(bad.parse::<ServiceTime>().is_err(), "{bad}");
        }
    }

    #[test]
    fn exponential_draws_have_the_mean_and_follow_the_seed() {
        let spec = |seed| ServiceTimeSpec {
            time: Some(ServiceTime::Exponential(Duration::from_millis(2))),
            seed,
            cpu: Duration::ZERO,
        };
        let a = spec(7);
        let n = 200_000u64;
        let draws: Vec<f64> = (0..n).map(|id| a.wait(id).as_secs_f64()).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        // The mean's standard error is 2 ms / √n ≈ 4.5 µs; 2 % is over eight of them.
        assert!((mean - 0.002).abs() < 0.002 * 0.02, "mean {mean}");
        // Exponential: the median is ln 2 × the mean.
        let below = draws.iter().filter(|d| **d < 0.002 * 2f64.ln()).count();
        assert!((below as f64 / n as f64 - 0.5).abs() < 0.01, "{below}");
        // Reproducible from the seed, whatever order requests are served in; another seed differs.
        assert!((0..1000).rev().all(|id| a.wait(id) == spec(7).wait(id)));
        assert!(
            (0..1000)
                .filter(|id| a.wait(*id) != spec(8).wait(*id))
                .count()
                > 990
        );
    }

    #[test]
    fn fixed_and_cpu_work_cost_what_they_say() {
        assert_eq!(ServiceTimeSpec::default().begin(3), Duration::ZERO);
        let spec = ServiceTimeSpec {
            time: Some(ServiceTime::Fixed(Duration::from_millis(3))),
            seed: 1,
            cpu: Duration::from_millis(5),
        };
        let start = Instant::now();
        assert_eq!(spec.begin(42), Duration::from_millis(3));
        assert!(start.elapsed() >= Duration::from_millis(5));
    }
}
