//! The plan: an experiment expanded into ordered cells. Stacks are interleaved inside each
//! (repetition, regime, concurrency) group so that drift hits all stacks alike; with a random
//! cell order ([`CellOrder`], the default for a run) each repetition's cells are then shuffled,
//! as far as cells do not depend on one another ([`shuffle_repetition`]).

use bench_core::{HandshakeVariant, PayloadProfile};
use results::rows::rate_key;

use crate::settings::{CellOrder, Experiment, HostNamespaces, Regime};

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
        stacks::find(&self.stack)
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

pub fn plan(base: &Experiment) -> Vec<Cell> {
    let variants: Vec<(String, std::sync::Arc<Experiment>)> = base
        .variant_experiments()
        .into_iter()
        .map(|(name, e)| (name, std::sync::Arc::new(e)))
        .collect();
    // Without a seed (a run draws one as it starts; `runner check` and older manifests have
    // none) the order is the planned one.
    let seed = match base.cell_order {
        CellOrder::Random => base.cell_order_seed,
        CellOrder::Fixed => None,
    };
    let mut cells = Vec::new();
    for repetition in 1..=base.repetitions {
        let mut groups: Vec<Vec<Cell>> = variants
            .iter()
            .map(|(variant, exp)| plan_variant(variant, exp, repetition))
            .collect();
        if let Some(seed) = seed {
            shuffle_repetition(&mut groups, &mut Shuffle::new(seed, repetition));
        }
        cells.extend(groups.into_iter().flatten());
    }
    cells
}

/// Shuffles one repetition's cells, given per variant in the planned order. What is kept, and
/// why:
/// - each variant's cells stay together (the order of the variants is shuffled): the `hosts`
///   executor keeps its namespaces while consecutive cells share a lifetime
///   (`host_namespaces`), so interleaving variants would remake them at every change;
/// - a variant's baselines come first (their order shuffled): a baseline measures one worker
///   without load, before the variant's stress cells leave sockets and memory behind;
/// - with `host_namespaces = "sweep"` the sweep's levels (regime, concurrency, rate) keep their
///   ascending order, since TIME_WAIT is meant to accumulate from level to level; only the
///   stacks within each level are shuffled. Otherwise the stress cells are shuffled freely.
pub fn shuffle_repetition(groups: &mut [Vec<Cell>], rng: &mut Shuffle) {
    rng.shuffle(groups);
    for group in groups.iter_mut() {
        let baselines = group
            .iter()
            .take_while(|c| c.stage == Stage::Baseline)
            .count();
        let (base, stress) = group.split_at_mut(baselines);
        rng.shuffle(base);
        let sweep = stress
            .first()
            .is_some_and(|c| c.settings.host_namespaces == HostNamespaces::Sweep);
        if !sweep {
            rng.shuffle(stress);
            continue;
        }
        let level = |c: &Cell| (c.regime, c.concurrency, c.swept_rate_rps.map(f64::to_bits));
        let mut start = 0;
        while start < stress.len() {
            let end = start
                + stress[start..]
                    .iter()
                    .take_while(|c| level(c) == level(&stress[start]))
                    .count();
            rng.shuffle(&mut stress[start..end]);
            start = end;
        }
    }
}

/// The cell order's generator: SplitMix64 from (seed, repetition), so that each repetition's
/// order follows from the seed alone, whatever the other repetitions hold. Written out here
/// rather than taken from a crate, so that a seed gives the same order in every version.
pub struct Shuffle(u64);

impl Shuffle {
    pub fn new(seed: u64, repetition: u32) -> Self {
        Shuffle(seed ^ u64::from(repetition).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates; an index below `n` by multiply-shift (no modulo bias worth the name).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = ((u128::from(self.next_u64()) * (i as u128 + 1)) >> 64) as usize;
            items.swap(i, j);
        }
    }
}

