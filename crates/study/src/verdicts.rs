//! The claim verdicts: for each kind of claim in [`claims`](crate::claims), the function that
//! judges one variant of a claim run against the claimed figures, and the paper's claims section
//! (a summary table, then one section per claim with every variant's outcome). Every stack,
//! level and figure comes from the claim table; nothing here names a protocol.

use std::collections::BTreeMap;
use std::fmt::Write;

use stats::{
    between_sessions, clopper_pearson_lower, clopper_pearson_upper, cv, trials_to_show_below,
    zero_failure_trials_below, Interval,
};

use runner::report::label;

use crate::claims::{
    At, Ceiling, Check, Claim, Collapse, Companion, FailureRateBelow, MemoryRatio, Throughput,
    CLAIMS,
};
use crate::provenance::{find_first, scalar};
use crate::run::{fval, Run, View};
use crate::sessions::{repetition_rate, verdict_kind, Sessions};
use crate::text::{
    fallback_note, pct, pct_digits, plain, show, show_both, show_rps, show_tput, thousands,
    throughput_note,
};
use crate::{scale, Row};

/// A claim's outcome on one variant: a short verdict for the summary table and the numbers.
struct Outcome {
    verdict: String,
    evidence: String,
}

/// Judges one variant (or the reference) against one claim; `None` when it lacks the cells
/// the claim needs.
fn check(claim: &Claim, v: &View) -> Option<Outcome> {
    check_kind(&claim.check, v)
}

fn check_kind(check: &Check, v: &View) -> Option<Outcome> {
    match check {
        Check::Throughput(c) => throughput(v, c),
        Check::Collapse(c) => collapse(v, c),
        Check::FailureRateBelow(c) => failure_rate_below(v, c),
        Check::Ceiling(c) => ceiling(v, c),
        Check::MemoryRatio(c) => memory_ratio(v, c),
    }
}

/// The level a claim is judged at in this view: the named one when the run has it, else the
/// highest.
fn level(v: &View, regime: &str, at: At) -> Option<u64> {
    let levels = v.levels(regime);
    match at {
        At::Workers(c) if levels.contains(&c) => Some(c),
        _ => levels.last().copied(),
    }
}

/// The claims section: a summary table (default conditions and every variant per claim),
/// then each claim's method and per-variant outcomes from its run, or from the reference when
/// no claim run was given.
pub(crate) fn section(
    out: &mut String,
    reference: &Run,
    claim_runs: &[Run],
    sessions: Option<&Sessions>,
) -> anyhow::Result<()> {
    let _ = writeln!(out, "## The study's claims\n");
    let _ = writeln!(
        out,
        "Each claim is checked under default conditions and under every variant of its experiment; every variant's outcome is listed, whether or not the default holds.\n"
    );
    let _ = writeln!(out, "| claim | default conditions | every variant |");
    let _ = writeln!(out, "|---|---|---|");
    let mut sections = String::new();
    for claim in &CLAIMS {
        let (id, text, method) = (claim.id, claim.statement, claim.method);
        let run = claim_runs
            .iter()
            .find(|r| r.name().starts_with(claim.run_prefix));
        let start = sections.len();
        let _ = writeln!(sections, "### {id}: {text}\n");
        let _ = writeln!(sections, "_How it is checked:_ {method}\n");
        let mut default_verdict = "—".to_string();
        let mut variant_verdicts = Vec::new();
        match run {
            None => {
                let _ = writeln!(
                    sections,
                    "No claim run was given; checked on the reference sweep only.\n"
                );
                match check(claim, &View::new(reference, None)) {
                    Some(o) => {
                        let _ = writeln!(sections, "{}\n\n{}\n", o.verdict, o.evidence);
                        default_verdict = o.verdict;
                    }
                    None => {
                        let _ = writeln!(
                            sections,
                            "The reference sweep has no cells this claim can be checked on.\n"
                        );
                    }
                }
            }
            Some(run) => {
                let _ = writeln!(
                    sections,
                    "From `{}` (experiment `{}`, {}):\n",
                    run.dir.display(),
                    run.name(),
                    throughput_note(run.throughput_col)
                );
                if let Some(comp) = claim
                    .companion
                    .as_ref()
                    .filter(|c| run.stress().iter().any(|r| r.stack == c.stack))
                {
                    let _ = writeln!(
                        sections,
                        "_{}_ The rows \"{} in {}'s place\" read the same claim with that stack; {}\n",
                        comp.question,
                        label(comp.stack),
                        label(comp.replaces),
                        companion_rule(claim, comp)
                    );
                }
                let _ = writeln!(sections, "| variant | outcome | numbers |");
                let _ = writeln!(sections, "|---|---|---|");
                let session_runs = sessions.map(|s| s.claim_runs(run)).unwrap_or_default();
                for variant in run.variants() {
                    let Some(mut o) = check(claim, &View::new(run, Some(&variant))) else {
                        let _ = writeln!(
                            sections,
                            "| {variant} | cannot be checked | the variant lacks the cells this claim needs |"
                        );
                        variant_verdicts.push(format!("{variant}: cannot be checked"));
                        continue;
                    };
                    if session_runs.len() >= 2 {
                        across_sessions(claim, &variant, &session_runs, &mut o);
                    }
                    let _ = writeln!(sections, "| {variant} | {} | {} |", o.verdict, o.evidence);
                    let reading = claim.companion.as_ref().and_then(|comp| {
                        let r = companion(claim, comp, &View::new(run, Some(&variant)))?;
                        let _ = writeln!(
                            sections,
                            "| {variant}: {} in {}'s place | {} | {} |",
                            label(comp.stack),
                            label(comp.replaces),
                            r.verdict,
                            r.evidence
                        );
                        Some(format!(
                            "{}: {}",
                            label(comp.stack),
                            verdict_kind(&r.verdict)
                        ))
                    });
                    let verdict = match reading {
                        Some(r) => format!("{} ({r})", o.verdict),
                        None => o.verdict,
                    };
                    if variant == "default" {
                        default_verdict = verdict;
                    } else {
                        variant_verdicts.push(format!("{variant}: {verdict}"));
                    }
                }
                if sections[start..].contains(" †") {
                    let _ = writeln!(sections, "\n{}", fallback_note());
                }
                sections.push('\n');
            }
        }
        if let Check::FailureRateBelow(c) = &claim.check {
            let (text, verdict) = failure_rate_across(c, claim_runs, sessions);
            sections.push_str(&text);
            default_verdict = format!("{default_verdict}<br>every claim run: {verdict}");
            let companion_ran = |comp: &Companion| {
                claim_runs
                    .iter()
                    .any(|r| r.stress().iter().any(|x| x.stack == comp.stack))
            };
            if let Some(Check::FailureRateBelow(other)) = claim
                .companion
                .filter(companion_ran)
                .map(|comp| claim.check.with_stack(comp.replaces, comp.stack))
            {
                let (text, verdict) = failure_rate_across(&other, claim_runs, sessions);
                sections.push_str(&text);
                default_verdict = format!(
                    "{default_verdict}<br>every claim run, {}: {verdict}",
                    label(other.stack)
                );
            }
        }
        if let Some(regime) = claim.memory_fits {
            // The slope describes every level fitted; the claim's one point does not.
            scale::memory_table(&mut sections, reference, Some(regime))?;
            if let Some(run) = run {
                scale::memory_table(&mut sections, run, Some(regime))?;
            }
            crate::soak::section(&mut sections, claim_runs);
        }
        let _ = writeln!(
            out,
            "| {id}: {text} | {default_verdict} | {} |",
            if variant_verdicts.is_empty() {
                "—".to_string()
            } else {
                variant_verdicts.join("<br>")
            }
        );
    }
    out.push('\n');
    out.push_str(&sections);
    Ok(())
}

