//! `runner paper`: the reproduction write-up (Markdown) generated from a reference run of the
//! default sweep and the claim experiments' runs. Every verdict, bound and range is computed
//! from the runs' files, never typed by hand, and the runs' provenance is checked first, so a
//! paper cannot silently compare numbers from different machines or code.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::output::rows::{self, CellRow, ResourceRow, Row as _, SummaryRow, Table};
use crate::output::summary::{interval, Interval};
use crate::report::labels::is_cell;
use crate::report::{label, levels, ms, regimes, stack_order, Results};

/// A `cells.csv` row of a run (the claim checks and tables read these).
type Row = CellRow;

mod scale;

/// The paper file and what the caller should tell the user (mixed provenance it was allowed).
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub warnings: Vec<String>,
}

/// Steady-state throughput (all workers active); preferred wherever the study's "throughput"
/// is compared, because `ok / elapsed` also counts ramp-up and drain.
const STEADY_RPS: &str = "throughput_steady_rps";
const ELAPSED_RPS: &str = "throughput_rps";

/// A "stable" throughput varies by at most this coefficient of variation (sd / mean).
const STABLE_CV: f64 = 0.10;

/// "≈ X" in a claim is matched when the measurement is within this fraction of X.
const MATCH_FRACTION: f64 = 0.10;

/// One results directory with the files the paper reads.
struct Run {
    dir: PathBuf,
    results: Results,
    /// `summary.csv` (empty when the file is absent).
    summary: Table<SummaryRow>,
    /// `resources.csv` rows (empty when the file is absent).
    resources: Vec<ResourceRow>,
    /// The throughput column used for this run: steady-state when the run has it.
    throughput_col: &'static str,
}

/// A parsed, finite number from a CSV cell; `None` for empty or unparsable cells, so missing
/// figures are never averaged in as zeros.
fn fval(row: &Row, col: &str) -> Option<f64> {
    row.number(col)
}

impl Run {
    fn load(dir: &Path) -> anyhow::Result<Self> {
        let results = Results::load(dir)?;
        let throughput_col = if results
            .cells
            .iter()
            .any(|r| r.stage == "stress" && fval(r, STEADY_RPS).is_some())
        {
            STEADY_RPS
        } else {
            ELAPSED_RPS
        };
        Ok(Run {
            dir: dir.to_path_buf(),
            // Older runs wrote no resources or summary: empty then.
            summary: rows::read_if_present(&dir.join("summary.csv"))?,
            resources: rows::read_if_present(&dir.join("resources.csv"))?.rows,
            results,
            throughput_col,
        })
    }

    fn name(&self) -> String {
        self.results.manifest["experiment"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    }

    fn stress(&self) -> Vec<&Row> {
        self.results
            .cells
            .iter()
            .filter(|r| r.stage == "stress")
            .collect()
    }

    fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in self.stress() {
            if !v.contains(&r.variant) {
                v.push(r.variant.clone());
            }
        }
        v
    }

    /// The stress rows of one variant (all of them for `None`).
    fn rows(&self, variant: Option<&str>) -> Vec<&Row> {
        self.stress()
            .into_iter()
            .filter(|r| variant.is_none_or(|v| r.variant == v))
            .collect()
    }

    /// Mean and 95 % interval over repetitions: from `summary.csv` when it holds the column
    /// and can tell variants apart, else computed the same way (Student t) from `cells.csv`.
    fn stat(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
        col: &str,
    ) -> Option<Interval> {
        if let Some(iv) = self.summary_stat(variant, stack, regime, c, col) {
            return Some(iv);
        }
        let values: Vec<f64> = self
            .rows(variant)
            .into_iter()
            .filter(|r| is_cell(r, stack, regime, c))
            .filter_map(|r| fval(r, col))
            .collect();
        (!values.is_empty()).then(|| interval(&values))
    }

    fn summary_stat(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
        col: &str,
    ) -> Option<Interval> {
        self.summary.rows.first()?;
        let mean_col = format!("{col}_mean");
        if !self.summary.has(&mean_col) {
            return None;
        }
        let by_variant = self.summary.has("variant");
        if !by_variant && self.variants().len() > 1 {
            // This summary.csv pools the variants; it cannot answer for one of them.
            return None;
        }
        let row = self.summary.rows.iter().find(|r| {
            r.stage == "stress"
                && r.stack == stack
                && r.regime == regime
                && r.concurrency as u64 == c
                && (!by_variant || variant.is_none_or(|v| r.variant == v))
        })?;
        let mean = row.number(&mean_col)?;
        let n = row.repetitions;
        let ci = match (
            row.number(&format!("{col}_ci95_low")),
            row.number(&format!("{col}_ci95_high")),
        ) {
            (Some(lo), Some(hi)) if n >= 2 => Some((lo, hi)),
            _ => None,
        };
        Some(Interval {
            n,
            mean,
            sd: row.number(&format!("{col}_sd")).filter(|_| n >= 2),
            ci,
        })
    }

    /// Throughput of a cell in the run's column, falling back (marked `true`) to
    /// `ok / elapsed_s` for a cell that had no steady window.
    fn tput(
        &self,
        variant: Option<&str>,
        stack: &str,
        regime: &str,
        c: u64,
    ) -> Option<(Interval, bool)> {
        match self.stat(variant, stack, regime, c, self.throughput_col) {
            Some(iv) => Some((iv, false)),
            None => self
                .stat(variant, stack, regime, c, ELAPSED_RPS)
                .map(|iv| (iv, self.throughput_col != ELAPSED_RPS)),
        }
    }

    /// Server samples of one cell in `resources.csv`: count, first, last and largest RSS.
    fn rss_samples(&self, cell_key: &str, role: &str) -> Option<RssSeries> {
        let rss: Vec<f64> = self
            .resources
            .iter()
            .filter(|r| r.cell_key == cell_key && r.role == role)
            .map(|r| r.rss_bytes as f64)
            .collect();
        Some(RssSeries {
            samples: rss.len(),
            first_bytes: *rss.first()?,
            last_bytes: *rss.last()?,
            max_bytes: rss.iter().cloned().fold(f64::MIN, f64::max),
        })
    }

    /// Repetitions the cells hold (a resumed or cut run may differ from the plan), else the
    /// manifest's planned count.
    fn repetitions(&self) -> String {
        let mut reps: Vec<String> = self
            .stress()
            .iter()
            .map(|r| r.repetition.to_string())
            .collect();
        reps.sort();
        reps.dedup();
        match reps.len() {
            0 => self.results.manifest["experiment"]["repetitions"]
                .as_u64()
                .map_or_else(|| "?".into(), |n| n.to_string()),
            n => n.to_string(),
        }
    }

