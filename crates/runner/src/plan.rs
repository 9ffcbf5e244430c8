//! The plan: an experiment expanded into ordered cells. Stacks are interleaved inside each
//! (repetition, regime, concurrency) group so that drift hits all stacks alike.

use bench_core::{HandshakeVariant, PayloadProfile};

use crate::settings::{Experiment, Regime};

/// What a cell is for in the report: seed 000's single-user baseline or a stress stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// One worker for a fixed time, no load.
    Baseline,
    /// `concurrency` workers for a request budget.
    Stress,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Baseline => "baseline",
            Stage::Stress => "stress",
        }
    }
}

/// One cell: where it sits in the plan, and the resolved settings of its variant. Everything
/// else about it derives from those two.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The variant's name (`default` without variants).
    pub variant: String,
    pub stage: Stage,
    pub stack: String,
    pub regime: Regime,
    pub concurrency: u32,
    pub repetition: u32,
    /// A rate sweep's (or a capacity probe's) offered rate for this cell, in requests per
    /// second; `None` takes the variant's `rate` (closed loop without one).
    pub swept_rate_rps: Option<f64>,
    /// The variant's resolved settings.
    pub settings: std::sync::Arc<Experiment>,
}

impl Cell {
    /// Stable identity of a cell within a run, used by the CSVs and by resume.
    pub fn key(&self) -> String {
        let key = match self.stage {
            Stage::Baseline => format!(
                "{}/{}/baseline/r{}",
                self.stack, self.regime, self.repetition
            ),
            Stage::Stress => match self.swept_rate_rps {
                Some(rate) => format!(
                    "{}/{}/c{}/q{}/r{}",
                    self.stack,
                    self.regime,
                    self.concurrency,
                    rate_key(rate),
                    self.repetition
                ),
                None => format!(
                    "{}/{}/c{}/r{}",
                    self.stack, self.regime, self.concurrency, self.repetition
                ),
            },
        };
        if self.variant == "default" {
            key
        } else {
            format!("{}/{key}", self.variant)
        }
    }

    pub fn payload(&self) -> PayloadProfile {
        self.settings.payload
    }

    pub fn plaintext(&self) -> bool {
        self.settings.plaintext
    }

    /// The server speaks plaintext: asked for, or behind a proxy that reaches it on its
    /// loopback (an edge or sidecar path).
    pub fn server_plaintext(&self) -> bool {
        self.settings.plaintext || self.settings.path != crate::settings::MeshPath::Direct
    }

    /// The stack whose server the cell starts: its own, or on an edge that terminates QUIC
    /// the TCP stack the edge forwards to ([`crate::settings::mesh::Carried::server_stack`]).
    pub fn server_stack(&self) -> &str {
        let e = &self.settings;
        if e.path == crate::settings::MeshPath::Direct {
            return &self.stack;
        }
        crate::registry::find(&self.stack)
            .and_then(|s| crate::settings::mesh::carries(e.proxy, e.path, s).ok())
            .map_or(&self.stack, |c| c.server_stack)
    }

    /// The load generator speaks plaintext: asked for, or to its own sidecar on loopback.
    pub fn client_plaintext(&self) -> bool {
        self.settings.plaintext || self.settings.path == crate::settings::MeshPath::Sidecar
    }

    pub fn handshake(&self) -> HandshakeVariant {
        self.settings.handshake
    }

    /// Connections shared by the workers of a reuse stress cell; 0 = one per worker.
    pub fn connections(&self) -> u32 {
        if self.regime == Regime::Reuse && self.stage == Stage::Stress {
            self.settings.connections
        } else {
            0
        }
    }

    /// Measured request budget (for a time-bound cell: an upper bound; its duration ends it).
    pub fn requests(&self) -> u64 {
        match (self.stage, self.settings.duration_seconds) {
            (Stage::Stress, None) => self.settings.requests(self.regime),
            // Bounded by time; the budget only guarantees that the loop ends.
            _ => u64::MAX / 4,
        }
    }

    pub fn warmup_requests(&self) -> u64 {
        match (self.stage, self.settings.duration_seconds) {
            (Stage::Stress, None) => self.settings.warmup_requests(self.regime),
            _ => 0,
        }
    }

    /// Time-bound stages (the baseline, or soak stress cells) run this long.
    pub fn duration_s(&self) -> Option<u64> {
        match self.stage {
            Stage::Baseline => Some(self.settings.baseline_seconds),
            Stage::Stress => self.settings.duration_seconds,
        }
    }

