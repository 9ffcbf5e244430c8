//! `runner compare BASE NEW`: the change of every cell present in both runs, with Welch's
//! t-test over the per-repetition values, written as a terminal table, `compare.csv` and
//! `compare.html`. The statistics are plain functions over parsed rows so they can be tested
//! without running anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::output::rows::{self, CellRow, CompareRow, Row as _};
use crate::report::chart;
use crate::report::{label, Results};

/// A `cells.csv` row of either run.
type Row = CellRow;

/// Exit status when the runs cannot be compared (nothing written), as for other invalid input.
const EXIT_REFUSED: u8 = 2;
/// Exit status of `--fail-on-regression` when a significant regression exceeds the limit.
const EXIT_REGRESSION: u8 = 1;

/// Fewer repetitions than this on either side give deltas only: with two values per side the
/// Welch interval has about one degree of freedom and is too wide to mean anything.
pub const MIN_REPETITIONS: usize = 3;

/// Two-sided significance level of the verdicts (the 95 % interval excludes zero).
const ALPHA: f64 = 0.05;

/// The `cells.csv` columns a cell is matched on across runs (its repetitions are pooled).
pub const KEY: [&str; 6] = ["variant", "stage", "stack", "regime", "concurrency", "mode"];

/// A compared figure: the `cells.csv` column read (and the one used when the first is empty
/// in some repetition), which direction is better, and how it is shown.
#[derive(Debug)]
pub struct Metric {
    /// The name in `compare.csv`, with its unit.
    pub name: &'static str,
    pub column: &'static str,
    pub fallback: Option<&'static str>,
    pub higher_is_better: bool,
    /// Terminal and HTML heading.
    pub short: &'static str,
    /// Display unit and the factor from the column's unit to it.
    pub unit: &'static str,
    pub scale: f64,
    pub decimals: usize,
}

pub const METRICS: [Metric; 9] = [
    Metric {
        name: "throughput_rps",
        column: "throughput_steady_rps",
        fallback: Some("throughput_rps"),
        higher_is_better: true,
        short: "req/s",
        unit: "req/s",
        scale: 1.0,
        decimals: 1,
    },
    Metric {
        name: "latency_p50_us",
        column: "latency_p50_us",
        fallback: None,
        higher_is_better: false,
        short: "p50",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "latency_p95_us",
        column: "latency_p95_us",
        fallback: None,
        higher_is_better: false,
        short: "p95",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "latency_p99_us",
        column: "latency_p99_us",
        fallback: None,
        higher_is_better: false,
        short: "p99",
        unit: "ms",
        scale: 1e-3,
        decimals: 3,
    },
    Metric {
        name: "success_rate",
        column: "success_rate",
        fallback: None,
        higher_is_better: true,
        short: "success",
        unit: "",
        scale: 1.0,
        decimals: 4,
    },
    Metric {
        name: "server_rss_bytes",
        column: "server_rss_hwm_bytes",
        fallback: Some("server_rss_peak_bytes"),
        higher_is_better: false,
        short: "srv RSS",
        unit: "MB",
        scale: 1e-6,
        decimals: 1,
    },
    Metric {
        name: "client_rss_bytes",
        column: "client_rss_hwm_bytes",
        fallback: Some("client_rss_peak_bytes"),
        higher_is_better: false,
        short: "cli RSS",
        unit: "MB",
        scale: 1e-6,
        decimals: 1,
    },
    Metric {
        name: "server_cpu_ms_per_1k_ok",
        column: "server_cpu_ms_per_1k_ok",
        fallback: None,
        higher_is_better: false,
        short: "srv CPU",
        unit: "ms/1k",
        scale: 1.0,
        decimals: 1,
    },
    Metric {
        name: "client_cpu_ms_per_1k_ok",
        column: "client_cpu_ms_per_1k_ok",
        fallback: None,
        higher_is_better: false,
        short: "cli CPU",
        unit: "ms/1k",
        scale: 1.0,
        decimals: 1,
    },
];

// ---------------------------------------------------------------------------------------------
// Student's t distribution for non-integer degrees of freedom (Welch–Satterthwaite).

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error ≈ 1e-15).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The fraction converges fast only on this side of the mean; use symmetry on the other.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T ≤ t) for Student's t with `df` > 0 degrees of freedom (not necessarily an integer).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t > 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom, by bisection on [`t_cdf`]
/// (monotone, so bisection cannot miss; 200 halvings reach f64 precision).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "t_quantile({p}, {df})");
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while t_cdf(hi, df) < p && hi < 1e300 {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-14 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

// ---------------------------------------------------------------------------------------------
// Welch's t-test.

/// Welch's two-sample t-test of `new − base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// Difference of the means, new − base.
    pub diff: f64,
    /// 95 % confidence interval of the difference.
    pub ci: (f64, f64),
    /// Welch–Satterthwaite degrees of freedom (infinite when neither side varies).
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

impl Welch {
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn variance(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
}

/// Welch's test; `None` unless both sides have at least two values (a variance).
pub fn welch(base: &[f64], new: &[f64]) -> Option<Welch> {
    if base.len() < 2 || new.len() < 2 {
        return None;
    }
    let diff = mean(new) - mean(base);
    let (qa, qb) = (
        variance(base) / base.len() as f64,
        variance(new) / new.len() as f64,
    );
    let se2 = qa + qb;
    if se2 <= 0.0 {
        // Neither side varies: the repetitions reproduce exactly, so any difference is real.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch {
            diff,
            ci: (diff, diff),
            df: f64::INFINITY,
            p,
        });
    }
    let se = se2.sqrt();
    let df = se2 * se2 / (qa * qa / (base.len() - 1) as f64 + qb * qb / (new.len() - 1) as f64);
    let t = diff / se;
    let p = (2.0 * t_cdf(-t.abs(), df)).min(1.0);
    let half = t_quantile(1.0 - ALPHA / 2.0, df) * se;
    Some(Welch {
        diff,
        ci: (diff - half, diff + half),
        df,
        p,
    })
}