/// A seed for a run's cell order, drawn as the run starts (the clock and the process id,
/// mixed: a cell order needs no secrecy).
pub fn draw_cell_order_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut s = Shuffle(nanos ^ (u64::from(std::process::id()) << 32));
    s.next_u64()
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
/// The goodput assumed for bulk objects on an unshaped link, in bits per second; on a shaped
/// link the estimate takes the shaped rate.
pub const ASSUMED_BULK_BITS_PER_S: f64 = 1e9;

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
/// at `max_cell_seconds` per phase, and to the link's rate (or [`ASSUMED_BULK_BITS_PER_S`]) for
/// bulk objects; plus a fixed overhead per cell.
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
        let link = cell.settings.netem.as_ref().and_then(|n| n.parsed().ok());
        let rps = match cell.rate() {
            Some(rate) => rate,
            None if rtt_s > 0.0 => assumed.min(f64::from(cell.concurrency) / (round_trips * rtt_s)),
            None => assumed,
        };
        // A bulk object takes its bytes at the link's rate, shared by every worker.
        let object_bits = cell
            .settings
            .object
            .as_ref()
            .and_then(|o| o.parsed().ok())
            .map(|o| o.bytes as f64 * 8.0);
        let rps = match object_bits {
            Some(bits) if bits > 0.0 => {
                let link_bits_per_s = link
                    .and_then(|n| n.rate_bits_per_s())
                    .unwrap_or(ASSUMED_BULK_BITS_PER_S);
                rps.min(link_bits_per_s / bits)
            }
            _ => rps,
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
            ..exp.clone()
        };
        let e = estimate(&plan(&slow));
        assert!((e.stress_s - 30.0).abs() < 1e-9, "{e:?}");
        assert_eq!(human_duration(95.0), "1 min 35 s");
        // Five 8 MiB objects over 10 Mbit/s take their bytes' time, not the item rate's.
        let bulk = Experiment {
            regimes: vec![Regime::Reuse],
            requests_reuse: 5,
            netem: Some("rate=10mbit".into()),
            object: Some("download:8MiB".into()),
            ..exp
        };
        let e = estimate(&plan(&bulk));
        let expected = 5.0 * 8.0 * 1024.0 * 1024.0 * 8.0 / 10e6;
        assert!((e.stress_s - expected).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn plan_covers_every_cell_once_interleaving_stacks() {
        let exp = Experiment {
            repetitions: 2,
            ..Experiment::default()
        };
        let cells = plan(&exp);
        let stacks = stacks::names();
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

    fn keys(cells: &[Cell]) -> Vec<String> {
        cells.iter().map(Cell::key).collect()
    }

    fn seeded(seed: Option<u64>) -> Experiment {
        Experiment {
            repetitions: 2,
            cell_order_seed: seed,
            ..Experiment::default()
        }
    }

    #[test]
    fn a_seed_orders_each_repetition_alike_every_time_and_another_seed_otherwise() {
        let fixed = keys(&plan(&seeded(None)));
        let a = keys(&plan(&seeded(Some(7))));
        assert_eq!(a, keys(&plan(&seeded(Some(7)))), "same seed, same order");
        assert_ne!(a, fixed, "a seed shuffles");
        assert_ne!(
            a,
            keys(&plan(&seeded(Some(8)))),
            "another seed, another order"
        );
        let mut sorted = a.clone();
        sorted.sort();
        let mut all = fixed.clone();
        all.sort();
        assert_eq!(sorted, all, "the same cells, each once");
        // Each repetition is shuffled on its own, inside its own block; baselines first.
        let half = a.len() / 2;
        assert!(a[..half].iter().all(|k| k.ends_with("/r1")));
        let order = |rep: &[String]| -> Vec<String> {
            rep.iter()
                .map(|k| k.trim_end_matches(char::is_numeric).to_string())
                .collect()
        };
        assert_ne!(order(&a[..half]), order(&a[half..]), "repetitions differ");
        let cells = plan(&seeded(Some(7)));
        let baselines = 2 * stacks::names().len();
        assert!(cells[..baselines]
            .iter()
            .all(|c| c.stage == Stage::Baseline));
        // cell_order = fixed plans the planned order; validation refuses a seed beside it.
        let fixed_order = Experiment {
            cell_order: CellOrder::Fixed,
            ..seeded(Some(7))
        };
        assert_eq!(keys(&plan(&fixed_order)), fixed);
        let names = stacks::names();
        let refused = fixed_order.validate(&names).unwrap_err().to_string();
        assert!(refused.contains("cell_order_seed"), "{refused}");
        let random = Experiment {
            cell_order: CellOrder::Random,
            ..seeded(Some(7))
        };
        assert!(random.validate(&names).is_ok());
    }

    #[test]
    fn a_kept_sweep_keeps_its_levels_ascending_and_variants_stay_together() {
        let text = r#"
stacks = ["h1", "h2", "h3", "grpc"]
regimes = ["new-conn"]
concurrency = [2, 4, 8]
baseline_seconds = 0
repetitions = 3
cell_order_seed = 11
[[variants]]
name = "kept"
host_namespaces = "sweep"
[[variants]]
name = "fresh"
host_namespaces = "cell"
"#;
        let knobs: crate::settings::Knobs = toml::from_str(text).unwrap();
        let exp = crate::settings::resolve(Some(&knobs), &crate::settings::Knobs::default());
        let cells = plan(&exp);
        let mut kept_stacks = std::collections::BTreeSet::new();
        let mut fresh_levels = std::collections::BTreeSet::new();
        for rep in cells.chunks(24) {
            // Each variant's 12 cells together, in either order.
            assert!(rep[..12].iter().all(|c| c.variant == rep[0].variant));
            assert!(rep[12..].iter().all(|c| c.variant == rep[12].variant));
            for block in [&rep[..12], &rep[12..]] {
                let levels: Vec<u32> = block.iter().map(|c| c.concurrency).collect();
                if block[0].variant == "kept" {
                    let mut ascending = levels.clone();
                    ascending.sort();
                    assert_eq!(levels, ascending, "a sweep's levels ascend");
                    kept_stacks.insert(block.iter().map(|c| c.stack.clone()).collect::<Vec<_>>());
                } else {
                    fresh_levels.insert(levels);
                }
            }
        }
        assert!(kept_stacks.len() > 1, "the sweep's stacks are shuffled");
        assert!(
            fresh_levels
                .iter()
                .any(|l| l.windows(2).any(|w| w[0] > w[1])),
            "other variants' levels are shuffled"
        );
    }

    #[test]
    fn the_shuffle_is_the_same_in_every_version() {
        // SplitMix64 written out: these orders must never change, or a recorded seed would
        // replay another order.
        let mut items: Vec<u32> = (0..8).collect();
        Shuffle::new(42, 1).shuffle(&mut items);
        assert_eq!(items, GOLDEN);
    }
    const GOLDEN: [u32; 8] = [5, 3, 4, 2, 0, 7, 1, 6];
}
