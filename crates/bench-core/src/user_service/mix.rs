//! A request mix: several named requests with weights, and which one request `seq` sends.
//! The choice is a pure function of (seed, seq), so every stack, run and load-generator
//! shard sends the same sequence of names, as `{{id}}` does with its ids.

use serde::{Deserialize, Serialize};

/// Added to the ids' seed so that the mix's draws are not the random id order's draws.
const MIX_SALT: u64 = 0x6D69_785F_6D69_7821;

/// The names and weights of a mix, compiled for drawing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMix {
    pub seed: u64,
    /// In the file's order; [`RequestMix::pick`] returns an index into it.
    pub names: Vec<String>,
    /// Running sums of the weights: request `i` owns draws in `[cumulative[i-1], cumulative[i])`.
    cumulative: Vec<u64>,
}

impl RequestMix {
    /// A mix of `(name, weight)` entries; an error names the bad entry (empty or repeated
    /// name, weight 0).
    pub fn new(seed: u64, entries: &[(&str, u32)], key: &str) -> Result<RequestMix, String> {
        if entries.is_empty() {
            return Err(format!("{key}: give at least one request"));
        }
        let mut names: Vec<String> = Vec::with_capacity(entries.len());
        let mut cumulative = Vec::with_capacity(entries.len());
        let mut sum = 0u64;
        for (name, weight) in entries {
            if name.trim().is_empty() {
                return Err(format!("{key}: every request needs a name"));
            }
            if names.iter().any(|n| n == name) {
                return Err(format!("{key}: the name '{name}' is used twice"));
            }
            if *weight == 0 {
                return Err(format!(
                    "{key}.{name}.weight: must be at least 1 (leave a request out to send none)"
                ));
            }
            sum += u64::from(*weight);
            names.push(name.to_string());
            cumulative.push(sum);
        }
        Ok(RequestMix {
            seed,
            names,
            cumulative,
        })
    }

    /// The mix of a target's named entries, `None` when it has none (the short form).
    pub fn of<'a>(
        seed: u64,
        entries: impl Iterator<Item = (&'a str, u32)>,
        key: &str,
    ) -> Result<Option<RequestMix>, String> {
        let entries: Vec<(&str, u32)> = entries.collect();
        if entries.is_empty() {
            return Ok(None);
        }
        RequestMix::new(seed, &entries, key).map(Some)
    }

    /// The index of the request that request `seq` sends: a draw from `splitmix64(seed, seq)`
    /// mapped onto the total weight.
    pub fn pick(&self, seq: u64) -> usize {
        let total = *self.cumulative.last().expect("a mix has a request");
        let draw = ((u128::from(super::splitmix64(self.seed.wrapping_add(MIX_SALT), seq))
            * u128::from(total))
            >> 64) as u64;
        self.cumulative.partition_point(|&c| c <= draw)
    }

    /// The share of requests `i` gets: its weight over the total.
    pub fn share(&self, i: usize) -> f64 {
        let total = *self.cumulative.last().expect("a mix has a request");
        let below = if i == 0 { 0 } else { self.cumulative[i - 1] };
        (self.cumulative[i] - below) as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_is_a_pure_function_of_seed_and_seq() {
        let entries = [("list", 6), ("get", 3), ("create", 1)];
        let a = RequestMix::new(7, &entries, "m").unwrap();
        let b = RequestMix::new(7, &entries, "m").unwrap();
        let first: Vec<usize> = (0..1000).map(|s| a.pick(s)).collect();
        // Another instance, and the same seqs asked in reverse order, give the same names.
        assert_eq!(first, (0..1000).map(|s| b.pick(s)).collect::<Vec<_>>());
        let mut reversed: Vec<usize> = (0..1000).rev().map(|s| b.pick(s)).collect();
        reversed.reverse();
        assert_eq!(first, reversed);
        let other = RequestMix::new(8, &entries, "m").unwrap();
        assert_ne!(first, (0..1000).map(|s| other.pick(s)).collect::<Vec<_>>());
    }

    #[test]
    fn counts_over_many_seqs_match_the_weights() {
        let entries = [("list", 6), ("get", 3), ("create", 1)];
        let mix = RequestMix::new(1, &entries, "m").unwrap();
        let n = 100_000u64;
        let mut counts = [0u64; 3];
        for s in 0..n {
            counts[mix.pick(s)] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let p = mix.share(i);
            let expected = p * n as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            // Five standard deviations: a correct draw fails this about once in 1.7 million.
            assert!(
                (c as f64 - expected).abs() < 5.0 * sd,
                "{}: {c} of {n}, expected {expected:.0} ± {sd:.0}",
                entries[i].0
            );
        }
        assert_eq!(mix.share(0), 0.6);
    }

    #[test]
    fn a_single_request_always_wins_and_bad_entries_are_named() {
        let one = RequestMix::new(3, &[("only", 5)], "m").unwrap();
        assert!((0..100).all(|s| one.pick(s) == 0));
        let e = RequestMix::new(1, &[("a", 1), ("a", 2)], "targets.rest.requests").unwrap_err();
        assert!(e.contains("'a' is used twice"), "{e}");
        let e = RequestMix::new(1, &[("a", 0)], "targets.rest.requests").unwrap_err();
        assert!(e.contains("targets.rest.requests.a.weight"), "{e}");
        assert!(RequestMix::new(1, &[("", 1)], "m").is_err());
        assert!(RequestMix::new(1, &[], "m").is_err());
    }
}