// ---------------------------------------------------------------------------------------------
// Cells and verdicts.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    Worse,
    Better,
    NoSignificantChange,
    /// Fewer than [`MIN_REPETITIONS`] on a side; `true` when both sides had exactly one.
    TooFew {
        one: bool,
    },
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::TooFew { one: true } => "one repetition: no significance",
            Verdict::TooFew { one: false } => "n < 3: no significance",
        }
    }
}

/// One metric of one cell in both runs.
#[derive(Debug, Clone)]
pub struct Change {
    pub metric: &'static Metric,
    /// The `cells.csv` column the values came from.
    pub column: &'static str,
    pub base: Vec<f64>,
    pub new: Vec<f64>,
    pub base_mean: f64,
    pub new_mean: f64,
    /// Relative change of the means in %, `None` when the base mean is 0.
    pub delta_pct: Option<f64>,
    pub test: Option<Welch>,
    pub verdict: Verdict,
}

impl Change {
    /// The change in %, signed so that positive is worse (for the regression limit and sorting).
    pub fn worsening_pct(&self) -> Option<f64> {
        self.delta_pct
            .map(|d| if self.metric.higher_is_better { -d } else { d })
    }
}

/// A cell present in both runs.
#[derive(Debug, Clone)]
pub struct CellChange {
    /// The values of [`KEY`], in order.
    pub key: Vec<String>,
    pub n_base: usize,
    pub n_new: usize,
    pub changes: Vec<Change>,
}

impl CellChange {
    pub fn field(&self, name: &str) -> &str {
        let i = KEY.iter().position(|k| *k == name).expect("a key column");
        &self.key[i]
    }

    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {} c{}",
            self.field("stack"),
            self.field("regime"),
            self.field("concurrency")
        );
        if self.field("stage") != "stress" {
            s = format!("{s} {}", self.field("stage"));
        }
        if self.field("mode") != "closed" {
            s = format!("{s} {}", self.field("mode"));
        }
        if self.field("variant") != "default" {
            s = format!("{}: {s}", self.field("variant"));
        }
        s
    }

    fn worst(&self) -> Option<f64> {
        self.changes
            .iter()
            .filter(|c| c.verdict == Verdict::Worse)
            .filter_map(Change::worsening_pct)
            .reduce(f64::max)
    }

    fn best(&self) -> Option<f64> {
        self.changes
            .iter()
            .filter(|c| c.verdict == Verdict::Better)
            .filter_map(|c| c.worsening_pct().map(|w| -w))
            .reduce(f64::max)
    }
}

fn value(row: &Row, column: &str) -> Option<f64> {
    row.number(column)
}

fn key_of(row: &Row) -> Vec<String> {
    KEY.iter()
        .map(|k| row.text(k).unwrap_or_default())
        .collect()
}

/// Report order: variant, baseline before stress, stacks in registry order, reuse before
/// new-conn, concurrency ascending.
fn natural_order(key: &[String]) -> impl Ord {
    let stacks = crate::registry::names();
    let stack = stacks
        .iter()
        .position(|s| *s == key[2])
        .unwrap_or(usize::MAX);
    (
        key[0].clone(),
        key[1] != "baseline",
        stack,
        key[2].clone(),
        key[3] != "reuse",
        key[3].clone(),
        key[4].parse::<u64>().unwrap_or(u64::MAX),
        key[5].clone(),
    )
}

fn group(rows: &[Row]) -> BTreeMap<Vec<String>, Vec<&Row>> {
    let mut groups: BTreeMap<Vec<String>, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups.entry(key_of(r)).or_default().push(r);
    }
    groups
}

/// One metric over a cell's repetitions in both runs: the primary column when every
/// repetition of both runs has it (so both sides measure the same thing), else the fallback.
/// A steady rate counts as had only from a long enough window ([`CellRow::steady_valid`]).
fn change(metric: &'static Metric, base: &[&Row], new: &[&Row]) -> Option<Change> {
    let all = |rows: &[&Row], c: &str| {
        rows.iter()
            .all(|r| value(r, c).is_some() && (c != "throughput_steady_rps" || r.steady_valid()))
    };
    let column = if all(base, metric.column) && all(new, metric.column) {
        metric.column
    } else {
        metric.fallback.unwrap_or(metric.column)
    };
    let values =
        |rows: &[&Row]| -> Vec<f64> { rows.iter().filter_map(|r| value(r, column)).collect() };
    let (b, n) = (values(base), values(new));
    if b.is_empty() || n.is_empty() {
        return None;
    }
    let (base_mean, new_mean) = (mean(&b), mean(&n));
    let delta_pct = (base_mean != 0.0).then(|| (new_mean - base_mean) / base_mean.abs() * 100.0);
    let enough = b.len() >= MIN_REPETITIONS && n.len() >= MIN_REPETITIONS;
    let test = if enough { welch(&b, &n) } else { None };
    let verdict = match test {
        None => Verdict::TooFew {
            one: b.len() == 1 && n.len() == 1,
        },
        Some(w) if !w.significant() => Verdict::NoSignificantChange,
        Some(w) if (w.diff > 0.0) == metric.higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
    };
    Some(Change {
        metric,
        column,
        base: b,
        new: n,
        base_mean,
        new_mean,
        delta_pct,
        test,
        verdict,
    })
}

