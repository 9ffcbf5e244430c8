//! The contrast table: for every condition (variant) of every claim run, did the TCP stacks
//! collapse, did the QUIC stacks, both or neither ([`crate::claims::CONTRAST_TCP`],
//! [`crate::claims::CONTRAST_QUIC`], [`crate::claims::CONTRAST_COLLAPSE_BELOW`]), with the
//! load generator's TIME_WAIT peak and the port budget beside the measured new-connection
//! rate, so the study's socket-exhaustion explanation is checked against what was counted.
//! A second table asks the same of new-connection throughput
//! ([`crate::claims::CONTRAST_THROUGHPUT_FALL_BELOW`]): a connect that waits for a port still
//! succeeds, so exhaustion can cost throughput long before it costs success.

use std::fmt::Write;

use runner::report::{label, regimes};

use crate::claims::{
    CONTRAST_COLLAPSE_BELOW, CONTRAST_QUIC, CONTRAST_RUN, CONTRAST_TCP,
    CONTRAST_THROUGHPUT_FALL_BELOW,
};
use crate::provenance::{find_first, scalar};
use crate::run::{fval, Run, View};
use crate::sessions::Sessions;
use crate::text::{pct, pct_digits, plain, thousands};
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

/// The regime whose connections the contrast is about.
const NEW_CONN: &str = "new-conn";

/// One stack's new-connection throughput per level, pooled over repetitions (Σ ok ÷ Σ
/// `elapsed_s`), levels without elapsed time left out.
fn level_rates(v: &View, stack: &str) -> Vec<(u64, f64)> {
    v.levels(NEW_CONN)
        .into_iter()
        .filter_map(|c| {
            let elapsed = v.sum(stack, NEW_CONN, c, "elapsed_s");
            (elapsed > 0.0).then(|| (c, v.sum(stack, NEW_CONN, c, "ok") / elapsed))
        })
        .collect()
}

/// A stack's lowest level above its best one against the best, in a condition.
#[derive(Debug, Clone, PartialEq)]
struct Fall {
    stack: String,
    low_c: u64,
    low_rps: f64,
    best_c: u64,
    best_rps: f64,
}

impl Fall {
    /// The lowest level's throughput as a share of the best's (1 when nothing was served).
    fn share(&self) -> f64 {
        if self.best_rps > 0.0 {
            self.low_rps / self.best_rps
        } else {
            1.0
        }
    }
}

/// The best of one stack's (level, throughput) pairs and the lowest at a level above it (the
/// best itself when none is lower): a closed loop's low levels are naturally below its peak,
/// a fall is what comes after it. `None` without any pair.
fn fall(stack: &str, rates: &[(u64, f64)]) -> Option<Fall> {
    let best = rates.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let low = rates
        .iter()
        .copied()
        .filter(|(c, _)| *c >= best.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Fall {
        stack: stack.to_string(),
        low_c: low.0,
        low_rps: low.1,
        best_c: best.0,
        best_rps: best.1,
    })
}

/// The side's stack whose throughput fell furthest in the view; `None` when the view runs
/// none of the side's stacks under new connections.
fn worst_fall(v: &View, side: &[&str]) -> Option<Fall> {
    v.stacks()
        .into_iter()
        .filter(|s| side.contains(&s.as_str()))
        .filter_map(|s| fall(&s, &level_rates(v, &s)))
        .min_by(|a, b| a.share().total_cmp(&b.share()))
}

/// "yes: HTTP/1.1 448/s at 500 = 17 % of 2,645/s at 100", "no (lowest 81 % of best)" or
/// "not run".
fn fall_text(f: &Option<Fall>) -> (Option<bool>, String) {
    match f {
        None => (None, "not run".into()),
        Some(f) if f.share() < CONTRAST_THROUGHPUT_FALL_BELOW => (
            Some(true),
            format!(
                "yes: {} {}/s at {} = {} of {}/s at {}",
                label(&f.stack),
                thousands(f.low_rps),
                f.low_c,
                pct_digits(f.share(), 0),
                thousands(f.best_rps),
                f.best_c
            ),
        ),
        Some(f) => (
            Some(false),
            format!("no (lowest {} of best)", pct_digits(f.share(), 0)),
        ),
    }
}

/// Which side gave way, from each side's answer (`None`: the side was not run).
fn which(tcp: Option<bool>, quic: Option<bool>) -> &'static str {
    match (tcp, quic) {
        (Some(true), Some(true)) => "both",
        (Some(true), Some(false)) => "TCP only",
        (Some(false), Some(true)) => "QUIC only",
        (Some(false), Some(false)) => "neither",
        _ => "no contrast (a side not run)",
    }
}

