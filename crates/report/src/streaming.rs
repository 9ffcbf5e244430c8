//! The report's "Streaming" section: per stress level of each stack, the successful
//! streaming calls, the messages per streaming call, messages per second and the gaps between
//! consecutive messages of a call, from `cells.csv` (`streamed_ok`, `messages_per_call_mean`,
//! `messages_per_s`, `message_gap_*_us`). Empty when no cell streamed.

use std::collections::BTreeMap;

use crate::label;
use results::labels::ms;
use results::rows::CellRow;

/// One row of the table: a (variant, stack, regime, level), pooled over repetitions.
#[derive(Default)]
struct Pooled {
    /// Successful streaming calls, summed.
    calls: u64,
    /// Their messages, summed.
    messages: f64,
    per_s: Vec<f64>,
    gaps: [Vec<f64>; 4],
    /// A repetition from before `streamed_ok`, whose mean was over every success.
    older: bool,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The section's HTML; empty when no stress cell has streaming calls.
pub fn section(cells: &[CellRow]) -> String {
    // A rate sweep's points are its curve's, not one level's.
    let swept = results::curve::swept_keys(cells);
    type Key = (String, String, String, u32);
    let mut pooled: BTreeMap<Key, Pooled> = BTreeMap::new();
    for r in cells
        .iter()
        .filter(|r| r.stage == "stress" && !swept.contains(&r.cell_key))
    {
        let Some(per_call) = r.messages_per_call_mean else {
            continue;
        };
        let p = pooled
            .entry((
                r.variant.clone(),
                r.stack.clone(),
                r.regime.clone(),
                r.concurrency,
            ))
            .or_default();
        // The calls the mean is over (every success in a run from before the column).
        let calls = r.streamed_ok.unwrap_or(r.ok);
        p.older |= r.streamed_ok.is_none();
        p.calls += calls;
        p.messages += per_call * calls as f64;
        p.per_s.extend(r.messages_per_s);
        for (into, v) in p.gaps.iter_mut().zip([
            r.message_gap_p50_us,
            r.message_gap_p99_us,
            r.message_gap_p999_us,
            r.message_gap_max_us,
        ]) {
            into.extend(v.map(|v| v as f64));
        }
    }
    if pooled.is_empty() {
        return String::new();
    }
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut html = String::from("<section id=\"streaming\">\n<h2>Streaming</h2>\n");
    html.push_str("<p class=\"table-note\">Streaming calls (client-streaming, server-streaming, bidi) per stress level, pooled over repetitions: streaming calls that succeeded (summed), messages per streaming call (received; sent for a client stream) over those calls only — a mix's unary calls are not counted as calls of 0 messages —, messages per second of the phase, and the gaps between consecutive messages of one call as the client read them (the mean of the repetitions' percentiles); from cells.csv.</p>\n");
    html.push_str("<table>\n<tr><th>Variant</th><th>Stack</th><th>Regime</th><th>Users</th><th>Streaming calls ok</th><th>Messages per streaming call</th><th>Messages/s</th><th>Gap p50 (ms)</th><th>Gap p99 (ms)</th><th>Gap p99.9 (ms)</th><th>Gap max (ms)</th></tr>\n");
    let (mut no_gaps, mut older) = (false, false);
    for ((variant, stack, regime, c), p) in &pooled {
        let per_call = if p.calls > 0 {
            format!("{:.2}", p.messages / p.calls as f64)
        } else {
            "—".into()
        };
        let mark = if p.older { " †" } else { "" };
        older |= p.older;
        let gaps: Vec<String> = p
            .gaps
            .iter()
            .map(|g| mean(g).map_or_else(|| "—".to_string(), ms))
            .collect();
        no_gaps |= p.gaps[0].is_empty();
        html.push_str(&format!(
            "<tr data-stack=\"{}\" data-regime=\"{}\" data-concurrency=\"{c}\"><td>{}</td><td>{}</td><td>{}</td><td>{c}</td><td>{}</td><td class=\"per-call\">{per_call}{mark}</td><td>{}</td><td>{}</td></tr>\n",
            esc(stack),
            esc(regime),
            esc(variant),
            label(stack),
            esc(regime),
            p.calls,
            mean(&p.per_s).map_or_else(|| "—".to_string(), |v| format!("{v:.1}")),
            gaps.join("</td><td>"),
        ));
    }
    html.push_str("</table>\n");
    if no_gaps {
        html.push_str("<p class=\"table-note\">Gaps — : no answer of those calls had two messages (a client stream's answer is one message; a stream that sent fewer than two has no gap).</p>\n");
    }
    if older {
        html.push_str("<p class=\"table-note\">† a run from before streamed_ok: its messages per call were averaged over every successful call, unary ones of a mix included.</p>\n");
    }
    html.push_str("</section>\n");
    html
}
