//! The analysis plan (`experiments/study/plan.toml`) as data: for each claim, the hypothesis,
//! the quantities with their units, the conditions (those where the claim's mechanism can act
//! among them), the statistic, the decision rule and the minimum sample, and the fixed budget of
//! attempts that is a cell's unit. The plan is committed before the data it judges
//! ([`crate::timing`] says whether it was); [`crate::engine`] judges every rule of it with one
//! piece of code. Nothing here names a claim, a stack or a number: they are all in the file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::Deserialize;

/// The whole plan file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The study the plan judges, as its title names it.
    pub study: String,
    /// The question the study answers, in one sentence.
    pub question: String,
    /// Confidence of every bound (0.95: α = 0.05).
    pub confidence: f64,
    /// A cell's unit: a fixed number of attempts per regime.
    pub budgets: Budgets,
    /// The smallest sample any rule is judged on, unless the rule states its own.
    pub min_sample: MinSample,
    /// What each quantity is, by name.
    pub quantities: BTreeMap<String, Quantity>,
    /// The conditions rules are judged in.
    pub conditions: Vec<Condition>,
    /// The claims, each a set of rules.
    pub claims: Vec<ClaimEntry>,
    pub rules: Vec<Rule>,
    /// What a failure counted in a column means ran out: the measured mechanism.
    #[serde(default)]
    pub limits: Vec<Limit>,
    /// The answer to [`Plan::question`], sentence by sentence, each resting on rules.
    #[serde(default)]
    pub answer: Vec<AnswerSentence>,
    /// Where notes written after the data live (a file and section), which the paper names
    /// under its answer: findings that change no rule but change how to read one.
    #[serde(default)]
    pub read_with: Option<String>,
    /// Set by [`Plan::quick`]: the sessions the full plan asks for.
    #[serde(skip)]
    pub quick_of_sessions: Option<usize>,
}

/// A failure column of `cells.csv` and the resource whose exhaustion it counts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// A `fail_*` column.
    pub column: String,
    /// What ran out, in a few words ("local ports (EADDRNOTAVAIL)").
    pub resource: String,
}

/// One sentence of the answer. Its words are chosen by the outcomes of its rules' verdicts in
/// the conditions that can refute them (the others are named, never counted): `all_hold` when
/// every judged verdict holds, `all_undecided` when every one is undecided, `none_hold` when
/// none holds and some fail, `some_hold` otherwise, and a fixed sentence when none was judged. Placeholders, filled from the verdicts: `{holds}`, `{fails}`,
/// `{undecided}` (the conditions and levels with that outcome, with their estimates) and
/// `{limits}` (what ran out in `limits_in`, from the failure counts).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerSentence {
    pub rules: Vec<String>,
    pub all_hold: String,
    pub none_hold: String,
    pub some_hold: String,
    #[serde(default = "AnswerSentence::undecided_default")]
    pub all_undecided: String,
    /// Conditions whose measured limits `{limits}` lists.
    #[serde(default)]
    pub limits_in: Vec<String>,
}

impl AnswerSentence {
    fn undecided_default() -> String {
        "Undecided: {undecided_list}.".into()
    }
}

/// Where a quantity's values are read: columns of `cells.csv` (and, for a percentile, the
/// histograms of `hlog/`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A proportion's successes.
    pub count: Option<String>,
    /// A proportion's attempts.
    pub of: Option<String>,
    /// A mean's or a percentile's value per repetition.
    pub value: Option<String>,
    /// A mean's value is `value ÷ per` (ok ÷ elapsed_s).
    pub per: Option<String>,
    /// Multiplies the value (1e-6 for bytes to MB, 0.001 for µs to ms).
    pub scale: Option<f64>,
    /// A percentile's histogram tag in `hlog/` (merged over a session's repetitions).
    pub histogram: Option<String>,
}

/// A cell is this many attempts, never stretched by time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// The `cells.csv` column that counts a cell's attempts (`sent`).
    pub column: String,
    /// Attempts per cell (one stack, level, condition and repetition) by regime name
    /// (`new-conn`, `reuse`).
    pub attempts: BTreeMap<String, u64>,
    /// The reduced budgets of `scripts/reproduce-paper --quick` (a first look, one session).
    #[serde(default)]
    pub quick: BTreeMap<String, u64>,
}

/// The smallest sample a verdict may rest on.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MinSample {
    /// Repetitions of a cell in one session.
    pub repetitions: usize,
    /// Sessions (whole runs of the plan at one commit on a quiet machine).
    pub sessions: usize,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum QuantityKind {
    /// k of n attempts; exact binomial bounds, pooled counts between sessions.
    Proportion,
    /// A mean over repetitions; Student t over repetitions, over session means between them.
    Mean,
    /// A latency percentile; judged on the merged histograms and every repetition
    /// ([`PercentileRule`]), without a sampling bound.
    Percentile,
}

