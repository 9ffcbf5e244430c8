//! The open-loop rates of a rate sweep (`rates`): a list (`1000,2000,5000`) or a geometric
//! ladder from a start rate to a ceiling (`1000..64000x2`: 1000, 2000, …, 64000; the ceiling
//! itself ends the ladder when a step would pass it).

use std::fmt;
use std::str::FromStr;

/// The most points a sweep may have: each is a cell per stack, regime, level and repetition.
pub const MAX_RATE_POINTS: usize = 200;

/// The offered rates of a sweep, in requests per second, ascending and distinct.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSweep {
    pub rates_rps: Vec<f64>,
}

/// A ladder's points: `start · factor^k` while at most `ceiling`, then `ceiling` itself
/// unless the last step landed on it (within 1e-9 relative).
pub fn ladder(start: f64, ceiling: f64, factor: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut rate = start;
    while rate <= ceiling * (1.0 + 1e-9) && out.len() < MAX_RATE_POINTS {
        out.push(rate);
        rate *= factor;
    }
    if out
        .last()
        .is_some_and(|last| (ceiling - last) / ceiling > 1e-9)
    {
        out.push(ceiling);
    }
    out
}

fn positive(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{}' is not a positive number of requests per second",
            text.trim()
        )),
    }
}

impl FromStr for RateSweep {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut rates = if let Some((start, rest)) = text.split_once("..") {
            let (ceiling, factor) = rest.split_once('x').ok_or_else(|| {
                format!("'{text}': a ladder is START..CEILINGxFACTOR, e.g. 1000..64000x2")
            })?;
            let (start, ceiling) = (positive(start)?, positive(ceiling)?);
            let factor: f64 = factor
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite() && *f > 1.0)
                .ok_or_else(|| format!("'{text}': the factor must be a number above 1"))?;
            if ceiling < start {
                return Err(format!("'{text}': the ceiling is below the start"));
            }
            if (ceiling / start).ln() / factor.ln() > MAX_RATE_POINTS as f64 {
                return Err(format!(
                    "'{text}': more than {MAX_RATE_POINTS} rates; take a larger factor"
                ));
            }
            ladder(start, ceiling, factor)
        } else {
            text.split(',')
                .map(positive)
                .collect::<Result<Vec<_>, _>>()?
        };
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        if rates.is_empty() {
            return Err("no rate given".into());
        }
        if rates.len() > MAX_RATE_POINTS {
            return Err(format!("more than {MAX_RATE_POINTS} rates"));
        }
        Ok(RateSweep { rates_rps: rates })
    }
}

impl fmt::Display for RateSweep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.rates_rps.iter().map(|r| r.to_string()).collect();
        f.write_str(&text.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ladders_parse_to_ascending_rates() {
        let list: RateSweep = "4000, 1000,2000,1000".parse().unwrap();
        assert_eq!(list.rates_rps, [1000.0, 2000.0, 4000.0]);
        let ladder: RateSweep = "1000..8000x2".parse().unwrap();
        assert_eq!(ladder.rates_rps, [1000.0, 2000.0, 4000.0, 8000.0]);
        // The ceiling ends a ladder that would step past it.
        let ladder: RateSweep = "1000..5000x2".parse().unwrap();
        assert_eq!(ladder.rates_rps, [1000.0, 2000.0, 4000.0, 5000.0]);
        let one: RateSweep = "500..500x3".parse().unwrap();
        assert_eq!(one.rates_rps, [500.0]);
        for bad in [
            "",
            "0,100",
            "-5",
            "abc",
            "1000..500x2",
            "1000..8000x1",
            "1000..8000",
            "1..1e300x1.0001",
        ] {
            assert!(bad.parse::<RateSweep>().is_err(), "{bad}");
        }
    }
}
