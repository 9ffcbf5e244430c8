//! The contrast table: for every condition (variant) of every claim run, did the TCP stacks
//! collapse, did the QUIC stacks, both or neither ([`crate::claims::CONTRAST_TCP`],
//! [`crate::claims::CONTRAST_QUIC`], [`crate::claims::CONTRAST_COLLAPSE_BELOW`]), with the
//! load generator's TIME_WAIT peak and the port budget beside the measured new-connection
//! rate, so the study's socket-exhaustion explanation is checked against what was counted.

use std::fmt::Write;

use runner::report::{label, regimes};

use crate::claims::{CONTRAST_COLLAPSE_BELOW, CONTRAST_QUIC, CONTRAST_RUN, CONTRAST_TCP};
use crate::provenance::{find_first, scalar};
use crate::run::{fval, Run, View};
use crate::text::{pct, plain, thousands};
use crate::verdicts::ports_in;

/// How long Linux holds a closed TCP connection's port in TIME_WAIT (`TCP_TIMEWAIT_LEN`, 60 s;
/// not tunable), the denominator of the port budget.
pub(crate) const TIME_WAIT_S: f64 = 60.0;

/// The worst (lowest) success of one side over every regime and level of a view: the stack,
/// regime, level and rate; `None` when the view runs none of the side's stacks.
fn worst(v: &View, side: &[&str]) -> Option<(String, String, u64, f64)> {
    let mut worst: Option<(String, String, u64, f64)> = None;
    for stack in v
        .stacks()
        .into_iter()
        .filter(|s| side.contains(&s.as_str()))
    {
        for regime in regimes(&v.rows) {
            for c in v.levels(&regime) {
                let sent = v.sum(&stack, &regime, c, "sent");
                if sent <= 0.0 {
                    continue;
                }
                let success = v.sum(&stack, &regime, c, "ok") / sent;
                if worst.as_ref().is_none_or(|w| success < w.3) {
                    worst = Some((stack.clone(), regime.clone(), c, success));
                }
            }
        }
    }
    worst
}

/// "yes: HTTP/1.1 new-conn at 200 (24.520 %)", "no (lowest 99.960 %)" or "not run".
fn side_text(w: &Option<(String, String, u64, f64)>) -> (Option<bool>, String) {
    match w {
        None => (None, "not run".into()),
        Some((stack, regime, c, s)) if *s < CONTRAST_COLLAPSE_BELOW => (
            Some(true),
            format!("yes: {} {regime} at {c} ({})", label(stack), pct(*s)),
        ),
        Some((_, _, _, s)) => (Some(false), format!("no (lowest {})", pct(*s))),
    }
}

/// The largest TIME_WAIT count at the load generator in any cell of the view's TCP stacks.
fn time_wait_peak(v: &View) -> Option<u64> {
    v.rows
        .iter()
        .filter(|r| CONTRAST_TCP.contains(&r.stack.as_str()))
        .filter_map(|r| r.tcp_time_wait_peak)
        .max()
}

/// Port budget per second: local ports (the cells' `port_range`, else the kernel's
/// `net.ipv4.ip_local_port_range` in the manifest) × source addresses (the cells' column,
/// else the experiment's) ÷ [`TIME_WAIT_S`]. Returns (ports, addresses, budget).
fn port_budget(v: &View) -> Option<(u64, u64, f64)> {
    let tcp: Vec<_> = v
        .rows
        .iter()
        .filter(|r| CONTRAST_TCP.contains(&r.stack.as_str()))
        .collect();
    let first = tcp.first()?;
    let manifest = &v.run.results.manifest;
    let ports = first
        .port_range
        .as_deref()
        .filter(|r| !r.is_empty())
        .and_then(ports_in)
        .or_else(|| {
            find_first(manifest, "net.ipv4.ip_local_port_range").and_then(|r| ports_in(&scalar(&r)))
        })?;
    let addresses = first
        .source_addresses
        .map(u64::from)
        .or_else(|| manifest["experiment"]["source_addresses"].as_u64())?;
    Some((
        ports,
        addresses,
        ports as f64 * addresses as f64 / TIME_WAIT_S,
    ))
}