/// How a percentile is judged against a bound.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PercentileRule {
    /// The percentile of the merged histograms (all repetitions of a session) and every
    /// repetition's own must each meet the bound.
    PooledAndEveryRepetition,
    /// Only the merged histograms' percentile.
    Pooled,
}

/// One quantity a rule judges.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantity {
    pub kind: QuantityKind,
    /// The unit bounds and values are written in ("%" is a proportion shown ×100; bounds of a
    /// proportion are written as fractions).
    pub unit: String,
    /// Its definition, from which columns of a results directory.
    pub definition: String,
    /// For a percentile: which one (95 for p95) and how it is judged.
    pub percentile: Option<f64>,
    pub percentile_rule: Option<PercentileRule>,
    /// Which columns hold it.
    pub source: Source,
}

/// A condition: one variant of one experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// "experiment/variant", as rules name it.
    pub name: String,
    /// The experiment file that runs it.
    pub experiment: String,
    /// Whether the claim's mechanism can act here, and why (or why not).
    pub mechanism: String,
    /// `false` for a condition that cannot refute the claims judged in it (its resource cannot
    /// run out there); the paper says so beside every verdict from it.
    pub can_refute: bool,
    /// The resource this condition makes scarce, checked in the data cell by cell: a verdict
    /// from a cell where it did not come near running out cannot refute either (a short cell
    /// may make fewer connections than there are ports).
    #[serde(default)]
    pub resource: Option<Resource>,
}

/// A resource whose exhaustion a condition provokes, as the data can show it.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    /// Local ports: TIME_WAIT's peak plus the open connections against ports × source
    /// addresses, or a failure to get an address (`fail_addr_unavailable`).
    Ports,
    /// The load generator's descriptors: workers against `client_nofile`, or `fail_fd_exhausted`.
    Descriptors,
}

/// One claim of the study.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimEntry {
    /// "C1" … "C5".
    pub id: String,
    /// The claim in the study's words, paraphrased as `paper/study.md` does.
    pub statement: String,
    /// What would make it true here, as a testable hypothesis.
    pub hypothesis: String,
}

/// Which concurrency level(s) a rule judges.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Workers {
    /// One level.
    Level(u64),
    /// `"highest"` (the highest level the condition ran) or `"every"` (each level judged on its
    /// own; the rule holds where every level holds).
    Named(NamedLevel),
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NamedLevel {
    Highest,
    Every,
}

/// What is measured: a stack in a regime at a level.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub stack: String,
    pub regime: String,
    pub workers: Workers,
}

/// The other side of a comparison: the subject with one thing changed. Exactly one field is
/// set, and it says which kind of comparison the rule is.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Versus {
    /// One stack against another, in the same condition and at the same level.
    pub stack: Option<String>,
    /// One condition against another (the rule's `conditions` are the first side).
    pub condition: Option<String>,
    /// One level against another.
    pub workers: Option<u64>,
}

/// How two sides are compared.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// subject − versus.
    Difference,
    /// subject ÷ versus (means only).
    Ratio,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum Op {
    #[serde(rename = "<")]
    Below,
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = ">")]
    Above,
    #[serde(rename = ">=")]
    AtLeast,
    /// Within [low, high] (two-sided).
    #[serde(rename = "within")]
    Within,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Sidedness {
    One,
    Two,
}

impl From<Sidedness> for stats::Sided {
    fn from(s: Sidedness) -> stats::Sided {
        match s {
            Sidedness::One => stats::Sided::One,
            Sidedness::Two => stats::Sided::Two,
        }
    }
}

/// The decision rule: the quantity (or the comparison) against a bound.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Test {
    pub op: Op,
    /// The bound of `<`, `<=`, `>`, `>=`.
    pub value: Option<f64>,
    /// The ends of `within`.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// One-sided bounds, or the two-sided interval (`within` needs two).
    pub sided: Sidedness,
}

/// The words a rule's outcome is shown with; which one applies is computed, never chosen.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub holds: String,
    pub fails: String,
    pub undecided: String,
}

