//! The report's "Request mix" section: per entry of a mix, in each stress level of each
//! stack, its share of the requests against the share its weight asks for, its success and
//! its latency, from `requests.csv`. Pooled over repetitions: counts are summed, percentiles
//! are the mean of the repetitions' (as the stress table's).

use std::collections::BTreeMap;
use std::path::Path;

use crate::label;
use results::folder::REQUESTS_FILE;
use results::labels::ms;
use results::rows::{self, CellRow, RequestRow};

/// How far (in binomial standard errors) an observed share may sit from its weight's share
/// before the table marks it: the draw is a pure function of (seed, seq), close to
/// independent draws, so 3 standard errors flag about 3 in 1,000 entries by chance.
const SHARE_TOLERANCE_SE: f64 = 3.0;

/// Every entry's weight share, by name, from the experiment in the manifest: a name found in
/// one target's list only (REST `requests` or gRPC `calls`).
fn weight_shares(manifest: &serde_json::Value) -> BTreeMap<String, f64> {
    let targets = &manifest["experiment"]["targets"];
    let mut seen: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for list in [&targets["rest"]["requests"], &targets["grpc"]["calls"]] {
        let Some(entries) = list.as_array() else {
            continue;
        };
        let weight = |e: &serde_json::Value| e["weight"].as_f64().unwrap_or(1.0);
        let total: f64 = entries.iter().map(weight).sum();
        for e in entries {
            if let (Some(name), true) = (e["name"].as_str(), total > 0.0) {
                seen.entry(name.to_string())
                    .or_default()
                    .push(weight(e) / total);
            }
        }
    }
    seen.into_iter()
        .filter_map(|(name, shares)| match shares[..] {
            [share] => Some((name, share)),
            _ => None,
        })
        .collect()
}

/// Whether `observed` of `n` draws is within [`SHARE_TOLERANCE_SE`] standard errors of `p`.
fn share_fits(observed: f64, p: f64, n: u64) -> bool {
    if n == 0 {
        return true;
    }
    let se = (p * (1.0 - p) / n as f64).sqrt();
    (observed - p).abs() <= SHARE_TOLERANCE_SE * se + f64::EPSILON
}