/// Every cell present in both runs (rows of `cells.csv` that ran), changed cells first: those
/// with a significant worsening (largest first), then improvements, then the rest in report
/// order.
pub fn compare(base: &[Row], new: &[Row]) -> Vec<CellChange> {
    let (b, n) = (group(base), group(new));
    let mut cells: Vec<CellChange> = b
        .iter()
        .filter_map(|(key, base_rows)| {
            let new_rows = n.get(key)?;
            Some(CellChange {
                key: key.clone(),
                n_base: base_rows.len(),
                n_new: new_rows.len(),
                changes: METRICS
                    .iter()
                    .filter_map(|m| change(m, base_rows, new_rows))
                    .collect(),
            })
        })
        .collect();
    cells.sort_by(|x, y| {
        let rank = |c: &CellChange| match (c.worst(), c.best()) {
            (Some(w), _) => (0, -w),
            (None, Some(b)) => (1, -b),
            (None, None) => (2, 0.0),
        };
        let (rx, ry) = (rank(x), rank(y));
        rx.0.cmp(&ry.0)
            .then(rx.1.total_cmp(&ry.1))
            .then_with(|| natural_order(&x.key).cmp(&natural_order(&y.key)))
    });
    cells
}

/// Significant worsenings larger than `limit_pct` %, as `cell metric +x.x %` lines.
pub fn regressions(cells: &[CellChange], limit_pct: f64) -> Vec<String> {
    cells
        .iter()
        .flat_map(|cell| {
            cell.changes
                .iter()
                .filter(|c| c.verdict == Verdict::Worse)
                .filter_map(move |c| {
                    let w = c.worsening_pct()?;
                    (w > limit_pct).then(|| {
                        format!(
                            "{} {}: {:+.1} % ({:.1} % worse)",
                            cell.label(),
                            c.metric.name,
                            c.delta_pct.unwrap_or(0.0),
                            w
                        )
                    })
                })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Whether two runs may be compared.

/// A string field of the manifest's experiment, `""` when absent.
fn exp_field(m: &serde_json::Value, key: &str) -> String {
    match &m["experiment"][key] {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn regime_set(m: &serde_json::Value) -> Vec<String> {
    let mut r: Vec<String> = m["experiment"]["regimes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    r.sort();
    r.dedup();
    r
}

/// `Err(one line)` when the workloads differ so that a per-cell comparison means nothing
/// (payload, regime set, request budget per regime, or no cell in common); otherwise the
/// warnings about the machine and the code, one line each.
pub fn check_compatible(base: &Results, new: &Results) -> Result<Vec<String>, String> {
    let (mb, mn) = (&base.manifest, &new.manifest);
    let (pb, pn) = (exp_field(mb, "payload"), exp_field(mn, "payload"));
    if pb != pn {
        return Err(format!(
            "the runs used different payloads ({pb} vs {pn}): comparison refused"
        ));
    }
    let (rb, rn) = (regime_set(mb), regime_set(mn));
    if rb != rn {
        return Err(format!(
            "the runs measured different regimes ({} vs {}): comparison refused",
            rb.join(","),
            rn.join(",")
        ));
    }
    for (regime, key) in [
        ("reuse", "requests_reuse"),
        ("new-conn", "requests_new_conn"),
    ] {
        let (b, n) = (exp_field(mb, key), exp_field(mn, key));
        if rb.iter().any(|r| r == regime) && b != n {
            return Err(format!(
                "the runs had different request budgets for {regime} ({b} vs {n} requests per cell): comparison refused"
            ));
        }
    }
    let (db, dn) = (
        exp_field(mb, "duration_seconds"),
        exp_field(mn, "duration_seconds"),
    );
    if db != dn {
        let shown = |d: &str| {
            if d.is_empty() {
                "request budget".to_string()
            } else {
                format!("{d} s")
            }
        };
        return Err(format!(
            "the runs had different cell durations ({} vs {}): comparison refused",
            shown(&db),
            shown(&dn)
        ));
    }
    // Variants may set their own payload or budget: check the cells themselves as well.
    let (gb, gn) = (group(&base.cells), group(&new.cells));
    let mut common = 0;
    for (key, rows) in &gb {
        let Some(other) = gn.get(key) else { continue };
        common += 1;
        for column in ["payload", "requests", "duration_s"] {
            let (x, y) = (
                rows[0].text(column).unwrap_or_default(),
                other[0].text(column).unwrap_or_default(),
            );
            if x != y {
                return Err(format!(
                    "cell {} differs in {column} ({x} vs {y}): comparison refused",
                    key.join("/")
                ));
            }
        }
    }
    if common == 0 {
        return Err(
            "the runs have no cell in common (variant, stage, stack, regime, concurrency, mode): nothing to compare"
                .into(),
        );
    }
    let mut warnings = Vec::new();
    let text = |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or("unknown").to_string();
    for (key, what) in [
        ("cpu_model", "CPU models"),
        ("kernel", "kernels"),
        ("git_commit", "commits"),
    ] {
        let (b, n) = (text(mb, key), text(mn, key));
        if b != n {
            warnings.push(format!(
                "the runs differ in {what} ({b} vs {n}): differences may come from that"
            ));
        }
    }
    if mb["cores"] != mn["cores"] {
        warnings.push(format!(
            "the runs had different core counts ({} vs {})",
            mb["cores"], mn["cores"]
        ));
    }
    for (m, which) in [(mb, "base"), (mn, "new")] {
        if text(m, "git_commit").ends_with("-dirty") {
            warnings.push(format!(
                "the {which} run was built from uncommitted changes: its code is not its commit"
            ));
        }
    }
    Ok(warnings)
}

// ---------------------------------------------------------------------------------------------
// Output.

fn fmt_value(metric: &Metric, v: f64) -> String {
    format!("{:.*}", metric.decimals, v * metric.scale)
}

fn sd(v: &[f64]) -> Option<f64> {
    (v.len() >= 2).then(|| variance(v).sqrt())
}

/// Writes `compare.csv` (docs/comparing.md): one row per metric of each cell.
pub fn write_csv(path: &Path, cells: &[CellChange]) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for cell in cells {
        for c in &cell.changes {
            out.push(CompareRow {
                variant: cell.field("variant").into(),
                stage: cell.field("stage").into(),
                stack: cell.field("stack").into(),
                regime: cell.field("regime").into(),
                concurrency: cell.field("concurrency").into(),
                mode: cell.field("mode").into(),
                metric: c.metric.name.into(),
                column: c.column.into(),
                higher_is_better: c.metric.higher_is_better,
                n_base: c.base.len(),
                n_new: c.new.len(),
                base_mean: c.base_mean,
                new_mean: c.new_mean,
                base_sd: sd(&c.base),
                new_sd: sd(&c.new),
                delta: c.new_mean - c.base_mean,
                delta_pct: c.delta_pct,
                ci95_low: c.test.map(|t| t.ci.0),
                ci95_high: c.test.map(|t| t.ci.1),
                df: c.test.map(|t| t.df).filter(|df| df.is_finite()),
                p_value: c.test.map(|t| t.p),
                verdict: c.verdict.text().into(),
            });
        }
    }
    rows::write(path, &out)
}

/// `-12.3% W`: the relative change and a one-letter verdict.
fn terminal_entry(c: &Change) -> String {
    let mark = match c.verdict {
        Verdict::Worse => " W",
        Verdict::Better => " B",
        Verdict::NoSignificantChange => "  ",
        Verdict::TooFew { .. } => " ?",
    };
    match c.delta_pct {
        Some(d) => format!("{d:+.1}%{mark}"),
        None => format!("n/a{mark}"),
    }
}

/// The terminal table: one line per cell (changed cells first), the relative change of each
/// metric with its verdict, and a legend.
pub fn terminal_table(cells: &[CellChange]) -> String {
    let width = cells
        .iter()
        .map(|c| c.label().chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut s = format!("{:<width$}  {:>5}", "cell", "reps");
    for m in &METRICS {
        let _ = write!(s, "  {:>10}", m.short);
    }
    s.push('\n');
    for cell in cells {
        let _ = write!(
            s,
            "{:<width$}  {:>5}",
            cell.label(),
            format!("{}/{}", cell.n_base, cell.n_new)
        );
        for m in &METRICS {
            let entry = cell
                .changes
                .iter()
                .find(|c| c.metric.name == m.name)
                .map_or_else(|| "—".to_string(), terminal_entry);
            let _ = write!(s, "  {entry:>10}");
        }
        s.push('\n');
    }
    s.push_str("change of the mean, new vs base; W significantly worse, B significantly better (Welch's t, 95 %), blank: no significant change");
    let too_few: Vec<Verdict> = cells
        .iter()
        .flat_map(|c| c.changes.iter().map(|x| x.verdict))
        .filter(|v| matches!(v, Verdict::TooFew { .. }))
        .collect();
    if !too_few.is_empty() {
        let text = if too_few.iter().all(|v| *v == Verdict::TooFew { one: true }) {
            Verdict::TooFew { one: true }.text()
        } else {
            "fewer than 3 repetitions on a side: no significance"
        };
        let _ = write!(s, "\n? {text} (deltas only)");
    }
    s
}

#[derive(Serialize)]
struct HtmlRow {
    cell: String,
    reps: String,
    metric: String,
    base: String,
    new: String,
    delta_pct: String,
    ci: String,
    p: String,
    verdict: &'static str,
    class: &'static str,
    first: bool,
    span: usize,
}

#[derive(Serialize)]
struct RunInfo {
    dir: String,
    name: String,
    started: String,
    commit: String,
    machine: String,
}

fn run_info(dir: &Path, r: &Results) -> RunInfo {
    let m = &r.manifest;
    let s = |k: &str| m[k].as_str().unwrap_or("unknown").to_string();
    RunInfo {
        dir: dir.display().to_string(),
        name: m["experiment"]["name"].as_str().unwrap_or("?").to_string(),
        started: s("started_utc"),
        commit: s("git_commit").chars().take(12).collect(),
        machine: format!(
            "{}, {} cores, Linux {}",
            s("cpu_model"),
            m["cores"],
            s("kernel")
        ),
    }
}

/// The report's stylesheet, taken from its template so both pages look alike.
fn report_css() -> &'static str {
    const REPORT: &str = include_str!("../../templates/report.html");
    let start = REPORT.find("<style>").map_or(0, |i| i + "<style>".len());
    let end = REPORT[start..]
        .find("</style>")
        .map_or(start, |i| start + i);
    &REPORT[start..end]
}

const BAR_W: f64 = 560.0;
const BAR_H: f64 = 300.0;
const BAR_LEFT: f64 = 64.0;
const BAR_RIGHT: f64 = 130.0;
const BAR_TOP: f64 = 28.0;
const BAR_BOTTOM: f64 = 44.0;
const COLOURS: [&str; 4] = ["#1f4e79", "#c55a11", "#548235", "#7030a0"];

/// One bar: the relative change of the mean and, when tested, the 95 % interval of the
/// difference relative to the base mean; filled when significant, outlined when not.
struct Bar {
    group: String,
    series: String,
    pct: f64,
    ci_pct: Option<(f64, f64)>,
    significant: bool,
}

/// A bar chart of relative changes around a zero line: groups (concurrency) along x, one bar
/// per series (stack), whiskers for the interval. Inline SVG like the report's charts.
fn delta_chart(title: &str, bars: &[Bar]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {BAR_W} {BAR_H}" width="{BAR_W}" height="{BAR_H}" role="img" aria-label="{title}"><title>{title}</title><rect width="{BAR_W}" height="{BAR_H}" fill="white"/><text x="{}" y="18" text-anchor="middle" font-size="14" font-family="sans-serif">{title}</text>"#,
        (BAR_W - BAR_RIGHT + BAR_LEFT) / 2.0
    );
    if bars.is_empty() {
        svg.push_str("</svg>");
        return svg;
    }
    let mut groups: Vec<&str> = Vec::new();
    let mut series: Vec<&str> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !series.contains(&b.series.as_str()) {
            series.push(&b.series);
        }
    }
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for b in bars {
        let (l, h) = b.ci_pct.unwrap_or((b.pct, b.pct));
        lo = lo.min(l.min(b.pct));
        hi = hi.max(h.max(b.pct));
    }
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let ticks = chart::ticks(lo, hi);
    let (y0, y1) = (ticks[0], *ticks.last().expect("at least one tick"));
    let py = |v: f64| BAR_H - BAR_BOTTOM - (v - y0) / (y1 - y0) * (BAR_H - BAR_TOP - BAR_BOTTOM);
    let plot_w = BAR_W - BAR_LEFT - BAR_RIGHT;
    for t in &ticks {
        let y = py(*t);
        let stroke = if t.abs() < 1e-12 { "#333" } else { "#ddd" };
        let _ = write!(
            svg,
            r#"<line x1="{BAR_LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" font-family="sans-serif">{}%</text>"#,
            BAR_W - BAR_RIGHT,
            BAR_LEFT - 4.0,
            y + 3.0,
            chart::fmt_tick(*t)
        );
    }
    let group_w = plot_w / groups.len() as f64;
    let bar_w = (group_w * 0.8 / series.len() as f64).min(40.0);
    for (gi, g) in groups.iter().enumerate() {
        let gx = BAR_LEFT + gi as f64 * group_w;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" font-family="sans-serif">{g}</text>"#,
            gx + group_w / 2.0,
            BAR_H - BAR_BOTTOM + 14.0
        );
        let start = gx + (group_w - bar_w * series.len() as f64) / 2.0;
        for b in bars.iter().filter(|b| b.group == *g) {
            let si = series.iter().position(|s| *s == b.series).expect("listed");
            let colour = COLOURS[si % COLOURS.len()];
            let x = start + si as f64 * bar_w;
            let (top, bottom) = (py(b.pct.max(0.0)), py(b.pct.min(0.0)));
            let fill = if b.significant { colour } else { "white" };
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{}: {:+.1} %{}</title></rect>"#,
                x + 1.0,
                bar_w - 2.0,
                (bottom - top).max(0.5),
                b.series,
                b.pct,
                if b.significant { ", significant" } else { "" }
            );
            if let Some((l, h)) = b.ci_pct {
                let cx = x + bar_w / 2.0;
                let _ = write!(
                    svg,
                    r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/>"##,
                    py(l),
                    py(h),
                    cx - 3.0,
                    py(l),
                    cx + 3.0,
                    py(l),
                    cx - 3.0,
                    py(h),
                    cx + 3.0,
                    py(h)
                );
            }
        }
    }
    let _ = write!(
        svg,
        r##"<line x1="{BAR_LEFT}" y1="{BAR_TOP}" x2="{BAR_LEFT}" y2="{b:.1}" stroke="#333"/><text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11" font-family="sans-serif">concurrent users</text><text transform="translate(14 {cy:.1}) rotate(-90)" text-anchor="middle" font-size="11" font-family="sans-serif">change, new vs base</text>"##,
        BAR_H - 8.0,
        b = BAR_H - BAR_BOTTOM,
        cx = (BAR_W - BAR_RIGHT + BAR_LEFT) / 2.0,
        cy = (BAR_H - BAR_BOTTOM + BAR_TOP) / 2.0,
    );
    for (si, s) in series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        let ly = BAR_TOP + 10.0 + si as f64 * 18.0;
        let lx = BAR_W - BAR_RIGHT + 12.0;
        let _ = write!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="11" font-family="sans-serif">{s}</text>"#,
            ly - 6.0,
            lx + 18.0,
            ly + 4.0
        );
    }
    let ly = BAR_TOP + 10.0 + series.len() as f64 * 18.0 + 8.0;
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{ly:.1}" font-size="10" font-family="sans-serif">filled: significant</text><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif">outline: not</text>"##,
        BAR_W - BAR_RIGHT + 12.0,
        BAR_W - BAR_RIGHT + 12.0,
        ly + 14.0
    );
    svg.push_str("</svg>");
    svg
}