/// One decision rule of one claim.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// "C2-collapse-default", unique.
    pub id: String,
    /// The claim it belongs to.
    pub claim: String,
    /// What the rule tests, in a sentence.
    pub hypothesis: String,
    /// A name of [`Plan::quantities`].
    pub quantity: String,
    pub subject: Subject,
    /// The conditions it is judged in, each on its own.
    pub conditions: Vec<String>,
    /// The other side, for a comparison; absent for a quantity against a bound.
    pub versus: Option<Versus>,
    /// How the sides are compared (required with `versus`).
    pub compare: Option<Compare>,
    pub test: Test,
    pub labels: Labels,
    /// Overrides the plan's.
    pub min_sample: Option<MinSample>,
    /// The hypothesis holds in every condition the rule lists ("at every level of every
    /// condition"; "where nothing runs out"), so a row from any of them can refute it: neither
    /// a condition's `can_refute` nor its `resource`, which say where a TCP resource can run
    /// out, gates this rule's rows.
    #[serde(default)]
    pub refuted_in_any_condition: bool,
}

/// What a rule compares, from its `versus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    /// The quantity against a bound.
    Bound,
    /// One stack against another.
    Stacks(String),
    /// One condition against another.
    Conditions(String),
    /// One level against another.
    Levels(u64),
}

impl Rule {
    pub fn kind(&self) -> RuleKind {
        match &self.versus {
            None => RuleKind::Bound,
            Some(Versus {
                stack: Some(s),
                condition: None,
                workers: None,
            }) => RuleKind::Stacks(s.clone()),
            Some(Versus {
                stack: None,
                condition: Some(c),
                workers: None,
            }) => RuleKind::Conditions(c.clone()),
            Some(Versus {
                stack: None,
                condition: None,
                workers: Some(w),
            }) => RuleKind::Levels(*w),
            // Refused by `Plan::validate`.
            Some(_) => RuleKind::Bound,
        }
    }
}