/// How a companion reading is judged, stated before its rows.
fn companion_rule(claim: &Claim, comp: &Companion) -> String {
    match claim.check {
        Check::Collapse(_) => format!(
            "it keeps {}'s resilience in a variant when its success at every level is at most {} percentage point(s) below {}'s, and does not otherwise.",
            label(comp.replaces),
            plain(comp.kept_within * 100.0),
            label(comp.replaces)
        ),
        _ => "the rule is the claim's own, stated above.".to_string(),
    }
}

/// The claim read with the companion stack in the replaced one's place (`None` when the
/// view lacks the companion stack). A collapse claim is about the TCP stacks, so its reading
/// compares the companion's success with the replaced stack's, level by level
/// ([`Companion::kept_within`]); every other claim is judged as it is, on the companion.
fn companion(claim: &Claim, comp: &Companion, v: &View) -> Option<Outcome> {
    let Check::Collapse(c) = &claim.check else {
        return check_kind(&claim.check.with_stack(comp.replaces, comp.stack), v);
    };
    if !v.has(comp.stack, c.regime) {
        return None;
    }
    let success = |stack: &str, l: u64| {
        let sent = v.sum(stack, c.regime, l, "sent");
        (sent > 0.0).then(|| v.sum(stack, c.regime, l, "ok") / sent)
    };
    let pairs: Vec<(u64, f64, f64)> = v
        .levels(c.regime)
        .into_iter()
        .filter_map(|l| Some((l, success(comp.stack, l)?, success(comp.replaces, l)?)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let worst = pairs
        .iter()
        .copied()
        .fold(None, |a: Option<(u64, f64, f64)>, b| match a {
            Some(a) if a.2 - a.1 >= b.2 - b.1 => Some(a),
            _ => Some(b),
        })?;
    let kept = pairs
        .iter()
        .all(|(_, own, other)| *own >= other - comp.kept_within);
    let verdict = if kept {
        format!(
            "kept: within {} point(s) of {} at every level",
            plain(comp.kept_within * 100.0),
            label(comp.replaces)
        )
    } else {
        format!(
            "not kept: at {} workers {} vs {}'s {}",
            worst.0,
            pct(worst.1),
            label(comp.replaces),
            pct(worst.2)
        )
    };
    Some(Outcome {
        verdict,
        evidence: format!(
            "success by workers, {} vs {}: {}",
            label(comp.stack),
            label(comp.replaces),
            pairs
                .iter()
                .map(|(l, own, other)| format!("{l}: {} vs {}", pct(*own), pct(*other)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// A verdict over the sessions: the claim judged on every session's run of the variant; it is
/// stable only if its kind ([`verdict_kind`]) is the same in every session, and the verdict
/// says in how many it held. A throughput claim's figure also gets its interval over the
/// session means ([`between_sessions`]) beside the within-session one.
fn across_sessions(claim: &Claim, variant: &str, session_runs: &[(u32, Run)], o: &mut Outcome) {
    let kind = verdict_kind(&o.verdict).to_string();
    let judged: Vec<Option<String>> = session_runs
        .iter()
        .map(|(_, r)| check(claim, &View::new(r, Some(variant))).map(|x| x.verdict))
        .collect();
    let held = judged
        .iter()
        .filter(|v| v.as_deref().is_some_and(|v| verdict_kind(v) == kind))
        .count();
    let n = session_runs.len();
    let _ = write!(
        o.verdict,
        "; the same verdict in {held} of {n} sessions ({})",
        if held == n {
            "the verdict is stable across sessions"
        } else {
            "the verdict is not stable across sessions"
        }
    );
    for figure in headline_figures(claim, &View::new(&session_runs[0].1, Some(variant))) {
        let values: Vec<Vec<f64>> = session_runs
            .iter()
            .map(|(_, r)| (figure.per_repetition)(&View::new(r, Some(variant))))
            .collect();
        let between = between_sessions(&values);
        let _ = write!(
            o.evidence,
            "; {} between sessions (n = {} session means): {} (within one session: the figures above)",
            figure.label,
            between.n,
            (figure.show)(&between)
        );
    }
}

/// A figure's values per repetition in one session's view of a variant.
type PerRepetition<'c> = Box<dyn Fn(&View) -> Vec<f64> + 'c>;

/// A claim's headline figure as each repetition of a session measured it, so that its
/// between-session interval is over the session means of those values.
struct Headline<'c> {
    /// What the figure is, e.g. "gRPC reuse req/s at 500 workers".
    label: String,
    /// The figure per repetition in one session's view of the variant (empty: not there).
    per_repetition: PerRepetition<'c>,
    /// How the interval is written (units included).
    show: fn(&Interval) -> String,
}

fn show_pct_interval(iv: &Interval) -> String {
    match iv.ci {
        Some((lo, hi)) => format!("{} [{}, {}]", pct(iv.mean), pct(lo), pct(hi)),
        None => pct(iv.mean),
    }
}

fn show_mb_interval(iv: &Interval) -> String {
    format!("{} MB", show(iv, 1e-6, 1))
}

/// Success (ok / sent) of each repetition of a stack's cell.
fn success_per_repetition(v: &View, stack: &str, regime: &str, c: u64) -> Vec<f64> {
    v.cells(stack, regime, c)
        .into_iter()
        .filter_map(|r| {
            let sent = fval(r, "sent")?;
            (sent > 0.0).then(|| fval(r, "ok").unwrap_or(0.0) / sent)
        })
        .collect()
}

/// The figures a claim's verdict rests on, each as a function of one session's view: the
/// throughput of a throughput claim, the success of every stack a collapse or failure-rate
/// claim names at its level, the ceiling's top throughput, the server memory of both stacks
/// of a memory claim. Levels are the first session's (the sessions run one experiment file).
fn headline_figures<'c>(claim: &'c Claim, first: &View) -> Vec<Headline<'c>> {
    let mut out = Vec::new();
    match &claim.check {
        Check::Throughput(t) => {
            if let Some(top) = level(first, t.regime, t.at) {
                out.push(Headline {
                    label: format!("{} {} req/s at {top} workers", label(t.stack), t.regime),
                    per_repetition: Box::new(move |v: &View| {
                        v.cells(t.stack, t.regime, top)
                            .into_iter()
                            .filter_map(repetition_rate)
                            .collect()
                    }),
                    show: show_rps,
                });
            }
        }
        Check::Collapse(c) => {
            if let Some(at) = level(first, c.regime, c.at) {
                let stacks = c.claimed.iter().map(|x| x.0).chain([c.contrast]);
                for stack in stacks.filter(|s| first.has(s, c.regime)) {
                    let regime = c.regime;
                    out.push(Headline {
                        label: format!("{} success at {at} workers", label(stack)),
                        per_repetition: Box::new(move |v: &View| {
                            success_per_repetition(v, stack, regime, at)
                        }),
                        show: show_pct_interval,
                    });
                }
            }
        }
        Check::FailureRateBelow(f) => {
            if let Some(&top) = first.levels(f.regime).last() {
                out.push(Headline {
                    label: format!("{} success at {top} workers", label(f.stack)),
                    per_repetition: Box::new(move |v: &View| {
                        success_per_repetition(v, f.stack, f.regime, top)
                    }),
                    show: show_pct_interval,
                });
            }
        }
        Check::Ceiling(c) => {
            let top = first
                .levels(c.regime)
                .into_iter()
                .filter_map(|l| Some((l, first.tput(c.stack, c.regime, l)?.0.mean)))
                .fold(None, |a: Option<(u64, f64)>, b| match a {
                    Some(a) if a.1 >= b.1 => Some(a),
                    _ => Some(b),
                });
            if let Some((at, _)) = top {
                out.push(Headline {
                    label: format!("{} {} req/s at {at} workers", label(c.stack), c.regime),
                    per_repetition: Box::new(move |v: &View| {
                        v.cells(c.stack, c.regime, at)
                            .into_iter()
                            .filter_map(repetition_rate)
                            .collect()
                    }),
                    show: show_rps,
                });
            }
        }
        Check::MemoryRatio(m) => {
            if let Some(top) = level(first, m.regime, m.at) {
                for stack in [m.stack, m.versus] {
                    out.push(Headline {
                        label: format!("{} server VmHWM at {top} workers", label(stack)),
                        per_repetition: Box::new(move |v: &View| {
                            v.cells(stack, m.regime, top)
                                .into_iter()
                                .filter_map(|r| {
                                    fval(r, "server_rss_hwm_bytes")
                                        .or_else(|| fval(r, "server_rss_peak_bytes"))
                                })
                                .collect()
                        }),
                        show: show_mb_interval,
                    });
                }
            }
        }
    }
    out
}

/// C1's kind: see [`Throughput`].
fn throughput(v: &View, claim: &Throughput) -> Option<Outcome> {
    let Throughput {
        stack,
        regime,
        at,
        claimed_rps,
        p95_max_ms,
        match_fraction,
        stable_cv,
    } = *claim;
    let top = level(v, regime, at)?;
    let (rps, rps_fallback) = v.tput(stack, regime, top)?;
    let p95_ms = v.stat(stack, regime, top, "latency_p95_us")?.mean / 1000.0;
    let ratio = rps.mean / claimed_rps;
    let level = if (ratio - 1.0).abs() <= match_fraction {
        "matched"
    } else if ratio > 1.0 {
        "exceeded"
    } else {
        "not reached"
    };
    let by_level: Vec<(u64, f64)> = v
        .levels(regime)
        .into_iter()
        .filter_map(|c| Some((c, v.tput(stack, regime, c)?.0.mean)))
        .collect();
    let means: Vec<f64> = by_level.iter().map(|x| x.1).collect();
    let across_levels = cv(&means);
    let across_reps = rps.sd.filter(|_| rps.mean != 0.0).map(|sd| sd / rps.mean);
    let stable =
        across_levels.is_none_or(|x| x <= stable_cv) && across_reps.is_none_or(|x| x <= stable_cv);
    let stability = format!(
        "throughput CV across {} levels {}{}",
        by_level.len(),
        across_levels.map_or("n/a (one level)".into(), |x| format!("{:.1} %", x * 100.0)),
        match across_reps {
            Some(x) => format!(
                ", across {} repetitions at {top} workers {:.1} %",
                rps.n,
                x * 100.0
            ),
            None => format!(
                ", {} repetition(s) at {top} workers: no spread across repetitions",
                rps.n
            ),
        }
    );
    let p95_ok = p95_ms <= p95_max_ms;
    let list: Vec<String> = by_level
        .iter()
        .map(|(c, r)| format!("{c}: {}", thousands(*r)))
        .collect();
    Some(Outcome {
        verdict: format!(
            "{level} across machines ({} vs ≈ {} req/s, {ratio:.2}×; {}); p95 {p95_ms:.2} ms {}; {}",
            thousands(rps.mean),
            thousands(claimed_rps),
            show_both(&v.both_rates(stack, regime, top)),
            if p95_ok {
                format!("≤ {} ms", plain(p95_max_ms))
            } else {
                format!("> {} ms: bound violated", plain(p95_max_ms))
            },
            if stable { "stable" } else { "not stable" }
        ),
        evidence: format!(
            "{} at {top} workers: {} req/s, p95 {p95_ms:.2} ms; req/s by workers: {}; {stability} (stable = CV ≤ {:.0} %); the claimed figure is from another machine, so the ratio compares machines as much as protocols; Little's law in a closed loop: mean latency = workers / throughput = {top} / {} = {:.2} ms, so a p95 bound follows largely from the throughput",
            label(stack),
            show_tput(&(rps, rps_fallback)),
            list.join(", "),
            stable_cv * 100.0,
            thousands(rps.mean),
            top as f64 / rps.mean * 1000.0
        ),
    })
}

/// C2's kind: see [`Collapse`].
fn collapse(v: &View, claim: &Collapse) -> Option<Outcome> {
    let Collapse {
        regime,
        at: claimed_at,
        claimed,
        like_claimed,
        collapse_below,
        contrast,
    } = *claim;
    let levels = v.levels(regime);
    let at = level(v, regime, claimed_at)?;
    // The level the claim names (its text says "at 200"), whether or not the run has it.
    let named = match claimed_at {
        At::Workers(c) => c,
        At::Highest => at,
    };
    let success = |stack: &str, c: u64| {
        let sent = v.sum(stack, regime, c, "sent");
        (sent > 0.0).then(|| v.sum(stack, regime, c, "ok") / sent)
    };
    let measured: Vec<f64> = claimed
        .iter()
        .map(|(s, _)| success(s, at))
        .collect::<Option<_>>()?;
    let verdict = if measured.iter().all(|x| *x <= like_claimed) {
        format!(
            "matched: collapse to ≤ {} % success",
            plain(like_claimed * 100.0)
        )
    } else if measured.iter().all(|x| *x < collapse_below) {
        "collapse, but milder than claimed".to_string()
    } else {
        "no collapse".to_string()
    };
    let mut parts = Vec::new();
    for stack in v.stacks() {
        let by_level: Vec<String> = levels
            .iter()
            .filter_map(|c| Some(format!("{c}: {}", pct(success(&stack, *c)?))))
            .collect();
        let claimed = claimed
            .iter()
            .find(|x| x.0 == stack)
            .map_or(String::new(), |x| {
                format!(" (claimed at {named}: {})", pct(x.1))
            });
        parts.push(format!(
            "{} success by workers {}{claimed}",
            label(&stack),
            by_level.join(", ")
        ));
    }
    if !v.has(contrast, regime) {
        parts.push(format!("{} was not run in this variant", label(contrast)));
    }
    // A collapse below the named level is a budget running out, not a threshold there.
    let onset = levels.iter().copied().find(|c| {
        claimed
            .iter()
            .all(|(s, _)| success(s, *c).is_some_and(|x| x < collapse_below))
    });
    let mut onset_note = String::new();
    if let Some(c) = onset.filter(|c| *c < named) {
        let _ = write!(
            onset_note,
            "; collapses already at {c} workers: a budget, not a threshold at {named}"
        );
        // The port budget, told for the first claimed stack.
        let first = claimed.first()?.0;
        let cells = v.cells(first, regime, c);
        if let Some(ports) = cells
            .first()
            .and_then(|r| ports_in(r.port_range.as_deref()?))
        {
            let used = v.sum(first, regime, c, "ok") + v.sum(first, regime, c, "warmup_ok");
            // What TIME_WAIT held, as measured in the load generator's namespace.
            let held = match cells.iter().filter_map(|r| r.tcp_time_wait_peak).max() {
                Some(peak) => format!(
                    "at most {} connections in TIME_WAIT at once (measured)",
                    thousands(peak as f64)
                ),
                None => "TIME_WAIT not counted in this run".to_string(),
            };
            let _ = write!(
                onset_note,
                " ({} local ports; {} completed {} connections in warm-up and measured phase together, {held})",
                thousands(ports as f64),
                label(first),
                thousands(used)
            );
        }
    }
    let classes = failure_summary(
        v.rows
            .iter()
            .filter(|r| r.regime == regime && r.concurrency as u64 == at)
            .copied(),
    );
    Some(Outcome {
        verdict: format!(
            "{verdict} (at {at} workers {} vs claimed {}){onset_note}",
            claimed
                .iter()
                .zip(&measured)
                .map(|((s, _), x)| format!("{} {}", label(s), pct(*x)))
                .collect::<Vec<_>>()
                .join(", "),
            claimed
                .iter()
                .map(|(_, x)| pct(*x))
                .collect::<Vec<_>>()
                .join(" / ")
        ),
        evidence: format!("{}{classes}", parts.join("; ")),
    })
}

/// C3's kind: see [`FailureRateBelow`]. Each level of the claimed stack is judged on its own
/// ([`judge_rate`]); the other stacks are shown under the same conditions.
fn failure_rate_below(v: &View, claim: &FailureRateBelow) -> Option<Outcome> {
    let FailureRateBelow {
        stack: claimed_stack,
        regime,
        max_failure_rate,
    } = *claim;
    let bound = format!("{} %", plain(max_failure_rate * 100.0));
    let levels = v.levels(regime);
    if !v.has(claimed_stack, regime) {
        return None;
    }
    let mut evidence = Vec::new();
    let mut claim_verdict = String::new();
    for stack in v.stacks() {
        let mut per_level = Vec::new();
        let (mut k_all, mut n_all) = (0u64, 0u64);
        let mut judged = Vec::new();
        for c in &levels {
            let n = v.sum(&stack, regime, *c, "sent") as u64;
            let k = v.sum(&stack, regime, *c, "failed") as u64;
            if n == 0 {
                continue;
            }
            per_level.push(format!(
                "{c}: {k} in {} (≤ {})",
                thousands(n as f64),
                pct_digits(clopper_pearson_upper(k, n, ONE_SIDED_95_ALPHA), 4)
            ));
            judged.push(judge_rate(k, n, max_failure_rate));
            k_all += k;
            n_all += n;
        }
        if n_all == 0 {
            continue;
        }
        evidence.push(format!(
            "{}: failures by workers {}; pooled {k_all} in {} (≤ {})",
            label(&stack),
            per_level.join(", "),
            thousands(n_all as f64),
            pct_digits(clopper_pearson_upper(k_all, n_all, ONE_SIDED_95_ALPHA), 4)
        ));
        if stack == claimed_stack {
            claim_verdict = rate_verdict(&judged, &bound);
        }
    }
    let others_also: Vec<String> = v
        .stacks()
        .into_iter()
        .filter(|s| s != claimed_stack)
        .filter(|s| {
            levels.iter().all(|c| {
                let n = v.sum(s, regime, *c, "sent");
                n > 0.0 && v.sum(s, regime, *c, "failed") / n < max_failure_rate
            })
        })
        .map(|s| label(&s))
        .collect();
    let others = if others_also.is_empty() {
        String::new()
    } else {
        format!(
            "; {} also stayed below {bound} failures under the same conditions",
            others_also.join(", ")
        )
    };
    Some(Outcome {
        verdict: format!("{claim_verdict}{others}"),
        evidence: format!(
            "{} (k failures in n requests, one-sided 95 % Clopper–Pearson upper bound)",
            evidence.join("; ")
        ),
    })
}

/// A one-sided 95 % bound: α = 0.05 in one tail.
const ONE_SIDED_95_ALPHA: f64 = 0.05;

/// How one cell's k failures in n requests judge a claim "the failure rate is below `max`",
/// by one-sided 95 % Clopper–Pearson bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RateJudgement {
    /// The upper bound is below `max`: the claim holds in this cell.
    Shown,
    /// The lower bound is at or above `max`: the claim fails in this cell.
    Refuted,
    /// Neither: the n that would show it at the observed rate (`None`: no n would).
    Open { needed: Option<u64> },
}

fn judge_rate(k: u64, n: u64, max: f64) -> RateJudgement {
    if clopper_pearson_upper(k, n, ONE_SIDED_95_ALPHA) < max {
        RateJudgement::Shown
    } else if clopper_pearson_lower(k, n, ONE_SIDED_95_ALPHA) >= max {
        RateJudgement::Refuted
    } else {
        let observed = if n == 0 { 0.0 } else { k as f64 / n as f64 };
        RateJudgement::Open {
            needed: trials_to_show_below(observed, max, ONE_SIDED_95_ALPHA),
        }
    }
}

impl RateJudgement {
    fn describe(self) -> String {
        match self {
            RateJudgement::Shown => "holds".into(),
            RateJudgement::Refuted => "fails".into(),
            RateJudgement::Open { needed: Some(n) } => format!(
                "undecided (≈ {} requests at this rate would decide it)",
                thousands(n as f64)
            ),
            RateJudgement::Open { needed: None } => {
                "undecided (no number of requests at this rate would show it)".into()
            }
        }
    }
}

/// The verdict over a set of judged cells (levels of one variant, or every cell of every run).
fn rate_verdict(judged: &[RateJudgement], bound: &str) -> String {
    let count = |f: fn(&RateJudgement) -> bool| judged.iter().filter(|j| f(j)).count();
    let refuted = count(|j| *j == RateJudgement::Refuted);
    let open = count(|j| matches!(j, RateJudgement::Open { .. }));
    if refuted > 0 {
        format!(
            "not reproduced: the failure rate's one-sided 95 % lower bound is at or above {bound} at {refuted} of {} levels",
            judged.len()
        )
    } else if open == 0 {
        format!("confirmed: the one-sided 95 % upper bound is below {bound} at every level")
    } else {
        format!(
            "consistent but not shown at {open} of {} levels",
            judged.len()
        )
    }
}

/// C3 over every claim run: each cell of the claimed stack and regime, in every variant of
/// every claim run, judged by [`judge_rate`]; the rule is stated before the table. Returns the
/// section and a one-line verdict for the summary table. With sessions, each cell is also
/// judged in every session, and the row says in how many the judgement was session 1's.
fn failure_rate_across(
    claim: &FailureRateBelow,
    claim_runs: &[Run],
    sessions: Option<&Sessions>,
) -> (String, String) {
    let FailureRateBelow {
        stack,
        regime,
        max_failure_rate,
    } = *claim;
    let bound = format!("{} %", plain(max_failure_rate * 100.0));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#### Every {} {regime} cell of every claim run
",
        label(stack)
    );
    let _ = writeln!(
        out,
        "Rule, fixed before the data: every {} {regime} cell of every claim run given to the paper (every variant, every level, repetitions pooled) is judged on its own. With k failures in n requests, the claim holds in the cell when the one-sided 95 % Clopper–Pearson upper bound of the failure rate is below {bound}, fails there when the one-sided 95 % lower bound is at or above {bound}, and is undecided otherwise (with no failure, {} requests decide it). The claim holds across conditions only if it holds in every cell.\n",
        label(stack),
        thousands(zero_failure_trials_below(max_failure_rate, ONE_SIDED_95_ALPHA) as f64)
    );
    let mut judged: Vec<(String, u64, RateJudgement)> = Vec::new();
    let mut rows = String::new();
    // Cells judged in two or more sessions, and those whose judgement every session shares.
    let (mut in_sessions, mut same_in_all, mut session_count) = (0usize, 0usize, 0usize);
    for run in claim_runs {
        let session_runs = sessions.map(|s| s.claim_runs(run)).unwrap_or_default();
        for variant in run.variants() {
            let v = View::new(run, Some(&variant));
            let judge = |v: &View, c: u64| {
                let n = v.sum(stack, regime, c, "sent") as u64;
                let k = v.sum(stack, regime, c, "failed") as u64;
                (n > 0).then(|| (k, n, judge_rate(k, n, max_failure_rate)))
            };
            for c in v.levels(regime) {
                let Some((k, n, j)) = judge(&v, c) else {
                    continue;
                };
                let same = if session_runs.len() >= 2 {
                    let same = session_runs
                        .iter()
                        .filter(|(_, r)| {
                            judge(&View::new(r, Some(&variant)), c).is_some_and(|(_, _, other)| {
                                std::mem::discriminant(&other) == std::mem::discriminant(&j)
                            })
                        })
                        .count();
                    in_sessions += 1;
                    session_count = session_count.max(session_runs.len());
                    if same == session_runs.len() {
                        same_in_all += 1;
                    }
                    format!("{same} of {}", session_runs.len())
                } else {
                    "—".to_string()
                };
                let _ = writeln!(
                    rows,
                    "| {} | {variant} | {c} | {k} in {} | {} | [{}, {}] | {} | {same} |",
                    run.name(),
                    thousands(n as f64),
                    pct(1.0 - k as f64 / n as f64),
                    pct_digits(clopper_pearson_lower(k, n, ONE_SIDED_95_ALPHA), 4),
                    pct_digits(clopper_pearson_upper(k, n, ONE_SIDED_95_ALPHA), 4),
                    j.describe()
                );
                judged.push((format!("{} {variant}", run.name()), c, j));
            }
        }
    }
    if judged.is_empty() {
        let _ = writeln!(out, "No claim run has a {} {regime} cell.\n", label(stack));
        return (out, "no cell to judge".into());
    }
    let _ = writeln!(
        out,
        "| run | variant | workers | failures | success | failure rate, one-sided 95 % bounds | the claim | same in sessions |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---|---|---|");
    out.push_str(&rows);
    let failed: Vec<&(String, u64, RateJudgement)> = judged
        .iter()
        .filter(|(_, _, j)| *j == RateJudgement::Refuted)
        .collect();
    // "run variant at 200, 500": one entry per variant, its failing levels listed.
    let mut failing: Vec<(String, Vec<String>)> = Vec::new();
    for (place, c, _) in &failed {
        match failing.last_mut() {
            Some((p, levels)) if p == place => levels.push(c.to_string()),
            _ => failing.push((place.clone(), vec![c.to_string()])),
        }
    }
    let failing: Vec<String> = failing
        .into_iter()
        .map(|(p, levels)| format!("{p} at {}", levels.join(", ")))
        .collect();
    let open = judged
        .iter()
        .filter(|(_, _, j)| matches!(j, RateJudgement::Open { .. }))
        .count();
    let held = judged.len() - failed.len() - open;
    let mut verdict = if !failed.is_empty() {
        format!(
            "not reproduced across conditions: fails in {} of {} cells ({})",
            failed.len(),
            judged.len(),
            failing.join("; ")
        )
    } else if open > 0 {
        format!(
            "consistent but not shown across conditions: holds in {held} of {} cells, undecided in {open}",
            judged.len()
        )
    } else {
        format!(
            "confirmed across conditions: holds in all {} cells",
            judged.len()
        )
    };
    if in_sessions > 0 {
        let _ = write!(
            verdict,
            "; the judgement of {same_in_all} of {in_sessions} cells is the same in all {session_count} sessions"
        );
    }
    let _ = writeln!(
        out,
        "\nAcross every claim run (figures of session 1; \"same in sessions\": in how many sessions at the data commit the same cell was judged alike): holds in {held}, fails in {}, undecided in {open} of {} cells: {verdict}.\n",
        failed.len(),
        judged.len()
    );
    (out, verdict)
}

/// C4's kind: see [`Ceiling`].
fn ceiling(v: &View, claim: &Ceiling) -> Option<Outcome> {
    let Ceiling {
        stack,
        regime,
        low_rps,
        high_rps,
        match_fraction,
    } = *claim;
    let rps: Vec<(u64, (Interval, bool))> = v
        .levels(regime)
        .into_iter()
        .filter_map(|c| Some((c, v.tput(stack, regime, c)?)))
        .collect();
    if rps.is_empty() {
        return None;
    }
    let (max_at, max) = rps
        .iter()
        .map(|r| (r.0, r.1 .0.mean))
        .fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
    let verdict = if max > high_rps * (1.0 + match_fraction) {
        format!(
            "not reproduced: up to {} req/s ({:.0}× the ceiling)",
            thousands(max),
            max / high_rps
        )
    } else if max < low_rps * (1.0 - match_fraction) {
        format!("not reproduced: at most {max:.0} req/s, below the claimed ceiling")
    } else {
        format!(
            "matched: at most {max:.0} req/s vs {}–{}",
            plain(low_rps),
            plain(high_rps)
        )
    };
    let verdict = format!(
        "{verdict} [at {max_at} workers: {}]",
        show_both(&v.both_rates(stack, regime, max_at))
    );
    let list: Vec<String> = rps
        .iter()
        .map(|(c, r)| {
            let bound = v
                .cells(stack, regime, *c)
                .first()
                .and_then(|r| rtt_s(r.netem.as_deref()?))
                .map_or(String::new(), |rtt| {
                    format!(" (c / (2·RTT) = {})", thousands(*c as f64 / (2.0 * rtt)))
                });
            format!("{c}: {}{bound}", show_tput(r))
        })
        .collect();
    Some(Outcome {
        verdict,
        evidence: format!(
            "{} {regime} req/s by workers: {}",
            label(stack),
            list.join(", ")
        ),
    })
}

/// C5's kind: see [`MemoryRatio`].
fn memory_ratio(v: &View, claim: &MemoryRatio) -> Option<Outcome> {
    let MemoryRatio {
        stack: claimed_stack,
        versus,
        regime,
        at,
        claimed_mb,
        versus_mb,
        match_within,
    } = *claim;
    let claim_ratio = claimed_mb / versus_mb;
    let top = level(v, regime, at)?;
    let hwm = v
        .stat(claimed_stack, regime, top, "server_rss_hwm_bytes")
        .is_some()
        && v.stat(versus, regime, top, "server_rss_hwm_bytes")
            .is_some();
    let col = if hwm {
        "server_rss_hwm_bytes"
    } else {
        "server_rss_peak_bytes"
    };
    let mb = v.stat(claimed_stack, regime, top, col)?.mean / 1e6;
    let versus_measured_mb = v.stat(versus, regime, top, col)?.mean / 1e6;
    let ratio = mb / versus_measured_mb;
    let verdict = if (ratio / claim_ratio - 1.0).abs() <= match_within {
        format!("matched: {ratio:.1}× vs {claim_ratio:.0}×")
    } else {
        format!(
            "not reproduced: {ratio:.1}× ({mb:.1} MB vs {versus_measured_mb:.1} MB), not {claim_ratio:.0}× ({} MB vs {} MB)",
            plain(claimed_mb),
            plain(versus_mb)
        )
    };
    let mut parts = Vec::new();
    for stack in [claimed_stack, versus] {
        for c in v.levels(regime) {
            let Some(peak) = v.stat(stack, regime, c, "server_rss_peak_bytes") else {
                continue;
            };
            let mut s = format!(
                "{} at {c}: server sampled peak {} MB",
                label(stack),
                show(&peak, 1e-6, 1)
            );
            if let Some(h) = v.stat(stack, regime, c, "server_rss_hwm_bytes") {
                let _ = write!(s, ", VmHWM {} MB", show(&h, 1e-6, 1));
            }
            if let Some(cl) = v.stat(stack, regime, c, "client_rss_peak_bytes") {
                let _ = write!(s, "; client sampled peak {} MB", show(&cl, 1e-6, 1));
            }
            if let Some(h) = v.stat(stack, regime, c, "client_rss_hwm_bytes") {
                let _ = write!(s, ", VmHWM {} MB", show(&h, 1e-6, 1));
            }
            // Peak vs cell length: a series still rising at its last sample has not peaked.
            if let Some(cell) = v.cells(stack, regime, c).first() {
                let elapsed = fval(cell, "elapsed_s").unwrap_or(f64::NAN);
                if let Some(series) = v.run.rss_samples(&cell.cell_key, "server") {
                    let rising = series.last_bytes >= series.max_bytes
                        && series.last_bytes > series.first_bytes * 1.05;
                    let _ = write!(
                        s,
                        "; cell {elapsed:.2} s, {} server samples, {:.1} → {:.1} MB{}",
                        series.samples,
                        series.first_bytes / 1e6,
                        series.last_bytes / 1e6,
                        if rising {
                            " (still rising at the last sample: the peak depends on cell length)"
                        } else {
                            ""
                        }
                    );
                } else {
                    let _ = write!(s, "; cell {elapsed:.2} s, no resource samples");
                }
            }
            parts.push(s);
        }
    }
    parts.push(udp_buffers(v));
    Some(Outcome {
        verdict: format!(
            "{verdict} ({} at {top} workers)",
            if hwm {
                "VmHWM"
            } else {
                "sampled peak; no VmHWM column"
            }
        ),
        evidence: parts.join("; "),
    })
}

/// The number of local ports in a `port_range` cell ("40000 41023" → 1,024).
pub(crate) fn ports_in(range: &str) -> Option<u64> {
    let mut it = range.split_whitespace().map(|p| p.parse::<u64>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (hi >= lo).then(|| hi - lo + 1)
}

/// Round-trip time in seconds from a `netem` cell ("rtt=100ms,…" or "delay=50ms" = RTT 100 ms).
fn rtt_s(netem: &str) -> Option<f64> {
    netem.split(',').find_map(|part| {
        let (key, value) = part.trim().split_once('=')?;
        let ms: f64 = value.trim().strip_suffix("ms")?.parse().ok()?;
        match key.trim() {
            "rtt" => Some(ms / 1000.0),
            "delay" => Some(2.0 * ms / 1000.0),
            _ => None,
        }
    })
}

/// The UDP receive buffer QUIC sockets really got: the manifest's `getsockopt` reading for
/// the server's default request and, for a variant that asks for more, the kernel's cap
/// (Linux sets at most `net.core.rmem_max` for SO_RCVBUF, whatever is asked, and reports twice
/// what it set).
fn udp_buffers(v: &View) -> String {
    let m = &v.run.results.manifest;
    let number = |key: &str| {
        find_first(m, key).and_then(|x| x.as_f64().or_else(|| scalar(&x).trim().parse().ok()))
    };
    let effective = number("udp_rcvbuf_effective_bytes");
    let requested = number("udp_buffer_requested_bytes");
    let rmem_max = number("net.core.rmem_max");
    let mut s = match (requested, effective) {
        (Some(r), Some(e)) => format!(
            "UDP SO_RCVBUF: server default {} B requested, {} B set (getsockopt reads {} B: Linux reports twice what it sets, the rest is its bookkeeping)",
            thousands(r),
            thousands(e / 2.0),
            thousands(e)
        ),
        (None, Some(e)) => format!(
            "UDP SO_RCVBUF set: {} B (getsockopt reads twice that, {} B)",
            thousands(e / 2.0),
            thousands(e)
        ),
        _ => "effective UDP SO_RCVBUF: not recorded by this run".to_string(),
    };
    if let Some(max) = rmem_max {
        let _ = write!(s, ", net.core.rmem_max {} B", thousands(max));
        let asked = v
            .rows
            .iter()
            .filter_map(|r| fval(r, "udp_buffer_bytes"))
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
        if let Some(asked) = asked {
            let granted = asked.min(max);
            let _ = write!(
                s,
                "; this variant asks {} B, so the kernel sets {} B{}",
                thousands(asked),
                thousands(granted),
                if asked > max {
                    " (capped by rmem_max: the knob did not take full effect)"
                } else {
                    ""
                }
            );
        }
    } else {
        s.push_str(" (the kernel caps any request at net.core.rmem_max, not recorded here)");
    }
    s
}

fn failure_summary<'a>(rows: impl Iterator<Item = &'a Row>) -> String {
    let mut by_class: BTreeMap<String, f64> = BTreeMap::new();
    for r in rows {
        for class in bench_core::FailureClass::ALL {
            let n = r.failures(class) as f64;
            if n > 0.0 {
                *by_class.entry(class.as_str().to_string()).or_default() += n;
            }
        }
    }
    if by_class.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = by_class
        .iter()
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect();
    format!("; failures: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_rtt_from_cells() {
        assert_eq!(ports_in("40000 41023"), Some(1024));
        assert_eq!(rtt_s("rtt=100ms"), Some(0.1));
        assert_eq!(rtt_s("loss=1%,delay=10ms"), Some(0.02));
        assert_eq!(rtt_s("loss=1%"), None);
    }

    /// 0 in 5,000 shows "below 0.06 %" one-sided (1 − 0.05^(1/5000) ≈ 0.0599 %), though the
    /// two-sided interval's upper end (0.074 %) would not; 2 in 5,000 decides nothing; 47 in
    /// 5,000 refutes it.
    #[test]
    fn one_cell_is_judged_by_one_sided_bounds() {
        assert_eq!(judge_rate(0, 5000, 0.0006), RateJudgement::Shown);
        assert_eq!(
            judge_rate(0, 4991, 0.0006),
            RateJudgement::Open { needed: Some(4992) }
        );
        assert!(matches!(
            judge_rate(2, 5000, 0.0006),
            RateJudgement::Open { needed: Some(n) } if n > 5000
        ));
        assert_eq!(judge_rate(47, 5000, 0.0006), RateJudgement::Refuted);
        assert_eq!(
            judge_rate(3, 5000, 0.0006),
            RateJudgement::Open { needed: None }
        );
    }
}
