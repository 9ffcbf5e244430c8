//! The paper's "Through a mesh" section, from a run whose variants set `path` (docs/mesh.md):
//! does the C2/C3 contrast (TCP stacks collapse under a new connection per request, HTTP/3
//! does not) survive a sidecar path, with the proxies pooling their upstream connections and
//! without? Per variant: each stack's success, throughput and latency at the highest level of
//! each regime, and the proxies' CPU; which stack wins under reuse, and which collapse under
//! new connections by C2's own threshold. Stacks no proxy carries (HTTP/3) are named as
//! absent from the proxied variants, not guessed. `study paper --mesh DIR` adds it from a run of
//! `experiments/mesh.toml`; [`section_from_dir`] renders it alone.

use std::fmt::Write;
use std::path::Path;

use results::rows::CellRow;

use crate::stacks::label;

use crate::claims::COLLAPSE_BELOW;

/// Success below this is a collapse: C2's bound, from the plan.
fn collapse_below() -> f64 {
    COLLAPSE_BELOW
}

/// The condition a variant's rows ran under: `direct`, or path, proxy and pooling.
fn condition(r: &CellRow) -> String {
    match r.path.as_deref() {
        None | Some("direct") => "direct".into(),
        Some(path) => format!(
            "{path} via {} (pool {})",
            r.proxy.as_deref().unwrap_or("?"),
            r.pool.as_deref().unwrap_or("?")
        ),
    }
}

/// Means over repetitions of one variant, stack, regime and level.
struct Cell {
    success: f64,
    throughput_rps: f64,
    p50_us: f64,
    p99_us: f64,
    proxy_cpu_ms_per_1k: Option<f64>,
}

fn cell(rows: &[&CellRow]) -> Cell {
    let n = rows.len().max(1) as f64;
    let mean = |f: &dyn Fn(&CellRow) -> f64| rows.iter().map(|r| f(r)).sum::<f64>() / n;
    Cell {
        success: mean(&|r| r.success_rate),
        throughput_rps: mean(&|r| r.throughput_rps),
        p50_us: mean(&|r| r.latency_p50_us as f64),
        p99_us: mean(&|r| r.latency_p99_us as f64),
        proxy_cpu_ms_per_1k: rows[0]
            .proxy_cpu_ms_per_1k_ok
            .map(|_| mean(&|r| r.proxy_cpu_ms_per_1k_ok.unwrap_or(0.0))),
    }
}

/// What one cell of the run is: each regime's request budget and how many whole budgets a cell
/// sent (`budget_repeats`), since these cells are not the plan's fixed budgets of attempts.
fn budgets_sentence(stress: &[&CellRow]) -> String {
    let mut regimes: Vec<(&str, Vec<u64>, Vec<u64>)> = Vec::new();
    for r in stress {
        let (Some(requests), Some(repeats)) = (r.requests, r.budget_repeats) else {
            continue;
        };
        match regimes.iter_mut().find(|g| g.0 == r.regime) {
            Some(g) => {
                g.1.push(requests);
                g.2.push(repeats);
            }
            None => regimes.push((&r.regime, vec![requests], vec![repeats])),
        }
    }
    if regimes.is_empty() {
        return String::new();
    }
    let range = |v: &[u64]| {
        let (lo, hi) = (v.iter().min(), v.iter().max());
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo == hi => crate::text::thousands(*lo as f64),
            (Some(lo), Some(hi)) => format!(
                "{}–{}",
                crate::text::thousands(*lo as f64),
                crate::text::thousands(*hi as f64)
            ),
            _ => "?".into(),
        }
    };
    let parts: Vec<String> = regimes
        .iter()
        .map(|(regime, requests, repeats)| {
            let times = match range(repeats) {
                r if r == "1" => "once".to_string(),
                r => format!("{r} times"),
            };
            format!(
                "under {regime}, a budget of {} requests sent whole {times}",
                range(requests)
            )
        })
        .collect();
    format!(
        " A cell here is not one of the plan's fixed budgets: its budget of requests was sent again, whole, until the cell had lasted its `min_cell_seconds` ({}; `budget_repeats`), and req/s is ok ÷ elapsed over all of them.",
        parts.join("; ")
    )
}