impl Plan {
    /// Reads and validates a plan file.
    pub fn load(path: &Path) -> anyhow::Result<Plan> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Plan::parse(&text).with_context(|| format!("{}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Plan> {
        let plan: Plan = toml::from_str(text)?;
        plan.validate()?;
        Ok(plan)
    }

    /// α of every bound.
    pub fn alpha(&self) -> f64 {
        1.0 - self.confidence
    }

    /// Every problem that would make a rule unjudgeable, refused before any data is read.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut problems = Vec::new();
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            problems.push(format!("confidence {} is not in (0.5, 1)", self.confidence));
        }
        let conditions: Vec<&str> = self.conditions.iter().map(|c| c.name.as_str()).collect();
        let claims: Vec<&str> = self.claims.iter().map(|c| c.id.as_str()).collect();
        let mut ids = std::collections::BTreeSet::new();
        for (name, q) in &self.quantities {
            let is_pct = q.kind == QuantityKind::Percentile;
            if is_pct != (q.percentile.is_some() && q.percentile_rule.is_some()) {
                problems.push(format!(
                    "quantity {name}: `percentile` and `percentile_rule` go with kind = \"percentile\" and only with it"
                ));
            }
            let src = &q.source;
            let fits = match q.kind {
                QuantityKind::Proportion => {
                    src.count.is_some() && src.of.is_some() && src.value.is_none()
                }
                QuantityKind::Mean => {
                    src.value.is_some() && src.count.is_none() && src.histogram.is_none()
                }
                QuantityKind::Percentile => {
                    src.value.is_some() && src.histogram.is_some() && src.per.is_none()
                }
            };
            if !fits {
                problems.push(format!(
                    "quantity {name}: its source takes count and of (a proportion), value with an optional per (a mean), or value and histogram (a percentile)"
                ));
            }
        }
        for l in &self.limits {
            if !l.column.starts_with("fail_") {
                problems.push(format!("limit {}: a limit is a fail_* column", l.column));
            }
        }
        if self.answer.len() > 10 {
            problems.push(format!(
                "the answer has {} sentences; it is at most 10",
                self.answer.len()
            ));
        }
        for (i, a) in self.answer.iter().enumerate() {
            for r in &a.rules {
                if !self.rules.iter().any(|x| &x.id == r) {
                    problems.push(format!("answer sentence {}: no rule {r}", i + 1));
                }
            }
            for c in &a.limits_in {
                if !conditions.contains(&c.as_str()) {
                    problems.push(format!("answer sentence {}: no condition {c}", i + 1));
                }
            }
        }
        for claim in &self.claims {
            if !self.rules.iter().any(|r| r.claim == claim.id) {
                problems.push(format!("claim {} has no rule", claim.id));
            }
        }
        for r in &self.rules {
            let at = |what: String| format!("rule {}: {what}", r.id);
            if !ids.insert(r.id.as_str()) {
                problems.push(at("the id is used twice".into()));
            }
            if !claims.contains(&r.claim.as_str()) {
                problems.push(at(format!("no claim {}", r.claim)));
            }
            let Some(q) = self.quantities.get(&r.quantity) else {
                problems.push(at(format!("no quantity {}", r.quantity)));
                continue;
            };
            if r.conditions.is_empty() {
                problems.push(at("no condition".into()));
            }
            let versus_condition = r.versus.as_ref().and_then(|v| v.condition.as_ref());
            for c in r.conditions.iter().chain(versus_condition) {
                if !conditions.contains(&c.as_str()) {
                    problems.push(at(format!("no condition {c}")));
                }
            }
            if !self.budgets.attempts.contains_key(&r.subject.regime) {
                problems.push(at(format!(
                    "no budget of attempts for regime {}",
                    r.subject.regime
                )));
            }
            match (&r.test.op, r.test.value, r.test.low, r.test.high) {
                (Op::Within, None, Some(lo), Some(hi)) if lo <= hi => {
                    if r.test.sided != Sidedness::Two {
                        problems.push(at("`within` is two-sided: sided = \"two\"".into()));
                    }
                }
                (Op::Within, ..) => {
                    problems.push(at("`within` takes low ≤ high and no value".into()))
                }
                (_, Some(_), None, None) => {}
                _ => problems.push(at("`<`, `<=`, `>`, `>=` take a value only".into())),
            }
            if let Some(v) = &r.versus {
                let set = [
                    v.stack.is_some(),
                    v.condition.is_some(),
                    v.workers.is_some(),
                ];
                if set.iter().filter(|x| **x).count() != 1 {
                    problems.push(at(
                        "versus changes exactly one of stack, condition, workers".into(),
                    ));
                }
                if v.workers.is_some() && r.subject.workers == Workers::Named(NamedLevel::Every) {
                    problems.push(at("a level comparison needs one subject level".into()));
                }
                match r.compare {
                    None => problems.push(at("a comparison needs `compare`".into())),
                    Some(Compare::Ratio) if q.kind != QuantityKind::Mean => {
                        problems.push(at("a ratio compares means only".into()))
                    }
                    _ => {}
                }
                if q.kind == QuantityKind::Percentile {
                    problems.push(at(
                        "a percentile is judged against a bound, not compared".into()
                    ));
                }
            } else if r.compare.is_some() {
                problems.push(at("`compare` without `versus`".into()));
            }
            let min = r.min_sample.unwrap_or(self.min_sample);
            if min.repetitions == 0 || min.sessions == 0 {
                problems.push(at("a minimum sample of 0".into()));
            }
        }
        if !problems.is_empty() {
            bail!("{}", problems.join("; "));
        }
        Ok(())
    }

    /// The plan as `--quick` judges it: the quick budgets, one session. Its verdicts are a
    /// first look, and the paper says so.
    pub fn quick(mut self) -> anyhow::Result<Plan> {
        if self.budgets.quick.is_empty() {
            bail!("the plan has no [budgets.quick]: a quick paper needs its reduced budgets");
        }
        self.budgets.attempts = std::mem::take(&mut self.budgets.quick);
        self.quick_of_sessions = Some(self.min_sample.sessions);
        self.min_sample.sessions = 1;
        for r in &mut self.rules {
            if let Some(m) = &mut r.min_sample {
                m.sessions = 1;
            }
        }
        Ok(self)
    }

    /// The minimum sample of a rule.
    pub fn min_sample_of(&self, rule: &Rule) -> MinSample {
        rule.min_sample.unwrap_or(self.min_sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn committed() -> Plan {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/study/plan.toml");
        Plan::load(&path).unwrap()
    }

    #[test]
    fn the_committed_plan_is_valid_and_every_claim_has_rules() {
        let plan = committed();
        let ids: Vec<&str> = plan.claims.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["C1", "C2", "C3", "C4", "C5", "Q"]);
        // Every rule kind is used by some claim.
        let kinds: Vec<RuleKind> = plan.rules.iter().map(Rule::kind).collect();
        assert!(kinds.contains(&RuleKind::Bound));
        assert!(kinds.iter().any(|k| matches!(k, RuleKind::Stacks(_))));
        assert!(kinds.iter().any(|k| matches!(k, RuleKind::Conditions(_))));
        assert!(kinds.iter().any(|k| matches!(k, RuleKind::Levels(_))));
        // C2 and C3 are judged where their mechanism can act, not only on the defaults.
        for claim in ["C2", "C3"] {
            let can_refute = plan
                .rules
                .iter()
                .filter(|r| r.claim == claim)
                .flat_map(|r| &r.conditions)
                .filter_map(|c| plan.conditions.iter().find(|x| &x.name == c))
                .any(|c| c.can_refute && c.name.starts_with("c2c3-two-hosts/"));
            assert!(can_refute, "{claim}");
        }
        assert!(plan.budgets.attempts["new-conn"] >= 4992, "C3 needs 4,992");
    }

    /// The committed plans: the study's and the bulk-transfer study's.
    const PLANS: [&str; 2] = ["experiments/study/plan.toml", "experiments/bulk/plan.toml"];

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The variant `name` of the experiment file `file`, with the file's top-level keys under
    /// the variant's own.
    fn variant_of(file: &str, name: &str) -> toml::Table {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let exp: toml::Table = text.parse().unwrap();
        let mut merged = exp.clone();
        merged.remove("variants");
        let variant = exp["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("{file}: no variant {name}"));
        for (k, v) in variant.as_table().unwrap() {
            merged.insert(k.clone(), v.clone());
        }
        merged
    }

    /// A second study fits the same file format and engine: the bulk plan is valid, its
    /// experiment's cells are its budget, and every rule's stacks run in its conditions.
    #[test]
    fn the_bulk_plan_is_valid_and_its_rules_stacks_run_where_judged() {
        let plan = Plan::load(&root().join(PLANS[1])).unwrap();
        let ids: Vec<&str> = plan.claims.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["Z1", "Z2", "I1", "S"]);
        for c in &plan.conditions {
            let (_, variant) = c.name.split_once('/').unwrap();
            let v = variant_of(&c.experiment, variant);
            assert_eq!(
                v["requests_reuse"].as_integer().map(|n| n as u64),
                Some(plan.budgets.attempts["reuse"]),
                "{}",
                c.name
            );
            assert_eq!(v["concurrency"].as_array().unwrap().len(), 1, "{}", c.name);
        }
        for r in &plan.rules {
            let mut stacks = vec![r.subject.stack.clone()];
            if let RuleKind::Stacks(s) = r.kind() {
                stacks.push(s);
            }
            let versus = match r.kind() {
                RuleKind::Conditions(c) => Some(c),
                _ => None,
            };
            for name in r.conditions.iter().chain(versus.as_ref()) {
                let c = plan.conditions.iter().find(|c| &c.name == name).unwrap();
                let (_, variant) = name.split_once('/').unwrap();
                let v = variant_of(&c.experiment, variant);
                let runs: Vec<&str> = v["stacks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap())
                    .collect();
                for s in &stacks {
                    assert!(
                        runs.contains(&s.as_str()),
                        "rule {}: {s} not in {name}",
                        r.id
                    );
                }
            }
        }
    }

    /// Every condition names a variant its experiment file really has.
    #[test]
    fn every_condition_is_a_variant_of_its_experiment() {
        let root = root();
        for c in PLANS
            .iter()
            .flat_map(|p| Plan::load(&root.join(p)).unwrap().conditions)
        {
            let text = std::fs::read_to_string(root.join(&c.experiment))
                .unwrap_or_else(|e| panic!("{}: {e}", c.experiment));
            let exp: toml::Table = text.parse().unwrap();
            let (name, variant) = c.name.split_once('/').unwrap();
            assert_eq!(exp["name"].as_str(), Some(name), "{}", c.name);
            let variants: Vec<&str> = exp["variants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["name"].as_str().unwrap())
                .collect();
            assert!(variants.contains(&variant), "{}: {variants:?}", c.name);
        }
    }

    #[test]
    fn an_unjudgeable_rule_is_refused_with_its_id() {
        let text = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/study/plan.toml"),
        )
        .unwrap();
        // A ratio of proportions, a `within` that is one-sided, an unknown condition.
        let broken = format!(
            "{text}\n[[rules]]\nid = \"X\"\nclaim = \"C2\"\nhypothesis = \"x\"\nquantity = \"success\"\nsubject = {{ stack = \"h1\", regime = \"new-conn\", workers = 200 }}\nconditions = [\"nowhere/none\"]\nversus = {{ stack = \"h3\" }}\ncompare = \"ratio\"\ntest = {{ op = \"within\", low = 0.5, high = 2.0, sided = \"one\" }}\nlabels = {{ holds = \"a\", fails = \"b\", undecided = \"c\" }}\n"
        );
        let err = Plan::parse(&broken).unwrap_err().to_string();
        for part in [
            "rule X: no condition nowhere/none",
            "rule X: a ratio compares means only",
            "rule X: `within` is two-sided",
        ] {
            assert!(err.contains(part), "{err}");
        }
    }
}