    /// Open-loop arrival rate, requests per second (closed loop: `None`).
    pub fn rate(&self) -> Option<f64> {
        match self.stage {
            Stage::Baseline => None,
            Stage::Stress => self.swept_rate_rps.or(self.settings.rate),
        }
    }
}

/// A rate as a cell key writes it: the shortest decimal that reads back as the same number
/// (`2000`, `1414.25`).
pub fn rate_key(rate_rps: f64) -> String {
    rate_rps.to_string()
}

pub fn plan(base: &Experiment) -> Vec<Cell> {
    let variants: Vec<(String, std::sync::Arc<Experiment>)> = base
        .variant_experiments()
        .into_iter()
        .map(|(name, e)| (name, std::sync::Arc::new(e)))
        .collect();
    let mut cells = Vec::new();
    for repetition in 1..=base.repetitions {
        for (variant, exp) in &variants {
            cells.extend(plan_variant(variant, exp, repetition));
        }
    }
    cells
}

fn plan_variant(variant: &str, exp: &std::sync::Arc<Experiment>, repetition: u32) -> Vec<Cell> {
    let cell = |stage, stack: &String, regime: Regime, concurrency, repetition| Cell {
        variant: variant.to_string(),
        settings: exp.clone(),
        stage,
        stack: stack.clone(),
        regime,
        concurrency,
        repetition,
        swept_rate_rps: None,
    };
    // A rate sweep's points, each a cell; without one, one point at the variant's rate.
    let rates: Vec<Option<f64>> = match &exp.rates {
        Some(sweep) => sweep.value().rates_rps.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut cells = Vec::new();
    if exp.baseline_seconds > 0 {
        for regime in &exp.regimes {
            for stack in &exp.stacks {
                cells.push(cell(Stage::Baseline, stack, *regime, 1, repetition));
            }
        }
    }
    for regime in &exp.regimes {
        for concurrency in &exp.concurrency {
            for rate in &rates {
                for stack in &exp.stacks {
                    cells.push(Cell {
                        swept_rate_rps: *rate,
                        ..cell(Stage::Stress, stack, *regime, *concurrency, repetition)
                    });
                }
            }
        }
    }
    cells
}

/// Closed-loop throughput `runner check` assumes when it estimates a run's duration: well
/// below what the slowest stack reaches on a 2-core machine (results/reference/summary.csv:
/// its slowest stress cells, HTTP/3 at 500 workers, average 68.6k req/s reuse and 2.3k
/// new-conn), so that the estimate is an upper bound rather than a hope.
pub const ASSUMED_RPS_REUSE: f64 = 5_000.0;
pub const ASSUMED_RPS_NEW_CONN: f64 = 500.0;
/// Starting a cell's server and load generator, and stopping them.
pub const ASSUMED_CELL_OVERHEAD_S: f64 = 1.0;

/// How long a plan should take, split as `runner check` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    pub baseline_cells: usize,
    pub baseline_s: f64,
    pub stress_cells: usize,
    pub stress_s: f64,
    pub overhead_s: f64,
}

impl Estimate {
    pub fn total_s(&self) -> f64 {
        self.baseline_s + self.stress_s + self.overhead_s
    }
}

/// The estimated duration of `cells`: time-bound cells take their time; budgeted ones their
/// requests (warm-up included) at the open-loop rate, or else at the assumed closed-loop
/// rate, lowered under emulated RTT to `concurrency / (round trips × RTT)` (a request is one
/// round trip on an open connection, about three with a new TCP + TLS connection) and capped
/// at `max_cell_seconds` per phase; plus a fixed overhead per cell.
pub fn estimate(cells: &[Cell]) -> Estimate {
    let mut e = Estimate::default();
    for cell in cells {
        e.overhead_s += ASSUMED_CELL_OVERHEAD_S + cell.settings.cell_pause_ms as f64 / 1000.0;
        if let Some(d) = cell.duration_s() {
            match cell.stage {
                Stage::Baseline => {
                    e.baseline_cells += 1;
                    e.baseline_s += d as f64;
                }
                Stage::Stress => {
                    e.stress_cells += 1;
                    e.stress_s += d as f64;
                }
            }
            continue;
        }
        let (assumed, round_trips) = match cell.regime {
            Regime::Reuse => (ASSUMED_RPS_REUSE, 1.0),
            Regime::NewConn => (ASSUMED_RPS_NEW_CONN, 3.0),
        };
        let rtt_s = cell
            .settings
            .netem
            .as_ref()
            .and_then(|n| n.parsed().ok())
            .map_or(0.0, |n| 2.0 * n.delay_ms / 1000.0);
        let rps = match cell.rate() {
            Some(rate) => rate,
            None if rtt_s > 0.0 => assumed.min(f64::from(cell.concurrency) / (round_trips * rtt_s)),
            None => assumed,
        };
        let cap_s = cell.settings.max_cell_seconds as f64;
        let phase = |requests: u64| (requests as f64 / rps).min(cap_s);
        e.stress_cells += 1;
        e.stress_s += phase(cell.requests()) + phase(cell.warmup_requests());
    }
    e
}

