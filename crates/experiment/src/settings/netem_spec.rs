//! The emulated network of a cell, parsed from the `netem` knob.

/// The emulated network of a cell, parsed from `netem`.
#[derive(Debug, Clone, PartialEq)]
pub struct Netem {
    /// One-way delay on the namespace's loopback (qdisc or userspace emulator); a round trip
    /// crosses it twice.
    pub delay_ms: f64,
    pub jitter_ms: f64,
    pub loss_pct: f64,
    pub rate: Option<String>,
}

impl std::str::FromStr for Netem {
    type Err = String;

    fn from_str(text: &str) -> Result<Netem, String> {
        Netem::parse(text)
    }
}

impl Netem {
    pub fn parse(text: &str) -> Result<Netem, String> {
        let mut netem = Netem {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss_pct: 0.0,
            rate: None,
        };
        let ms = |v: &str| -> Result<f64, String> {
            let n = v
                .strip_suffix("ms")
                .ok_or_else(|| format!("'{v}' needs a unit of ms"))?;
            n.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0)
                .ok_or_else(|| format!("'{v}' is not a duration in ms"))
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not key=value"))?;
            match key {
                "delay" => netem.delay_ms = ms(value)?,
                "rtt" => netem.delay_ms = ms(value)? / 2.0,
                "jitter" => netem.jitter_ms = ms(value)?,
                "loss" => {
                    let pct = value
                        .strip_suffix('%')
                        .ok_or_else(|| format!("loss '{value}' needs a %"))?;
                    netem.loss_pct = pct
                        .parse::<f64>()
                        .ok()
                        .filter(|p| (0.0..=100.0).contains(p))
                        .ok_or_else(|| format!("loss '{value}' is not a percentage"))?;
                }
                "rate" => {
                    let ok = value
                        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                        .parse::<f64>()
                        .is_ok()
                        && ["kbit", "mbit", "gbit"].iter().any(|u| value.ends_with(u));
                    if !ok {
                        return Err(format!("rate '{value}' must look like 100mbit"));
                    }
                    netem.rate = Some(value.to_string());
                }
                other => {
                    return Err(format!(
                        "unknown netem key '{other}', expected delay, rtt, jitter, loss or rate"
                    ))
                }
            }
        }
        Ok(netem)
    }
}