/// One row of the table: an entry in one (variant, stack, regime, level), pooled.
#[derive(Debug, Default)]
struct Pooled {
    sent: u64,
    ok: u64,
    cell_sent: u64,
    p50: Vec<f64>,
    p95: Vec<f64>,
    p99: Vec<f64>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The section's HTML; empty when the run has no `requests.csv`.
pub fn section(
    dir: &Path,
    cells: &[CellRow],
    manifest: &serde_json::Value,
) -> anyhow::Result<String> {
    let requests = rows::read_if_present::<RequestRow>(&dir.join(REQUESTS_FILE))?.rows;
    if requests.is_empty() {
        return Ok(String::new());
    }
    let shares = weight_shares(manifest);
    // A cell interrupted after its names' rows were written runs again and writes them
    // again: the last row of each (cell, name) is the one that goes with the cell's row.
    let mut last: BTreeMap<(&str, &str), &RequestRow> = BTreeMap::new();
    for r in &requests {
        last.insert((r.cell_key.as_str(), r.request.as_str()), r);
    }
    // A rate sweep's points are its curve's, not one level's.
    let swept = results::curve::swept_keys(cells);
    // (variant, stack, regime, level, entry order) → pooled figures; stacks and regimes
    // sort by name.
    type Key = (String, String, String, u32, usize, String);
    let mut order: Vec<String> = Vec::new();
    let mut pooled: BTreeMap<Key, Pooled> = BTreeMap::new();
    for r in requests.iter().filter(|r| {
        last.get(&(r.cell_key.as_str(), r.request.as_str()))
            .is_some_and(|l| std::ptr::eq(*l, *r))
    }) {
        // The cell's row is the proof it finished.
        let Some(cell) = cells.iter().find(|c| {
            c.cell_key == r.cell_key && c.stage == "stress" && !swept.contains(&c.cell_key)
        }) else {
            continue;
        };
        if !order.contains(&r.request) {
            order.push(r.request.clone());
        }
        let at = order.iter().position(|n| n == &r.request).unwrap_or(0);
        let p = pooled
            .entry((
                cell.variant.clone(),
                cell.stack.clone(),
                cell.regime.clone(),
                cell.concurrency,
                at,
                r.request.clone(),
            ))
            .or_default();
        p.sent += r.sent;
        p.ok += r.ok;
        p.cell_sent += cell.sent;
        for (v, into) in [
            (r.latency_p50_us, &mut p.p50),
            (r.latency_p95_us, &mut p.p95),
            (r.latency_p99_us, &mut p.p99),
        ] {
            into.extend(v.map(|v| v as f64));
        }
    }
    if pooled.is_empty() {
        return Ok(String::new());
    }
    let mut html = String::from("<section id=\"requests\">\n<h2>Request mix</h2>\n");
    html.push_str(&format!(
        "<p class=\"table-note\">Each entry of the mix on its own, per stress level, pooled over repetitions (counts summed, percentiles the mean of the repetitions'); from requests.csv. Share: the entry's requests of the cell's, against its weight's share; † more than {SHARE_TOLERANCE_SE:.0} binomial standard errors from it.</p>\n"
    ));
    html.push_str("<table>\n<tr><th>Variant</th><th>Stack</th><th>Regime</th><th>Users</th><th>Request</th><th>Sent</th><th>Share (weight)</th><th>Success</th><th>p50 (ms)</th><th>p95 (ms)</th><th>p99 (ms)</th></tr>\n");
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let show = |v: Option<f64>| v.map_or_else(|| "—".to_string(), ms);
    for ((variant, stack, regime, c, _, name), p) in &pooled {
        let share = if p.cell_sent > 0 {
            p.sent as f64 / p.cell_sent as f64
        } else {
            0.0
        };
        let share_text = match shares.get(name) {
            Some(&w) => format!(
                "{:.1} % ({:.1} %){}",
                share * 100.0,
                w * 100.0,
                if share_fits(share, w, p.cell_sent) {
                    ""
                } else {
                    " †"
                }
            ),
            None => format!("{:.1} %", share * 100.0),
        };
        let success = if p.sent > 0 {
            format!("{:.2} %", p.ok as f64 / p.sent as f64 * 100.0)
        } else {
            "—".into()
        };
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{c}</td><td>{}</td><td>{}</td><td>{share_text}</td><td>{success}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(variant),
            label(stack),
            esc(regime),
            esc(name),
            p.sent,
            show(mean(&p.p50)),
            show(mean(&p.p95)),
            show(mean(&p.p99)),
        ));
    }
    html.push_str("</table>\n</section>\n");
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_shares_are_per_list_and_skip_names_in_both() {
        let manifest = serde_json::json!({"experiment": {"targets": {
            "rest": {"requests": [{"name": "get", "weight": 3}, {"name": "create", "weight": 1}, {"name": "both", "weight": 4}]},
            "grpc": {"calls": [{"name": "both", "weight": 1}, {"name": "call", "weight": 1}]}
        }}});
        let s = weight_shares(&manifest);
        assert_eq!(s.get("get"), Some(&0.375));
        assert_eq!(s.get("create"), Some(&0.125));
        assert_eq!(s.get("call"), Some(&0.5));
        assert_eq!(s.get("both"), None);
        assert!(weight_shares(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn a_share_fits_within_three_standard_errors_only() {
        // p = 0.25, n = 10,000: one standard error is 0.433 %.
        assert!(share_fits(0.25 + 0.0129, 0.25, 10_000));
        assert!(!share_fits(0.25 + 0.0131, 0.25, 10_000));
        assert!(share_fits(0.9, 0.25, 0));
    }
}