/// Appends the section for the stress cells of a mesh run (`source` names the run).
pub fn section(out: &mut String, cells: &[CellRow], source: &str) {
    let stress: Vec<&CellRow> = cells
        .iter()
        .filter(|r| r.stage == "stress" && r.ran())
        .collect();
    let _ = writeln!(out, "## Through a mesh\n");
    if !stress
        .iter()
        .any(|r| r.path.as_deref().is_some_and(|p| p != "direct"))
    {
        let _ = writeln!(
            out,
            "No run with a proxied path (`path = \"edge\"` or `\"sidecar\"`) was given: the question stays open.\n"
        );
        return;
    }
    let mut variants: Vec<&str> = Vec::new();
    let mut stacks: Vec<&str> = Vec::new();
    for r in &stress {
        if !variants.contains(&r.variant.as_str()) {
            variants.push(&r.variant);
        }
        if !stacks.contains(&r.stack.as_str()) {
            stacks.push(&r.stack);
        }
    }
    let _ = writeln!(
        out,
        "Measured in `{source}`: each variant runs the same stacks through a different path; figures at each regime's highest level, means over repetitions. A collapse is success below {:.0} % (C2's threshold).{}\n",
        collapse_below() * 100.0,
        budgets_sentence(&stress)
    );
    let _ = writeln!(
        out,
        "| variant | condition | stack | regime | workers | success | req/s (ok ÷ elapsed) | p50 ms | p99 ms | proxy CPU ms / 1,000 ok |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut answers = Vec::new();
    for variant in &variants {
        let rows: Vec<&CellRow> = stress
            .iter()
            .copied()
            .filter(|r| r.variant == *variant)
            .collect();
        let cond = condition(rows[0]);
        let mut regimes: Vec<&str> = Vec::new();
        for r in &rows {
            if !regimes.contains(&r.regime.as_str()) {
                regimes.push(&r.regime);
            }
        }
        let mut collapsed = Vec::new();
        let mut winner: Option<(&str, f64)> = None;
        for regime in &regimes {
            let top = rows
                .iter()
                .filter(|r| r.regime == *regime)
                .map(|r| r.concurrency)
                .max()
                .unwrap_or(0);
            for stack in &stacks {
                let at: Vec<&CellRow> = rows
                    .iter()
                    .copied()
                    .filter(|r| r.regime == *regime && r.concurrency == top && r.stack == *stack)
                    .collect();
                if at.is_empty() {
                    continue;
                }
                let c = cell(&at);
                let _ = writeln!(
                    out,
                    "| {variant} | {cond} | {} | {regime} | {top} | {:.2} % | {} | {:.2} | {:.2} | {} |",
                    label(stack),
                    c.success * 100.0,
                    crate::text::thousands(c.throughput_rps),
                    c.p50_us / 1000.0,
                    c.p99_us / 1000.0,
                    c.proxy_cpu_ms_per_1k
                        .map_or("—".to_string(), |v| format!("{v:.0}"))
                );
                if *regime == "new-conn" && c.success < collapse_below() {
                    collapsed.push(label(stack));
                }
                if *regime == "reuse" && winner.is_none_or(|(_, best)| c.throughput_rps > best) {
                    winner = Some((stack, c.throughput_rps));
                }
            }
        }
        let absent: Vec<String> = stacks
            .iter()
            .filter(|s| !rows.iter().any(|r| r.stack == **s))
            .map(|s| label(s))
            .collect();
        let mut answer = format!("{cond}: ");
        match winner {
            Some((stack, _)) => {
                let _ = write!(answer, "{} has the highest reuse throughput", label(stack));
            }
            None => answer.push_str("no reuse cell"),
        }
        if regimes.contains(&"new-conn") {
            if collapsed.is_empty() {
                answer.push_str("; no stack collapses under new connections");
            } else {
                let _ = write!(
                    answer,
                    "; {} collapse under new connections",
                    collapsed.join(", ")
                );
            }
        }
        if !absent.is_empty() {
            let _ = write!(answer, "; not carried: {}", absent.join(", "));
        }
        answers.push(answer);
    }
    let _ = writeln!(out, "\n{}.\n", answers.join(". "));
    let edge = terminated_at_edge(&stress);
    if !edge.is_empty() {
        let _ = writeln!(
            out,
            "QUIC terminated at an edge: a stack whose client-side protocol differs from what the edge speaks on (`client_protocol`, `upstream_protocol`) is held against the stack that speaks that upstream protocol end to end, through the same edge and direct, at each regime's highest level (throughput ok ÷ elapsed, means over repetitions, without an interval).\n"
        );
        for line in edge {
            let _ = writeln!(out, "- {line}");
        }
        out.push('\n');
    }
}

/// For each stack terminated at an edge (its client-side protocol is not its upstream one) and
/// each regime: its throughput against its upstream stack's through the same variant, and the
/// same ratio direct; whether the edge keeps the cost or the benefit seen direct.
fn terminated_at_edge(stress: &[&CellRow]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for r in stress {
        let (Some(client), Some(upstream)) = (&r.client_protocol, &r.upstream_protocol) else {
            continue;
        };
        if client == upstream {
            continue;
        }
        let key = (r.variant.clone(), r.stack.clone(), r.regime.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let top_of = |variant: &str| {
            stress
                .iter()
                .filter(|x| x.variant == variant && x.regime == r.regime)
                .map(|x| x.concurrency)
                .max()
        };
        let mean_rps = |variant: &str, stack: &str, top: u32| {
            let at: Vec<&CellRow> = stress
                .iter()
                .copied()
                .filter(|x| {
                    x.variant == variant
                        && x.stack == stack
                        && x.regime == r.regime
                        && x.concurrency == top
                })
                .collect();
            (!at.is_empty()).then(|| cell(&at).throughput_rps)
        };
        let direct = stress
            .iter()
            .find(|x| x.path.as_deref().is_none_or(|p| p == "direct"))
            .map(|x| x.variant.clone());
        let Some(top) = top_of(&r.variant) else {
            continue;
        };
        let (Some(at_edge), Some(upstream_at_edge)) = (
            mean_rps(&r.variant, &r.stack, top),
            mean_rps(&r.variant, upstream, top),
        ) else {
            continue;
        };
        let edge_ratio = at_edge / upstream_at_edge;
        let mut line = format!(
            "{}, {} at {top} workers: {} through `{}` served {:.2}× the throughput of {} through the same edge",
            r.regime,
            label(&r.stack),
            label(&r.stack),
            r.variant,
            edge_ratio,
            label(upstream)
        );
        let direct_ratio = direct.as_deref().and_then(|d| {
            let top = top_of(d)?;
            Some(mean_rps(d, &r.stack, top)? / mean_rps(d, upstream, top)?)
        });
        match direct_ratio {
            Some(d) => {
                let side = |x: f64| if x < 1.0 { "cost" } else { "benefit" };
                let verdict = if side(d) == side(edge_ratio) {
                    format!("the edge keeps the {} seen direct", side(d))
                } else {
                    format!(
                        "the edge turns the {} seen direct into a {}",
                        side(d),
                        side(edge_ratio)
                    )
                };
                let _ = write!(line, ", against {d:.2}× direct: {verdict}");
            }
            None => line.push_str("; no direct cell to compare"),
        }
        lines.push(format!("{line}."));
    }
    lines
}

/// The section from a results directory.
pub fn section_from_dir(dir: &Path) -> anyhow::Result<String> {
    let results = results::Results::load(dir)?;
    crate::stacks::learn(&results.manifest);
    let mut out = String::new();
    section(&mut out, &results.cells, &dir.display().to_string());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        variant: &str,
        path: &str,
        stack: &str,
        regime: &str,
        success: f64,
        rps: f64,
    ) -> CellRow {
        CellRow {
            variant: variant.into(),
            stage: "stress".into(),
            stack: stack.into(),
            regime: regime.into(),
            concurrency: 200,
            path: Some(path.into()),
            proxy: (path != "direct").then(|| "haproxy".into()),
            pool: (path != "direct").then(|| "keep".into()),
            success_rate: success,
            throughput_rps: rps,
            proxy_cpu_ms_per_1k_ok: (path != "direct").then_some(50.0),
            ..CellRow::default()
        }
    }

    /// Per variant: the reuse winner, the stacks below C2's threshold under new connections,
    /// and the stacks the proxied variant did not carry; without a proxied variant, no table.
    #[test]
    fn the_answer_names_winner_collapse_and_absent_stacks_per_condition() {
        crate::stacks::learn_committed();
        let cells = vec![
            row("direct", "direct", "h1", "reuse", 1.0, 900.0),
            row("direct", "direct", "grpc", "reuse", 1.0, 1200.0),
            row("direct", "direct", "h3", "reuse", 1.0, 800.0),
            row("direct", "direct", "h1", "new-conn", 0.01, 10.0),
            row("direct", "direct", "h3", "new-conn", 1.0, 40.0),
            row("sc", "sidecar", "h1", "reuse", 1.0, 1000.0),
            row("sc", "sidecar", "grpc", "reuse", 1.0, 700.0),
            row("sc", "sidecar", "h1", "new-conn", 1.0, 300.0),
        ];
        let mut out = String::new();
        section(&mut out, &cells, "results/mesh");
        assert!(out.contains("## Through a mesh"), "{out}");
        assert!(
            out.contains("direct: gRPC has the highest reuse throughput; HTTP/1.1 collapse under new connections"),
            "{out}"
        );
        assert!(
            out.contains("sidecar via haproxy (pool keep): HTTP/1.1 has the highest reuse throughput; no stack collapses under new connections; not carried: HTTP/3"),
            "{out}"
        );
        assert!(out.contains("| sc | sidecar via haproxy (pool keep) | HTTP/1.1 | reuse | 200 | 100.00 % | 1,000 |"), "{out}");
        assert!(!out.contains("QUIC terminated at an edge"), "{out}");
        // HTTP/3 terminated at a Caddy edge, forwarding over HTTP/2: its ratio to HTTP/2
        // through the same edge against the same ratio direct.
        let mut edge = cells.clone();
        for (stack, rps, direct_rps) in [("h3", 400.0, 800.0), ("h2", 1000.0, 1000.0)] {
            let mut r = row("ec", "edge", stack, "reuse", 1.0, rps);
            r.proxy = Some("caddy".into());
            r.client_protocol = Some(stack.into());
            r.upstream_protocol = Some("h2".into());
            edge.push(r);
            edge.push(row("direct", "direct", stack, "reuse", 1.0, direct_rps));
        }
        let mut out = String::new();
        section(&mut out, &edge, "results/mesh");
        assert!(
            out.contains("- reuse, HTTP/3 at 200 workers: HTTP/3 through `ec` served 0.40× the throughput of HTTP/2 through the same edge, against 0.80× direct: the edge keeps the cost seen direct."),
            "{out}"
        );
        let mut none = String::new();
        section(&mut none, &cells[..5], "x");
        assert!(none.contains("question stays open") && !none.contains("| variant"));
    }
}