/// The largest TIME_WAIT count at the load generator in any cell of the view's TCP stacks,
/// as the table shows it: "no TCP cell" without one, "not counted" for runs from before the
/// TIME_WAIT columns.
fn time_wait_peak(v: &View) -> String {
    let mut tcp = v
        .rows
        .iter()
        .filter(|r| CONTRAST_TCP.contains(&r.stack.as_str()))
        .peekable();
    if tcp.peek().is_none() {
        return "no TCP cell".into();
    }
    tcp.filter_map(|r| r.tcp_time_wait_peak)
        .max()
        .map_or("not counted".into(), |p| thousands(p as f64))
}

/// In how many sessions a condition's answer ("which" side gave way) is session 1's: "k of n",
/// or "—" without two sessions. `runs` is the same claim run in every session
/// ([`Sessions::claim_runs`]); `answer` judges one session's view of the condition.
fn same_in_sessions(
    run: &Run,
    variant: &str,
    runs: &[(u32, Run)],
    answer: impl Fn(&View) -> String,
) -> String {
    if runs.len() < 2 {
        return "—".into();
    }
    let first = answer(&View::new(run, Some(variant)));
    let same = runs
        .iter()
        .filter(|(_, r)| answer(&View::new(r, Some(variant))) == first)
        .count();
    format!("{same} of {}", runs.len())
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
pub(crate) fn section(out: &mut String, claim_runs: &[Run], sessions: Option<&Sessions>) {
    let names = |side: &[&str]| side.iter().map(|s| label(s)).collect::<Vec<_>>().join(", ");
    let (tcp, quic) = (names(CONTRAST_TCP), names(CONTRAST_QUIC));
    let _ = writeln!(out, "## Where TCP and QUIC part: the contrast\n");
    let _ = writeln!(
        out,
        "The study's central contrast is that the TCP stacks ({tcp}) collapse under new connections while QUIC ({quic}) holds, through socket exhaustion. Rule, fixed before the data: a side collapsed in a condition (one variant of one claim run) when one of its stacks' success, pooled over repetitions, fell below {} % at any level of any regime. Beside it: the load generator's largest TIME_WAIT count in any TCP cell, the port budget (local ports × source addresses ÷ {} s in TIME_WAIT) and the highest measured new-connection rate of a TCP cell (connections attempted, or established in runs before that column, ÷ elapsed); \"not counted\" marks runs made before the TIME_WAIT columns, \"no TCP cell\" conditions without a TCP stack. \"Same in sessions\": in how many sessions at the data commit the answer in \"which\" was the same as in session 1 (whose figures the row shows). A rate above the budget can exhaust the ports only where TIME_WAIT ports are not reused (tcp_tw_reuse reuses them on loopback) and outlive the cell (per-cell namespaces start empty).\n",
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
        "| run | variant | TCP collapsed | QUIC collapsed | which | same in sessions | TIME_WAIT peak | port budget | new TCP connections/s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---:|---|---:|");
    for run in claim_runs {
        let session_runs = sessions.map(|s| s.claim_runs(run)).unwrap_or_default();
        for variant in run.variants() {
            let v = View::new(run, Some(&variant));
            let (t, t_text) = side_text(&worst(&v, CONTRAST_TCP));
            let (q, q_text) = side_text(&worst(&v, CONTRAST_QUIC));
            let which_side = which(t, q);
            let budget = port_budget(&v).map_or("—".to_string(), |(ports, addresses, b)| {
                format!(
                    "{} ports × {addresses} ÷ {} s = {}/s",
                    thousands(ports as f64),
                    plain(TIME_WAIT_S),
                    thousands(b)
                )
            });
            let same = same_in_sessions(run, &variant, &session_runs, |v| {
                which(
                    side_text(&worst(v, CONTRAST_TCP)).0,
                    side_text(&worst(v, CONTRAST_QUIC)).0,
                )
                .to_string()
            });
            let _ = writeln!(
                out,
                "| {} | {variant} | {t_text} | {q_text} | {which_side} | {same} | {} | {budget} | {} |",
                run.name(),
                time_wait_peak(&v),
                new_connection_rate(&v).map_or("—".to_string(), thousands)
            );
        }
    }
    out.push('\n');
    throughput_table(out, claim_runs, sessions);
}

/// The load generator's CPU per 1,000 successes of one stack's new-connection cells at a level
/// (Σ `client_cpu_s` ÷ Σ ok, pooled over repetitions), in milliseconds; `None` without
/// successes or CPU readings. Where ports run short, the kernel's search for a free one is
/// the load generator's CPU: this shows where the time went.
fn client_cpu_ms_per_1k(v: &View, stack: &str, c: u64) -> Option<f64> {
    let ok = v.sum(stack, NEW_CONN, c, "ok");
    let cpu_s = v.sum(stack, NEW_CONN, c, "client_cpu_s");
    (ok > 0.0 && cpu_s > 0.0).then(|| cpu_s * 1e6 / ok)
}

/// "4.5 → 120.4 ms at 500" for a fall's stack between its best and lowest level.
fn cpu_text(v: &View, f: &Option<Fall>) -> String {
    let Some(f) = f else {
        return "—".into();
    };
    match (
        client_cpu_ms_per_1k(v, &f.stack, f.best_c),
        client_cpu_ms_per_1k(v, &f.stack, f.low_c),
    ) {
        (Some(best), Some(low)) if f.low_c != f.best_c => format!(
            "{}: {} at {} → {} at {}",
            label(&f.stack),
            plain((best * 10.0).round() / 10.0),
            f.best_c,
            plain((low * 10.0).round() / 10.0),
            f.low_c
        ),
        (Some(best), _) => format!(
            "{}: {} at {}",
            label(&f.stack),
            plain((best * 10.0).round() / 10.0),
            f.best_c
        ),
        _ => "—".into(),
    }
}

/// The second table: did a side's new-connection throughput fall, condition by condition.
fn throughput_table(out: &mut String, claim_runs: &[Run], sessions: Option<&Sessions>) {
    let _ = writeln!(
        out,
        "Exhaustion need not fail a connect: a connection that waits for a free port, or for a SYN sent again, still succeeds, later. So the same conditions are also read for throughput. Rule, stated after session 1 at `b314ddf` had been seen and before sessions 2 and 3 ran: a side's throughput fell in a condition when one of its stacks' new-connection throughput (ok ÷ elapsed, pooled over repetitions) at a level above its best level is below {} % of that best, in that condition (levels below the best are a closed loop's ramp, not a fall). Conditions without new-connection cells are left out. Beside each side: the load generator's CPU (ms per 1,000 successes) of the stack named, at its best and its lowest level.\n",
        plain(CONTRAST_THROUGHPUT_FALL_BELOW * 100.0)
    );
    let _ = writeln!(
        out,
        "| run | variant | TCP throughput fell | QUIC throughput fell | which | same in sessions | TCP load-generator CPU (ms/1k ok) | QUIC load-generator CPU (ms/1k ok) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for run in claim_runs {
        let session_runs = sessions.map(|s| s.claim_runs(run)).unwrap_or_default();
        for variant in run.variants() {
            let v = View::new(run, Some(&variant));
            let (tcp, quic) = (worst_fall(&v, CONTRAST_TCP), worst_fall(&v, CONTRAST_QUIC));
            if tcp.is_none() && quic.is_none() {
                continue;
            }
            let (t, t_text) = fall_text(&tcp);
            let (q, q_text) = fall_text(&quic);
            let same = same_in_sessions(run, &variant, &session_runs, |v| {
                which(
                    fall_text(&worst_fall(v, CONTRAST_TCP)).0,
                    fall_text(&worst_fall(v, CONTRAST_QUIC)).0,
                )
                .to_string()
            });
            let _ = writeln!(
                out,
                "| {} | {variant} | {t_text} | {q_text} | {} | {same} | {} | {} |",
                run.name(),
                which(t, q),
                cpu_text(&v, &tcp),
                cpu_text(&v, &quic)
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

    #[test]
    fn throughput_falls_below_half_of_the_best_level_and_not_at_half() {
        let f = fall("h1", &[(100, 2645.0), (200, 1500.0), (500, 448.0)]).unwrap();
        assert_eq!((f.low_c, f.best_c), (500, 100));
        let (fell, text) = fall_text(&Some(f));
        assert_eq!(fell, Some(true));
        assert_eq!(text, "yes: HTTP/1.1 448/s at 500 = 17 % of 2,645/s at 100");
        let at_half = fall("h3", &[(100, 1000.0), (500, 500.0)]);
        assert_eq!(fall_text(&at_half).0, Some(false));
        assert_eq!(fall_text(&at_half).1, "no (lowest 50 % of best)");
        assert_eq!(fall("h3", &[]), None);
        assert_eq!(fall_text(&None), (None, "not run".to_string()));
        // Nothing served at any level is not a fall.
        assert_eq!(fall("h3", &[(100, 0.0)]).unwrap().share(), 1.0);
        // Below the best level is the ramp, not a fall.
        let ramp = fall("h3", &[(10, 200.0), (100, 1000.0), (500, 900.0)]).unwrap();
        assert_eq!((ramp.low_c, ramp.best_c), (500, 100));
        assert_eq!(fall_text(&Some(ramp)).0, Some(false));
    }

    #[test]
    fn which_side_gave_way() {
        assert_eq!(which(Some(true), Some(false)), "TCP only");
        assert_eq!(which(Some(false), Some(true)), "QUIC only");
        assert_eq!(which(Some(true), Some(true)), "both");
        assert_eq!(which(Some(false), Some(false)), "neither");
        assert_eq!(which(None, Some(true)), "no contrast (a side not run)");
    }
}