/// `95` → `1 min 35 s`; `4000` → `1 h 6 min`.
pub fn human_duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_counts_baselines_budgets_and_emulated_round_trips() {
        let exp = Experiment {
            stacks: vec!["h1".into()],
            regimes: vec![Regime::NewConn],
            concurrency: vec![10],
            requests_new_conn: 1_000,
            warmup_fraction: 0.0,
            baseline_seconds: 10,
            ..Experiment::default()
        };
        let e = estimate(&plan(&exp));
        assert_eq!((e.baseline_cells, e.stress_cells), (1, 1));
        assert_eq!(e.baseline_s, 10.0);
        assert_eq!(e.stress_s, 1_000.0 / ASSUMED_RPS_NEW_CONN);
        assert_eq!(e.total_s(), 10.0 + 2.0 + 2.0 * ASSUMED_CELL_OVERHEAD_S);
        // 10 workers over a 100 ms RTT, three round trips a request: ≈ 33 req/s.
        let paused = Experiment {
            cell_pause_ms: 1_500,
            ..exp.clone()
        };
        let e_paused = estimate(&plan(&paused));
        assert_eq!(e_paused.total_s(), e.total_s() + 2.0 * 1.5);
        let slow = Experiment {
            netem: Some("rtt=100ms".into()),
            ..exp
        };
        let e = estimate(&plan(&slow));
        assert!((e.stress_s - 30.0).abs() < 1e-9, "{e:?}");
        assert_eq!(human_duration(95.0), "1 min 35 s");
    }

    #[test]
    fn plan_covers_every_cell_once_interleaving_stacks() {
        let exp = Experiment {
            repetitions: 2,
            ..Experiment::default()
        };
        let cells = plan(&exp);
        let stacks = crate::registry::names();
        let n = stacks.len();
        assert_eq!(cells.len(), (n * 2 * 5 + n * 2) * 2);
        assert_eq!(cells[0].stage, Stage::Baseline);
        assert_eq!(cells[0].concurrency, 1);
        assert_eq!(cells[0].duration_s(), Some(10));
        let mut keys: Vec<_> = cells.iter().map(Cell::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), cells.len());
        let first_group: Vec<_> = cells[..n].iter().map(|c| c.stack.as_str()).collect();
        assert_eq!(first_group, stacks, "stacks interleave in registry order");
    }

    #[test]
    fn a_rate_sweep_is_one_open_loop_cell_per_rate_with_its_rate_in_the_key() {
        let exp = Experiment {
            stacks: vec!["h1".into(), "h2".into()],
            regimes: vec![Regime::Reuse],
            concurrency: vec![10],
            baseline_seconds: 0,
            repetitions: 2,
            rates: Some("100..400x2".into()),
            ..Experiment::default()
        };
        let cells = plan(&exp);
        assert_eq!(cells.len(), 2 * 3 * 2);
        let keys: Vec<String> = cells[..6].iter().map(Cell::key).collect();
        assert_eq!(
            keys,
            [
                "h1/reuse/c10/q100/r1",
                "h2/reuse/c10/q100/r1",
                "h1/reuse/c10/q200/r1",
                "h2/reuse/c10/q200/r1",
                "h1/reuse/c10/q400/r1",
                "h2/reuse/c10/q400/r1"
            ]
        );
        assert_eq!(cells[2].rate(), Some(200.0));
        assert_eq!(cells[11].key(), "h2/reuse/c10/q400/r2");
        // Without a sweep, keys are as before.
        let plain = plan(&Experiment {
            rates: None,
            rate: Some(50.0),
            ..exp
        });
        assert_eq!(plain[0].key(), "h1/reuse/c10/r1");
        assert_eq!(plain[0].rate(), Some(50.0));
        assert_eq!(rate_key(1414.25), "1414.25");
    }
}