/// The delta charts: per variant, stage and regime, throughput and p95 by concurrency and stack.
fn charts(cells: &[CellChange]) -> Vec<String> {
    let mut panels: Vec<(String, String, String)> = Vec::new();
    let mut sorted: Vec<&CellChange> = cells.iter().collect();
    sorted.sort_by_key(|c| natural_order(&c.key));
    for c in &sorted {
        let p = (
            c.field("variant").to_string(),
            c.field("stage").to_string(),
            c.field("regime").to_string(),
        );
        if !panels.contains(&p) {
            panels.push(p);
        }
    }
    let mut out = Vec::new();
    for (variant, stage, regime) in &panels {
        for metric in ["throughput_rps", "latency_p95_us"] {
            let bars: Vec<Bar> = sorted
                .iter()
                .filter(|c| {
                    c.field("variant") == variant
                        && c.field("stage") == stage
                        && c.field("regime") == regime
                })
                .filter_map(|c| {
                    let ch = c.changes.iter().find(|x| x.metric.name == metric)?;
                    let pct = ch.delta_pct?;
                    let mut series = label(c.field("stack"));
                    if c.field("mode") != "closed" {
                        series = format!("{series} {}", c.field("mode"));
                    }
                    Some(Bar {
                        group: c.field("concurrency").to_string(),
                        series,
                        pct,
                        ci_pct: ch.test.map(|t| {
                            let k = 100.0 / ch.base_mean.abs();
                            (t.ci.0 * k, t.ci.1 * k)
                        }),
                        significant: matches!(ch.verdict, Verdict::Worse | Verdict::Better),
                    })
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            let what = if metric == "throughput_rps" {
                "Throughput change"
            } else {
                "p95 latency change"
            };
            let mut title = format!("{what} — {regime}");
            if stage != "stress" {
                title = format!("{title}, {stage}");
            }
            if variant != "default" {
                title = format!("{title} ({variant})");
            }
            out.push(delta_chart(&title, &bars));
        }
    }
    out
}

/// The HTML page: runs, warnings, delta charts and the full table.
pub fn html(
    base: (&Path, &Results),
    new: (&Path, &Results),
    cells: &[CellChange],
    warnings: &[String],
) -> anyhow::Result<String> {
    let mut rows = Vec::new();
    for cell in cells {
        for (i, c) in cell.changes.iter().enumerate() {
            let m = c.metric;
            let unit = if m.unit.is_empty() || m.unit == m.short {
                String::new()
            } else {
                format!(" {}", m.unit)
            };
            rows.push(HtmlRow {
                cell: cell.label(),
                reps: format!("{} / {}", cell.n_base, cell.n_new),
                metric: format!("{}{unit}", m.short),
                base: fmt_value(m, c.base_mean),
                new: fmt_value(m, c.new_mean),
                delta_pct: c
                    .delta_pct
                    .map_or_else(|| "—".into(), |d| format!("{d:+.1} %")),
                ci: c.test.map_or_else(
                    || "—".into(),
                    |t| format!("[{}, {}]", fmt_value(m, t.ci.0), fmt_value(m, t.ci.1)),
                ),
                p: c.test.map_or_else(|| "—".into(), |t| format!("{:.3}", t.p)),
                verdict: c.verdict.text(),
                class: match c.verdict {
                    Verdict::Worse => "worse",
                    Verdict::Better => "better",
                    _ => "same",
                },
                first: i == 0,
                span: cell.changes.len(),
            });
        }
    }
    let changed = cells
        .iter()
        .filter(|c| c.worst().is_some() || c.best().is_some())
        .count();
    let tested = cells
        .iter()
        .any(|c| c.changes.iter().any(|x| x.test.is_some()));
    let mut env = minijinja::Environment::new();
    env.add_template("compare.html", include_str!("../../templates/compare.html"))?;
    Ok(env
        .get_template("compare.html")?
        .render(minijinja::context! {
            css => report_css(),
            base => run_info(base.0, base.1),
            new => run_info(new.0, new.1),
            warnings => warnings,
            charts => charts(cells),
            rows => rows,
            cells => cells.len(),
            changed => changed,
            tested => tested,
        })?)
}

// ---------------------------------------------------------------------------------------------
// The command.

/// What `runner compare` wrote and found.
pub struct Outcome {
    pub out: PathBuf,
    pub warnings: Vec<String>,
    pub cells: Vec<CellChange>,
}

/// Reads both runs, refuses incompatible ones (`Err` with `refused = true`), writes
/// `compare.csv` and `compare.html` into `out` (default `NEW/compare/`).
pub fn run(base_dir: &Path, new_dir: &Path, out: Option<&Path>) -> Result<Outcome, (bool, String)> {
    let load = |d: &Path| Results::load(d).map_err(|e| (true, format!("{e:#}")));
    let (base, new) = (load(base_dir)?, load(new_dir)?);
    let warnings = check_compatible(&base, &new).map_err(|e| (true, e))?;
    let cells = compare(&base.cells, &new.cells);
    let out = out.map_or_else(|| new_dir.join("compare"), Path::to_path_buf);
    let write = || -> anyhow::Result<()> {
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        write_csv(&out.join("compare.csv"), &cells)?;
        let page = html((base_dir, &base), (new_dir, &new), &cells, &warnings)?;
        let path = out.join("compare.html");
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    };
    write().map_err(|e| (false, format!("{e:#}")))?;
    Ok(Outcome {
        out,
        warnings,
        cells,
    })
}

/// `runner compare`: exit 0, 1 with `--fail-on-regression` exceeded, 2 when refused.
pub fn command(base: &Path, new: &Path, out: Option<&Path>, fail_pct: Option<f64>) -> ExitCode {
    if let Some(p) = fail_pct {
        if !(p.is_finite() && p >= 0.0) {
            eprintln!("error: --fail-on-regression: {p} is not a percentage ≥ 0");
            return ExitCode::from(EXIT_REFUSED);
        }
    }
    let outcome = match run(base, new, out) {
        Ok(o) => o,
        Err((refused, e)) => {
            eprintln!("error: {e}");
            return if refused {
                ExitCode::from(EXIT_REFUSED)
            } else {
                ExitCode::FAILURE
            };
        }
    };
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    println!("{}", terminal_table(&outcome.cells));
    println!(
        "compare: {} and {}",
        outcome.out.join("compare.csv").display(),
        outcome.out.join("compare.html").display()
    );
    if let Some(limit) = fail_pct {
        let found = regressions(&outcome.cells, limit);
        if !found.is_empty() {
            for r in &found {
                eprintln!("regression: {r}");
            }
            eprintln!(
                "{} significant regression(s) larger than {limit} %",
                found.len()
            );
            return ExitCode::from(EXIT_REGRESSION);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_quantile_matches_table_values() {
        // Two-sided 95 % critical values (Student's t tables).
        for (df, t) in [
            (1.0, 12.7062),
            (2.0, 4.3027),
            (3.0, 3.1824),
            (4.0, 2.7764),
            (5.0, 2.5706),
            (10.0, 2.2281),
            (30.0, 2.0423),
            (120.0, 1.9799),
            (1e7, 1.9600),
        ] {
            let q = t_quantile(0.975, df);
            assert!(close(q, t, 1e-4), "df {df}: {q} vs {t}");
        }
        // One-sided 99 % and 90 %.
        assert!(close(t_quantile(0.99, 5.0), 3.3649, 1e-4));
        assert!(close(t_quantile(0.90, 8.0), 1.3968, 1e-4));
        assert!(close(t_quantile(0.025, 4.0), -2.7764, 1e-4));
    }

    #[test]
    fn t_cdf_matches_closed_forms() {
        // df = 1 (Cauchy) and df = 2 have closed forms.
        for t in [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0] {
            let cauchy = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!(close(t_cdf(t, 1.0), cauchy, 1e-12), "df 1, t {t}");
            let two = 0.5 + t / (2.0 * (t * t + 2.0).sqrt());
            assert!(close(t_cdf(t, 2.0), two, 1e-12), "df 2, t {t}");
        }
    }

    /// Non-integer degrees of freedom (what Welch–Satterthwaite gives): checked against a
    /// numerical integral of the t density, independent of the incomplete beta function.
    #[test]
    fn t_cdf_matches_the_integrated_density_for_fractional_df() {
        for df in [1.5, 2.7, 4.35, 9.9] {
            let ln_c = ln_gamma((df + 1.0) / 2.0)
                - ln_gamma(df / 2.0)
                - 0.5 * (df * std::f64::consts::PI).ln();
            let density = |x: f64| (ln_c - (df + 1.0) / 2.0 * (1.0 + x * x / df).ln()).exp();
            let t = 2.1;
            // Simpson's rule on [0, t]; P(T ≤ t) = 0.5 + ∫₀ᵗ f.
            let n = 20_000;
            let h = t / n as f64;
            let mut sum = density(0.0) + density(t);
            for i in 1..n {
                sum += density(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            let integral = 0.5 + sum * h / 3.0;
            assert!(
                close(t_cdf(t, df), integral, 1e-9),
                "df {df}: {} vs {integral}",
                t_cdf(t, df)
            );
            // And the quantile inverts the distribution function.
            let q = t_quantile(0.975, df);
            assert!(close(t_cdf(q, df), 0.975, 1e-12), "df {df}");
            // Between the neighbouring integer table values.
            assert!(q < t_quantile(0.975, df.floor()) && q > t_quantile(0.975, df.ceil()));
        }
    }

    #[test]
    fn welch_matches_a_hand_computation() {
        // base mean 12, var 4; new mean 20, var 16; n = 3 each.
        let w = welch(&[10.0, 12.0, 14.0], &[16.0, 20.0, 24.0]).unwrap();
        assert!(close(w.diff, 8.0, 1e-12));
        // se² = 4/3 + 16/3 = 20/3; df = (20/3)² / ((4/3)²/2 + (16/3)²/2) = 400/136.
        assert!(close(w.df, 400.0 / 136.0, 1e-12), "{}", w.df);
        let half = t_quantile(0.975, 400.0 / 136.0) * (20.0f64 / 3.0).sqrt();
        assert!(close(w.ci.0, 8.0 - half, 1e-9) && close(w.ci.1, 8.0 + half, 1e-9));
        // t = 8 / √(20/3) ≈ 3.098 at ≈ 2.94 df: p ≈ 0.054, just not significant.
        assert!(w.p > 0.05 && w.p < 0.06, "{}", w.p);
        assert!(!w.significant());
        // The interval excludes zero exactly when p < 0.05.
        assert_eq!(w.ci.0 > 0.0, w.significant());
    }

    #[test]
    fn identical_samples_are_not_significant() {
        let a = [100.0, 103.0, 98.0, 101.0];
        let w = welch(&a, &a).unwrap();
        assert_eq!(w.diff, 0.0);
        assert!(close(w.p, 1.0, 1e-12));
        assert!(w.ci.0 < 0.0 && w.ci.1 > 0.0);
        // Constant on both sides and equal: no change either.
        let c = welch(&[5.0; 3], &[5.0; 3]).unwrap();
        assert_eq!((c.p, c.ci), (1.0, (0.0, 0.0)));
        // Constant but different: reproducible exactly, so the difference is real.
        assert!(welch(&[1.0; 3], &[0.99; 3]).unwrap().significant());
    }

    fn row(stack: &str, rep: u32, rps: f64, p50: f64, steady: Option<f64>) -> Row {
        Row {
            variant: "default".into(),
            stage: "stress".into(),
            stack: stack.into(),
            regime: "reuse".into(),
            concurrency: 2,
            mode: "closed".into(),
            success_rate: 1.0,
            repetition: rep,
            throughput_rps: rps,
            throughput_steady_rps: steady,
            steady_window_valid: steady.map(|_| true),
            latency_p50_us: p50 as u64,
            server_rss_peak_bytes: Some(20_000_000),
            ..Row::default()
        }
    }

    fn find<'a>(cells: &'a [CellChange], stack: &str, metric: &str) -> &'a Change {
        cells
            .iter()
            .find(|c| c.field("stack") == stack)
            .unwrap()
            .changes
            .iter()
            .find(|c| c.metric.name == metric)
            .unwrap()
    }

    #[test]
    fn verdicts_follow_each_metrics_direction() {
        let base = vec![
            row("h1", 1, 1000.0, 400.0, Some(1010.0)),
            row("h1", 2, 1020.0, 410.0, Some(1030.0)),
            row("h1", 3, 990.0, 405.0, Some(995.0)),
            row("h2", 1, 800.0, 700.0, Some(810.0)),
            row("h2", 2, 810.0, 690.0, Some(805.0)),
            row("h2", 3, 790.0, 710.0, Some(800.0)),
        ];
        let new = vec![
            // h1 slower: lower throughput and higher latency, both worse.
            row("h1", 1, 300.0, 7000.0, Some(301.0)),
            row("h1", 2, 310.0, 7100.0, Some(305.0)),
            row("h1", 3, 290.0, 6900.0, Some(299.0)),
            // h2 faster: both better. Its third repetition has no steady window, so both
            // sides fall back to throughput_rps.
            row("h2", 1, 1600.0, 350.0, Some(1610.0)),
            row("h2", 2, 1610.0, 345.0, Some(1605.0)),
            row("h2", 3, 1590.0, 355.0, None),
        ];
        let cells = compare(&base, &new);
        assert_eq!(cells.len(), 2);
        // Worsened cells first.
        assert_eq!(cells[0].field("stack"), "h1");
        assert_eq!(find(&cells, "h1", "throughput_rps").verdict, Verdict::Worse);
        assert_eq!(find(&cells, "h1", "latency_p50_us").verdict, Verdict::Worse);
        assert_eq!(
            find(&cells, "h2", "throughput_rps").verdict,
            Verdict::Better
        );
        assert_eq!(
            find(&cells, "h2", "latency_p50_us").verdict,
            Verdict::Better
        );
        assert_eq!(
            find(&cells, "h1", "throughput_rps").column,
            "throughput_steady_rps"
        );
        let h2 = find(&cells, "h2", "throughput_rps");
        assert_eq!(h2.column, "throughput_rps");
        assert!(close(h2.delta_pct.unwrap(), 100.0, 1e-9));
        // Same success rate everywhere; RSS falls back to the sampled peak.
        assert_eq!(
            find(&cells, "h1", "success_rate").verdict,
            Verdict::NoSignificantChange
        );
        assert_eq!(
            find(&cells, "h1", "server_rss_bytes").column,
            "server_rss_peak_bytes"
        );
        // Metrics without values on either side are left out, not shown as zero.
        static EMPTY: Metric = Metric {
            name: "steal",
            column: "steal_pct",
            fallback: None,
            higher_is_better: false,
            short: "steal",
            unit: "%",
            scale: 1.0,
            decimals: 1,
        };
        let rows: Vec<&Row> = base.iter().collect();
        assert!(change(&EMPTY, &rows, &rows).is_none());
        // h1: throughput −70 %, p50 +1,600 %: over a 10 % limit, not over a 2,000 % one.
        let r = regressions(&cells, 10.0);
        assert!(r
            .iter()
            .any(|l| l.contains("h1") && l.contains("throughput_rps")));
        assert!(r.iter().all(|l| !l.contains("h2")));
        assert!(regressions(&cells, 2000.0).is_empty());
        // The table puts h1 first and marks it.
        let table = terminal_table(&cells);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[1].starts_with("h1") && lines[1].contains(" W"),
            "{table}"
        );
        assert!(
            lines[2].starts_with("h2") && lines[2].contains(" B"),
            "{table}"
        );
    }

    #[test]
    fn identical_runs_show_no_significant_change() {
        let rows: Vec<Row> = (1..=3)
            .map(|i| row("h1", i, 1000.0 + i as f64, 400.0 + i as f64, None))
            .collect();
        let cells = compare(&rows, &rows);
        assert!(cells[0]
            .changes
            .iter()
            .all(|c| c.verdict == Verdict::NoSignificantChange));
        assert!(regressions(&cells, 0.0).is_empty());
    }

    #[test]
    fn fewer_than_three_repetitions_give_deltas_only() {
        let one = compare(
            &[row("h1", 1, 1000.0, 400.0, None)],
            &[row("h1", 1, 100.0, 4000.0, None)],
        );
        let c = find(&one, "h1", "latency_p50_us");
        assert_eq!(c.verdict, Verdict::TooFew { one: true });
        assert_eq!(c.verdict.text(), "one repetition: no significance");
        assert!(close(c.delta_pct.unwrap(), 900.0, 1e-9));
        assert!(c.test.is_none());
        assert!(regressions(&one, 0.0).is_empty());
        assert!(terminal_table(&one).contains("one repetition: no significance"));
        let two: Vec<Row> = (1..=2).map(|i| row("h1", i, 1000.0, 400.0, None)).collect();
        let c = compare(&two, &two);
        assert_eq!(
            find(&c, "h1", "latency_p50_us").verdict.text(),
            "n < 3: no significance"
        );
    }

    #[test]
    fn delta_chart_draws_negative_bars_inside_the_frame() {
        let svg = delta_chart(
            "t",
            &[
                Bar {
                    group: "2".into(),
                    series: "A".into(),
                    pct: -90.0,
                    ci_pct: Some((-95.0, -85.0)),
                    significant: true,
                },
                Bar {
                    group: "2".into(),
                    series: "B".into(),
                    pct: 3.0,
                    ci_pct: Some((-2.0, 8.0)),
                    significant: false,
                },
            ],
        );
        assert_eq!(
            svg.matches("<rect x=").count(),
            2 + 2,
            "bars and legend keys"
        );
        for y in svg
            .split(" y=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next()?.parse::<f64>().ok())
        {
            assert!((0.0..=BAR_H).contains(&y), "y {y} outside the chart");
        }
        assert!(
            svg.contains(r##"fill="white" stroke="#c55a11""##),
            "B outlined: {svg}"
        );
    }
}
