//! The paper's "Beyond 500" section (from a run of `experiments/scale.toml`) and the
//! memory-per-connection table shown next to C5. The study stopped at 500 workers; past it
//! each stack has a knee, and the kernel's counters say which queue or buffer gave way there.

use std::fmt::Write;

use crate::run::{fval, Run, View};
use crate::templates;
use crate::text::{fallback_note, show, show_both, show_tput, thousands, throughput_note};
use results::labels::regimes;
use results::memory;

use crate::stacks::label;

/// p99 "jumps" when p99 per worker exceeds this multiple of the previous level's. In a
/// saturated closed loop p99 grows with concurrency by itself (Little's law: latency =
/// workers / throughput), so only growth beyond concurrency's says the stack got worse.
pub const KNEE_P99_RATIO: f64 = 2.0;
/// Throughput "collapses" when it falls below this fraction of the best at fewer workers.
pub const KNEE_THROUGHPUT_FRACTION: f64 = 0.8;
/// Below this success rate a level has failures that matter at any scale.
pub const KNEE_SUCCESS: f64 = 0.999;

/// The kernel counters (`cells.csv` columns) that explain a knee, with the mechanism a
/// reader should look for and the knob that moves it.
pub const COUNTERS: [(&str, &str); 10] = [
    (
        "net_udp_rcvbuf_errors",
        "UDP receive buffer overflow: the QUIC socket dropped datagrams (see `udp_buffer_bytes`)",
    ),
    (
        "net_udp_sndbuf_errors",
        "UDP send buffer full: datagrams were not sent (see `udp_buffer_bytes`)",
    ),
    (
        "net_udp_in_errors",
        "UDP input errors (mostly receive buffer overflow)",
    ),
    (
        "net_listen_overflows",
        "listen queue overflow: the accept queue was full (see `backlog`, `somaxconn`)",
    ),
    (
        "net_listen_drops",
        "listen queue drops: SYNs or completed handshakes dropped at the listener (see `backlog`, `somaxconn`)",
    ),
    (
        "net_syncookies_sent",
        "SYN cookies: the SYN queue was full (see `backlog`, `somaxconn`)",
    ),
    (
        "net_tcp_timeouts",
        "TCP retransmission timeouts",
    ),
    (
        "net_tcp_retrans_segs",
        "TCP retransmissions",
    ),
    (
        "net_tcp_out_rsts",
        "TCP resets sent",
    ),
    (
        "net_tcp_estab_resets",
        "established TCP connections reset",
    ),
];

/// One concurrency level of one stack: mean p99 over repetitions (µs) and pooled success.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub concurrency: u64,
    pub p99_us: Option<f64>,
    pub success: Option<f64>,
    /// Mean throughput over repetitions (the run's throughput column), req/s.
    pub throughput_rps: Option<f64>,
}

/// The knee: the lowest level whose success is below [`KNEE_SUCCESS`], whose throughput is
/// below [`KNEE_THROUGHPUT_FRACTION`] of the best at fewer workers, or whose p99 per worker
/// is more than [`KNEE_P99_RATIO`] × the previous level's. Returns its index and why.
pub fn knee(levels: &[Level]) -> Option<(usize, String)> {
    for (i, l) in levels.iter().enumerate() {
        let mut why = Vec::new();
        let prev = i.checked_sub(1).map(|j| levels[j]);
        if let (Some(prev), Some(p99)) = (prev, l.p99_us) {
            if let Some(prev_p99) = prev.p99_us.filter(|v| *v > 0.0) {
                let per_worker =
                    (p99 / l.concurrency as f64) / (prev_p99 / prev.concurrency.max(1) as f64);
                if per_worker > KNEE_P99_RATIO {
                    why.push(format!(
                        "p99 {:.0} ms vs {:.0} ms at {} workers: {:.1}× per worker",
                        p99 / 1e3,
                        prev_p99 / 1e3,
                        prev.concurrency,
                        per_worker
                    ));
                }
            }
        }
        let best_before = levels[..i]
            .iter()
            .filter_map(|l| l.throughput_rps)
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
        if let (Some(best), Some(t)) = (best_before, l.throughput_rps) {
            if t < KNEE_THROUGHPUT_FRACTION * best {
                why.push(format!(
                    "{:.0} req/s, {:.0} % of the best at fewer workers ({:.0})",
                    t,
                    t / best * 100.0,
                    best
                ));
            }
        }
        if let Some(s) = l.success.filter(|s| *s < KNEE_SUCCESS) {
            why.push(format!("success {:.3} %", s * 100.0));
        }
        if !why.is_empty() {
            return Some((i, why.join(", ")));
        }
    }
    None
}