    fn provenance(&self) -> Provenance {
        let m = &self.results.manifest;
        let text = |key: &str| find_first(m, key).map(|v| scalar(&v));
        Provenance {
            name: self.name(),
            run: format!("{} (`{}`)", self.name(), self.dir.display()),
            cpu_model: text("cpu_model").unwrap_or_else(|| "unknown".into()),
            cpu_model_name: text("cpu_model_name"),
            hypervisor: text("hypervisor"),
            ram: find_first(m, "ram_bytes")
                .and_then(|v| v.as_f64())
                .map(|b| format!("{:.1} GB RAM", b / 1e9)),
            cores: text("cores").unwrap_or_else(|| "?".into()),
            kernel: text("kernel").unwrap_or_else(|| "unknown".into()),
            commit: text("git_commit").unwrap_or_else(|| "unknown".into()),
            date: text("started_utc")
                .map(|d| d.chars().take(16).collect::<String>().replace('T', " "))
                .unwrap_or_else(|| "?".into()),
            repetitions: self.repetitions(),
            throughput_col: self.throughput_col,
        }
    }
}

struct RssSeries {
    samples: usize,
    first_bytes: f64,
    last_bytes: f64,
    max_bytes: f64,
}

/// A JSON scalar as text (strings without quotes).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first non-null value under `key` anywhere in the manifest except the experiment (whose
/// keys are settings, not the environment): new environment fields may be nested.
fn find_first(v: &Value, key: &str) -> Option<Value> {
    find_all(v, key).into_iter().next().map(|(_, v)| v)
}

/// Every non-null value under `key`, with its JSON path, outside `experiment`.
fn find_all(v: &Value, key: &str) -> Vec<(String, Value)> {
    fn walk(v: &Value, key: &str, path: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let here = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if k == key && !child.is_null() && !child.is_object() {
                        out.push((here, child.clone()));
                    } else if k != "experiment" {
                        walk(child, key, &here, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, key, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, key, "", &mut out);
    out
}

/// Where, on what and from which code one run came.
struct Provenance {
    /// The experiment's name, for sentences.
    name: String,
    /// Name and directory, for the table.
    run: String,
    cpu_model: String,
    cpu_model_name: Option<String>,
    hypervisor: Option<String>,
    /// Memory size, when the manifest records it.
    ram: Option<String>,
    cores: String,
    kernel: String,
    commit: String,
    date: String,
    repetitions: String,
    throughput_col: &'static str,
}

impl Provenance {
    /// The most precise CPU description the manifest has.
    fn cpu(&self) -> String {
        match &self.cpu_model_name {
            Some(name) if name != &self.cpu_model => format!("{name} ({})", self.cpu_model),
            _ => self.cpu_model.clone(),
        }
    }
}

/// What differs between the runs, or makes one untraceable, one sentence each; empty when the
/// runs share commit, CPU model and kernel and every commit is clean.
fn provenance_problems(provs: &[Provenance]) -> Vec<String> {
    let mut problems = Vec::new();
    type Field = (&'static str, fn(&Provenance) -> String);
    let fields: [Field; 3] = [
        ("commit", |p| short_commit(&p.commit)),
        ("CPU model", |p| p.cpu()),
        ("kernel", |p| p.kernel.clone()),
    ];
    for (what, get) in fields {
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for p in provs {
            let value = get(p);
            match groups.iter_mut().find(|g| g.0 == value) {
                Some(g) => g.1.push(&p.name),
                None => groups.push((value, vec![&p.name])),
            }
        }
        if groups.len() > 1 {
            let parts: Vec<String> = groups
                .iter()
                .map(|(v, runs)| format!("`{v}` for {}", runs.join(", ")))
                .collect();
            problems.push(format!("the runs differ in {what}: {}", parts.join("; ")));
        }
    }
    for p in provs {
        if p.commit.ends_with("-dirty") {
            problems.push(format!(
                "{} ran on a dirty tree (`{}`): its code is in no commit",
                p.name,
                short_commit(&p.commit)
            ));
        } else if p.commit == "unknown" {
            problems.push(format!("{} has no recorded commit", p.name));
        }
    }
    problems
}

/// A commit as `git log --oneline` shows it, keeping a `-dirty` mark.
fn short_commit(commit: &str) -> String {
    match commit.strip_suffix("-dirty") {
        Some(c) => format!("{}-dirty", &c[..c.len().min(9)]),
        None if commit.len() > 9 && commit.chars().all(|c| c.is_ascii_hexdigit()) => {
            commit[..9].to_string()
        }
        None => commit.to_string(),
    }
}

/// Two-sided 95 % Clopper–Pearson interval of a binomial proportion: `k` events in `n` trials.
/// Exact (from the binomial CDF, each tail 2.5 %), so it stays valid at k = 0, where the upper
/// end is `1 − 0.025^(1/n)` (one-sided 95 % would be `1 − 0.05^(1/n)`, smaller).
pub fn clopper_pearson_95(k: u64, n: u64) -> (f64, f64) {
    const TAIL: f64 = 0.025;
    if n == 0 {
        return (0.0, 1.0);
    }
    let k = k.min(n);
    let upper = if k == n {
        1.0
    } else {
        // P(X ≤ k; p) falls from 1 to 0 as p grows: the upper end is where it reaches 2.5 %.
        solve_decreasing(|p| binomial_cdf(k, n, p), TAIL)
    };
    let lower = if k == 0 {
        0.0
    } else {
        // P(X ≥ k; p) = 1 − P(X ≤ k − 1; p) reaches 2.5 % at the lower end.
        solve_decreasing(|p| binomial_cdf(k - 1, n, p), 1.0 - TAIL)
    };
    (lower, upper)
}

/// The p in (0, 1) where a decreasing `f` crosses `target`, by bisection to ~1e-15.
fn solve_decreasing(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// P(X ≤ k) for X ~ Binomial(n, p), summed in log space so that large n does not underflow.
fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if k >= n { 1.0 } else { 0.0 };
    }
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    let mut ln_choose = 0.0;
    let mut terms = Vec::with_capacity(k.min(n) as usize + 1);
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        terms.push(ln_choose + i as f64 * ln_p + (n - i) as f64 * ln_q);
    }
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}

/// `12345.6` → `12,346`.
fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Mean with its 95 % interval when there are repetitions: `12.4 [11.9, 12.9]`.
fn show(iv: &Interval, scale: f64, decimals: usize) -> String {
    match iv.ci {
        Some((lo, hi)) => format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            iv.mean * scale,
            lo * scale,
            hi * scale,
            d = decimals
        ),
        None => format!("{:.d$}", iv.mean * scale, d = decimals),
    }
}

