//! The knobs' values read from text: regime lists, names by their serde spelling, labels, a
//! local port range, a pod's resources and durations.

use load::Regime;

/// The regimes of a run, in order. An alias so that the command line parses
/// `--regime both` into one value rather than a list of flags.
pub type RegimeList = Vec<Regime>;

/// `reuse`, `new-conn`, `both` or a comma-separated list.
pub fn parse_regimes(text: &str) -> Result<RegimeList, String> {
    if text == "both" {
        return Ok(vec![Regime::Reuse, Regime::NewConn]);
    }
    text.split(',').map(|s| s.trim().parse()).collect()
}

/// A value by its serde name (the name the TOML file uses), for enums without `FromStr`.
pub fn parse_name<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
        .map_err(|e| format!("'{text}': {e}"))
}

/// Labels (a node selector): key → value, sorted. An alias so that clap takes one value.
pub type Labels = std::collections::BTreeMap<String, String>;

/// `key=value,key=value` → [`Labels`].
pub fn parse_labels(text: &str) -> Result<Labels, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("'{pair}' is not key=value")),
        })
        .collect()
}

/// A local port range, `low high` (net.ipv4.ip_local_port_range's form), 1 ≤ low ≤ high ≤
/// 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl std::str::FromStr for PortRange {
    type Err = String;

    fn from_str(text: &str) -> Result<PortRange, String> {
        let ports: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        match ports[..] {
            [low, high] if low > 0 && low <= high && high <= 65535 => Ok(PortRange {
                low: low as u16,
                high: high as u16,
            }),
            _ => Err(format!(
                "'{text}' must be two ports 'low high' with low <= high"
            )),
        }
    }
}

/// A pod's CPU and memory (`cpu=2,memory=1Gi`), by name, validated by [`parse_resources`].
#[derive(Debug, Clone, PartialEq)]
pub struct PodResources(pub Labels);

impl std::str::FromStr for PodResources {
    type Err = String;

    fn from_str(text: &str) -> Result<PodResources, String> {
        parse_resources(text).map(PodResources)
    }
}

/// `cpu=2,memory=1Gi` → the quantities by name (only `cpu` and `memory`, each at most once,
/// each a Kubernetes quantity: digits with an optional fraction and suffix).
pub fn parse_resources(text: &str) -> Result<Labels, String> {
    let quantities = parse_labels(text)?;
    if quantities.is_empty() {
        return Err("give cpu=…,memory=… (e.g. cpu=2,memory=1Gi)".into());
    }
    if text.split(',').filter(|p| !p.trim().is_empty()).count() != quantities.len() {
        return Err(format!("'{text}' names a resource twice"));
    }
    for (name, value) in &quantities {
        if name != "cpu" && name != "memory" {
            return Err(format!(
                "unknown resource '{name}' (expected cpu and memory)"
            ));
        }
        let number_end = value
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(value.len());
        let (number, suffix) = value.split_at(number_end);
        let suffixes = ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"];
        if number.is_empty() || number.parse::<f64>().is_err() || !suffixes.contains(&suffix) {
            return Err(format!(
                "{name}: '{value}' is not a quantity like 500m, 2, 512Mi or 1Gi"
            ));
        }
    }
    Ok(quantities)
}

/// `90`, `90s`, `10m` or `1h` → seconds.
pub fn parse_duration_s(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 90s, 10m or 1h"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("'{text}' is not a duration like 90s, 10m or 1h")),
    };
    Ok(n * factor)
}
