//! One engine for every rule of the plan ([`crate::plan`]): a quantity against a bound, one
//! stack against another, one condition against another, one level against another; one- or
//! two-sided; a proportion, a mean or a percentile. It holds no claim, stack or number: those
//! are the plan's. It reads observations through [`Data`] (sessions × repetitions of a cell)
//! and returns [`Verdict`]s whose label is the plan's word for the computed outcome.
//!
//! The statistics fit the quantity (`stats`): a proportion gets exact (Clopper–Pearson) bounds
//! within a session and pooled counts between sessions, with a per-session agreement check, and
//! a difference of proportions Newcombe's hybrid score interval; a mean gets Student t over the
//! repetitions of one session and over the session means between sessions, with n stated; a
//! percentile is judged on each session's merged histograms and, by the plan's rule, on every
//! repetition. Whole verdicts are compared between sessions part by part ([`agreement`]).

use stats::{
    mean, mean_bounds, newcombe_difference, normal_quantile, pool_sessions, welch_difference,
    Counts, Sided,
};

use crate::plan::{Compare, NamedLevel, Op, PercentileRule, Plan, Rule, RuleKind, Test, Workers};

/// One cell as a rule names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    /// "experiment/variant".
    pub condition: String,
    pub stack: String,
    pub regime: String,
    pub workers: u64,
}

/// One session's percentile: the merged histograms' and every repetition's.
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileSession {
    pub pooled: f64,
    pub repetitions: Vec<f64>,
}

/// What was measured in a cell, per session (outer) and per repetition (inner).
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// k successes of n attempts per repetition.
    Proportion(Vec<Vec<Counts>>),
    /// One value per repetition.
    Mean(Vec<Vec<f64>>),
    Percentile(Vec<PercentileSession>),
}

impl Observed {
    fn sessions(&self) -> usize {
        match self {
            Observed::Proportion(s) => s.len(),
            Observed::Mean(s) => s.len(),
            Observed::Percentile(s) => s.len(),
        }
    }

    /// The fewest repetitions of any session.
    fn repetitions(&self) -> usize {
        let min = |it: &mut dyn Iterator<Item = usize>| it.min().unwrap_or(0);
        match self {
            Observed::Proportion(s) => min(&mut s.iter().map(Vec::len)),
            Observed::Mean(s) => min(&mut s.iter().map(Vec::len)),
            Observed::Percentile(s) => min(&mut s.iter().map(|x| x.repetitions.len())),
        }
    }

    /// Only session `i`.
    fn session(&self, i: usize) -> Observed {
        let pick = |len: usize| i..(i + 1).min(len);
        match self {
            Observed::Proportion(s) => Observed::Proportion(s[pick(s.len())].to_vec()),
            Observed::Mean(s) => Observed::Mean(s[pick(s.len())].to_vec()),
            Observed::Percentile(s) => Observed::Percentile(s[pick(s.len())].to_vec()),
        }
    }
}

/// Where the engine reads observations (results directories, or fixtures in tests).
pub trait Data {
    /// The levels a stack ran in a condition and regime, ascending.
    fn levels(&self, condition: &str, stack: &str, regime: &str) -> Vec<u64>;
    /// The named quantity in a cell; `None` when the cell was not run.
    fn observe(&self, cell: &Cell, quantity: &str) -> Option<Observed>;
    /// The attempts each repetition of a cell made, per session, so a mean or a percentile is
    /// held to the plan's budget as a proportion is; `None` when the source cannot tell.
    fn attempts(&self, _cell: &Cell) -> Option<Vec<Vec<u64>>> {
        None
    }
}

/// One session of another [`Data`].
pub struct OneSession<'a, D: Data> {
    pub data: &'a D,
    pub index: usize,
}

impl<D: Data> Data for OneSession<'_, D> {
    fn levels(&self, condition: &str, stack: &str, regime: &str) -> Vec<u64> {
        self.data.levels(condition, stack, regime)
    }
    fn observe(&self, cell: &Cell, quantity: &str) -> Option<Observed> {
        let o = self.data.observe(cell, quantity)?;
        (self.index < o.sessions()).then(|| o.session(self.index))
    }
    fn attempts(&self, cell: &Cell) -> Option<Vec<Vec<u64>>> {
        let a = self.data.attempts(cell)?;
        a.get(self.index).map(|s| vec![s.clone()])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The bounds lie on the rule's side.
    Holds,
    /// The bounds lie on the other side.
    Fails,
    /// The bounds straddle the rule's bound.
    Undecided,
    /// Not judged: a cell missing, fewer repetitions or sessions than the plan's minimum, or a
    /// repetition whose attempts are not the plan's budget.
    NotJudged,
}

/// One part of a verdict: a figure, and whether it meets the rule's bound (`None` for a figure
/// that is shown but not held against it).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: String,
    pub value: f64,
    pub meets: Option<bool>,
}

/// A rule judged in one condition at one level.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rule: String,
    pub claim: String,
    pub condition: String,
    pub workers: u64,
    pub outcome: Outcome,
    /// The plan's word for `outcome`; for [`Outcome::NotJudged`] "not judged: why".
    pub label: String,
    pub parts: Vec<Part>,
    /// Sessions (0-based) the per-session agreement check names: a session whose own interval
    /// excludes the pooled proportion.
    pub disagreeing: Vec<usize>,
}