fn show_rps(iv: &Interval) -> String {
    match iv.ci {
        Some((lo, hi)) => format!(
            "{} [{}, {}]",
            thousands(iv.mean),
            thousands(lo),
            thousands(hi)
        ),
        None => thousands(iv.mean),
    }
}

/// Throughput with its interval; `†` marks a cell measured as `ok / elapsed_s` because it had
/// no steady window.
fn show_tput((iv, fallback): &(Interval, bool)) -> String {
    format!("{}{}", show_rps(iv), if *fallback { " †" } else { "" })
}

/// Footnote for `†`.
const FALLBACK_NOTE: &str =
    "† no steady window in this cell (too few requests after ramp-up): `ok / elapsed_s` instead.";

fn pct(x: f64) -> String {
    format!("{:.3} %", x * 100.0)
}

fn throughput_note(col: &str) -> &'static str {
    if col == STEADY_RPS {
        "steady-state req/s (`throughput_steady_rps`: the window in which all workers are active)"
    } else {
        "req/s as `ok / elapsed_s` (`throughput_rps`, ramp-up and drain included: this run has no steady-state column)"
    }
}

/// The rows of one variant of one run (or the reference), as a claim check sees them.
struct View<'a> {
    run: &'a Run,
    variant: Option<String>,
    rows: Vec<&'a Row>,
}

impl<'a> View<'a> {
    fn new(run: &'a Run, variant: Option<&str>) -> Self {
        View {
            run,
            variant: variant.map(str::to_string),
            rows: run.rows(variant),
        }
    }
    fn levels(&self, regime: &str) -> Vec<u64> {
        levels(&self.rows, regime)
    }
    fn has(&self, stack: &str, regime: &str) -> bool {
        self.rows
            .iter()
            .any(|r| r.stack == stack && r.regime == regime)
    }
    fn stat(&self, stack: &str, regime: &str, c: u64, col: &str) -> Option<Interval> {
        self.run
            .stat(self.variant.as_deref(), stack, regime, c, col)
    }
    /// Throughput of one cell in the run's column; a cell without a steady window falls back
    /// to `ok / elapsed_s`, marked by `true`.
    fn tput(&self, stack: &str, regime: &str, c: u64) -> Option<(Interval, bool)> {
        self.run.tput(self.variant.as_deref(), stack, regime, c)
    }
    fn cells(&self, stack: &str, regime: &str, c: u64) -> Vec<&'a Row> {
        self.rows
            .iter()
            .copied()
            .filter(|r| is_cell(r, stack, regime, c))
            .collect()
    }
    /// Sum of a column over the repetitions of one cell.
    fn sum(&self, stack: &str, regime: &str, c: u64, col: &str) -> f64 {
        self.cells(stack, regime, c)
            .iter()
            .filter_map(|r| fval(r, col))
            .sum()
    }
    fn stacks(&self) -> Vec<String> {
        stack_order(&self.rows)
    }
}

/// A claim's outcome on one variant: a short verdict for the summary table and the numbers.
struct Outcome {
    verdict: String,
    evidence: String,
}

type Check = fn(&View) -> Option<Outcome>;

/// Coefficient of variation (sample sd / mean) of a series; `None` below two values.
fn cv(values: &[f64]) -> Option<f64> {
    let iv = interval(values);
    iv.sd.filter(|_| iv.mean != 0.0).map(|sd| sd / iv.mean)
}

fn c1(v: &View) -> Option<Outcome> {
    const CLAIM_RPS: f64 = 26_000.0;
    const CLAIM_P95_MS: f64 = 25.0;
    let top = *v.levels("reuse").last()?;
    let (rps, rps_fallback) = v.tput("grpc", "reuse", top)?;
    let p95_ms = v.stat("grpc", "reuse", top, "latency_p95_us")?.mean / 1000.0;
    let ratio = rps.mean / CLAIM_RPS;
    let level = if (ratio - 1.0).abs() <= MATCH_FRACTION {
        "matched"
    } else if ratio > 1.0 {
        "exceeded"
    } else {
        "not reached"
    };
    let by_level: Vec<(u64, f64)> = v
        .levels("reuse")
        .into_iter()
        .filter_map(|c| Some((c, v.tput("grpc", "reuse", c)?.0.mean)))
        .collect();
    let means: Vec<f64> = by_level.iter().map(|x| x.1).collect();
    let across_levels = cv(&means);
    let across_reps = rps.sd.filter(|_| rps.mean != 0.0).map(|sd| sd / rps.mean);
    let stable =
        across_levels.is_none_or(|x| x <= STABLE_CV) && across_reps.is_none_or(|x| x <= STABLE_CV);
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
    let p95_ok = p95_ms <= CLAIM_P95_MS;
    let list: Vec<String> = by_level
        .iter()
        .map(|(c, r)| format!("{c}: {}", thousands(*r)))
        .collect();
    Some(Outcome {
        verdict: format!(
            "{level} ({} vs ≈ 26,000 req/s, {ratio:.2}×); p95 {p95_ms:.2} ms {}; {}",
            thousands(rps.mean),
            if p95_ok { "≤ 25 ms" } else { "> 25 ms: bound violated" },
            if stable { "stable" } else { "not stable" }
        ),
        evidence: format!(
            "gRPC at {top} workers: {} req/s, p95 {p95_ms:.2} ms; req/s by workers: {}; {stability} (stable = CV ≤ {:.0} %)",
            show_tput(&(rps, rps_fallback)),
            list.join(", "),
            STABLE_CV * 100.0
        ),
    })
}