/// The counters that moved at `c` (sum over its repetitions > 0 and above the previous
/// level's), as "mechanism: `column` N (M at the previous level)"; marked host-wide when the
/// cells were not in a private namespace.
fn moved(v: &View, stack: &str, regime: &str, c: u64, prev: Option<u64>) -> Vec<String> {
    let cells = v.cells(stack, regime, c);
    let host = cells.iter().any(|r| {
        r.net_counters_scope
            .as_deref()
            .is_some_and(|s| !s.is_empty() && s != "namespace")
    });
    let mut out = Vec::new();
    for (col, mechanism) in COUNTERS {
        if !cells.iter().any(|r| fval(r, col).is_some()) {
            continue;
        }
        let here = v.sum(stack, regime, c, col);
        let before = prev.map_or(0.0, |p| v.sum(stack, regime, p, col));
        if here > 0.0 && here > before {
            out.push(format!(
                "{mechanism}: `{col}` {}{}{}",
                thousands(here),
                prev.map_or(String::new(), |p| format!(
                    " ({} at {p})",
                    thousands(before)
                )),
                if host { ", host-wide" } else { "" }
            ));
        }
    }
    out
}

/// The per-level figures of one stack and regime, levels the stack did not run left out.
fn stack_levels(v: &View, stack: &str, regime: &str) -> Vec<Level> {
    v.levels(regime)
        .into_iter()
        .filter(|c| !v.cells(stack, regime, *c).is_empty())
        .map(|c| {
            let sent = v.sum(stack, regime, c, "sent");
            Level {
                concurrency: c,
                p99_us: v.stat(stack, regime, c, "latency_p99_us").map(|iv| iv.mean),
                success: (sent > 0.0).then(|| v.sum(stack, regime, c, "ok") / sent),
                throughput_rps: v.tput(stack, regime, c).map(|(iv, _)| iv.mean),
            }
        })
        .collect()
}

/// Appends the memory-per-open-connection table of `run` (`regime` only, when given).
pub(crate) fn memory_table(
    out: &mut String,
    run: &Run,
    regime: Option<&str>,
) -> anyhow::Result<()> {
    let fits: Vec<_> = memory::fits(run.stress())
        .into_iter()
        .filter(|m| regime.is_none_or(|r| m.regime == r))
        .map(|m| {
            let (slope, intercept) = memory::describe(&m.fit);
            minijinja::context! {
                variant => m.variant,
                stack => label(&m.stack),
                regime => m.regime,
                role => if m.role == "client" { "load generator" } else { "server" },
                slope,
                intercept,
                r_squared => m.fit.r_squared.map_or("—".into(), |r| format!("{r:.3}")),
                n => m.fit.n,
                levels => m.fit.levels,
            }
        })
        .collect();
    templates::render(
        out,
        "memory.md",
        minijinja::context! {
            run => run.dir.display().to_string(),
            min_levels => memory::MIN_LEVELS,
            fits,
        },
    )
}