/// The verdicts of one rule: one per condition and level it names.
pub fn judge(plan: &Plan, rule: &Rule, data: &impl Data) -> Vec<Verdict> {
    let mut out = Vec::new();
    for condition in &rule.conditions {
        let levels = data.levels(condition, &rule.subject.stack, &rule.subject.regime);
        let judged: Vec<u64> = match rule.subject.workers {
            Workers::Level(w) => vec![w],
            Workers::Named(NamedLevel::Highest) => levels.last().copied().into_iter().collect(),
            Workers::Named(NamedLevel::Every) => levels,
        };
        if judged.is_empty() {
            out.push(not_judged(
                rule,
                condition,
                0,
                "the condition has no cell".into(),
            ));
        }
        for w in judged {
            out.push(judge_cell(plan, rule, data, condition, w));
        }
    }
    out
}

/// Every session judged on its own (for [`agreement`]): `sessions` lists, each `judge`'s.
pub fn judge_sessions(
    plan: &Plan,
    rule: &Rule,
    data: &impl Data,
    sessions: usize,
) -> Vec<Vec<Verdict>> {
    (0..sessions)
        .map(|index| {
            let one = OneSession { data, index };
            // One session is judged against the repetitions minimum only.
            let mut single = plan.clone();
            single.min_sample.sessions = 1;
            let mut rule = rule.clone();
            if let Some(m) = &mut rule.min_sample {
                m.sessions = 1;
            }
            judge(&single, &rule, &one)
        })
        .collect()
}

fn not_judged(rule: &Rule, condition: &str, workers: u64, why: String) -> Verdict {
    Verdict {
        rule: rule.id.clone(),
        claim: rule.claim.clone(),
        condition: condition.to_string(),
        workers,
        outcome: Outcome::NotJudged,
        label: format!("not judged: {why}"),
        parts: Vec::new(),
        disagreeing: Vec::new(),
    }
}

/// The sample checks of the plan: sessions, repetitions, and attempts equal to the budget
/// (a proportion's own counts, and for every kind the attempts the data reports).
fn sample_problem(
    plan: &Plan,
    rule: &Rule,
    cell: &Cell,
    o: &Observed,
    attempts: Option<Vec<Vec<u64>>>,
) -> Option<String> {
    if let (Observed::Proportion(s), Some(&budget)) = (o, plan.budgets.attempts.get(&cell.regime)) {
        if let Some(c) = s.iter().flatten().find(|c| c.n != budget) {
            return Some(format!(
                "a repetition of {} at {} workers made {} attempts, not the plan's budget of {budget}",
                cell.stack, cell.workers, c.n
            ));
        }
    }
    if let (Some(a), Some(&budget)) = (attempts, plan.budgets.attempts.get(&cell.regime)) {
        if let Some(n) = a.iter().flatten().find(|n| **n != budget) {
            return Some(format!(
                "a repetition of {} at {} workers made {n} attempts, not the plan's budget of {budget}",
                cell.stack, cell.workers
            ));
        }
    }
    let min = plan.min_sample_of(rule);
    if o.sessions() < min.sessions {
        return Some(format!(
            "{} session(s) of {} at {} workers, the plan's minimum is {}",
            o.sessions(),
            cell.stack,
            cell.workers,
            min.sessions
        ));
    }
    if o.repetitions() < min.repetitions {
        return Some(format!(
            "{} repetition(s) of {} at {} workers, the plan's minimum is {}",
            o.repetitions(),
            cell.stack,
            cell.workers,
            min.repetitions
        ));
    }
    None
}

/// Whether bounds (lower, upper) decide the test: Holds when the whole interval is on the
/// rule's side, Fails when it is wholly on the other, Undecided when it straddles the bound.
/// At the boundary: `< v` holds only for upper < v and fails for lower ≥ v; `<= v` holds for
/// upper ≤ v and fails for lower > v; likewise mirrored for `>` and `>=`; `within [a, b]`
/// holds for a ≤ lower and upper ≤ b, and fails when upper < a or lower > b.
pub fn decide(test: &Test, lower: f64, upper: f64) -> Outcome {
    let v = test.value.unwrap_or(f64::NAN);
    let (holds, fails) = match test.op {
        Op::Below => (upper < v, lower >= v),
        Op::AtMost => (upper <= v, lower > v),
        Op::Above => (lower > v, upper <= v),
        Op::AtLeast => (lower >= v, upper < v),
        Op::Within => {
            let (a, b) = (test.low.unwrap_or(f64::NAN), test.high.unwrap_or(f64::NAN));
            (a <= lower && upper <= b, upper < a || lower > b)
        }
    };
    if holds {
        Outcome::Holds
    } else if fails {
        Outcome::Fails
    } else {
        Outcome::Undecided
    }
}

/// Whether one value meets the test (a point, for percentiles and for bound parts).
fn meets(test: &Test, x: f64) -> bool {
    decide(test, x, x) == Outcome::Holds
}

/// Parts for a pair of bounds: each bound meets the test when it lies on the rule's side.
fn bound_parts(test: &Test, estimate: (&str, f64), lower: f64, upper: f64) -> Vec<Part> {
    let (lower_meets, upper_meets) = match test.op {
        Op::Below | Op::AtMost => (None, Some(meets(test, upper))),
        Op::Above | Op::AtLeast => (Some(meets(test, lower)), None),
        Op::Within => (Some(meets(test, lower)), Some(meets(test, upper))),
    };
    vec![
        Part {
            name: estimate.0.to_string(),
            value: estimate.1,
            meets: None,
        },
        Part {
            name: "lower bound".into(),
            value: lower,
            meets: lower_meets,
        },
        Part {
            name: "upper bound".into(),
            value: upper,
            meets: upper_meets,
        },
    ]
}