/// The highest measured rate of new TCP connections in any cell of the view's TCP stacks:
/// connections attempted (established, in runs before that column) ÷ `elapsed_s`.
fn new_connection_rate(v: &View) -> Option<f64> {
    v.rows
        .iter()
        .filter(|r| CONTRAST_TCP.contains(&r.stack.as_str()) && r.regime == "new-conn")
        .filter_map(|r| {
            let opened = r.connections_attempted.unwrap_or(r.connections_established) as f64;
            let elapsed = fval(r, "elapsed_s").filter(|e| *e > 0.0)?;
            Some(opened / elapsed)
        })
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))
}

/// The contrast section.
pub(crate) fn section(out: &mut String, claim_runs: &[Run]) {
    let names = |side: &[&str]| side.iter().map(|s| label(s)).collect::<Vec<_>>().join(", ");
    let (tcp, quic) = (names(CONTRAST_TCP), names(CONTRAST_QUIC));
    let _ = writeln!(out, "## Where TCP and QUIC part: the contrast\n");
    let _ = writeln!(
        out,
        "The study's central contrast is that the TCP stacks ({tcp}) collapse under new connections while QUIC ({quic}) holds, through socket exhaustion. Rule, fixed before the data: a side collapsed in a condition (one variant of one claim run) when one of its stacks' success, pooled over repetitions, fell below {} % at any level of any regime. Beside it: the load generator's largest TIME_WAIT count in any TCP cell, the port budget (local ports × source addresses ÷ {} s in TIME_WAIT) and the highest measured new-connection rate of a TCP cell (connections attempted, or established in runs before that column, ÷ elapsed); \"not counted\" marks runs made before the TIME_WAIT columns. A rate above the budget can exhaust the ports only where TIME_WAIT ports are not reused (tcp_tw_reuse reuses them on loopback) and outlive the cell (per-cell namespaces start empty).\n",
        plain(CONTRAST_COLLAPSE_BELOW * 100.0),
        plain(TIME_WAIT_S)
    );
    if !claim_runs.iter().any(|r| r.name() == CONTRAST_RUN) {
        let _ = writeln!(
            out,
            "`{CONTRAST_RUN}` (`experiments/claims/{CONTRAST_RUN}.toml`: server and load generator on two hosts, one source address, TIME_WAIT kept across levels) has no run in this paper: its results are not committed yet. Every row below is from loopback, where the mechanism the study names cannot bind.\n"
        );
    }
    let _ = writeln!(
        out,
        "| run | variant | TCP collapsed | QUIC collapsed | which | TIME_WAIT peak | port budget | new TCP connections/s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---:|---|---:|");
    for run in claim_runs {
        for variant in run.variants() {
            let v = View::new(run, Some(&variant));
            let (t, t_text) = side_text(&worst(&v, CONTRAST_TCP));
            let (q, q_text) = side_text(&worst(&v, CONTRAST_QUIC));
            let which = match (t, q) {
                (Some(true), Some(true)) => "both",
                (Some(true), Some(false)) => "TCP only",
                (Some(false), Some(true)) => "QUIC only",
                (Some(false), Some(false)) => "neither",
                _ => "no contrast (a side not run)",
            };
            let budget = port_budget(&v).map_or("—".to_string(), |(ports, addresses, b)| {
                format!(
                    "{} ports × {addresses} ÷ {} s = {}/s",
                    thousands(ports as f64),
                    plain(TIME_WAIT_S),
                    thousands(b)
                )
            });
            let _ = writeln!(
                out,
                "| {} | {variant} | {t_text} | {q_text} | {which} | {} | {budget} | {} |",
                run.name(),
                time_wait_peak(&v).map_or("not counted".to_string(), |p| thousands(p as f64)),
                new_connection_rate(&v).map_or("—".to_string(), thousands)
            );
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_collapses_below_the_rule_and_not_at_it() {
        let w = |s: f64| Some(("h1".to_string(), "new-conn".to_string(), 200, s));
        assert_eq!(side_text(&w(0.2452)).0, Some(true));
        assert!(side_text(&w(0.2452))
            .1
            .starts_with("yes: HTTP/1.1 new-conn at 200"));
        assert_eq!(side_text(&w(CONTRAST_COLLAPSE_BELOW)).0, Some(false));
        assert_eq!(side_text(&None), (None, "not run".to_string()));
    }
}
