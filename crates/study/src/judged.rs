//! The paper's judged part, written from the plan and the engine alone: the answer (the plan's
//! sentences, their words chosen by the verdicts' outcomes), the plan and when it was committed
//! (from git), every rule's verdicts with what their bounds cover and how the sessions agree,
//! and what ran out in each condition (from the failure counts). Nothing here names a claim, a
//! stack or a figure: those are the plan's and the data's.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::stacks::label;
use results::rows::Row as _;

use crate::engine::{self, agreement, Outcome, Verdict};
use crate::observe::ClaimData;
use crate::plan::{Compare, Op, Plan, QuantityKind, Resource, Rule, RuleKind, Sidedness};
use crate::provenance::{find_first, scalar};
use crate::text::{pct_digits, plain, thousands};

/// How long Linux holds a closed TCP connection's port in TIME_WAIT (`TCP_TIMEWAIT_LEN`, 60 s;
/// not tunable): the denominator of a port budget.
const TIME_WAIT_S: f64 = 60.0;

/// Which verdicts the plan's timing marks †, and why (from git).
pub(crate) struct Marks {
    /// Every verdict: the data do not contain the plan, or it cannot be checked.
    pub(crate) all: bool,
    /// The rules whose definition (the rule, its quantity, its conditions, the budgets or the
    /// minimum sample) changed after the data.
    pub(crate) rules: Vec<String>,
    /// What the banner and the footnote say.
    pub(crate) why: String,
}

impl Marks {
    pub(crate) fn none() -> Marks {
        Marks {
            all: false,
            rules: Vec::new(),
            why: String::new(),
        }
    }

    fn marks(&self, rule: &str) -> bool {
        self.all || self.rules.iter().any(|r| r == rule)
    }

    fn any(&self) -> bool {
        self.all || !self.rules.is_empty()
    }
}

/// What of the plan changed between the plan the data commit holds and this one: the rules
/// whose definition differs (all of them when the old plan cannot be read or the shared parts
/// changed), and whether only wording (the answer, labels, statements) changed.
pub(crate) fn changed_rules(old: Option<&Plan>, new: &Plan) -> Vec<String> {
    let Some(old) = old else {
        return new.rules.iter().map(|r| r.id.clone()).collect();
    };
    let shared = |p: &Plan| format!("{:?}{:?}{}", p.budgets.attempts, p.min_sample, p.confidence);
    let all_changed = shared(old) != shared(new);
    let definition = |p: &Plan, r: &crate::plan::Rule| {
        let mut r = r.clone();
        r.labels = crate::plan::Labels {
            holds: String::new(),
            fails: String::new(),
            undecided: String::new(),
        };
        r.hypothesis = String::new();
        let conditions: Vec<String> = r
            .conditions
            .iter()
            .filter_map(|c| p.conditions.iter().find(|x| &x.name == c))
            .map(|c| format!("{}{}{:?}", c.name, c.experiment, c.resource))
            .collect();
        format!(
            "{r:?}{:?}{conditions:?}",
            p.quantities.get(&r.quantity).map(|q| (
                &q.kind,
                &q.source,
                q.percentile,
                q.percentile_rule
            ))
        )
    };
    new.rules
        .iter()
        .filter(|r| {
            all_changed
                || old
                    .rules
                    .iter()
                    .find(|o| o.id == r.id)
                    .is_none_or(|o| definition(old, o) != definition(new, r))
        })
        .map(|r| r.id.clone())
        .collect()
}

/// One rule judged on the pooled sessions and in each session alone.
pub(crate) struct Judged<'p> {
    pub(crate) rule: &'p Rule,
    pub(crate) pooled: Vec<Verdict>,
    pub(crate) per_session: Vec<Vec<Verdict>>,
}