fn label_of(rule: &Rule, outcome: Outcome) -> String {
    match outcome {
        Outcome::Holds => rule.labels.holds.clone(),
        Outcome::Fails => rule.labels.fails.clone(),
        Outcome::Undecided => rule.labels.undecided.clone(),
        Outcome::NotJudged => "not judged".into(),
    }
}

fn judge_cell(plan: &Plan, rule: &Rule, data: &impl Data, condition: &str, w: u64) -> Verdict {
    let cell = Cell {
        condition: condition.to_string(),
        stack: rule.subject.stack.clone(),
        regime: rule.subject.regime.clone(),
        workers: w,
    };
    let versus = match rule.kind() {
        RuleKind::Bound => None,
        RuleKind::Stacks(s) => Some(Cell {
            stack: s,
            ..cell.clone()
        }),
        RuleKind::Conditions(c) => Some(Cell {
            condition: c,
            ..cell.clone()
        }),
        RuleKind::Levels(l) => Some(Cell {
            workers: l,
            ..cell.clone()
        }),
    };
    let observe = |c: &Cell| {
        let o = data.observe(c, &rule.quantity).ok_or_else(|| {
            format!(
                "no {} cell of {} at {} workers in {}",
                c.regime, c.stack, c.workers, c.condition
            )
        })?;
        match sample_problem(plan, rule, c, &o, data.attempts(c)) {
            Some(p) => Err(p),
            None => Ok(o),
        }
    };
    let result = observe(&cell).and_then(|a| {
        let b = versus.as_ref().map(observe).transpose()?;
        judge_observed(plan, rule, &a, b.as_ref())
    });
    match result {
        Err(why) => not_judged(rule, condition, w, why),
        Ok((outcome, parts, disagreeing)) => Verdict {
            rule: rule.id.clone(),
            claim: rule.claim.clone(),
            condition: condition.to_string(),
            workers: w,
            outcome,
            label: label_of(rule, outcome),
            parts,
            disagreeing,
        },
    }
}

type Judged = (Outcome, Vec<Part>, Vec<usize>);

/// Each session's counts, its repetitions pooled (a session is one sample of the budget ×
/// repetitions).
fn session_counts(s: &[Vec<Counts>]) -> Vec<Counts> {
    s.iter()
        .map(|reps| Counts {
            k: reps.iter().map(|c| c.k.min(c.n)).sum(),
            n: reps.iter().map(|c| c.n).sum(),
        })
        .collect()
}

fn sum_counts(s: &[Counts]) -> Counts {
    Counts {
        k: s.iter().map(|c| c.k).sum(),
        n: s.iter().map(|c| c.n).sum(),
    }
}

/// Between sessions a mean is over the session means; within one session, over its
/// repetitions.
fn mean_sample(s: &[Vec<f64>]) -> Vec<f64> {
    if s.len() >= 2 {
        s.iter()
            .filter(|r| !r.is_empty())
            .map(|r| mean(r))
            .collect()
    } else {
        s.first().cloned().unwrap_or_default()
    }
}