/// The number of local ports in a `port_range` cell ("40000 41023" → 1,024).
fn ports_in(range: &str) -> Option<u64> {
    let mut it = range.split_whitespace().map(|p| p.parse::<u64>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (hi >= lo).then(|| hi - lo + 1)
}

fn c2(v: &View) -> Option<Outcome> {
    const CLAIMED: [(&str, f64); 2] = [("h1", 0.0004), ("grpc", 0.0028)];
    const COLLAPSE: f64 = 0.5;
    const LIKE_CLAIMED: f64 = 0.01;
    let levels = v.levels("new-conn");
    let at = if levels.contains(&200) {
        200
    } else {
        *levels.last()?
    };
    let success = |stack: &str, c: u64| {
        let sent = v.sum(stack, "new-conn", c, "sent");
        (sent > 0.0).then(|| v.sum(stack, "new-conn", c, "ok") / sent)
    };
    let h1 = success("h1", at)?;
    let grpc = success("grpc", at)?;
    let verdict = if h1 <= LIKE_CLAIMED && grpc <= LIKE_CLAIMED {
        "matched: collapse to ≤ 1 % success"
    } else if h1 < COLLAPSE && grpc < COLLAPSE {
        "collapse, but milder than claimed"
    } else {
        "no collapse"
    };
    let mut parts = Vec::new();
    for stack in v.stacks() {
        let by_level: Vec<String> = levels
            .iter()
            .filter_map(|c| Some(format!("{c}: {}", pct(success(&stack, *c)?))))
            .collect();
        let claimed = CLAIMED
            .iter()
            .find(|x| x.0 == stack)
            .map_or(String::new(), |x| {
                format!(" (claimed at 200: {})", pct(x.1))
            });
        parts.push(format!(
            "{} success by workers {}{claimed}",
            label(&stack),
            by_level.join(", ")
        ));
    }
    if !v.has("h3", "new-conn") {
        parts.push("HTTP/3 was not run in this variant".into());
    }
    // A collapse below 200 workers is a budget running out, not a threshold at 200.
    let onset = levels.iter().copied().find(|c| {
        ["h1", "grpc"]
            .iter()
            .all(|s| success(s, *c).is_some_and(|x| x < COLLAPSE))
    });
    let mut onset_note = String::new();
    if let Some(c) = onset.filter(|c| *c < 200) {
        let _ = write!(
            onset_note,
            "; collapses already at {c} workers: a budget, not a threshold at 200"
        );
        if let Some(ports) = v
            .cells("h1", "new-conn", c)
            .first()
            .and_then(|r| ports_in(r.port_range.as_deref()?))
        {
            let used = v.sum("h1", "new-conn", c, "ok") + v.sum("h1", "new-conn", c, "warmup_ok");
            let _ = write!(
                onset_note,
                " ({} local ports; HTTP/1.1 completed {} connections in warm-up and measured phase together, each port then held in TIME_WAIT)",
                thousands(ports as f64),
                thousands(used)
            );
        }
    }
    let classes = failure_summary(
        v.rows
            .iter()
            .filter(|r| r.regime == "new-conn" && r.concurrency as u64 == at)
            .copied(),
    );
    Some(Outcome {
        verdict: format!(
            "{verdict} (at {at} workers HTTP/1.1 {}, gRPC {} vs claimed 0.040 % / 0.280 %){onset_note}",
            pct(h1),
            pct(grpc)
        ),
        evidence: format!("{}{classes}", parts.join("; ")),
    })
}

fn c3(v: &View) -> Option<Outcome> {
    /// The claim: success above 99.94 %, i.e. a failure rate below 0.06 %.
    const THRESHOLD: f64 = 0.0006;
    let levels = v.levels("new-conn");
    if !v.has("h3", "new-conn") {
        return None;
    }
    let mut evidence = Vec::new();
    let mut h3_verdict = String::new();
    for stack in v.stacks() {
        let mut per_level = Vec::new();
        let (mut k_all, mut n_all) = (0u64, 0u64);
        let mut worst_observed = 0.0_f64;
        let mut all_bounds_below = true;
        for c in &levels {
            let n = v.sum(&stack, "new-conn", *c, "sent") as u64;
            let k = v.sum(&stack, "new-conn", *c, "failed") as u64;
            if n == 0 {
                continue;
            }
            let (_, hi) = clopper_pearson_95(k, n);
            all_bounds_below &= hi < THRESHOLD;
            worst_observed = worst_observed.max(k as f64 / n as f64);
            per_level.push(format!(
                "{c}: {k} in {} (≤ {})",
                thousands(n as f64),
                pct(hi)
            ));
            k_all += k;
            n_all += n;
        }
        if n_all == 0 {
            continue;
        }
        let (_, pooled_hi) = clopper_pearson_95(k_all, n_all);
        evidence.push(format!(
            "{}: failures by workers {}; pooled {k_all} in {} (≤ {})",
            label(&stack),
            per_level.join(", "),
            thousands(n_all as f64),
            pct(pooled_hi)
        ));
        if stack == "h3" {
            h3_verdict = if worst_observed >= THRESHOLD {
                format!(
                    "not reproduced: observed failure rate {} ≥ 0.06 % at some level",
                    pct(worst_observed)
                )
            } else if all_bounds_below {
                "confirmed: the 95 % upper bound is below 0.06 % at every level".into()
            } else {
                format!(
                    "consistent but not shown: {}, yet the 95 % upper bound of a level is not below 0.06 % (≥ {} requests per level with no failure would be needed)",
                    if worst_observed == 0.0 {
                        "no failure at any level".to_string()
                    } else {
                        format!("observed failure rate at most {}", pct(worst_observed))
                    },
                    thousands(requests_to_bound(THRESHOLD) as f64)
                )
            };
        }
    }
    let others_also: Vec<String> = v
        .stacks()
        .into_iter()
        .filter(|s| s != "h3")
        .filter(|s| {
            levels.iter().all(|c| {
                let n = v.sum(s, "new-conn", *c, "sent");
                n > 0.0 && v.sum(s, "new-conn", *c, "failed") / n < THRESHOLD
            })
        })
        .map(|s| label(&s))
        .collect();
    let others = if others_also.is_empty() {
        String::new()
    } else {
        format!(
            "; {} also stayed below 0.06 % failures under the same conditions",
            others_also.join(", ")
        )
    };
    Some(Outcome {
        verdict: format!("{h3_verdict}{others}"),
        evidence: format!(
            "{} (k failures in n requests, two-sided 95 % Clopper–Pearson upper bound)",
            evidence.join("; ")
        ),
    })
}

/// Requests with no failure needed before the two-sided 95 % upper bound falls below `rate`.
fn requests_to_bound(rate: f64) -> u64 {
    (0.025_f64.ln() / (-rate).ln_1p()).floor() as u64 + 1
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

fn c4(v: &View) -> Option<Outcome> {
    const CLAIM_LOW: f64 = 36.0;
    const CLAIM_HIGH: f64 = 39.0;
    let rps: Vec<(u64, (Interval, bool))> = v
        .levels("new-conn")
        .into_iter()
        .filter_map(|c| Some((c, v.tput("h3", "new-conn", c)?)))
        .collect();
    if rps.is_empty() {
        return None;
    }
    let max = rps.iter().map(|r| r.1 .0.mean).fold(f64::MIN, f64::max);
    let verdict = if max > CLAIM_HIGH * (1.0 + MATCH_FRACTION) {
        format!(
            "not reproduced: up to {} req/s ({:.0}× the ceiling)",
            thousands(max),
            max / CLAIM_HIGH
        )
    } else if max < CLAIM_LOW * (1.0 - MATCH_FRACTION) {
        format!("not reproduced: at most {max:.0} req/s, below the claimed ceiling")
    } else {
        format!("matched: at most {max:.0} req/s vs 36–39")
    };
    let list: Vec<String> = rps
        .iter()
        .map(|(c, r)| {
            let bound = v
                .cells("h3", "new-conn", *c)
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
        evidence: format!("HTTP/3 new-conn req/s by workers: {}", list.join(", ")),
    })
}

fn c5(v: &View) -> Option<Outcome> {
    const CLAIM_RATIO: f64 = 440.0 / 37.0;
    let top = *v.levels("reuse").last()?;
    let hwm = v.stat("h3", "reuse", top, "server_rss_hwm_bytes").is_some()
        && v.stat("grpc", "reuse", top, "server_rss_hwm_bytes")
            .is_some();
    let col = if hwm {
        "server_rss_hwm_bytes"
    } else {
        "server_rss_peak_bytes"
    };
    let h3 = v.stat("h3", "reuse", top, col)?.mean / 1e6;
    let grpc = v.stat("grpc", "reuse", top, col)?.mean / 1e6;
    let ratio = h3 / grpc;
    let verdict = if (ratio / CLAIM_RATIO - 1.0).abs() <= 0.5 {
        format!("matched: {ratio:.1}× vs 12×")
    } else {
        format!(
            "not reproduced: {ratio:.1}× ({h3:.1} MB vs {grpc:.1} MB), not 12× (440 MB vs 37 MB)"
        )
    };
    let mut parts = Vec::new();
    for stack in ["h3", "grpc"] {
        for c in v.levels("reuse") {
            let Some(peak) = v.stat(stack, "reuse", c, "server_rss_peak_bytes") else {
                continue;
            };
            let mut s = format!(
                "{} at {c}: server sampled peak {} MB",
                label(stack),
                show(&peak, 1e-6, 1)
            );
            if let Some(h) = v.stat(stack, "reuse", c, "server_rss_hwm_bytes") {
                let _ = write!(s, ", VmHWM {} MB", show(&h, 1e-6, 1));
            }
            if let Some(cl) = v.stat(stack, "reuse", c, "client_rss_peak_bytes") {
                let _ = write!(s, "; client sampled peak {} MB", show(&cl, 1e-6, 1));
            }
            if let Some(h) = v.stat(stack, "reuse", c, "client_rss_hwm_bytes") {
                let _ = write!(s, ", VmHWM {} MB", show(&h, 1e-6, 1));
            }
            // Peak vs cell length: a series still rising at its last sample has not peaked.
            if let Some(cell) = v.cells(stack, "reuse", c).first() {
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

const CLAIMS: [(&str, &str, &str, &str, Check); 5] = [
    (
        "C1",
        "c1-",
        "gRPC ≈ 26,000 req/s, stable throughout, p95 ≤ 25 ms at 500 workers (reuse)",
        "Throughput at the highest level is compared with 26,000 req/s (matched within ±10 %); \
         p95 with 25 ms; stability is the coefficient of variation of gRPC's throughput across the \
         concurrency levels (the study's \"throughout\") and across repetitions of the top level.",
        c1,
    ),
    (
        "C2",
        "c2-",
        "HTTP/1.1 and gRPC collapse at 200 workers under new connections (0.04 % and 0.28 % success)",
        "Success at 200 workers is compared with the claimed 0.04 % (HTTP/1.1) and 0.28 % (gRPC): \
         ≤ 1 % counts as the claimed collapse, < 50 % as a milder one. A collapse that is already \
         there at fewer workers is reported as a budget (ports, descriptors), not a threshold.",
        c2,
    ),
    (
        "C3",
        "c3-",
        "HTTP/3 success > 99.94 % at every level (new connections)",
        "For k failures in n requests per level, the two-sided 95 % Clopper–Pearson interval \
         (exact; for k = 0 its upper end is 1 − 0.025^(1/n), 0.074 % at n = 5,000) is compared \
         with the claim's 0.06 % failure rate; the other stacks of the same run are shown under \
         the same conditions.",
        c3,
    ),
    (
        "C4",
        "c4-",
        "HTTP/3 capped at 36–39 req/s under new connections",
        "The highest HTTP/3 new-connection throughput over the levels is compared with the \
         claimed 36–39 req/s (±10 %); with an emulated RTT, c / (2·RTT) is the bound of a 1-RTT \
         handshake plus one request per connection.",
        c4,
    ),
    (
        "C5",
        "c5-",
        "QUIC RSS ≈ 440 MB vs gRPC ≈ 37 MB under reuse (12×)",
        "Server RSS of HTTP/3 and gRPC at the highest level, as the kernel's VmHWM when the run \
         has it (else the sampled peak), is compared with the claimed 12× (matched within a \
         factor 1.5); the sampled series shows whether the peak still grew at the cell's end.",
        c5,
    ),
];

fn stress_table(out: &mut String, run: &Run, rows: &[&Row], regime: &str) {
    let start = out.len();
    let has = |col: &str| rows.iter().any(|r| fval(r, col).is_some());
    let hwm = has("server_rss_hwm_bytes");
    let _ = writeln!(
        out,
        "| users | stack | median (ms) | p95 (ms) | p99 (ms) | req/s | failed % | server RSS peak (MB) |{} server CPU (%) | client CPU (%) | client CPU ms / 1k | cell (s) |",
        if hwm { " server VmHWM (MB) |" } else { "" }
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|{}---:|---:|---:|---:|",
        if hwm { "---:|" } else { "" }
    );
    let opt = |iv: Option<Interval>, f: &dyn Fn(&Interval) -> String| {
        iv.map_or_else(|| "—".to_string(), |iv| f(&iv))
    };
    for c in levels(rows, regime) {
        for s in stack_order(rows) {
            let st = |col: &str| run.stat(None, &s, regime, c, col);
            let Some(ok) = st("success_rate") else {
                continue;
            };
            let lat = |iv: &Interval| show(iv, 1e-3, 3);
            let mut line = format!(
                "| {c} | {} | {} | {} | {} | {} | {:.2} | {} |",
                label(&s),
                opt(st("latency_p50_us"), &|iv| ms(iv.mean)),
                opt(st("latency_p95_us"), &lat),
                opt(st("latency_p99_us"), &lat),
                run.tput(None, &s, regime, c)
                    .map_or_else(|| "—".to_string(), |t| show_tput(&t)),
                (1.0 - ok.mean) * 100.0,
                opt(st("server_rss_peak_bytes"), &|iv| show(iv, 1e-6, 1)),
            );
            if hwm {
                let _ = write!(
                    line,
                    " {} |",
                    opt(st("server_rss_hwm_bytes"), &|iv| show(iv, 1e-6, 1))
                );
            }
            let _ = write!(
                line,
                " {} | {} | {} | {} |",
                opt(st("server_cpu_pct_mean"), &|iv| format!("{:.0}", iv.mean)),
                opt(st("client_cpu_pct_mean"), &|iv| format!("{:.0}", iv.mean)),
                opt(st("client_cpu_ms_per_1k_ok"), &|iv| format!(
                    "{:.0}",
                    iv.mean
                )),
                opt(st("elapsed_s"), &|iv| format!("{:.2}", iv.mean)),
            );
            let _ = writeln!(out, "{line}");
        }
    }
    if out[start..].contains(" †") {
        let _ = writeln!(out, "\n{FALLBACK_NOTE}");
    }
    out.push('\n');
}

/// Min and max of server + client CPU % over stress cells that have both figures, and how
/// many cells had none (short cells may leave CPU empty as unreliable).
fn cpu_sum_range(rows: &[&Row]) -> (Option<(f64, f64)>, usize) {
    let mut range: Option<(f64, f64)> = None;
    let mut missing = 0;
    for r in rows {
        match (
            fval(r, "server_cpu_pct_mean"),
            fval(r, "client_cpu_pct_mean"),
        ) {
            (Some(s), Some(c)) => {
                let sum = s + c;
                range = Some(range.map_or((sum, sum), |(lo, hi)| (lo.min(sum), hi.max(sum))));
            }
            _ => missing += 1,
        }
    }
    (range, missing)
}

/// How much the reference run's throughput moved between repetitions of the same cell
/// (median and largest coefficient of variation), or nothing with one repetition.
fn rep_spread(run: &Run) -> String {
    let rows = run.stress();
    let mut cvs: Vec<f64> = Vec::new();
    for regime in regimes(&rows) {
        for c in levels(&rows, &regime) {
            for stack in stack_order(&rows) {
                let values: Vec<f64> = rows
                    .iter()
                    .filter(|r| is_cell(r, &stack, &regime, c))
                    .filter_map(|r| fval(r, run.throughput_col))
                    .collect();
                cvs.extend(cv(&values));
            }
        }
    }
    if cvs.is_empty() {
        return String::new();
    }
    cvs.sort_by(f64::total_cmp);
    format!(
        "Across repetitions of the same reference cell, throughput varies with a coefficient of variation of {:.1} % (median over {} cells) up to {:.1} %.",
        cvs[cvs.len() / 2] * 100.0,
        cvs.len(),
        cvs[cvs.len() - 1] * 100.0
    )
}

fn threats(out: &mut String, runs: &[&Run], provs: &[Provenance], problems: &[String]) {
    let _ = writeln!(out, "## Threats to validity\n");
    let _ = writeln!(
        out,
        "_Generated from the runs above; each point says what in the data it rests on._\n"
    );
    let mut machines: Vec<String> = provs
        .iter()
        .map(|p| format!("{}, {} cores, Linux {}", p.cpu(), p.cores, p.kernel))
        .collect();
    machines.sort();
    machines.dedup();
    let _ = writeln!(
        out,
        "- **One machine.** Every run used {} machine configuration(s): {}. Server and load generator ran on the same host, so nothing here measures a network card, a switch or a second kernel; the study's numbers came from another setup (see [study.md](study.md)) and absolute values are not comparable, only orders of magnitude and shapes.",
        machines.len(),
        machines.join("; ")
    );
    let all: Vec<&Row> = runs.iter().flat_map(|r| r.stress()).collect();
    let most = |col: &str| {
        all.iter()
            .filter_map(|r| fval(r, col))
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))
    };
    if let (Some(steal), Some(load)) = (most("steal_pct"), most("loadavg1_before")) {
        let _ = writeln!(
            out,
            "- **Machine state.** Steal time (CPU taken by the hypervisor) was at most {steal:.1} % in any cell, and the 1-minute load average before a cell at most {load:.2}; a cell with high steal or load is a candidate outlier."
        );
    }
    let emulated = all
        .iter()
        .filter(|r| r.netem.as_deref().is_some_and(|n| !n.trim().is_empty()))
        .count();
    let _ = writeln!(
        out,
        "- **Loopback.** {} of {} stress cells ran on plain loopback, where a round trip costs no time and a handshake costs only CPU{}. Loopback hides exactly the round trips in which the protocols' handshakes differ.",
        all.len() - emulated,
        all.len(),
        if emulated > 0 {
            format!("; the other {emulated} ran with emulated delay/loss (below)")
        } else {
            String::new()
        }
    );
    let pinning: Vec<String> = runs
        .iter()
        .map(|r| {
            r.results.manifest["pinning"]
                .as_str()
                .unwrap_or("none")
                .to_string()
        })
        .collect();
    let cores = provs.first().map_or("?".to_string(), |p| p.cores.clone());
    let (ref_range, ref_missing) = cpu_sum_range(&runs[0].stress());
    let (all_range, all_missing) = cpu_sum_range(&all);
    let fmt_range = |r: Option<(f64, f64)>| {
        r.map_or("no cell with both CPU figures".to_string(), |(lo, hi)| {
            format!("{lo:.0}–{hi:.0} %")
        })
    };
    let _ = writeln!(
        out,
        "- **Shared cores.** Server and load generator share {cores} cores (pinning: {}). Server + client CPU per stress cell sums to {} in the reference run{} (100 % = one core){}. Where the sum approaches the cores available, a protocol whose client costs more CPU takes CPU from its own server: client cost is part of every throughput figure.",
        {
            let mut p = pinning.clone();
            p.sort();
            p.dedup();
            p.join(", ")
        },
        fmt_range(ref_range),
        if runs.len() > 1 {
            format!(" and {} over all runs", fmt_range(all_range))
        } else {
            String::new()
        },
        if all_missing > 0 {
            format!(
                "; {all_missing} cell(s) ({ref_missing} in the reference) have no reliable CPU figure and are left out"
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "- **Client implementations differ.** HTTP/1.1, HTTP/2 and gRPC are driven by lean clients of our own (the HTTP/2 and gRPC ones share a minimal HTTP/2 implementation), HTTP/3 by the general-purpose quinn + h3 libraries. Part of any HTTP/3 gap is therefore client cost, not protocol cost; the servers are general-purpose libraries for every stack."
    );
    let reps: Vec<String> = provs
        .iter()
        .map(|p| format!("{} {}", p.name, p.repetitions))
        .collect();
    let single = provs.iter().filter(|p| p.repetitions == "1").count();
    let elapsed = |rows: &[&Row]| {
        let (lo, hi) = rows
            .iter()
            .filter_map(|r| fval(r, "elapsed_s"))
            .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
        if lo <= hi {
            format!("{lo:.2}–{hi:.2} s")
        } else {
            "an unknown time".into()
        }
    };
    let _ = writeln!(
        out,
        "- **Repetitions and cell length.** Repetitions per run: {}. {}{} Measured phases last {} in the reference run{}; short cells make throughput and peak RSS depend on timing and sampling.",
        reps.join(", "),
        if single > 0 {
            format!("{single} run(s) have one repetition: their figures have no confidence interval and their run-to-run variation is unknown.")
        } else {
            "Intervals are 95 % Student-t intervals of the mean over repetitions.".to_string()
        },
        match rep_spread(runs[0]) {
            s if s.is_empty() => s,
            s => format!(" {s}"),
        },
        elapsed(&runs[0].stress()),
        if runs.len() > 1 {
            format!(" ({} over all runs)", elapsed(&all))
        } else {
            String::new()
        }
    );
    let tput: Vec<&str> = runs.iter().map(|r| r.throughput_col).collect();
    let _ = writeln!(
        out,
        "- **Throughput definition.** {}",
        if tput.iter().all(|c| *c == STEADY_RPS) {
            "Every run's throughput is the steady-state figure (all workers active)."
        } else if tput.iter().all(|c| *c == ELAPSED_RPS) {
            "No run has the steady-state column, so throughput is `ok / elapsed_s`, which includes ramp-up and drain and understates the steady rate of short cells."
        } else {
            "Runs differ: some report steady-state throughput, others only `ok / elapsed_s` (see the provenance table); the two are not directly comparable."
        }
    );
    let _ = writeln!(
        out,
        "- **Emulator limits.** Delay and loss are applied by a user-space emulator thread in the runner: it shares the same cores as server and client (so emulated runs have less CPU for the protocols), it drops a GSO super-packet as one unit (one loss event can remove several QUIC datagrams at once, unlike a wire), and it draws loss and jitter from one fixed seed, so each emulated cell is one sample of the loss pattern, not an average over patterns."
    );
    if !problems.is_empty() {
        let _ = writeln!(
            out,
            "- **Mixed provenance.** The runs were accepted with `--allow-mixed` although they are not from one commit on one machine ({} problem(s), listed at the top).",
            problems.len()
        );
    }
    out.push('\n');
}

/// Writes `out_dir/reproduction.md` from the reference run and the claim runs. Refuses runs of
/// mixed provenance (commit, CPU model, kernel) or dirty commits unless `allow_mixed`, in which
/// case the paper opens with a warning naming what is mixed.
pub fn write(
    reference: &Path,
    claims: &[PathBuf],
    out_dir: &Path,
    allow_mixed: bool,
) -> anyhow::Result<Written> {
    write_with_scale(reference, claims, None, out_dir, allow_mixed)
}

/// [`write`], plus the "Beyond 500" section from a run of `experiments/scale.toml`; that run
/// joins the provenance table and the mixed-provenance check like any claim run.
pub fn write_with_scale(
    reference: &Path,
    claims: &[PathBuf],
    scale: Option<&Path>,
    out_dir: &Path,
    allow_mixed: bool,
) -> anyhow::Result<Written> {
    let reference = Run::load(reference)?;
    let scale_run = scale.map(Run::load).transpose()?;
    let claim_runs: Vec<Run> = claims
        .iter()
        .map(|d| Run::load(d))
        .collect::<anyhow::Result<_>>()?;
    let runs: Vec<&Run> = std::iter::once(&reference)
        .chain(claim_runs.iter())
        .chain(scale_run.iter())
        .collect();
    let provs: Vec<Provenance> = runs.iter().map(|r| r.provenance()).collect();
    let problems = provenance_problems(&provs);
    if !problems.is_empty() && !allow_mixed {
        bail!(
            "mixed or untraceable provenance: {}. Re-run all experiments at one clean commit on one machine (scripts/reproduce-paper), or pass --allow-mixed to write the paper with a warning",
            problems.join("; ")
        );
    }

    let m = &reference.results.manifest;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Reproducing \"gRPC over QUIC vs REST in saturated meshes\" on one machine\n"
    );
    if !problems.is_empty() {
        let _ = writeln!(
            out,
            "> **Warning: mixed provenance.** This paper was generated with `--allow-mixed`; numbers from different runs below are not comparable with each other:\n>"
        );
        for p in &problems {
            let _ = writeln!(out, "> - {p}");
        }
        out.push('\n');
    }
    let _ = writeln!(out, "_Generated by `runner paper` from `{}` and {} claim run(s); every number below comes from their CSVs and manifests. The study being reproduced, its claims and the report format it used are described in [study.md](study.md)._\n", reference.dir.display(), claim_runs.len());

    let _ = writeln!(out, "## Setup\n");
    let rp = &provs[0];
    let _ = writeln!(
        out,
        "- Reference machine: {}, {} cores, Linux {}{}; client and server on the same host (loopback), pinning: {}.",
        rp.cpu(),
        rp.cores,
        rp.kernel,
        rp.hypervisor
            .as_ref()
            .map_or(String::new(), |h| format!(", hypervisor {h}")),
        m["pinning"].as_str().unwrap_or("none")
    );
    let versions: Vec<String> = m["crate_versions"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "- Software: {}; {}; commit `{}`.",
        m["rustc"].as_str().unwrap_or("?"),
        versions.join(", "),
        rp.commit
    );
    let e = &m["experiment"];
    let _ = writeln!(out, "- Workload: `GET /items/{{id}}` (JSON) and unary `GetItem` (protobuf), payload `{}`, TLS 1.3 with ECDSA P-256; closed loop; {} requests per reuse cell and {} per new-connection cell, {} % warm-up; {} repetition(s) in the reference run.\n", e["payload"].as_str().unwrap_or("?"), e["requests_reuse"], e["requests_new_conn"], e["warmup_fraction"].as_f64().unwrap_or(0.0) * 100.0, e["repetitions"]);

    let _ = writeln!(out, "### Provenance\n");
    let _ = writeln!(
        out,
        "| run | machine (CPU, cores) | hypervisor | kernel | commit | started (UTC) | repetitions | throughput column |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---:|---|");
    for p in &provs {
        let _ = writeln!(
            out,
            "| {} | {}, {} cores{} | {} | {} | `{}` | {} | {} | `{}` |",
            p.run,
            p.cpu(),
            p.cores,
            p.ram.as_ref().map_or(String::new(), |r| format!(", {r}")),
            p.hypervisor.as_deref().unwrap_or("not recorded"),
            p.kernel,
            p.commit,
            p.date,
            p.repetitions,
            p.throughput_col
        );
    }
    out.push('\n');

    let _ = writeln!(out, "## Reference sweep\n");
    let _ = writeln!(
        out,
        "Means over repetitions; with two or more repetitions, p95, p99, req/s and RSS carry the 95 % confidence interval of the mean in brackets (Student t, as in `summary.csv`). req/s is {}. Client CPU is the load generator's.\n",
        throughput_note(reference.throughput_col)
    );
    let stress = reference.stress();
    for regime in regimes(&stress) {
        let _ = writeln!(out, "### {regime}\n");
        stress_table(&mut out, &reference, &stress, &regime);
    }
    let _ = writeln!(
        out,
        "Figures (from `python3 scripts/plot.py {} --out {}/figures`):\n",
        reference.dir.display(),
        out_dir.display()
    );
    for (file, caption) in [
        ("throughput.png", "Throughput vs concurrency"),
        ("latency_p95.png", "p95 latency vs concurrency"),
        ("success_rate.png", "Success rate vs concurrency"),
        ("server_resources.png", "Server RSS and CPU"),
        ("latency_cdf.png", "Latency CDF at the highest concurrency"),
        ("new_conn_breakdown.png", "New-connection latency by phase"),
    ] {
        let _ = writeln!(out, "![{caption}](figures/{file})\n");
    }

    let _ = writeln!(out, "## The study's claims\n");
    let _ = writeln!(
        out,
        "Each claim is checked under default conditions and under every variant of its experiment; every variant's outcome is listed, whether or not the default holds.\n"
    );
    let _ = writeln!(out, "| claim | default conditions | every variant |");
    let _ = writeln!(out, "|---|---|---|");
    let mut sections = String::new();
    for (id, prefix, text, method, check) in CLAIMS {
        let run = claim_runs.iter().find(|r| r.name().starts_with(prefix));
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
                match check(&View::new(&reference, None)) {
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
                let _ = writeln!(sections, "| variant | outcome | numbers |");
                let _ = writeln!(sections, "|---|---|---|");
                for variant in run.variants() {
                    let Some(o) = check(&View::new(run, Some(&variant))) else {
                        let _ = writeln!(
                            sections,
                            "| {variant} | cannot be checked | the variant lacks the cells this claim needs |"
                        );
                        variant_verdicts.push(format!("{variant}: cannot be checked"));
                        continue;
                    };
                    let _ = writeln!(sections, "| {variant} | {} | {} |", o.verdict, o.evidence);
                    if variant == "default" {
                        default_verdict = o.verdict;
                    } else {
                        variant_verdicts.push(format!("{variant}: {}", o.verdict));
                    }
                }
                if sections[start..].contains(" †") {
                    let _ = writeln!(sections, "\n{FALLBACK_NOTE}");
                }
                sections.push('\n');
            }
        }
        if id == "C5" {
            // The slope carries to any scale; the claim's one point does not.
            scale::memory_table(&mut sections, &reference, Some("reuse"));
            if let Some(run) = run {
                scale::memory_table(&mut sections, run, Some("reuse"));
            }
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
    if let Some(run) = &scale_run {
        scale::section(&mut out, run);
    }
    threats(&mut out, &runs, &provs, &problems);

    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let path = out_dir.join("reproduction.md");
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Written {
        path,
        warnings: problems
            .into_iter()
            .map(|p| format!("mixed provenance allowed: {p}"))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clopper_pearson_zero_failures_has_the_closed_form() {
        let (lo, hi) = clopper_pearson_95(0, 5000);
        assert_eq!(lo, 0.0);
        assert!((hi - (1.0 - 0.025_f64.powf(1.0 / 5000.0))).abs() < 1e-12);
        assert!(hi > 0.0006, "5,000 clean requests cannot show < 0.06 %");
    }

    #[test]
    fn clopper_pearson_matches_a_table_value() {
        // 1 in 10: the exact 95 % interval is 0.0025 – 0.4450.
        let (lo, hi) = clopper_pearson_95(1, 10);
        assert!((lo - 0.002529).abs() < 1e-5, "{lo}");
        assert!((hi - 0.445016).abs() < 1e-5, "{hi}");
        assert_eq!(clopper_pearson_95(10, 10).1, 1.0);
    }

    #[test]
    fn requests_to_bound_is_the_first_n_below_the_rate() {
        let n = requests_to_bound(0.0006);
        assert!(clopper_pearson_95(0, n).1 < 0.0006);
        assert!(clopper_pearson_95(0, n - 1).1 >= 0.0006);
    }

    #[test]
    fn small_helpers() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(ports_in("40000 41023"), Some(1024));
        assert_eq!(rtt_s("rtt=100ms"), Some(0.1));
        assert_eq!(rtt_s("loss=1%,delay=10ms"), Some(0.02));
        assert_eq!(rtt_s("loss=1%"), None);
    }
}
