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
    /// The rate shaper's queue, in packets of [`Netem::LINK_MTU`] bytes (`queue=25`); the
    /// namespace's loopback then carries packets of that size, so that a packet count means
    /// what it means on a link. `None`: a queue of a second at the rate.
    pub queue_packets: Option<u32>,
}

/// Named link shapes the `netem` knob takes in place of a spec.
pub const PRESETS: &[(&str, &str)] = &[
    // quic-interop-runner's goodput test: 10 Mbit/s, 15 ms each way, a 25-packet queue.
    ("interop-goodput", "rate=10mbit,delay=15ms,queue=25"),
];

impl std::str::FromStr for Netem {
    type Err = String;

    fn from_str(text: &str) -> Result<Netem, String> {
        Netem::parse(text)
    }
}

impl Netem {
    /// The packet size a `queue` counts in: Ethernet's MTU.
    pub const LINK_MTU: u32 = 1500;

    /// The rate in bits per second, if shaped.
    pub fn rate_bits_per_s(&self) -> Option<f64> {
        let rate = self.rate.as_deref()?;
        let (n, scale) = [("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)]
            .iter()
            .find_map(|(u, s)| rate.strip_suffix(u).map(|n| (n, *s)))?;
        n.parse::<f64>().ok().map(|n| n * scale)
    }

    pub fn parse(text: &str) -> Result<Netem, String> {
        if let Some((_, spec)) = PRESETS.iter().find(|(name, _)| *name == text.trim()) {
            return Netem::parse(spec);
        }
        let mut netem = Netem {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss_pct: 0.0,
            rate: None,
            queue_packets: None,
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
                "queue" => {
                    netem.queue_packets = Some(
                        value
                            .parse::<u32>()
                            .ok()
                            .filter(|n| (2..=100_000).contains(n))
                            .ok_or_else(|| {
                                format!("queue '{value}' must be 2 to 100000 packets")
                            })?,
                    );
                }
                other => {
                    return Err(format!(
                        "unknown netem key '{other}', expected delay, rtt, jitter, loss, rate or queue, or a preset ({})",
                        PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    ))
                }
            }
        }
        if netem.queue_packets.is_some() && netem.rate.is_none() {
            return Err("queue is the rate shaper's: give a rate too".into());
        }
        Ok(netem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_and_the_interop_preset_parse() {
        let n = Netem::parse("rate=50mbit,queue=25").unwrap();
        assert_eq!(n.queue_packets, Some(25));
        assert_eq!(n.rate_bits_per_s(), Some(50e6));
        let interop = Netem::parse("interop-goodput").unwrap();
        assert_eq!(interop.rate.as_deref(), Some("10mbit"));
        assert_eq!(interop.delay_ms, 15.0);
        assert_eq!(interop.queue_packets, Some(25));
        assert!(Netem::parse("queue=25")
            .unwrap_err()
            .contains("give a rate"));
        assert!(Netem::parse("rate=1mbit,queue=x").is_err());
        assert!(Netem::parse("nosuch-preset").is_err());
    }
}