fn judge_observed(
    plan: &Plan,
    rule: &Rule,
    a: &Observed,
    b: Option<&Observed>,
) -> Result<Judged, String> {
    let alpha = plan.alpha();
    let sided: Sided = rule.test.sided.into();
    let test = &rule.test;
    let decided = |lo: f64, hi: f64, estimate: (&str, f64), extra: Vec<Part>, dis: Vec<usize>| {
        let mut parts = bound_parts(test, estimate, lo, hi);
        parts.extend(extra);
        (decide(test, lo, hi), parts, dis)
    };
    match (a, b) {
        (Observed::Proportion(s), None) => {
            let pooled = pool_sessions(&session_counts(s), alpha, sided);
            let (lo, hi) = pooled.bounds;
            let rate = pooled.pooled.rate().unwrap_or(f64::NAN);
            let extra = vec![
                Part {
                    name: "successes".into(),
                    value: pooled.pooled.k as f64,
                    meets: None,
                },
                Part {
                    name: "attempts".into(),
                    value: pooled.pooled.n as f64,
                    meets: None,
                },
            ];
            Ok(decided(lo, hi, ("rate", rate), extra, pooled.disagreeing()))
        }
        (Observed::Mean(s), None) => {
            let values = mean_sample(s);
            let m = mean_bounds(&values, alpha, sided);
            let (lo, hi) = m
                .bounds
                .ok_or("fewer than two values for a mean's bounds")?;
            let n = Part {
                name: if s.len() >= 2 {
                    "n (session means)".into()
                } else {
                    "n (repetitions)".into()
                },
                value: m.n as f64,
                meets: None,
            };
            Ok(decided(lo, hi, ("mean", m.mean), vec![n], Vec::new()))
        }
        (Observed::Percentile(s), None) => {
            let rule_of = plan
                .quantities
                .get(&rule.quantity)
                .and_then(|q| q.percentile_rule)
                .unwrap_or(PercentileRule::PooledAndEveryRepetition);
            let mut parts = Vec::new();
            for (i, session) in s.iter().enumerate() {
                let prefix = if s.len() >= 2 {
                    format!("session {} ", i + 1)
                } else {
                    String::new()
                };
                parts.push(Part {
                    name: format!("{prefix}merged histograms"),
                    value: session.pooled,
                    meets: Some(meets(test, session.pooled)),
                });
                if rule_of == PercentileRule::PooledAndEveryRepetition {
                    for (r, x) in session.repetitions.iter().enumerate() {
                        parts.push(Part {
                            name: format!("{prefix}repetition {}", r + 1),
                            value: *x,
                            meets: Some(meets(test, *x)),
                        });
                    }
                }
            }
            let outcome = if parts.iter().all(|p| p.meets == Some(true)) {
                Outcome::Holds
            } else {
                Outcome::Fails
            };
            Ok((outcome, parts, Vec::new()))
        }
        (Observed::Proportion(sa), Some(Observed::Proportion(sb))) => {
            let (ca, cb) = (
                sum_counts(&session_counts(sa)),
                sum_counts(&session_counts(sb)),
            );
            let z = normal_quantile(1.0 - sided.tail(alpha));
            let (lo, hi) =
                newcombe_difference(ca.k, ca.n, cb.k, cb.n, z).ok_or("no attempts on a side")?;
            let (ra, rb) = (ca.rate().unwrap_or(0.0), cb.rate().unwrap_or(0.0));
            // Each side's sessions checked for agreement with that side's pooled rate.
            let mut dis = pool_sessions(&session_counts(sa), alpha, sided).disagreeing();
            dis.extend(pool_sessions(&session_counts(sb), alpha, sided).disagreeing());
            dis.sort_unstable();
            dis.dedup();
            let extra = vec![
                Part {
                    name: "subject rate".into(),
                    value: ra,
                    meets: None,
                },
                Part {
                    name: "versus rate".into(),
                    value: rb,
                    meets: None,
                },
            ];
            Ok(decided(lo, hi, ("difference", ra - rb), extra, dis))
        }
        (Observed::Mean(sa), Some(Observed::Mean(sb))) => {
            let (va, vb) = (mean_sample(sa), mean_sample(sb));
            let n = |name: &str, v: &[f64]| Part {
                name: format!("n ({name})"),
                value: v.len() as f64,
                meets: None,
            };
            let extra = vec![n("subject", &va), n("versus", &vb)];
            match rule.compare {
                Some(Compare::Ratio) => {
                    // Each side's bounds at α / 2 (Bonferroni), so the ratio's bounds, the
                    // extreme quotients, hold at 1 − α together.
                    let (ma, mb) = (
                        mean_bounds(&va, alpha / 2.0, sided),
                        mean_bounds(&vb, alpha / 2.0, sided),
                    );
                    let ((la, ha), (lb, hb)) = (
                        ma.bounds
                            .ok_or("fewer than two values on the subject's side")?,
                        mb.bounds
                            .ok_or("fewer than two values on the versus side")?,
                    );
                    if lb <= 0.0 || la < 0.0 {
                        // A bound at or below 0 leaves the quotient unbounded: undecided, with
                        // the estimate shown.
                        let mut parts = vec![Part {
                            name: "ratio".into(),
                            value: ma.mean / mb.mean,
                            meets: None,
                        }];
                        parts.extend(extra);
                        return Ok((Outcome::Undecided, parts, Vec::new()));
                    }
                    Ok(decided(
                        la / hb,
                        ha / lb,
                        ("ratio", ma.mean / mb.mean),
                        extra,
                        Vec::new(),
                    ))
                }
                _ => {
                    let (d, (lo, hi), _) = welch_difference(&va, &vb, alpha, sided)
                        .ok_or("fewer than two values on a side")?;
                    Ok(decided(lo, hi, ("difference", d), extra, Vec::new()))
                }
            }
        }
        _ => Err("the two sides are different kinds of quantity".into()),
    }
}

/// What a verdict says, part by part, in one session.
fn reading(v: &Verdict) -> Vec<(String, String)> {
    let mut out = vec![
        ("outcome".to_string(), format!("{:?}", v.outcome)),
        ("label".to_string(), v.label.clone()),
    ];
    for p in &v.parts {
        if let Some(m) = p.meets {
            out.push((
                p.name.clone(),
                if m {
                    "meets the bound"
                } else {
                    "misses the bound"
                }
                .into(),
            ));
        }
    }
    out
}

/// A part of a verdict that is not the same in every session: its name and each session's
/// reading of it (the value and whether it met the bound), in session order.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub part: String,
    pub sessions: Vec<SessionReading>,
}

/// One session's reading of a part of a verdict: the part's value where it has one (a bound,
/// an estimate) and what it read ("meets the bound", a label, an outcome); `None` where the
/// session's verdict has no such part.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionReading {
    pub value: Option<f64>,
    pub reading: Option<String>,
}

impl SessionReading {
    /// The reading with its value written by `figure` (the paper's units): "28,019 req/s
    /// meets the bound", or "absent".
    pub fn text(&self, figure: impl Fn(f64) -> String) -> String {
        match &self.reading {
            Some(r) => match self.value {
                Some(x) => format!("{} {r}", figure(x)),
                None => r.clone(),
            },
            None => "absent".into(),
        }
    }
}