/// The "Beyond 500" section.
pub(crate) fn section(out: &mut String, run: &Run, reference: &Run) -> anyhow::Result<()> {
    templates::render(
        out,
        "beyond_500.md",
        minijinja::context! {
            run => run.dir.display().to_string(),
            name => run.name(),
            throughput => throughput_note(run.throughput_col),
            knee_success_pct => format!("{:.1}", KNEE_SUCCESS * 100.0),
            knee_throughput_pct => format!("{:.0}", KNEE_THROUGHPUT_FRACTION * 100.0),
            knee_p99_ratio => KNEE_P99_RATIO.to_string(),
        },
    )?;
    let mut summary = String::new();
    let mut detail = String::new();
    let variants = run.variants();
    for variant in &variants {
        let v = View::new(run, Some(variant));
        if variants.len() > 1 {
            let _ = writeln!(detail, "### Variant `{variant}`\n");
        }
        for regime in regimes(&v.rows) {
            for stack in v.stacks() {
                if !v.has(&stack, &regime) {
                    continue;
                }
                let levels = stack_levels(&v, &stack, &regime);
                let knee = knee(&levels);
                let _ = writeln!(detail, "#### {} — {regime}\n", label(&stack));
                let _ = writeln!(
                    detail,
                    "| workers | req/s | p99 (ms) | success | counters that moved |"
                );
                let _ = writeln!(detail, "|---:|---:|---:|---:|---|");
                for (i, l) in levels.iter().enumerate() {
                    let c = l.concurrency;
                    let prev = i.checked_sub(1).map(|j| levels[j].concurrency);
                    let mark = if knee.as_ref().is_some_and(|k| k.0 == i) {
                        " **knee**"
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        detail,
                        "| {}{mark} | {} | {} | {} | {} |",
                        thousands(c as f64),
                        v.tput(&stack, &regime, c)
                            .map_or("—".into(), |t| show_tput(&t)),
                        v.stat(&stack, &regime, c, "latency_p99_us")
                            .map_or("—".into(), |iv| show(&iv, 1e-3, 1)),
                        l.success
                            .map_or("—".into(), |s| format!("{:.3} %", s * 100.0)),
                        moved(&v, &stack, &regime, c, prev).join("; ")
                    );
                }
                detail.push('\n');
                let (knee_text, mechanism) = match &knee {
                    Some((i, why)) => {
                        let c = levels[*i].concurrency;
                        let prev = i.checked_sub(1).map(|j| levels[j].concurrency);
                        let m = moved(&v, &stack, &regime, c, prev);
                        (
                            format!(
                                "{} workers ({why}; {})",
                                thousands(c as f64),
                                show_both(&v.both_rates(&stack, &regime, c))
                            ),
                            if m.is_empty() {
                                "no kernel counter moved (CPU or the stack's own queues)"
                                    .to_string()
                            } else {
                                m.join("; ")
                            },
                        )
                    }
                    None => (
                        format!(
                            "none up to {} workers",
                            levels
                                .last()
                                .map_or("?".into(), |l| thousands(l.concurrency as f64))
                        ),
                        "—".to_string(),
                    ),
                };
                let _ = writeln!(
                    detail,
                    "Knee of {} ({regime}): {knee_text}. Mechanism: {mechanism}.\n",
                    label(&stack)
                );
                let _ = writeln!(
                    summary,
                    "| {variant} | {} | {regime} | {knee_text} | {mechanism} |",
                    label(&stack)
                );
            }
        }
    }
    let _ = writeln!(out, "| variant | stack | regime | knee | mechanism |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    out.push_str(&summary);
    out.push('\n');
    out.push_str(&detail);
    if detail.contains(" †") {
        let _ = writeln!(out, "{}\n", fallback_note());
    }
    memory_table(out, run, None)?;
    slopes_at_two_scales(out, reference, run);
    Ok(())
}

/// Memory per connection fitted at the reference's levels and at scale, side by side: by the
/// stated rule a slope carries from one scale to the other only when the two 95 % intervals
/// overlap. Where they do not, the paragraph says what the data do not decide.
fn slopes_at_two_scales(out: &mut String, reference: &Run, scale_run: &Run) {
    let small = memory::fits(reference.stress());
    let large = memory::fits(scale_run.stress());
    let mut rows = Vec::new();
    let mut disjoint = 0;
    for l in &large {
        let Some(s) = small.iter().find(|s| {
            s.stack == l.stack && s.regime == l.regime && s.role == l.role && s.variant == "default"
        }) else {
            continue;
        };
        let (a, b) = (s.fit.slope_ci95, l.fit.slope_ci95);
        let overlap = a.0 <= b.1 && b.0 <= a.1;
        if !overlap {
            disjoint += 1;
        }
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            l.variant,
            label(&l.stack),
            l.regime,
            if l.role == "client" {
                "load generator"
            } else {
                "server"
            },
            memory::describe(&s.fit).0,
            memory::describe(&l.fit).0,
            if overlap {
                "yes (intervals overlap)"
            } else {
                "no (intervals disjoint)"
            }
        ));
    }
    if rows.is_empty() {
        return;
    }
    let span = |run: &Run| {
        let levels: Vec<u64> = run.stress().iter().map(|r| r.concurrency as u64).collect();
        format!(
            "{}–{}",
            thousands(levels.iter().copied().min().unwrap_or(0) as f64),
            thousands(levels.iter().copied().max().unwrap_or(0) as f64)
        )
    };
    let _ = writeln!(
        out,
        "Memory per connection at two scales (KB per connection [95 % CI]; rule (the study crate's, not the plan's): a slope carries from one scale to the other only when the two intervals overlap):\n"
    );
    let _ = writeln!(
        out,
        "| scale variant | stack | regime | role | reference ({} workers) | scale ({} workers) | carries? |",
        span(reference),
        span(scale_run)
    );
    let _ = writeln!(out, "|---|---|---|---|---:|---:|---|");
    for r in rows {
        let _ = writeln!(out, "{r}");
    }
    out.push('\n');
    if disjoint > 0 {
        let top = |run: &Run| {
            thousands(
                run.stress()
                    .iter()
                    .map(|r| r.concurrency as f64)
                    .fold(0.0, f64::max),
            )
        };
        let _ = writeln!(
            out,
            "In {disjoint} of these the intervals are disjoint: there memory is not linear in open connections over the whole range, and a per-connection figure holds only within the levels it was fitted on. Why is not measured here. Two candidates fit a slope that changes with scale: memory that follows the work in progress rather than the connections (at a similar throughput, each of {} connections is served less often than each of {}, so fewer hold full send and receive buffers at once), and memory that grows in steps (allocator arenas and buffer pools sized to a peak), which a fit over a few levels reads as a slope.\n",
            top(scale_run),
            top(reference)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(c: u64, p99_ms: f64, success: f64, rps: f64) -> Level {
        Level {
            concurrency: c,
            p99_us: Some(p99_ms * 1e3),
            success: Some(success),
            throughput_rps: Some(rps),
        }
    }

    #[test]
    fn the_knee_is_a_collapse_a_tail_growing_faster_than_workers_or_failures() {
        // Saturated closed loop: p99 doubles with workers at constant throughput: no knee.
        let queueing = [
            lv(500, 10.0, 1.0, 50_000.0),
            lv(1000, 20.0, 1.0, 50_000.0),
            lv(2000, 41.0, 1.0, 49_000.0),
        ];
        assert_eq!(knee(&queueing), None);
        // Throughput halves at 5,000: that is the knee.
        let collapse = [
            lv(500, 300.0, 1.0, 1_400.0),
            lv(1000, 600.0, 1.0, 1_350.0),
            lv(2000, 1200.0, 1.0, 1_380.0),
            lv(5000, 6000.0, 1.0, 690.0),
        ];
        let (i, why) = knee(&collapse).unwrap();
        assert_eq!(i, 3, "{why}");
        assert!(why.contains("49 %"), "{why}");
        // The tail grows 2.5× per worker at 2,000 with throughput still up.
        let tail = [
            lv(500, 10.0, 1.0, 50_000.0),
            lv(1000, 20.0, 1.0, 50_000.0),
            lv(2000, 100.0, 1.0, 48_000.0),
        ];
        let (i, why) = knee(&tail).unwrap();
        assert_eq!(i, 2, "{why}");
        assert!(why.contains("2.5× per worker"), "{why}");
        let fail = [lv(500, 100.0, 1.0, 1.0), lv(1000, 150.0, 0.998, 1.0)];
        assert_eq!(knee(&fail).unwrap().0, 1);
        // Failures at the first level make it the knee; the rest needs a previous level.
        assert_eq!(knee(&[lv(500, 100.0, 0.5, 1.0)]).unwrap().0, 0);
        assert_eq!(knee(&[lv(500, 1e6, 1.0, 1.0)]), None);
    }
}
