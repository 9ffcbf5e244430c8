//! The plan: an experiment expanded into ordered cells. Stacks are interleaved inside each
//! (repetition, regime, concurrency) group so that drift hits all stacks alike.

use bench_core::{HandshakeVariant, PayloadProfile};

use crate::experiment::{Experiment, Regime};

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub stack: String,
    pub regime: Regime,
    pub concurrency: u32,
    pub repetition: u32,
    pub payload: PayloadProfile,
    pub plaintext: bool,
    pub handshake: HandshakeVariant,
    pub connections: u32,
    pub requests: u64,
    pub warmup_requests: u64,
}

impl Cell {
    /// Stable identity of a cell within a run, used by the CSVs and by resume.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/c{}/r{}",
            self.stack, self.regime, self.concurrency, self.repetition
        )
    }
}

pub fn plan(exp: &Experiment) -> Vec<Cell> {
    let mut cells = Vec::new();
    for repetition in 1..=exp.repetitions {
        for regime in &exp.regimes {
            for concurrency in &exp.concurrency {
                for stack in &exp.stacks {
                    cells.push(Cell {
                        stack: stack.clone(),
                        regime: *regime,
                        concurrency: *concurrency,
                        repetition,
                        payload: exp.payload,
                        plaintext: exp.plaintext,
                        handshake: exp.handshake,
                        connections: if *regime == Regime::Reuse {
                            exp.connections
                        } else {
                            0
                        },
                        requests: exp.requests(*regime),
                        warmup_requests: exp.warmup_requests(*regime),
                    });
                }
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
        assert_eq!(cells.len(), 4 * 2 * 5 * 2);
        let mut keys: Vec<_> = cells.iter().map(Cell::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), cells.len());
        let first_four: Vec<_> = cells[..4].iter().map(|c| c.stack.as_str()).collect();
        assert_eq!(first_four, ["h1", "h2", "h3", "grpc"]);
    }
}