/// Whole-verdict agreement: compares every part of the same verdict (same rule, condition,
/// level) judged in each session alone — the outcome, the label and every bound or value held
/// against the rule — and names each part that is not the same in all of them. Empty: the
/// sessions agree on the whole verdict.
pub fn agreement(per_session: &[&Verdict]) -> Vec<Change> {
    let readings: Vec<Vec<(String, String)>> = per_session.iter().map(|v| reading(v)).collect();
    let mut names: Vec<String> = Vec::new();
    for r in &readings {
        for (name, _) in r {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    let mut changes = Vec::new();
    for name in names {
        let shown: Vec<Option<&String>> = readings
            .iter()
            .map(|r| r.iter().find(|(n, _)| *n == name).map(|(_, s)| s))
            .collect();
        if shown.windows(2).all(|w| w[0] == w[1]) {
            continue;
        }
        let sessions = per_session
            .iter()
            .zip(&shown)
            .map(|(v, s)| SessionReading {
                value: v.parts.iter().find(|p| p.name == name).map(|p| p.value),
                reading: s.cloned(),
            })
            .collect();
        changes.push(Change {
            part: name,
            sessions,
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Plan, Sidedness};
    use std::collections::BTreeMap;

    /// Fixture data: observations by cell and quantity.
    #[derive(Default)]
    struct Fixture {
        cells: BTreeMap<(Cell, String), Observed>,
    }

    impl Fixture {
        fn put(&mut self, condition: &str, stack: &str, w: u64, quantity: &str, o: Observed) {
            let cell = Cell {
                condition: condition.into(),
                stack: stack.into(),
                regime: "new-conn".into(),
                workers: w,
            };
            self.cells.insert((cell, quantity.into()), o);
        }
    }

    impl Data for Fixture {
        fn levels(&self, condition: &str, stack: &str, regime: &str) -> Vec<u64> {
            let mut l: Vec<u64> = self
                .cells
                .keys()
                .filter(|(c, _)| c.condition == condition && c.stack == stack && c.regime == regime)
                .map(|(c, _)| c.workers)
                .collect();
            l.sort_unstable();
            l.dedup();
            l
        }
        fn observe(&self, cell: &Cell, quantity: &str) -> Option<Observed> {
            self.cells
                .get(&(cell.clone(), quantity.to_string()))
                .cloned()
        }
    }

    /// A small plan: one quantity of each kind, budget 1,000 attempts, 2 repetitions and 1
    /// session minimum, and the rule given.
    fn plan_with(rule: &str) -> (Plan, Rule) {
        let text = format!(
            r#"
study = "fixture"
question = "q"
confidence = 0.95
budgets = {{ column = "sent", attempts = {{ new-conn = 1000 }} }}
min_sample = {{ repetitions = 2, sessions = 1 }}
[quantities.success]
kind = "proportion"
unit = "%"
definition = "ok / attempts"
source = {{ count = "ok", of = "sent" }}
[quantities.rps]
kind = "mean"
unit = "req/s"
definition = "ok / elapsed"
source = {{ value = "ok", per = "elapsed_s" }}
[quantities.p95]
kind = "percentile"
unit = "ms"
definition = "p95 of latency"
percentile = 95
percentile_rule = "pooled-and-every-repetition"
source = {{ value = "latency_p95_us", histogram = "latency" }}
[[conditions]]
name = "e/a"
experiment = "x"
mechanism = "m"
can_refute = true
[[conditions]]
name = "e/b"
experiment = "x"
mechanism = "m"
can_refute = true
[[claims]]
id = "C"
statement = "s"
hypothesis = "h"
[[rules]]
id = "R"
claim = "C"
hypothesis = "h"
labels = {{ holds = "kept", fails = "collapsed", undecided = "undecided" }}
conditions = ["e/a"]
{rule}
"#
        );
        let plan = Plan::parse(&text).unwrap();
        let rule = plan.rules[0].clone();
        (plan, rule)
    }

    fn counts(reps: &[(u64, u64)]) -> Vec<Counts> {
        reps.iter().map(|&(k, n)| Counts { k, n }).collect()
    }

    /// A proportion against a bound, one-sided: 1,000 of 1,000 in each of two repetitions
    /// gives an exact lower bound 0.05^(1/2000) = 0.99850; `>= 0.9985` holds (just), `>=
    /// 0.9986` is undecided, and a rate whose upper bound is below the bound fails.
    #[test]
    fn a_proportion_against_a_bound_at_the_boundary() {
        let rule = |v: f64| {
            format!("quantity = \"success\"\nsubject = {{ stack = \"h1\", regime = \"new-conn\", workers = 200 }}\ntest = {{ op = \">=\", value = {v}, sided = \"one\" }}")
        };
        let mut d = Fixture::default();
        d.put(
            "e/a",
            "h1",
            200,
            "success",
            Observed::Proportion(vec![counts(&[(1000, 1000), (1000, 1000)])]),
        );
        let lower = 0.05_f64.powf(1.0 / 2000.0);
        let (p, r) = plan_with(&rule(lower - 1e-9));
        let v = &judge(&p, &r, &d)[0];
        assert_eq!((v.outcome, v.label.as_str()), (Outcome::Holds, "kept"));
        let (p, r) = plan_with(&rule(lower + 1e-6));
        assert_eq!(judge(&p, &r, &d)[0].outcome, Outcome::Undecided);
        d.put(
            "e/a",
            "h1",
            200,
            "success",
            Observed::Proportion(vec![counts(&[(300, 1000), (320, 1000)])]),
        );
        let (p, r) = plan_with(&rule(0.5));
        let v = &judge(&p, &r, &d)[0];
        assert_eq!((v.outcome, v.label.as_str()), (Outcome::Fails, "collapsed"));
        // The label follows the number: the bound parts say why.
        let upper = v.parts.iter().find(|x| x.name == "upper bound").unwrap();
        assert!(upper.value < 0.5);
        let lower = v.parts.iter().find(|x| x.name == "lower bound").unwrap();
        assert_eq!(lower.meets, Some(false));
    }

    /// The decision at the bound itself, for every operator.
    #[test]
    fn decisions_at_the_boundary() {
        let t = |op, value| Test {
            op,
            value: Some(value),
            low: None,
            high: None,
            sided: Sidedness::One,
        };
        assert_eq!(decide(&t(Op::Below, 1.0), 0.5, 1.0), Outcome::Undecided);
        assert_eq!(decide(&t(Op::Below, 1.0), 1.0, 1.5), Outcome::Fails);
        assert_eq!(decide(&t(Op::AtMost, 1.0), 0.5, 1.0), Outcome::Holds);
        assert_eq!(decide(&t(Op::AtMost, 1.0), 1.0, 1.5), Outcome::Undecided);
        assert_eq!(decide(&t(Op::Above, 1.0), 1.0, 1.5), Outcome::Undecided);
        assert_eq!(decide(&t(Op::Above, 1.0), 0.5, 1.0), Outcome::Fails);
        assert_eq!(decide(&t(Op::AtLeast, 1.0), 1.0, 1.5), Outcome::Holds);
        assert_eq!(decide(&t(Op::AtLeast, 1.0), 0.5, 1.0), Outcome::Undecided);
        let within = Test {
            op: Op::Within,
            value: None,
            low: Some(1.0),
            high: Some(2.0),
            sided: Sidedness::Two,
        };
        assert_eq!(decide(&within, 1.0, 2.0), Outcome::Holds);
        assert_eq!(decide(&within, 0.9, 2.0), Outcome::Undecided);
        assert_eq!(decide(&within, 2.0, 3.0), Outcome::Undecided);
        assert_eq!(decide(&within, 2.1, 3.0), Outcome::Fails);
        assert_eq!(decide(&within, 0.0, 0.99), Outcome::Fails);
    }

    /// A percentile against a bound: the merged histograms' p95 alone would pass, but one
    /// repetition's p95 is over 25 ms, so the rule (pooled and every repetition) fails, naming
    /// that repetition; exactly 25 ms meets `<= 25`.
    #[test]
    fn a_percentile_is_judged_on_the_merged_histograms_and_every_repetition() {
        let rule = "quantity = \"p95\"\nsubject = { stack = \"grpc\", regime = \"new-conn\", workers = \"highest\" }\ntest = { op = \"<=\", value = 25.0, sided = \"one\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        d.put("e/a", "grpc", 10, "p95", Observed::Percentile(vec![]));
        d.put(
            "e/a",
            "grpc",
            500,
            "p95",
            Observed::Percentile(vec![PercentileSession {
                pooled: 23.1,
                repetitions: vec![21.0, 25.0, 26.59],
            }]),
        );
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.workers, 500, "highest");
        assert_eq!(v.outcome, Outcome::Fails);
        let missed: Vec<&str> = v
            .parts
            .iter()
            .filter(|x| x.meets == Some(false))
            .map(|x| x.name.as_str())
            .collect();
        assert_eq!(missed, ["repetition 3"]);
        d.put(
            "e/a",
            "grpc",
            500,
            "p95",
            Observed::Percentile(vec![PercentileSession {
                pooled: 25.0,
                repetitions: vec![21.0, 25.0],
            }]),
        );
        assert_eq!(judge(&p, &r, &d)[0].outcome, Outcome::Holds);
    }

    /// One stack against another: HTTP/1.1 at 10 % success vs HTTP/3 at 99 %; "h1 − h3 <= −0.5"
    /// holds by Newcombe's interval; with 60 % vs 99 % the interval straddles −0.5 at these n
    /// only if it is wide, so it is checked on both sides of the boundary.
    #[test]
    fn one_stack_against_another() {
        let rule = |v: f64| {
            format!("quantity = \"success\"\nsubject = {{ stack = \"h1\", regime = \"new-conn\", workers = 200 }}\nversus = {{ stack = \"h3\" }}\ncompare = \"difference\"\ntest = {{ op = \"<=\", value = {v}, sided = \"one\" }}")
        };
        let mut d = Fixture::default();
        d.put(
            "e/a",
            "h1",
            200,
            "success",
            Observed::Proportion(vec![counts(&[(100, 1000), (100, 1000)])]),
        );
        d.put(
            "e/a",
            "h3",
            200,
            "success",
            Observed::Proportion(vec![counts(&[(990, 1000), (990, 1000)])]),
        );
        let (p, r) = plan_with(&rule(-0.5));
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::Holds, "{v:?}");
        let upper = v.parts.iter().find(|x| x.name == "upper bound").unwrap();
        assert!(upper.value < -0.86 && upper.value > -0.9, "{upper:?}");
        // The bound just above the upper end: still holds; just below it: undecided.
        let (p, r) = plan_with(&rule(upper.value + 1e-9));
        assert_eq!(judge(&p, &r, &d)[0].outcome, Outcome::Holds);
        let (p, r) = plan_with(&rule(upper.value - 1e-6));
        assert_eq!(judge(&p, &r, &d)[0].outcome, Outcome::Undecided);
        // A cell with fewer attempts than the budget is not judged, and says why.
        d.put(
            "e/a",
            "h3",
            200,
            "success",
            Observed::Proportion(vec![counts(&[(990, 1000), (500, 512)])]),
        );
        let (p, r) = plan_with(&rule(-0.5));
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::NotJudged);
        assert!(
            v.label
                .contains("512 attempts, not the plan's budget of 1000"),
            "{}",
            v.label
        );
    }

    /// One condition against another (means): throughput in e/a vs e/b, two-sided within
    /// [−50, 50] req/s; one level against another (ratio of means, one-sided `>=`).
    #[test]
    fn one_condition_or_level_against_another() {
        let rule = "quantity = \"rps\"\nsubject = { stack = \"h1\", regime = \"new-conn\", workers = 100 }\nversus = { condition = \"e/b\" }\ncompare = \"difference\"\ntest = { op = \"within\", low = -50.0, high = 50.0, sided = \"two\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        d.put(
            "e/a",
            "h1",
            100,
            "rps",
            Observed::Mean(vec![vec![1000.0, 1010.0, 990.0]]),
        );
        d.put(
            "e/b",
            "h1",
            100,
            "rps",
            Observed::Mean(vec![vec![1005.0, 995.0, 1000.0]]),
        );
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::Holds, "{v:?}");
        d.put(
            "e/b",
            "h1",
            100,
            "rps",
            Observed::Mean(vec![vec![400.0, 410.0, 390.0]]),
        );
        assert_eq!(judge(&p, &r, &d)[0].outcome, Outcome::Fails);

        let ratio = "quantity = \"rps\"\nsubject = { stack = \"h1\", regime = \"new-conn\", workers = 500 }\nversus = { workers = 100 }\ncompare = \"ratio\"\ntest = { op = \">=\", value = 0.5, sided = \"one\" }";
        let (p, r) = plan_with(ratio);
        d.put(
            "e/a",
            "h1",
            500,
            "rps",
            Observed::Mean(vec![vec![450.0, 460.0, 440.0]]),
        );
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::Fails, "{v:?}");
        let estimate = v.parts.iter().find(|x| x.name == "ratio").unwrap();
        assert!((estimate.value - 0.45).abs() < 1e-12);
    }

    /// Between sessions: a proportion is pooled (never a t over session rates), every bound
    /// stays in [0, 1], the per-session agreement check names the session that disagrees, and
    /// a mean is a t over session means with n = 3 stated.
    #[test]
    fn between_sessions_counts_are_pooled_and_means_are_over_session_means() {
        let rule = "quantity = \"success\"\nsubject = { stack = \"h1\", regime = \"new-conn\", workers = 500 }\ntest = { op = \">=\", value = 0.5, sided = \"two\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        // The committee's case: 3 %, 8.5 %, 14 % in three sessions.
        d.put(
            "e/a",
            "h1",
            500,
            "success",
            Observed::Proportion(vec![
                counts(&[(15, 1000), (15, 1000)]),
                counts(&[(85, 1000), (85, 1000)]),
                counts(&[(140, 1000), (140, 1000)]),
            ]),
        );
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::Fails);
        for part in &v.parts {
            if part.name.ends_with("bound") {
                assert!((0.0..=1.0).contains(&part.value), "{part:?}");
            }
        }
        assert_eq!(
            v.parts.iter().find(|x| x.name == "attempts").unwrap().value,
            6000.0
        );
        assert_eq!(v.disagreeing, vec![0, 2]);

        let rule = "quantity = \"rps\"\nsubject = { stack = \"h1\", regime = \"new-conn\", workers = 500 }\ntest = { op = \">=\", value = 900.0, sided = \"one\" }";
        let (p, r) = plan_with(rule);
        d.put(
            "e/a",
            "h1",
            500,
            "rps",
            Observed::Mean(vec![
                vec![1000.0, 1002.0],
                vec![1100.0, 1098.0],
                vec![1200.0, 1204.0],
            ]),
        );
        let v = &judge(&p, &r, &d)[0];
        let n = v.parts.iter().find(|x| x.name.starts_with("n (")).unwrap();
        assert_eq!((n.name.as_str(), n.value), ("n (session means)", 3.0));
        // mean 1100.67, sd ≈ 100.0 over the 3 session means, t(0.95, 2) = 2.92: lower ≈ 932.
        let lower = v.parts.iter().find(|x| x.name == "lower bound").unwrap();
        assert!(lower.value > 925.0 && lower.value < 940.0, "{lower:?}");
        assert_eq!(v.outcome, Outcome::Holds);
    }

    /// Whole verdicts: session 2's p95 is over the bound in one repetition, so its verdict
    /// fails while sessions 1 and 3 hold; agreement names the outcome, the label and that
    /// repetition, not merely "the first phrase differs". Sessions that agree give no change.
    #[test]
    fn whole_verdicts_agree_or_name_the_part_that_moved() {
        let rule = "quantity = \"p95\"\nsubject = { stack = \"grpc\", regime = \"new-conn\", workers = 500 }\ntest = { op = \"<=\", value = 25.0, sided = \"one\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        let s = |pooled: f64, reps: &[f64]| PercentileSession {
            pooled,
            repetitions: reps.to_vec(),
        };
        d.put(
            "e/a",
            "grpc",
            500,
            "p95",
            Observed::Percentile(vec![
                s(23.1, &[22.0, 23.0, 24.0]),
                s(24.9, &[22.0, 27.78, 24.0]),
                s(23.5, &[22.5, 23.1, 24.4]),
            ]),
        );
        let per = judge_sessions(&p, &r, &d, 3);
        let verdicts: Vec<&Verdict> = per.iter().map(|v| &v[0]).collect();
        assert_eq!(
            verdicts.iter().map(|v| v.outcome).collect::<Vec<_>>(),
            [Outcome::Holds, Outcome::Fails, Outcome::Holds]
        );
        let changes = agreement(&verdicts);
        let names: Vec<&str> = changes.iter().map(|c| c.part.as_str()).collect();
        assert_eq!(names, ["outcome", "label", "repetition 2"]);
        assert_eq!(
            changes[2]
                .sessions
                .iter()
                .map(|s| s.text(|x| x.to_string()))
                .collect::<Vec<_>>(),
            [
                "23 meets the bound",
                "27.78 misses the bound",
                "23.1 meets the bound"
            ]
        );
        assert!(agreement(&[verdicts[0], verdicts[2]]).is_empty());
        // The same outcome with a bound on the other side is still a change: a proportion whose
        // lower bound moved below the rule's while the outcome stayed undecided.
        let part = |meets| Part {
            name: "lower bound".into(),
            value: 0.4,
            meets: Some(meets),
        };
        let mut a = verdicts[0].clone();
        a.parts = vec![part(true)];
        let mut b = a.clone();
        b.parts = vec![part(false)];
        assert_eq!(agreement(&[&a, &b])[0].part, "lower bound");
    }

    /// A rule names a cell the data lacks: not judged, with the missing cell named, never a
    /// verdict by default; below the minimum repetitions likewise.
    #[test]
    fn missing_cells_and_small_samples_are_not_judged() {
        let rule = "quantity = \"rps\"\nsubject = { stack = \"h1\", regime = \"new-conn\", workers = 200 }\ntest = { op = \">=\", value = 1.0, sided = \"one\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        let v = &judge(&p, &r, &d)[0];
        assert_eq!(v.outcome, Outcome::NotJudged);
        assert!(v
            .label
            .contains("no new-conn cell of h1 at 200 workers in e/a"));
        d.put("e/a", "h1", 200, "rps", Observed::Mean(vec![vec![5.0]]));
        let v = &judge(&p, &r, &d)[0];
        assert!(v.label.contains("1 repetition(s)"), "{}", v.label);
    }

    /// The committed plan's C3 rule through the engine: 3 sessions × 3 repetitions of the
    /// plan's budget without a failure hold at every level; a repetition short of the budget
    /// is not judged; 20 failures in one repetition leave that level undecided (pooled 20 in
    /// 45,000), and the agreement check names the sessions.
    #[test]
    fn the_committed_plan_judges_c3_at_its_budget() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/study/plan.toml");
        let plan = Plan::load(&path).unwrap();
        let rule = plan.rules.iter().find(|r| r.id == "C3-h3").unwrap().clone();
        let budget = plan.budgets.attempts["new-conn"];
        let mut d = Fixture::default();
        let cells = |k: u64| Observed::Proportion(vec![vec![Counts { k, n: budget }; 3]; 3]);
        for w in [10, 100, 200, 500] {
            d.put("c3-h3-success/default", "h3", w, "success", cells(budget));
        }
        let judged: Vec<Verdict> = judge(&plan, &rule, &d)
            .into_iter()
            .filter(|v| v.condition == "c3-h3-success/default")
            .collect();
        assert_eq!(judged.len(), 4);
        assert!(
            judged.iter().all(|v| v.label == "above 99.94 %"),
            "{judged:?}"
        );
        let mut short = cells(budget);
        if let Observed::Proportion(s) = &mut short {
            s[1][2] = Counts { k: 4000, n: 4000 };
        }
        d.put("c3-h3-success/default", "h3", 200, "success", short);
        let mut three = cells(budget);
        if let Observed::Proportion(s) = &mut three {
            s[0][0].k = budget - 20;
        }
        d.put("c3-h3-success/default", "h3", 500, "success", three);
        let v = judge(&plan, &rule, &d);
        let at = |w| {
            v.iter()
                .find(|x| x.condition == "c3-h3-success/default" && x.workers == w)
                .unwrap()
        };
        assert_eq!(at(200).outcome, Outcome::NotJudged);
        assert_eq!(at(500).outcome, Outcome::Undecided, "{:?}", at(500));
        // 20 in 15,000 against 0 in 15,000 twice: no session's interval holds the pooled rate,
        // so the check names all three (pooling them is not supported by the data).
        assert_eq!(at(500).disagreeing, vec![0, 1, 2]);
        assert!(at(100).disagreeing.is_empty());
        assert_eq!(at(10).outcome, Outcome::Holds);
        // Conditions without data are named as such, never judged by default.
        assert!(v
            .iter()
            .filter(|x| x.condition == "c2c3-two-hosts/kept-one-address")
            .all(|x| x.label == "not judged: the condition has no cell"));
    }

    /// Every level judged on its own with `workers = "every"`.
    #[test]
    fn every_level_is_a_verdict() {
        let rule = "quantity = \"success\"\nsubject = { stack = \"h3\", regime = \"new-conn\", workers = \"every\" }\ntest = { op = \">\", value = 0.99, sided = \"one\" }";
        let (p, r) = plan_with(rule);
        let mut d = Fixture::default();
        for (w, k) in [(10, 1000), (100, 1000), (500, 900)] {
            d.put(
                "e/a",
                "h3",
                w,
                "success",
                Observed::Proportion(vec![counts(&[(k, 1000), (k, 1000)])]),
            );
        }
        let v = judge(&p, &r, &d);
        assert_eq!(
            v.iter().map(|x| (x.workers, x.outcome)).collect::<Vec<_>>(),
            [
                (10, Outcome::Holds),
                (100, Outcome::Holds),
                (500, Outcome::Fails)
            ]
        );
    }
}
