//! The report's path note, measured: for a run whose variants put proxies in the path (`edge`,
//! `sidecar`), what the path added against `direct` in the same run, per stack and regime at
//! the highest concurrency both have: latency p50 and p99, and CPU per 1,000 successes (server
//! + load generator + proxies against server + load generator). Means over repetitions.

use results::rows::CellRow;

/// A row's path (`direct` for runs from before the column).
fn path_of(r: &CellRow) -> &str {
    r.path.as_deref().unwrap_or("direct")
}

/// CPU ms per 1,000 successes of everything on the path: server, load generator and proxies.
fn cpu_per_1k(r: &CellRow) -> f64 {
    r.server_cpu_ms_per_1k_ok.unwrap_or(0.0)
        + r.client_cpu_ms_per_1k_ok
        + r.proxy_cpu_ms_per_1k_ok.unwrap_or(0.0)
}

/// The mean of `f` over `rows`.
fn mean(rows: &[&CellRow], f: impl Fn(&CellRow) -> f64) -> f64 {
    rows.iter().map(|r| f(r)).sum::<f64>() / rows.len().max(1) as f64
}

/// One line per proxied variant; empty when every stress cell ran direct or no direct cell
/// matches.
pub fn notes(stress: &[&CellRow]) -> Vec<String> {
    let direct: Vec<&CellRow> = stress
        .iter()
        .copied()
        .filter(|r| path_of(r) == "direct")
        .collect();
    let mut variants: Vec<&str> = Vec::new();
    for r in stress.iter().filter(|r| path_of(r) != "direct") {
        if !variants.contains(&r.variant.as_str()) {
            variants.push(&r.variant);
        }
    }
    let mut notes = Vec::new();
    for variant in variants {
        let rows: Vec<&CellRow> = stress
            .iter()
            .copied()
            .filter(|r| r.variant == variant)
            .collect();
        let first = rows[0];
        let mut parts = Vec::new();
        let mut groups: Vec<(&str, &str)> = Vec::new();
        for r in &rows {
            if !groups.contains(&(r.stack.as_str(), r.regime.as_str())) {
                groups.push((&r.stack, &r.regime));
            }
        }
        for (stack, regime) in groups {
            let same = |r: &CellRow| r.stack == stack && r.regime == regime;
            let top = rows
                .iter()
                .filter(|r| same(r))
                .map(|r| r.concurrency)
                .filter(|c| direct.iter().any(|d| same(d) && d.concurrency == *c))
                .max();
            let Some(c) = top else {
                continue;
            };
            let at = |r: &&&CellRow| r.stack == stack && r.regime == regime && r.concurrency == c;
            let p: Vec<&CellRow> = rows.iter().filter(at).copied().collect();
            let d: Vec<&CellRow> = direct.iter().filter(at).copied().collect();
            let p50 = mean(&p, |r| r.latency_p50_us as f64) - mean(&d, |r| r.latency_p50_us as f64);
            let p99 = mean(&p, |r| r.latency_p99_us as f64) - mean(&d, |r| r.latency_p99_us as f64);
            parts.push(format!(
                "{} {regime} c={c}: p50 {p50:+.0} µs, p99 {p99:+.0} µs, CPU {:.0} → {:.0} ms per 1,000 ok (proxies {:.0})",
                crate::label(stack),
                mean(&d, cpu_per_1k),
                mean(&p, cpu_per_1k),
                mean(&p, |r| r.proxy_cpu_ms_per_1k_ok.unwrap_or(0.0)),
            ));
        }
        if parts.is_empty() {
            continue;
        }
        notes.push(format!(
            "Path {} through {} (pool {}), variant {variant}, against direct in the same run: {}.",
            path_of(first),
            first.proxy.as_deref().unwrap_or("?"),
            first.pool.as_deref().unwrap_or("?"),
            parts.join("; ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: &str, path: &str, p50: u64, p99: u64, proxy_cpu: Option<f64>) -> CellRow {
        CellRow {
            variant: variant.into(),
            stage: "stress".into(),
            stack: "h1".into(),
            regime: "reuse".into(),
            concurrency: 10,
            path: Some(path.into()),
            proxy: (path != "direct").then(|| "haproxy".into()),
            pool: (path != "direct").then(|| "keep".into()),
            latency_p50_us: p50,
            latency_p99_us: p99,
            server_cpu_ms_per_1k_ok: Some(30.0),
            client_cpu_ms_per_1k_ok: 20.0,
            proxy_cpu_ms_per_1k_ok: proxy_cpu,
            ..CellRow::default()
        }
    }

    /// The sidecar variant's latency and CPU, each against the direct variant's at the same
    /// stack, regime and level; a run with no proxied variant has no note.
    #[test]
    fn the_note_is_the_difference_to_direct_at_the_same_level() {
        let direct = row("direct", "direct", 1000, 3000, None);
        let sidecar = row("sidecar", "sidecar", 1500, 5000, Some(40.0));
        let notes = notes(&[&direct, &sidecar]);
        assert_eq!(notes.len(), 1);
        let n = &notes[0];
        assert!(
            n.contains("Path sidecar through haproxy (pool keep)"),
            "{n}"
        );
        assert!(n.contains("p50 +500 µs, p99 +2000 µs"), "{n}");
        assert!(
            n.contains("CPU 50 → 90 ms per 1,000 ok (proxies 40)"),
            "{n}"
        );
        assert!(super::notes(&[&direct]).is_empty());
    }
}
