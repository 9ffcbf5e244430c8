//! The plan: an experiment expanded into ordered cells. Stacks are interleaved inside each
//! (repetition, regime, concurrency) group so that drift hits all stacks alike.

use bench_core::{HandshakeVariant, PayloadProfile};

use crate::experiment::{Experiment, Regime};

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

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The variant's name (`default` without variants) and its effective settings.
    pub variant: String,
    pub exp: std::sync::Arc<Experiment>,
    pub stage: Stage,
    pub stack: String,
    pub regime: Regime,
    pub concurrency: u32,
    pub repetition: u32,
    pub payload: PayloadProfile,
    pub plaintext: bool,
    pub handshake: HandshakeVariant,
    pub connections: u32,
    /// Measured request budget (for a baseline: an upper bound; its duration ends it).
    pub requests: u64,
    pub warmup_requests: u64,
    /// Time-bound stages (the baseline) run this long.
    pub duration_s: Option<u64>,
    /// Open-loop arrival rate, requests per second.
    pub rate: Option<f64>,
}

impl Cell {
    /// Stable identity of a cell within a run, used by the CSVs and by resume.
    pub fn key(&self) -> String {
        let key = match self.stage {
            Stage::Baseline => format!(
                "{}/{}/baseline/r{}",
                self.stack, self.regime, self.repetition
            ),
            Stage::Stress => format!(
                "{}/{}/c{}/r{}",
                self.stack, self.regime, self.concurrency, self.repetition
            ),
        };
        if self.variant == "default" {
            key
        } else {
            format!("{}/{key}", self.variant)
        }
    }
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
        exp: exp.clone(),
        stage,
        stack: stack.clone(),
        regime,
        concurrency,
        repetition,
        payload: exp.payload,
        plaintext: exp.plaintext,
        handshake: exp.handshake,
        connections: if regime == Regime::Reuse && stage == Stage::Stress {
            exp.connections
        } else {
            0
        },
        requests: match (stage, exp.duration_seconds) {
            (Stage::Stress, None) => exp.requests(regime),
            // Bounded by time; the budget only guarantees that the loop ends.
            _ => u64::MAX / 4,
        },
        warmup_requests: match (stage, exp.duration_seconds) {
            (Stage::Stress, None) => exp.warmup_requests(regime),
            _ => 0,
        },
        duration_s: match stage {
            Stage::Baseline => Some(exp.baseline_seconds),
            Stage::Stress => exp.duration_seconds,
        },
        rate: match stage {
            Stage::Baseline => None,
            Stage::Stress => exp.rate,
        },
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
            for stack in &exp.stacks {
                cells.push(cell(
                    Stage::Stress,
                    stack,
                    *regime,
                    *concurrency,
                    repetition,
                ));
            }
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_cell_once_interleaving_stacks() {
        let exp = Experiment {
            repetitions: 2,
            ..Experiment::default()
        };
        let cells = plan(&exp);
        assert_eq!(cells.len(), (4 * 2 * 5 + 4 * 2) * 2);
        assert_eq!(cells[0].stage, Stage::Baseline);
        assert_eq!(cells[0].concurrency, 1);
        assert_eq!(cells[0].duration_s, Some(10));
        let mut keys: Vec<_> = cells.iter().map(Cell::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), cells.len());
        let first_four: Vec<_> = cells[..4].iter().map(|c| c.stack.as_str()).collect();
        assert_eq!(first_four, ["h1", "h2", "h3", "grpc"]);
    }
}