/// Every rule of the plan, judged.
pub(crate) fn judge_all<'p>(plan: &'p Plan, data: &ClaimData) -> Vec<Judged<'p>> {
    let sessions = data.sessions();
    plan.rules
        .iter()
        .map(|rule| Judged {
            rule,
            pooled: engine::judge(plan, rule, data),
            per_session: if sessions >= 2 {
                engine::judge_sessions(plan, rule, data, sessions)
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// The HTML anchor of a rule's table.
fn anchor(rule: &str) -> String {
    format!("rule-{}", rule.to_lowercase())
}

const LIMITS_ANCHOR: &str = "what-ran-out";

/// The regime whose connections ports, TIME_WAIT and descriptors are about.
const NEW_CONN: &str = "new-conn";

fn can_refute(plan: &Plan, condition: &str) -> bool {
    plan.conditions
        .iter()
        .find(|c| c.name == condition)
        .is_none_or(|c| c.can_refute)
}

/// Whether a verdict's cells could refute its rule: its condition can (the plan), and the
/// resource the condition makes scarce came near running out at that level (the data); else
/// why not.
/// The share of the port range that TIME_WAIT plus the workers must reach for a ports condition
/// to refute at a level: within a tenth, near enough that the mechanism acted. The generator's
/// choice, not the plan's (experiments/study/README.md says when it was made).
const PORTS_NEAR_SHARE: f64 = 0.9;

fn row_refutes(plan: &Plan, data: &ClaimData, v: &Verdict) -> Result<(), String> {
    let rule = plan.rules.iter().find(|r| r.id == v.rule);
    if rule.is_some_and(|r| r.refuted_in_any_condition) {
        return Ok(());
    }
    if !can_refute(plan, &v.condition) {
        return Err(match port_budget(data, &v.condition) {
            Some(b) => format!(
                "cannot refute: port budget {}/s against a demand of {}/s",
                thousands(b.per_s()),
                thousands(b.demand_per_s)
            ),
            None => "cannot refute (its resource cannot run out here)".into(),
        });
    }
    let Some(resource) = plan
        .conditions
        .iter()
        .find(|c| c.name == v.condition)
        .and_then(|c| c.resource)
    else {
        return Ok(());
    };
    let Some((runs, variant)) = data.condition(&v.condition) else {
        return Ok(());
    };
    // The rule's subject's own cells: TIME_WAIT and descriptors are counted per cell, and
    // another stack's cell at the same level says nothing of this one's.
    let subject = rule.map(|r| r.subject.stack.as_str());
    let rows: Vec<_> = runs
        .iter()
        .flat_map(|r| r.rows(Some(variant)))
        .filter(|r| r.regime == NEW_CONN && r.concurrency as u64 == v.workers)
        .filter(|r| subject.is_none_or(|s| r.stack == s))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    match resource {
        Resource::Ports => {
            if rows
                .iter()
                .any(|r| r.number("fail_addr_unavailable").unwrap_or(0.0) > 0.0)
            {
                return Ok(());
            }
            let Some(b) = port_budget(data, &v.condition) else {
                return Ok(());
            };
            let capacity = b.ports * b.addresses;
            let used = rows
                .iter()
                .map(|r| r.tcp_time_wait_peak.unwrap_or(0) + r.concurrency as u64)
                .max()
                .unwrap_or(0);
            if used as f64 >= PORTS_NEAR_SHARE * capacity as f64 {
                Ok(())
            } else {
                Err(format!(
                    "no: ports did not run short here (TIME_WAIT peak + workers {} of {} ports, under the generator's {:.0} % cut-off, no address failure)",
                    thousands(used as f64),
                    thousands(capacity as f64),
                    PORTS_NEAR_SHARE * 100.0
                ))
            }
        }
        Resource::Descriptors => {
            let failed = rows
                .iter()
                .any(|r| r.number("fail_fd_exhausted").unwrap_or(0.0) > 0.0);
            let nofile = rows.iter().find_map(|r| r.client_nofile);
            if failed || nofile.is_some_and(|n| v.workers >= n) {
                Ok(())
            } else {
                Err(format!(
                    "no: descriptors did not run short here ({} workers, {} descriptors, no EMFILE)",
                    v.workers,
                    nofile.map_or("?".to_string(), |n| n.to_string())
                ))
            }
        }
    }
}

/// "gRPC against gRPC/HTTP/3": what a rule's verdict compares.
fn subject_text(rule: &Rule) -> String {
    let s = label(&rule.subject.stack);
    match rule.kind() {
        RuleKind::Bound => s,
        RuleKind::Stacks(v) => format!("{s} against {}", label(&v)),
        RuleKind::Conditions(c) => format!("{s} against `{c}`"),
        RuleKind::Levels(l) => format!("{s} against {l} workers"),
    }
}

/// A figure of a rule in its unit: a proportion in % (a difference in points), a ratio as ×,
/// a mean with its unit.
fn figure(plan: &Plan, rule: &Rule, part: &str, x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    if part.starts_with("n (") || part == "successes" || part == "attempts" {
        return thousands(x);
    }
    let q = &plan.quantities[&rule.quantity];
    let compared = rule.versus.is_some() && !part.ends_with(" rate");
    match (q.kind, compared, rule.compare) {
        (QuantityKind::Proportion, true, _) => format!("{:+.2} points", x * 100.0),
        (QuantityKind::Proportion, false, _) => pct_digits(x, 3),
        (QuantityKind::Mean, true, Some(Compare::Ratio)) => format!("{x:.3}×"),
        (_, _, _) if x.abs() >= 100.0 => format!("{} {}", thousands(x), q.unit),
        _ => format!("{x:.2} {}", q.unit),
    }
}

/// What a verdict's bounds cover, in words.
fn covers(plan: &Plan, rule: &Rule, sessions: usize) -> String {
    let conf = plain(plan.confidence * 100.0);
    let sided = match rule.test.sided {
        Sidedness::One => "one-sided bound",
        Sidedness::Two => "two-sided interval",
    };
    let over = if sessions >= 2 {
        format!("{sessions} sessions")
    } else {
        "one session".into()
    };
    let q = &plan.quantities[&rule.quantity];
    match (q.kind, rule.versus.is_some(), rule.compare) {
        (QuantityKind::Proportion, false, _) => format!(
            "{conf} % {sided}, exact (Clopper–Pearson), on the successes of every repetition of {over} pooled"
        ),
        (QuantityKind::Proportion, true, _) => format!(
            "{conf} % {sided} on the difference of the two pooled rates of {over} (Newcombe's hybrid score)"
        ),
        (QuantityKind::Mean, false, _) => format!(
            "{conf} % {sided}, Student t over {}",
            if sessions >= 2 { "the session means" } else { "the repetitions" }
        ),
        (QuantityKind::Mean, true, Some(Compare::Ratio)) => format!(
            "{conf} % {sided} on the ratio: the extreme quotients of each side's Student t bounds at half the α, over {}",
            if sessions >= 2 { "the session means" } else { "the repetitions" }
        ),
        (QuantityKind::Mean, true, _) => format!(
            "{conf} % {sided} on the difference of means (Welch's t) over {}",
            if sessions >= 2 { "the session means" } else { "the repetitions" }
        ),
        (QuantityKind::Percentile, _, _) => {
            "no sampling bound: the merged histograms' percentile of each session and every repetition's are each held to the bound".into()
        }
    }
}

fn test_text(plan: &Plan, rule: &Rule) -> String {
    let t = &rule.test;
    let f = |x: f64| figure(plan, rule, "bound", x);
    match t.op {
        Op::Below => format!("< {}", f(t.value.unwrap_or(f64::NAN))),
        Op::AtMost => format!("≤ {}", f(t.value.unwrap_or(f64::NAN))),
        Op::Above => format!("> {}", f(t.value.unwrap_or(f64::NAN))),
        Op::AtLeast => format!("≥ {}", f(t.value.unwrap_or(f64::NAN))),
        Op::Within => format!(
            "within [{}, {}]",
            f(t.low.unwrap_or(f64::NAN)),
            f(t.high.unwrap_or(f64::NAN))
        ),
    }
}

/// The estimate and bounds of a verdict: "51.400 % [50.012 %, 52.781 %]", or a percentile's
/// parts.
fn reading(plan: &Plan, rule: &Rule, v: &Verdict) -> (String, String) {
    let part = |name: &str| v.parts.iter().find(|p| p.name == name);
    let estimate = v
        .parts
        .first()
        .filter(|p| p.meets.is_none())
        .map(|p| figure(plan, rule, &p.name, p.value));
    match (estimate, part("lower bound"), part("upper bound")) {
        (Some(e), Some(lo), Some(hi)) => {
            let mut e = e;
            if let (Some(k), Some(n)) = (part("successes"), part("attempts")) {
                e = format!("{e} ({} of {})", thousands(k.value), thousands(n.value));
            }
            if let (Some(a), Some(b)) = (part("subject rate"), part("versus rate")) {
                e = format!(
                    "{e} ({} against {})",
                    figure(plan, rule, "subject rate", a.value),
                    figure(plan, rule, "versus rate", b.value)
                );
            }
            // A mean of a quantity that cannot be negative: a t bound below 0 is shown as 0.
            let kind = plan.quantities[&rule.quantity].kind;
            let clamped = kind == QuantityKind::Mean && rule.versus.is_none() && lo.value < 0.0;
            let mut bounds = format!(
                "[{}, {}]",
                figure(
                    plan,
                    rule,
                    "lower bound",
                    if clamped { 0.0 } else { lo.value }
                ),
                figure(plan, rule, "upper bound", hi.value)
            );
            if clamped {
                bounds.push_str(" (t's lower bound below 0, shown as 0)");
            }
            let ns: Vec<String> = v
                .parts
                .iter()
                .filter(|p| p.name.starts_with("n ("))
                .map(|p| format!("{} = {}", p.name, thousands(p.value)))
                .collect();
            if !ns.is_empty() {
                bounds = format!("{bounds}; {}", ns.join(", "));
            }
            (e, bounds)
        }
        (Some(e), None, None) => {
            let ns: Vec<String> = v
                .parts
                .iter()
                .filter(|p| p.name.starts_with("n ("))
                .map(|p| format!("{} = {}", p.name, thousands(p.value)))
                .collect();
            (
                e,
                format!(
                    "unbounded: a side's lower bound is at or below 0; {}",
                    ns.join(", ")
                ),
            )
        }
        _ if !v.parts.is_empty() => {
            let shown = v
                .parts
                .iter()
                .map(|p| {
                    format!(
                        "{}: {}{}",
                        p.name,
                        figure(plan, rule, &p.name, p.value),
                        match p.meets {
                            Some(false) => " ✗",
                            _ => "",
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            (shown, "—".into())
        }
        _ => ("—".into(), "—".into()),
    }
}

/// How the sessions read a verdict: "3 of 3 agree", or every part that moved.
fn sessions_text(plan: &Plan, j: &Judged, v: &Verdict) -> String {
    if j.per_session.is_empty() {
        return match plan.quick_of_sessions {
            Some(n) => format!("one session (quick; the plan asks for {n})"),
            None => "one session".into(),
        };
    }
    let mine: Vec<&Verdict> = j
        .per_session
        .iter()
        .filter_map(|s| {
            s.iter()
                .find(|x| x.condition == v.condition && x.workers == v.workers)
        })
        .collect();
    let changes = agreement(&mine);
    let mut text = if changes.is_empty() {
        format!("{} of {} agree", mine.len(), j.per_session.len())
    } else {
        let parts = changes
            .iter()
            .map(|c| {
                let readings: Vec<String> = c
                    .sessions
                    .iter()
                    .map(|s| s.text(|x| figure(plan, j.rule, &c.part, x)))
                    .collect();
                format!("{}: {}", c.part, readings.join(" · "))
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!("moved: {parts}")
    };
    if !v.disagreeing.is_empty() {
        let _ = write!(
            text,
            "; session {} alone excludes the pooled rate",
            v.disagreeing
                .iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    text
}

/// A condition's port budget against its demand, from its runs.
struct PortBudget {
    /// Local ports: the cells' `port_range`, else the kernel's in the manifest.
    ports: u64,
    /// Source addresses the clients spread over.
    addresses: u64,
    /// The highest rate of established new connections of any cell, per second.
    demand_per_s: f64,
    /// The most connections any one cell established.
    most_in_a_cell: u64,
}

impl PortBudget {
    /// Connections per second the ports allow when each waits 60 s in TIME_WAIT.
    fn per_s(&self) -> f64 {
        self.ports as f64 * self.addresses as f64 / TIME_WAIT_S
    }

    fn text(&self) -> String {
        format!(
            "{} ports × {} address(es) ÷ 60 s = {}/s against {}/s; at most {} connections in one cell",
            thousands(self.ports as f64),
            self.addresses,
            thousands(self.per_s()),
            thousands(self.demand_per_s),
            thousands(self.most_in_a_cell as f64)
        )
    }
}

fn port_budget(data: &ClaimData, condition: &str) -> Option<PortBudget> {
    let (runs, variant) = data.condition(condition)?;
    let manifest = &runs.first()?.results.manifest;
    let rows: Vec<_> = runs
        .iter()
        .flat_map(|r| r.rows(Some(variant)))
        .filter(|r| r.regime == NEW_CONN)
        .collect();
    let first = rows.first()?;
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
        .or_else(|| manifest["experiment"]["source_addresses"].as_u64())
        .unwrap_or(1)
        .max(1);
    let demand_per_s = rows
        .iter()
        .filter_map(|r| {
            let elapsed = r.number("elapsed_s").filter(|e| *e > 0.0)?;
            Some(r.connections_established as f64 / elapsed)
        })
        .fold(0.0, f64::max);
    let most_in_a_cell = rows
        .iter()
        .map(|r| r.connections_established)
        .max()
        .unwrap_or(0);
    Some(PortBudget {
        ports,
        addresses,
        demand_per_s,
        most_in_a_cell,
    })
}

/// Ports in a "lo hi" range.
fn ports_in(range: &str) -> Option<u64> {
    let mut it = range.split_whitespace().map(|p| p.parse::<u64>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (hi >= lo).then(|| hi - lo + 1)
}

fn refute_text(plan: &Plan, data: &ClaimData, v: &Verdict) -> String {
    match row_refutes(plan, data, v) {
        Ok(()) => "yes".into(),
        Err(why) => why,
    }
}

/// A row's verdict as the table shows it: a row that cannot refute the rule carries no label
/// of the rule's, only what its bounds alone would have read.
fn verdict_text(plan: &Plan, data: &ClaimData, v: &Verdict) -> String {
    match row_refutes(plan, data, v) {
        Ok(()) => v.label.clone(),
        Err(_) if v.outcome == Outcome::NotJudged => v.label.clone(),
        Err(_) => format!(
            "none: cannot refute (its bounds alone would read \"{}\")",
            v.label
        ),
    }
}

/// Verdicts grouped for a sentence: "gRPC/HTTP/3 against gRPC, `c3-h3-success/default`, 200
/// workers: 0.780×"; the levels of one condition together, with the range of their estimates.
fn items(plan: &Plan, data: &ClaimData, judged: &[&Judged], outcome: Outcome) -> Vec<String> {
    items_of(plan, data, judged, outcome, true)
}

/// [`items`] of the rows that could refute their rule (`refuting`), or of those that could not.
fn items_of(
    plan: &Plan,
    data: &ClaimData,
    judged: &[&Judged],
    outcome: Outcome,
    refuting: bool,
) -> Vec<String> {
    type Group = (String, Vec<u64>, Vec<(f64, String)>, Option<String>);
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for j in judged {
        for v in j.pooled.iter().filter(|v| v.outcome == outcome) {
            let refutes = row_refutes(plan, data, v);
            if refutes.is_ok() != refuting {
                continue;
            }
            let g = groups
                .entry((j.rule.id.clone(), v.condition.clone()))
                .or_insert_with(|| (subject_text(j.rule), Vec::new(), Vec::new(), None));
            // Where the row cannot refute, why (the first level's reason stands for its group).
            if g.3.is_none() {
                g.3 = refutes.err();
            }
            g.1.push(v.workers);
            if let Some(p) = v.parts.first().filter(|p| p.meets.is_none()) {
                g.2.push((p.value, figure(plan, j.rule, &p.name, p.value)));
            }
        }
    }
    let total = groups.len();
    let mut listed: Vec<String> = groups
        .into_iter()
        .take(MAX_ITEMS)
        .map(|((_, condition), (subject, levels, estimates, why))| {
            let lo = estimates.iter().min_by(|a, b| a.0.total_cmp(&b.0));
            let hi = estimates.iter().max_by(|a, b| a.0.total_cmp(&b.0));
            let shown = match (lo, hi) {
                (Some(lo), Some(hi)) if lo.1 == hi.1 => format!(": {}", lo.1),
                (Some(lo), Some(hi)) => format!(": {} to {}", lo.1, hi.1),
                _ => String::new(),
            };
            let noun = if levels == [1] { "worker" } else { "workers" };
            let levels = levels
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let why = why.map_or(String::new(), |w| {
                format!(" ({})", w.trim_start_matches("no: "))
            });
            format!("{subject}, `{condition}`, {levels} {noun}{shown}{why}")
        })
        .collect();
    if total > MAX_ITEMS {
        listed.push(format!(
            "and {} more in the linked tables",
            total - MAX_ITEMS
        ));
    }
    listed
}

/// The most conditions a sentence of the answer lists; the rest are counted (the tables list
/// them all).
const MAX_ITEMS: usize = 3;

/// What ran out in a condition, per stack, from the failure counts of its new-connection cells:
/// "HTTP/1.1: local ports (EADDRNOTAVAIL) 98 % of 12,345 failures".
fn limits_text(plan: &Plan, data: &ClaimData, condition: &str) -> String {
    let Some((runs, variant)) = data.condition(condition) else {
        return format!("`{condition}` was not run");
    };
    let mut by_stack: BTreeMap<String, (f64, f64, BTreeMap<String, f64>)> = BTreeMap::new();
    for r in runs.iter().flat_map(|r| r.rows(Some(variant))) {
        let e = by_stack.entry(r.stack.clone()).or_default();
        e.0 += r.number(&plan.budgets.column).unwrap_or(0.0);
        e.1 += r.failed as f64;
        for l in &plan.limits {
            *e.2.entry(l.resource.clone()).or_default() += r.number(&l.column).unwrap_or(0.0);
        }
    }
    let mut failing = Vec::new();
    let mut clean = Vec::new();
    for (stack, (attempts, failed, causes)) in &by_stack {
        if *failed == 0.0 {
            clean.push(label(stack));
            continue;
        }
        let top = causes
            .iter()
            .filter(|(_, n)| **n > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1));
        failing.push(match top {
            Some((resource, n)) => format!(
                "{}: {resource} ({} of {} failures in {} attempts)",
                label(stack),
                thousands(*n),
                thousands(*failed),
                thousands(*attempts)
            ),
            None => format!(
                "{}: {} failures of no counted cause in {} attempts",
                label(stack),
                thousands(*failed),
                thousands(*attempts)
            ),
        });
    }
    if !clean.is_empty() {
        failing.push(format!("no attempt failed for {}", clean.join(", ")));
    }
    let stacks = failing.join(", ");
    format!("in `{condition}`: {stacks}")
}

fn fill(
    text: &str,
    plan: &Plan,
    data: &ClaimData,
    judged: &[&Judged],
    limits_in: &[String],
) -> String {
    let list = |o: Outcome| {
        let v = items(plan, data, judged, o);
        if v.is_empty() {
            "no condition".to_string()
        } else {
            v.join("; ")
        }
    };
    let undecided = items(plan, data, judged, Outcome::Undecided);
    let undecided_list = if undecided.is_empty() {
        "no condition".to_string()
    } else {
        undecided.join("; ")
    };
    let undecided = if undecided.is_empty() {
        String::new()
    } else {
        format!("; undecided: {}", undecided.join("; "))
    };
    let limits = limits_in
        .iter()
        .map(|c| limits_text(plan, data, c))
        .collect::<Vec<_>>()
        .join("; ");
    text.replace("{undecided_list}", &undecided_list)
        .replace("{holds}", &list(Outcome::Holds))
        .replace("{fails}", &list(Outcome::Fails))
        .replace("{undecided}", &undecided)
        .replace("{limits}", &limits)
}

/// The answer: the plan's sentences, each with the words its verdicts choose and links to the
/// rules' tables.
pub(crate) fn answer_section(
    out: &mut String,
    plan: &Plan,
    data: &ClaimData,
    all: &[Judged],
    marks: &Marks,
) {
    let _ = writeln!(out, "## The answer\n\n*{}*\n", plan.question);
    if !marks.why.is_empty() {
        let _ = writeln!(out, "**{}** ([the plan](#the-plan))\n", marks.why);
    }
    let mut lines: Vec<(Option<String>, String, String)> = Vec::new();
    for sentence in &plan.answer {
        let judged: Vec<&Judged> = all
            .iter()
            .filter(|j| sentence.rules.contains(&j.rule.id))
            .collect();
        let verdicts: Vec<&Verdict> = judged.iter().flat_map(|j| j.pooled.iter()).collect();
        let outcomes: Vec<Outcome> = verdicts
            .iter()
            .filter(|v| v.outcome != Outcome::NotJudged && row_refutes(plan, data, v).is_ok())
            .map(|v| v.outcome)
            .collect();
        let links = sentence
            .rules
            .iter()
            .map(|r| format!("[{r}](#{})", anchor(r)))
            .collect::<Vec<_>>()
            .join(", ");
        let limits_link = if sentence.limits_in.is_empty() {
            String::new()
        } else {
            format!(", [what ran out](#{LIMITS_ANCHOR})")
        };
        let links = format!("{links}{limits_link}");
        if outcomes.is_empty() {
            // Judged verdicts that could not refute: say why; none judged: the plan's reason.
            let cannot = verdicts
                .iter()
                .filter(|v| v.outcome != Outcome::NotJudged)
                .find_map(|v| {
                    row_refutes(plan, data, v).err().map(|why| {
                        format!(
                            "`{}`, {} workers: {}",
                            v.condition,
                            v.workers,
                            why.trim_start_matches("no: ")
                        )
                    })
                });
            match cannot {
                Some(why) if sentence.limits_in.is_empty() => lines.push((
                    None,
                    format!(
                        "Not answerable from these data: no verdict comes from a cell that could refute it ({}).",
                        why.trim_start_matches("no: ")
                    ),
                    links,
                )),
                _ => {
                    let why = verdicts
                        .iter()
                        .find(|v| v.outcome == Outcome::NotJudged)
                        .map(|v| v.label.trim_start_matches("not judged: ").to_string())
                        .unwrap_or_else(|| "no condition that could refute it".into());
                    lines.push((Some(why), String::new(), links));
                }
            }
            continue;
        }
        let text = if outcomes.iter().all(|o| *o == Outcome::Holds) {
            &sentence.all_hold
        } else if outcomes.iter().all(|o| *o == Outcome::Undecided) {
            &sentence.all_undecided
        } else if outcomes.iter().all(|o| *o != Outcome::Holds) {
            &sentence.none_hold
        } else {
            &sentence.some_hold
        };
        // Rows that could not refute the sentence's rules but read otherwise are named, so a
        // sentence never reads as if every cell agreed with it.
        let otherwise: Vec<String> = [Outcome::Holds, Outcome::Fails, Outcome::Undecided]
            .into_iter()
            .filter(|o| !outcomes.contains(o))
            .flat_map(|o| items_of(plan, data, &judged, o, false))
            .collect();
        let mut text = fill(text, plan, data, &judged, &sentence.limits_in);
        if !otherwise.is_empty() {
            text = format!(
                "{} Cells that could not refute it read otherwise: {}.",
                text.trim_end(),
                otherwise.join("; ")
            );
        }
        lines.push((None, text, links));
    }
    // Sentences that came out word for word alike are said once, with both links.
    let mut merged: Vec<(Option<String>, String, String)> = Vec::new();
    for (why, text, links) in lines {
        match merged.last_mut() {
            Some(last) if last.0 == why && last.1 == text => {
                last.2 = format!("{}, {links}", last.2);
            }
            _ => merged.push((why, text, links)),
        }
    }
    let lines = merged;
    if lines.iter().all(|(why, _, _)| why.is_some()) {
        // Nothing judged at all: one line, each reason once.
        let mut reasons: Vec<&str> = Vec::new();
        for (why, _, _) in &lines {
            let why = why.as_deref().unwrap_or("");
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        let links = lines
            .iter()
            .map(|(_, _, l)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "- No sentence of the answer can be judged from these data: {}. ({links})",
            reasons.join("; ")
        );
    } else {
        for (why, text, links) in &lines {
            match why {
                Some(why) => {
                    let _ = writeln!(out, "- Not judged: {why}. ({links})");
                }
                None => {
                    let _ = writeln!(out, "- {text} ({links})");
                }
            }
        }
    }
    out.push('\n');
}

/// The plan, its timing from git, and the unit of a cell.
pub(crate) fn plan_section(
    out: &mut String,
    plan: &Plan,
    data: &ClaimData,
    plan_path: &str,
    timing: &Option<crate::timing::PlanTiming>,
    sessions: usize,
) {
    let _ = writeln!(out, "## The plan\n");
    let when = match timing {
        Some(t) => t.sentence(plan_path),
        None => format!("`{plan_path}`: the data are not in a git repository, so whether the plan came before them cannot be checked; every verdict is marked †."),
    };
    let budgets = plan
        .budgets
        .attempts
        .iter()
        .map(|(regime, n)| format!("{} attempts under {regime}", thousands(*n as f64)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "Every verdict below is computed by one engine from the analysis plan `{plan_path}` (its reasons: `{reasons}`). {when} A cell is a fixed budget of attempts ({budgets}; the `{}` column), never stretched by time; a repetition with another count is not judged. A verdict rests on at least {} per session and {}; these data hold {}. Outcomes are computed from the bounds: a rule holds when its whole bound lies on the rule's side, fails when it lies wholly on the other, and is undecided otherwise.\n",
        plan.budgets.column,
        crate::text::count(plan.min_sample.repetitions, "repetition", "repetitions"),
        match plan.quick_of_sessions {
            Some(n) => format!("1 session (quick; the full plan asks for {n})"),
            None => crate::text::count(plan.min_sample.sessions, "session", "sessions"),
        },
        crate::text::count(sessions, "session", "sessions"),
        reasons = std::path::Path::new(plan_path)
            .with_file_name("README.md")
            .display(),
    );
    let _ = writeln!(
        out,
        "Bounds: a one-sided rule shows both one-sided {c} % bounds (together a {two} % interval; only the bound on the rule's side decides it); a two-sided rule shows a {c} % interval. Each bound column says what it covers, and a mean's bounds name n.\n",
        c = plain(plan.confidence * 100.0),
        two = plain((2.0 * plan.confidence - 1.0) * 100.0)
    );
    let orders: Vec<String> = data
        .first_runs()
        .map(|(name, run)| {
            let e = &run.results.manifest["experiment"];
            match (e["cell_order"].as_str(), e["cell_order_seed"].as_u64()) {
                (Some("random"), Some(seed)) => format!("`{name}` random (seed {seed})"),
                (Some(order), _) => format!("`{name}` {order}"),
                _ => format!("`{name}` fixed (measured before the cell order was randomised)"),
            }
        })
        .collect();
    if !orders.is_empty() {
        let _ = writeln!(
            out,
            "Cell order within each repetition (session 1's runs; the seed is in each manifest): {}.\n",
            orders.join(", ")
        );
    }
}

/// Every claim and its rules' verdicts.
pub(crate) fn claims_section(
    out: &mut String,
    plan: &Plan,
    data: &ClaimData,
    all: &[Judged],
    marks: &Marks,
) {
    let _ = writeln!(out, "## The claims, judged\n");
    for claim in &plan.claims {
        let _ = writeln!(
            out,
            "### {}: {}\n\nHypothesis: {}\n",
            claim.id, claim.statement, claim.hypothesis
        );
        for j in all.iter().filter(|j| j.rule.claim == claim.id) {
            let rule = j.rule;
            let sessions = data.sessions();
            let _ = writeln!(
                out,
                "<a id=\"{}\"></a>**{}**: {} Test: {} {}; bounds: {}.\n",
                anchor(&rule.id),
                rule.id,
                rule.hypothesis,
                rule.quantity,
                test_text(plan, rule),
                covers(plan, rule, sessions)
            );
            let _ = writeln!(
                out,
                "| condition | workers | can refute | estimate | bounds | verdict | sessions |\n|---|---|---|---|---|---|---|"
            );
            let mark = if marks.marks(&rule.id) { " †" } else { "" };
            for v in &j.pooled {
                let (estimate, bounds) = reading(plan, rule, v);
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {estimate} | {bounds} | {}{mark} | {} |",
                    v.condition,
                    if v.workers == 0 {
                        "—".to_string()
                    } else {
                        v.workers.to_string()
                    },
                    refute_text(plan, data, v),
                    verdict_text(plan, data, v),
                    if v.outcome == Outcome::NotJudged {
                        "—".to_string()
                    } else {
                        sessions_text(plan, j, v)
                    }
                );
            }
            out.push('\n');
        }
    }
    if marks.any() {
        let _ = writeln!(out, "† {} ([the plan](#the-plan)).\n", marks.why);
    }
}

/// What ran out, condition by condition: attempts, failures by counted cause, the load
/// generator's TIME_WAIT and its port budget against the demand.
pub(crate) fn limits_section(out: &mut String, plan: &Plan, data: &ClaimData) {
    let _ = writeln!(
        out,
        "<a id=\"{LIMITS_ANCHOR}\"></a>\n## What ran out\n\nPer condition and stack, over every level, repetition and session of its new-connection cells: the attempts, the failures and their most frequent counted cause (each `fail_*` column of `cells.csv` names the resource it counts: the plan's `limits`), the load generator's largest TIME_WAIT count (read in its own network namespace; on plain loopback that is the host's, and the count before the cell shows what was already there) against its local ports, and the port budget (ports × source addresses ÷ 60 s in TIME_WAIT) against the highest rate of established connections of any cell, with the most connections one cell made: a cell that makes fewer connections than there are ports cannot run out of them, whatever the rates.\n"
    );
    let _ = writeln!(
        out,
        "| condition | stack | attempts | failed | most frequent cause | TIME_WAIT before → peak (ports) | port budget against demand |\n|---|---|---|---|---|---|---|"
    );
    for c in &plan.conditions {
        let Some((runs, variant)) = data.condition(&c.name) else {
            continue;
        };
        let rows: Vec<_> = runs
            .iter()
            .flat_map(|r| r.rows(Some(variant)))
            .filter(|r| r.regime == NEW_CONN)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut stacks: Vec<String> = Vec::new();
        for r in &rows {
            if !stacks.contains(&r.stack) {
                stacks.push(r.stack.clone());
            }
        }
        let budget = port_budget(data, &c.name).map_or("—".to_string(), |b| b.text());
        for stack in stacks {
            let mine: Vec<_> = rows.iter().filter(|r| r.stack == stack).collect();
            let attempts: f64 = mine
                .iter()
                .map(|r| r.number(&plan.budgets.column).unwrap_or(0.0))
                .sum();
            let failed: f64 = mine.iter().map(|r| r.failed as f64).sum();
            let cause = plan
                .limits
                .iter()
                .map(|l| {
                    (
                        &l.resource,
                        mine.iter()
                            .map(|r| r.number(&l.column).unwrap_or(0.0))
                            .sum::<f64>(),
                    )
                })
                .filter(|(_, n)| *n > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map_or("—".to_string(), |(res, n)| {
                    format!("{res}: {}", thousands(n))
                });
            let tw_before = mine.iter().filter_map(|r| r.tcp_time_wait_before).min();
            let tw_peak = mine.iter().filter_map(|r| r.tcp_time_wait_peak).max();
            let ports = mine
                .iter()
                .find_map(|r| r.port_range.as_deref().and_then(ports_in));
            let tw = match (tw_before, tw_peak) {
                (Some(b), Some(p)) => format!(
                    "{} → {}{}",
                    thousands(b as f64),
                    thousands(p as f64),
                    ports.map_or(String::new(), |n| format!(" ({})", thousands(n as f64)))
                ),
                _ => "not counted".into(),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {cause} | {tw} | {budget} |",
                c.name,
                label(&stack),
                thousands(attempts),
                thousands(failed)
            );
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_range_counts_both_ends() {
        assert_eq!(ports_in("32768 60999"), Some(28232));
        assert_eq!(ports_in("10 9"), None);
        assert_eq!(ports_in("x"), None);
    }

    /// A condition where the claim's resource cannot run out gates a rule's rows, unless the
    /// rule is refuted in any condition it lists (C3's "every condition", Q's "where nothing
    /// runs out").
    #[test]
    fn a_rule_refuted_in_any_condition_is_not_gated_by_the_condition() {
        let text = r#"
study = "s"
question = "q"
confidence = 0.95
[budgets]
column = "sent"
attempts = { new-conn = 10 }
[min_sample]
repetitions = 1
sessions = 1
[quantities.success]
kind = "proportion"
unit = "%"
definition = "d"
source = { count = "ok", of = "sent" }
[[conditions]]
name = "e/a"
experiment = "experiments/claims/e.toml"
mechanism = "m"
can_refute = false
[[claims]]
id = "C"
statement = "s"
hypothesis = "h"
[[rules]]
id = "gated"
claim = "C"
hypothesis = "h"
quantity = "success"
subject = { stack = "h1", regime = "new-conn", workers = 10 }
conditions = ["e/a"]
test = { op = ">", value = 0.5, sided = "one" }
labels = { holds = "kept", fails = "collapsed", undecided = "undecided" }
[[rules]]
id = "anywhere"
claim = "C"
hypothesis = "h"
quantity = "success"
subject = { stack = "h3", regime = "new-conn", workers = 10 }
conditions = ["e/a"]
test = { op = ">", value = 0.5, sided = "one" }
labels = { holds = "kept", fails = "collapsed", undecided = "undecided" }
refuted_in_any_condition = true
"#;
        let plan = Plan::parse(text).unwrap();
        let sessions: Vec<Vec<crate::run::Run>> = Vec::new();
        let data = ClaimData::new(&plan, &sessions);
        let verdict = |rule: &str| Verdict {
            rule: rule.into(),
            claim: "C".into(),
            condition: "e/a".into(),
            workers: 10,
            outcome: Outcome::Holds,
            label: "kept".into(),
            parts: Vec::new(),
            disagreeing: Vec::new(),
        };
        let gated = row_refutes(&plan, &data, &verdict("gated")).unwrap_err();
        assert!(gated.starts_with("cannot refute"), "{gated}");
        assert_eq!(row_refutes(&plan, &data, &verdict("anywhere")), Ok(()));
        assert_eq!(verdict_text(&plan, &data, &verdict("anywhere")), "kept");
    }

    #[test]
    fn anchors_are_lowercase_and_stable() {
        assert_eq!(anchor("C2-h1-collapse"), "rule-c2-h1-collapse");
    }
}
