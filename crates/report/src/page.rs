//! `runner report RESULTS_DIR`: one self-contained HTML file shaped like seed 000's report —
//! peak-load summary, single-user baseline, stress table, failure reasons by stage, charts and
//! notes — computed from the results directory's typed rows alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bench_core::FailureClass;
use serde::Serialize;

use crate::chart::{self, Series};
use crate::Results;
use crate::{label, stack_order};
use results::labels::{is_cell, levels, mean_of, ms, regimes};
use results::rows::{self, CellRow, Row as _, SummaryRow, ThresholdRow};
use results::summary;

/// The `cells.csv` figures the stress table, the peak summary and the comparisons read: one
/// definition each (docs/results-schema.md).
mod col {
    pub const LATENCY_P50: &str = "latency_p50_us";
    pub const LATENCY_P95: &str = "latency_p95_us";
    pub const LATENCY_P99: &str = "latency_p99_us";
    pub const SUCCESS_RATE: &str = "success_rate";
    /// `ok / elapsed_s`: the whole phase, ramp-up and drain included.
    pub const THROUGHPUT: &str = "throughput_rps";
    pub const OK: &str = "ok";
    pub const ELAPSED_S: &str = "elapsed_s";
    /// Successes per second while every worker was busy; empty when there was no such window.
    pub const THROUGHPUT_STEADY: &str = "throughput_steady_rps";
    pub const STEADY_S: &str = "steady_s";
    /// The largest sampled reading, and the kernel's VmHWM over the phase (empty if unavailable).
    pub const RSS_PEAK: &str = "server_rss_peak_bytes";
    pub const RSS_HWM: &str = "server_rss_hwm_bytes";
    /// Empty when it could not be measured: shown as "—", never as 0.
    pub const CPU_PCT: &str = "server_cpu_pct_mean";
}

/// A column's value, 0 when empty (the baseline table and the failure counts read it so).
fn num(row: &CellRow, column: &str) -> f64 {
    row.number(column).unwrap_or(0.0)
}

#[derive(Serialize)]
struct Peak {
    regime: String,
    concurrency: u64,
    stacks: Vec<PeakStack>,
}

#[derive(Serialize)]
struct PeakStack {
    label: String,
    p50_ms: Shown,
    p99_ms: Shown,
    /// Steady-state throughput (or the overall one, marked, where there was no steady window).
    rps: Shown,
    /// `ok / elapsed_s`.
    overall_rps: Shown,
    fail_pct: Shown,
}

/// A figure as shown: the mean, the half-width of its 95 % interval when there is one, a
/// footnote mark and a tooltip.
#[derive(Serialize)]
struct Shown {
    value: String,
    ci: Option<String>,
    mark: &'static str,
    title: String,
}

impl Shown {
    fn new(f: Figure, fmt: impl Fn(f64) -> String) -> Self {
        Shown {
            value: fmt(f.mean),
            ci: f.half.map(&fmt),
            mark: "",
            title: String::new(),
        }
    }

    fn missing() -> Self {
        Shown {
            value: "—".into(),
            ci: None,
            mark: "",
            title: "not measured".into(),
        }
    }

    fn mark(mut self, mark: &'static str) -> Self {
        self.mark = mark;
        self
    }

    fn title(mut self, title: String) -> Self {
        self.title = title;
        self
    }
}

/// Footnote marks of the stress table and the peak summary.
const MARK_NO_STEADY: &str = "†";
const MARK_SAMPLED_RSS: &str = "‡";

/// One figure of a (stack, regime, concurrency) group over its repetitions: the mean and the
/// half-width of the 95 % Student-t interval of the mean (`None` for one repetition).
#[derive(Clone, Copy, Debug)]
struct Figure {
    mean: f64,
    half: Option<f64>,
    n: usize,
}

impl Figure {
    fn scaled(self, k: f64) -> Self {
        Figure {
            mean: self.mean * k,
            half: self.half.map(|h| h * k.abs()),
            n: self.n,
        }
    }

    /// Failure % from a success-rate figure.
    fn failure_pct(self) -> Self {
        Figure {
            mean: (1.0 - self.mean) * 100.0,
            half: self.half.map(|h| h * 100.0),
            n: self.n,
        }
    }
}

/// The stress stage's figures: from `summary.csv` where it has the figure for exactly this
/// group, else computed from `cells.csv` with the same interval (an older `summary.csv`, a
/// column it does not aggregate, or groups it splits further, e.g. by variant).
struct Stats<'a> {
    stress: &'a [&'a CellRow],
    summary: &'a [SummaryRow],
    /// The figures `summary.csv` has columns for (an older file may lack some).
    summary_has: &'a dyn Fn(&str) -> bool,
}

impl Stats<'_> {
    fn cells(&self, stack: &str, regime: &str, c: u64) -> Vec<&CellRow> {
        self.stress
            .iter()
            .filter(|r| is_cell(r, stack, regime, c))
            .copied()
            .collect()
    }

    fn summary_row(&self, stack: &str, regime: &str, c: u64) -> Option<&SummaryRow> {
        let mut rows = self.summary.iter().filter(|r| {
            r.stage == "stress"
                && r.stack == stack
                && r.regime == regime
                && r.concurrency as u64 == c
        });
        let first = rows.next()?;
        rows.next().is_none().then_some(first)
    }

    fn figure(&self, stack: &str, regime: &str, c: u64, column: &str) -> Option<Figure> {
        let cells = self.cells(stack, regime, c);
        if cells.is_empty() {
            return None;
        }
        if let Some(row) = self.summary_row(stack, regime, c) {
            let stat = |s: &str| row.number(&format!("{column}_{s}"));
            if (self.summary_has)(&format!("{column}_{}", summary::MEAN)) {
                return Some(Figure {
                    mean: stat(summary::MEAN)?,
                    half: stat(summary::CI95_LOW)
                        .zip(stat(summary::CI95_HIGH))
                        .map(|(lo, hi)| (hi - lo) / 2.0),
                    n: row.repetitions,
                });
            }
        }
        let values: Vec<f64> = cells.iter().filter_map(|r| r.number(column)).collect();
        if values.is_empty() {
            return None;
        }
        let iv = stats::interval(&values);
        Some(Figure {
            mean: iv.mean,
            half: iv.ci.map(|(lo, hi)| (hi - lo) / 2.0),
            n: cells.len(),
        })
    }

    /// Every repetition of the group has `column` (it is not empty).
    fn all_have(&self, stack: &str, regime: &str, c: u64, column: &str) -> bool {
        let cells = self.cells(stack, regime, c);
        !cells.is_empty() && cells.iter().all(|r| r.number(column).is_some())
    }

    /// The throughput compared between stacks: steady-state when every repetition had a long
    /// enough steady window (`true`, [`CellRow::steady_valid`]), else `ok / elapsed_s`
    /// (`false`).
    fn throughput(&self, stack: &str, regime: &str, c: u64) -> Option<(Figure, bool)> {
        if self.all_have(stack, regime, c, col::THROUGHPUT_STEADY)
            && self
                .cells(stack, regime, c)
                .iter()
                .all(|r| r.steady_valid())
        {
            Some((self.figure(stack, regime, c, col::THROUGHPUT_STEADY)?, true))
        } else {
            Some((self.figure(stack, regime, c, col::THROUGHPUT)?, false))
        }
    }

    /// Server peak RSS: the kernel's VmHWM when every repetition has it (`true`), else the
    /// largest sampled reading (`false`).
    fn rss(&self, stack: &str, regime: &str, c: u64) -> Option<(Figure, bool)> {
        if self.all_have(stack, regime, c, col::RSS_HWM) {
            Some((self.figure(stack, regime, c, col::RSS_HWM)?, true))
        } else {
            Some((self.figure(stack, regime, c, col::RSS_PEAK)?, false))
        }
    }

    /// Mean of a plain column over the group's repetitions that have it.
    fn plain_mean(&self, stack: &str, regime: &str, c: u64, column: &str) -> Option<f64> {
        let v: Vec<f64> = self
            .cells(stack, regime, c)
            .iter()
            .filter_map(|r| r.number(column))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The throughput cells of a row: the compared one (steady-state, or marked), and the
    /// overall `ok / elapsed_s` with its counts in the tooltip.
    fn throughput_shown(&self, stack: &str, regime: &str, c: u64) -> Option<(Shown, Shown, bool)> {
        let rps = |v: f64| format!("{v:.1}");
        let (tp, steady) = self.throughput(stack, regime, c)?;
        let overall = self.figure(stack, regime, c, col::THROUGHPUT)?;
        let elapsed = self
            .plain_mean(stack, regime, c, col::ELAPSED_S)
            .unwrap_or(0.0);
        let ok = self.plain_mean(stack, regime, c, col::OK).unwrap_or(0.0);
        let shown = if steady {
            let window = self
                .plain_mean(stack, regime, c, col::STEADY_S)
                .unwrap_or(0.0);
            Shown::new(tp, rps).title(format!(
                "steady window {window:.3} s of {elapsed:.3} s elapsed (mean over {} repetition(s))",
                tp.n
            ))
        } else {
            Shown::new(tp, rps)
                .mark(MARK_NO_STEADY)
                .title("no steady-state figure: ok / elapsed shown".into())
        };
        let overall = Shown::new(overall, rps).title(format!(
            "{ok:.0} ok in {elapsed:.3} s (mean over {} repetition(s))",
            overall.n
        ));
        Some((shown, overall, steady))
    }
}

/// The one-line note under a table of means: what the ± is, or that there is none.
fn interval_note(ns: &[usize]) -> String {
    let (lo, hi) = (
        ns.iter().copied().min().unwrap_or(1),
        ns.iter().copied().max().unwrap_or(1),
    );
    if hi < 2 {
        return "One repetition per cell: single values, no confidence interval (run with repetitions ≥ 2 for one).".into();
    }
    let n = if lo == hi {
        format!("n = {hi}")
    } else {
        format!("n = {lo}–{hi} (rows without ± had one)")
    };
    format!("Mean ± half-width of the Student-t 95 % confidence interval of the mean over {n} repetitions, each against a fresh server, interleaved with the other stacks' cells (run-to-run variation on this machine).")
}

const STEADY_NOTE: &str = "Steady-state throughput: successes per second in the window in which every worker was busy (no ramp-up, no drain); overall = ok / elapsed over the whole phase.";
const NO_STEADY_NOTE: &str = "† no steady-state figure in some repetition (no window with every worker busy, i.e. fewer requests than workers, or a results directory from a runner that did not record it): the overall ok / elapsed is shown instead.";

#[derive(Serialize)]
struct BaselineTable {
    regime: String,
    seconds: String,
    rows: Vec<BaselineRow>,
}

#[derive(Serialize)]
struct Cell {
    value: String,
    best: bool,
}

#[derive(Serialize)]
struct BaselineRow {
    label: String,
    cells: Vec<Cell>,
}

#[derive(Serialize)]
struct StressRow {
    label: String,
    cells: Vec<Shown>,
}

#[derive(Serialize)]
struct StressLevel {
    concurrency: u64,
    rows: Vec<StressRow>,
}

#[derive(Serialize)]
struct StressTable {
    regime: String,
    levels: Vec<StressLevel>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct FailureStage {
    stage: String,
    total: u64,
    counts: Vec<u64>,
    /// The kernel counters that moved over the stage (`—` when none did).
    counters: String,
    examples: String,
}

#[derive(Serialize)]
struct Chart {
    svg: String,
}

/// Percentage of failed requests in a row.
fn fail_pct(row: &CellRow) -> f64 {
    (1.0 - row.success_rate) * 100.0
}

/// Why a service's server columns are empty.
const NOT_SAMPLED_NOTE: &str = "Server RSS and CPU — : not measured. The server is your service, which the runner did not start; give --target-pid PID when it runs on this machine to sample it.";

fn stage_label(row: &CellRow) -> String {
    match row.stage.as_str() {
        "baseline" => format!("{} {} baseline (1 user)", label(&row.stack), row.regime),
        _ => format!(
            "{} {} {} users (rep {})",
            label(&row.stack),
            row.regime,
            row.concurrency,
            row.repetition
        ),
    }
}

fn notes(results: &Results, stress: &[&CellRow], stats: &Stats) -> Vec<String> {
    let m = &results.manifest["experiment"];
    // A run of your own service speaks of it, not of the study this suite reproduces.
    let yours = results::manifest::ServiceRecord::of(&results.manifest).is_some();
    let mut notes = Vec::new();
    let tls = if m["plaintext"].as_bool() == Some(true) {
        "plaintext (no TLS)"
    } else {
        "TLS 1.3 (ECDSA P-256, full handshakes unless noted)"
    };
    if yours {
        notes.push(format!(
            "Your service was measured at its targets (above) by a load generator on this machine ({} cores): the figures include the network path to each target.",
            results.manifest["cores"]
        ));
    } else {
        notes.push(format!(
            "Every stack ran over {tls} against a server on the same machine (loopback, {} cores, pinning: {}): unlike seed 000, REST and gRPC take the same network path with the same TLS, so the differences below are protocol and implementation costs.",
            results.manifest["cores"], results.manifest["pinning"].as_str().unwrap_or("none")
        ));
    }
    // With proxied variants, the path is measured, not only warned about.
    notes.extend(crate::path::notes(stress));
    // Body size per wire encoding, from the stacks' own description of their encoding.
    let recorded = results::manifest::StackInfo::of(&results.manifest);
    let mut by_encoding: Vec<(&str, Vec<String>, Vec<f64>)> = Vec::new();
    for r in stress.iter().filter(|r| r.ok > 0) {
        let Some(stack) = recorded.iter().find(|s| s.name == r.stack) else {
            continue;
        };
        let i = match by_encoding.iter().position(|e| e.0 == stack.encoding) {
            Some(i) => i,
            None => {
                by_encoding.push((&stack.encoding, Vec::new(), Vec::new()));
                by_encoding.len() - 1
            }
        };
        if !by_encoding[i].1.contains(&stack.label) {
            by_encoding[i].1.push(stack.label.clone());
        }
        by_encoding[i].2.push(r.body_bytes_per_ok);
    }
    by_encoding.sort_by_key(|e| if e.0 == "JSON" { 0 } else { 1 });
    if by_encoding.len() >= 2 {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let base = mean(&by_encoding[0].2);
        let parts: Vec<String> = by_encoding
            .iter()
            .map(|(enc, stacks, v)| {
                format!(
                    "{enc} bodies {:.0} B ({}), {:.2}× {}",
                    mean(v),
                    stacks.join(", "),
                    mean(v) / base,
                    by_encoding[0].0
                )
            })
            .collect();
        notes.push(if yours {
            format!("Answer bodies of your service: {}.", parts.join("; "))
        } else {
            format!(
                "Payload profile {}: {} (seed 000 saw gRPC payloads ≈ 2.4× larger than its JSON; its services returned different data).",
                m["payload"].as_str().unwrap_or("?"),
                parts.join("; ")
            )
        });
    }
    let regs = regimes(stress);
    for regime in &regs {
        let top = levels(stress, regime).last().copied().unwrap_or(0);
        let wire: Vec<String> = stack_order(stress)
            .iter()
            .filter_map(|s| {
                let rx = mean_of(stress, s, regime, top, "wire_received_bytes_per_request")?;
                let tx = mean_of(stress, s, regime, top, "wire_sent_bytes_per_request")?;
                Some(format!(
                    "{} {:.0} B sent / {:.0} B received",
                    label(s),
                    tx,
                    rx
                ))
            })
            .collect();
        if !wire.is_empty() {
            notes.push(format!("Wire bytes per request at the socket ({regime}, {top} users; TCP payload incl. TLS and HTTP/2 framing, UDP payload for QUIC, handshakes included in new-conn): {}.", wire.join("; ")));
        }
    }
    if regs.len() == 2 {
        let common: Vec<u64> = levels(stress, "reuse")
            .into_iter()
            .filter(|c| levels(stress, "new-conn").contains(c))
            .collect();
        if let Some(c) = common.last() {
            let parts: Vec<String> = stack_order(stress)
                .iter()
                .filter_map(|s| {
                    let reuse = stats.throughput(s, "reuse", *c)?.0.mean;
                    let fresh = stats.throughput(s, "new-conn", *c)?.0.mean;
                    Some(format!(
                        "{} {:.0} → {:.0} req/s ({:.1}×)",
                        label(s),
                        reuse,
                        fresh,
                        reuse / fresh.max(1e-9)
                    ))
                })
                .collect();
            notes.push(format!(
                "Cost of a connection per request at {c} users (reuse → new-conn, steady-state throughput where there was a steady window): {}.",
                parts.join("; ")
            ));
        }
    }
    let failed: f64 = stress.iter().map(|r| r.failed as f64).sum();
    if failed == 0.0 {
        notes.push(if yours {
            "No request failed in any stress stage.".into()
        } else {
            "No request failed in any stress stage: the collapse the study reports did not occur under these conditions.".into()
        });
    } else {
        let mut by_class: BTreeMap<&str, f64> = BTreeMap::new();
        for class in FailureClass::ALL {
            let n: f64 = stress.iter().map(|r| r.failures(class) as f64).sum();
            if n > 0.0 {
                by_class.insert(class.as_str(), n);
            }
        }
        let parts: Vec<String> = by_class
            .iter()
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect();
        notes.push(format!(
            "{failed:.0} requests failed across the stress stages: {}.",
            parts.join(", ")
        ));
    }
    notes.extend(mechanism_notes(&results.cells));
    notes.extend(pacing_floor_note(results));
    notes
}

/// Open loop: the cells' pacing lag beside the floor the machine itself sets (the stall probe
/// in the manifest), so a reader can tell the generator's lateness from the machine's.
fn pacing_floor_note(results: &Results) -> Option<String> {
    let probe: results::manifest::StallProbe =
        serde_json::from_value(results.manifest["environment"]["stall_probe"].clone()).ok()?;
    let lags: Vec<u64> = results
        .cells
        .iter()
        .filter_map(|r| r.pacing_lag_p99_us)
        .collect();
    let (lo, hi) = (lags.iter().min()?, lags.iter().max()?);
    let range = if lo == hi {
        format!("{lo} µs")
    } else {
        format!("{lo}–{hi} µs")
    };
    Some(format!(
        "Open loop: pacing lag p99 {range} across the cells. Before the run, {}; lag at or under that floor is the machine's, not the load generator's.",
        probe.describe()
    ))
}

/// Why the memory section is left out of a service's report whose server was not sampled.
const MEMORY_LEFT_OUT_NOTE: &str = "Memory per open connection is left out: the server is your service, which the runner did not start and did not sample, so no RSS of it was read (give --target-pid PID when it runs on this machine); the load generator's own memory is not your service's.";

/// The "Memory per open connection" section: the OLS fits of `memory.csv`, computed from the
/// cells so an older run without the file still gets them (empty when no group has 3 levels),
/// or `None` with the reason when it is left out: a service whose server RSS was not read.
fn memory_section(results: &Results) -> Result<String, &'static str> {
    let cells = &results.cells;
    let yours = results::manifest::ServiceRecord::of(&results.manifest).is_some();
    let server_sampled = cells.iter().any(|r| {
        r.stage == "stress"
            && (r.server_rss_hwm_bytes.is_some() || r.server_rss_peak_bytes.is_some())
    });
    if yours && !server_sampled {
        return Err(MEMORY_LEFT_OUT_NOTE);
    }
    let fits = results::memory::fits(cells);
    if fits.is_empty() {
        return Ok(String::new());
    }
    let mut html = String::from("<section id=\"memory\">\n<h2>Memory per open connection</h2>\n");
    html.push_str("<p class=\"table-note\">Least-squares fit of RSS against open connections over all stress cells (reuse: the pool; new-conn: the workers, one connection in flight each); slope in KB per connection with its 95 % interval (t, n − 2 df), intercept in MB; from memory.csv.</p>\n");
    html.push_str("<table>\n<tr><th>Variant</th><th>Stack</th><th>Regime</th><th>Role</th><th>KB per connection [95 % CI]</th><th>Intercept (MB)</th><th>R²</th><th>n (levels)</th><th>RSS column</th></tr>\n");
    let (mut unresolved, mut falling) = (false, false);
    for m in &fits {
        let (_, intercept) = results::memory::describe(&m.fit);
        let slope = results::memory::slope_shown(&m.fit);
        match results::memory::resolved(&m.fit) {
            results::memory::Resolved::Growth => {}
            results::memory::Resolved::Unresolved => unresolved = true,
            results::memory::Resolved::Falling => falling = true,
        }
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{slope}</td><td>{intercept}</td><td>{}</td><td>{} ({})</td><td>{}</td></tr>\n",
            m.variant,
            label(&m.stack),
            m.regime,
            m.role,
            m.fit.r_squared.map_or("—".into(), |r| format!("{r:.3}")),
            m.fit.n,
            m.fit.levels,
            m.rss_column
        ));
    }
    html.push_str("</table>\n");
    if unresolved {
        html.push_str("<p class=\"table-note\">Not resolved: the slope's 95 % interval includes 0, so these cells cannot tell a per-connection cost from noise (RSS varied between cells more than the connection count explains); no per-connection figure is shown. memory.csv keeps the fitted slope and interval.</p>\n");
    }
    if falling {
        html.push_str("<p class=\"table-note\">None: RSS fell as connections rose (the whole 95 % interval is below 0), which no per-connection cost explains; memory.csv keeps the fitted slope and interval.</p>\n");
    }
    html.push_str("</section>\n");
    Ok(html)
}

/// Renders `report.html` into the results directory and returns its path.
/// The "Thresholds" section at the top of the report, from `thresholds.csv` (empty when the
/// run stated none): one row per threshold bound, failures first, with the failing cells.
fn thresholds_section(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join(results::folder::THRESHOLDS_FILE);
    if !path.is_file() {
        return Ok(String::new());
    }
    let rows = rows::read::<ThresholdRow>(&path)?.rows;
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    // (threshold, column, bound) in the file's order, with passing count and failures.
    let mut groups: Vec<([&str; 3], usize, Vec<String>)> = Vec::new();
    for r in &rows {
        let key = [r.threshold.as_str(), r.column.as_str(), r.bound.as_str()];
        let at = match groups.iter().position(|(k, _, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, 0, Vec::new()));
                groups.len() - 1
            }
        };
        if r.pass {
            groups[at].1 += 1;
        } else {
            let value = r
                .value
                .map_or_else(|| "no value".to_string(), results::rows::fmt::number);
            let cell = if r.request.is_empty() {
                r.cell_key.clone()
            } else {
                format!("{} [{}]", r.cell_key, r.request)
            };
            groups[at].2.push(format!("{cell} ({value})"));
        }
    }
    groups.sort_by_key(|(_, _, failed)| failed.is_empty());
    let failed = groups.iter().filter(|(_, _, f)| !f.is_empty()).count();
    let mut html = String::from("<section id=\"thresholds\">\n<h2>Thresholds</h2>\n");
    html.push_str(&format!(
        "<p class=\"table-note\">{}; every selected cell (each repetition) must meet its bound; from thresholds.csv.</p>\n",
        if failed == 0 {
            format!("All {} passed", groups.len())
        } else {
            format!("{failed} of {} failed", groups.len())
        }
    ));
    html.push_str("<table>\n<tr><th>Threshold</th><th>Column</th><th>Bound</th><th>Cells passing</th><th>Result</th><th>Failed cells (value)</th></tr>\n");
    for ([threshold, column, bound], passed, failures) in &groups {
        let result = if failures.is_empty() {
            "<td class=\"pass\" style=\"color:#00965a\">pass</td>"
        } else {
            "<td class=\"fail\" style=\"color:#c00;font-weight:600\">FAIL</td>"
        };
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{passed}/{}</td>{result}<td class=\"examples\">{}</td></tr>\n",
            esc(threshold),
            esc(column),
            esc(bound),
            passed + failures.len(),
            esc(&failures.join(" · "))
        ));
    }
    html.push_str("</table>\n</section>\n");
    Ok(html)
}

pub fn write(dir: &Path) -> anyhow::Result<PathBuf> {
    let results = Results::load(dir)?;
    crate::labels::with(results.stacks(), || write_loaded(dir, &results))
}

fn write_loaded(dir: &Path, results: &Results) -> anyhow::Result<PathBuf> {
    let baseline: Vec<&CellRow> = results
        .cells
        .iter()
        .filter(|r| r.stage == "baseline")
        .collect();
    // A rate sweep's points are drawn as its curve (below), not pooled into one level.
    let swept = results::curve::swept_keys(&results.cells);
    let stress: Vec<&CellRow> = results
        .cells
        .iter()
        .filter(|r| r.stage == "stress" && !swept.contains(&r.cell_key))
        .collect();
    if stress.is_empty() && baseline.is_empty() && swept.is_empty() {
        bail!("{} has no measured cells to report", dir.display());
    }
    let stacks = stack_order(&results.cells.iter().collect::<Vec<_>>());
    let summary_has = |column: &str| results.summary.has(column);
    let stats = Stats {
        stress: &stress,
        summary: &results.summary.rows,
        summary_has: &summary_has,
    };

    let (peaks, peak_notes) = peak_section(&stacks, &stress, &stats);
    let baselines = baseline_section(&stacks, &baseline);
    let stress_tables = stress_section(&stacks, &stress, &stats);
    let (seen, failure_stages) = failure_section(results);
    let charts = chart_section(&stacks, &stress, &stats);

    let service = results::manifest::ServiceRecord::of(&results.manifest);
    let memory = memory_section(results);
    let mut notes = notes(results, &stress, &stats);
    if let Err(why) = memory {
        notes.push(why.to_string());
    }
    let mut env = minijinja::Environment::new();
    // The stylesheet is its own template, shared with compare.html so both pages look alike.
    env.add_template("report.css", include_str!("../templates/report.css"))?;
    env.add_template("report.html", include_str!("../templates/report.html"))?;
    let html = env
        .get_template("report.html")?
        .render(minijinja::context! {
            manifest => &results.manifest,
            peaks => peaks,
            peak_notes => peak_notes,
            baselines => baselines,
            stress_tables => stress_tables,
            failure_classes => seen.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            failure_stages => failure_stages,
            charts => charts,
            notes => notes,
            thresholds => thresholds_section(dir)?,
            service_header => service
                .as_ref()
                .map(|s| crate::service::header(s, &results.cells)),
            insecure => service.as_ref().is_some_and(|s| s.insecure),
            network_path => service
                .as_ref()
                .and_then(|s| crate::service::network_path_warning(s, &results.cells)),
            memory => memory.as_deref().unwrap_or_default(),
            streaming => crate::streaming::section(&results.cells),
            requests => crate::requests::section(dir, &results.cells, &results.manifest)?,
            curve => crate::chart_curve::section(&results.cells),
        })?;
    let path = dir.join("report.html");
    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// A failure share as the tables show it, in percent with two decimals.
fn pct(v: f64) -> String {
    format!("{v:.2}")
}

/// The peak summary: each regime's top level, every stack's figures there, and its notes.
fn peak_section(stacks: &[String], stress: &[&CellRow], stats: &Stats) -> (Vec<Peak>, Vec<String>) {
    // Repetitions and footnotes of the peak summary, for its notes.
    let mut peak_ns = Vec::new();
    let mut peak_no_steady = false;
    let peaks: Vec<Peak> = regimes(stress)
        .iter()
        .map(|regime| {
            let top = levels(stress, regime).last().copied().unwrap_or(0);
            Peak {
                regime: regime.clone(),
                concurrency: top,
                stacks: stacks
                    .iter()
                    .filter_map(|s| {
                        let fig = |column| stats.figure(s, regime, top, column);
                        let p50 = fig(col::LATENCY_P50)?;
                        let (rps, overall_rps, steady) = stats.throughput_shown(s, regime, top)?;
                        peak_ns.push(p50.n);
                        peak_no_steady |= !steady;
                        Some(PeakStack {
                            label: label(s),
                            p50_ms: Shown::new(p50, ms),
                            p99_ms: Shown::new(fig(col::LATENCY_P99)?, ms),
                            rps,
                            overall_rps,
                            fail_pct: Shown::new(fig(col::SUCCESS_RATE)?.failure_pct(), pct),
                        })
                    })
                    .collect(),
            }
        })
        .collect();
    let mut peak_notes = vec![interval_note(&peak_ns), STEADY_NOTE.to_string()];
    if peak_no_steady {
        peak_notes.push(NO_STEADY_NOTE.into());
    }

    (peaks, peak_notes)
}

/// The single-user baselines, one table per regime, the best value of each column marked.
fn baseline_section(stacks: &[String], baseline: &[&CellRow]) -> Vec<BaselineTable> {
    const BASE_COLS: [(&str, bool); 8] = [
        ("latency_min_us", false),
        ("latency_mean_us", false),
        ("latency_p50_us", false),
        ("latency_p95_us", false),
        ("latency_p99_us", false),
        ("latency_max_us", false),
        ("sent", true),
        ("fail_pct", false),
    ];
    regimes(baseline)
        .iter()
        .map(|regime| {
            let rows: Vec<&CellRow> = stacks
                .iter()
                .filter_map(|s| {
                    baseline
                        .iter()
                        .find(|r| &r.stack == s && &r.regime == regime)
                        .copied()
                })
                .collect();
            let value = |r: &CellRow, col: &str| {
                if col == "fail_pct" {
                    fail_pct(r)
                } else {
                    num(r, col)
                }
            };
            let best: Vec<f64> = BASE_COLS
                .iter()
                .map(|(col, higher)| {
                    let vals = rows.iter().map(|r| value(r, col));
                    if *higher {
                        vals.fold(f64::MIN, f64::max)
                    } else {
                        vals.fold(f64::MAX, f64::min)
                    }
                })
                .collect();
            BaselineTable {
                regime: regime.clone(),
                seconds: rows
                    .first()
                    .map(|r| r.duration_s.map(|d| d.to_string()).unwrap_or_default())
                    .unwrap_or_default(),
                rows: rows
                    .iter()
                    .map(|r| BaselineRow {
                        label: label(&r.stack),
                        cells: BASE_COLS
                            .iter()
                            .enumerate()
                            .map(|(i, (col, _))| {
                                let v = value(r, col);
                                Cell {
                                    value: match *col {
                                        "sent" => format!("{v:.0}"),
                                        "fail_pct" => format!("{v:.2}"),
                                        _ => ms(v),
                                    },
                                    best: rows.len() > 1 && v == best[i],
                                }
                            })
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The stress tables, one per regime: every level's figures per stack, with their notes.
fn stress_section(stacks: &[String], stress: &[&CellRow], stats: &Stats) -> Vec<StressTable> {
    regimes(stress)
        .iter()
        .map(|regime| {
            let (mut ns, mut no_steady, mut rss_kernel, mut rss_sampled, mut no_cpu) =
                (Vec::new(), false, false, false, false);
            let mut no_rss = false;
            let levels = levels(stress, regime)
                .into_iter()
                .map(|c| StressLevel {
                    concurrency: c,
                    rows: stacks
                        .iter()
                        .filter_map(|s| {
                            let fig = |column| stats.figure(s, regime, c, column);
                            let p50 = fig(col::LATENCY_P50)?;
                            let (rps, overall_rps, steady) = stats.throughput_shown(s, regime, c)?;
                            // No server RSS at all: a service the runner has no pid of.
                            let rss = stats.rss(s, regime, c);
                            let cpu = fig(col::CPU_PCT);
                            ns.push(p50.n);
                            no_steady |= !steady;
                            match rss {
                                Some((_, kernel)) => {
                                    rss_kernel |= kernel;
                                    rss_sampled |= !kernel;
                                }
                                None => no_rss = true,
                            }
                            no_cpu |= cpu.is_none() && rss.is_some();
                            let mb = |v: f64| format!("{v:.1}");
                            let rss = rss.map_or_else(Shown::missing, |(rss, kernel)| {
                                let rss = Shown::new(rss.scaled(1e-6), mb);
                                if kernel {
                                    rss.title("kernel VmHWM over the measured phase".into())
                                } else {
                                    rss.mark(MARK_SAMPLED_RSS)
                                        .title("largest sampled reading".into())
                                }
                            });
                            Some(StressRow {
                                label: label(s),
                                cells: vec![
                                    Shown::new(p50, ms),
                                    Shown::new(fig(col::LATENCY_P95)?, ms),
                                    Shown::new(fig(col::LATENCY_P99)?, ms),
                                    rps,
                                    overall_rps,
                                    Shown::new(fig(col::SUCCESS_RATE)?.failure_pct(), pct),
                                    rss,
                                    cpu.map_or_else(Shown::missing, |f| {
                                        Shown::new(f, |v| format!("{v:.1}"))
                                    }),
                                ],
                            })
                        })
                        .collect(),
                })
                .collect();
            let mut notes = vec![interval_note(&ns), STEADY_NOTE.to_string()];
            if no_steady {
                notes.push(NO_STEADY_NOTE.into());
            }
            match (rss_kernel, rss_sampled) {
                (false, false) => {}
                (true, false) => notes.push("Server peak RSS: the kernel's high-water mark (VmHWM) over the measured phase.".into()),
                (false, true) => notes.push(format!("{MARK_SAMPLED_RSS} Server peak RSS: the largest sampled reading (the kernel's VmHWM was not available), which can miss a peak between samples.")),
                (true, true) => notes.push(format!("Server peak RSS: the kernel's high-water mark (VmHWM) over the measured phase; {MARK_SAMPLED_RSS} the largest sampled reading where VmHWM was not available.")),
            }
            if no_rss {
                notes.push(NOT_SAMPLED_NOTE.into());
            }
            if no_cpu {
                notes.push("Server CPU — : not measurable (CPU time only in 10 ms ticks and a phase under 1 s).".into());
            }
            StressTable {
                regime: regime.clone(),
                levels,
                notes,
            }
        })
        .collect()
}

/// The failure classes that occurred, and a row per stage that failed requests.
fn failure_section(results: &Results) -> (Vec<FailureClass>, Vec<FailureStage>) {
    // Only the classes that occurred anywhere get a column (all 13 are in cells.csv).
    let seen: Vec<FailureClass> = FailureClass::ALL
        .into_iter()
        .filter(|c| results.cells.iter().any(|r| r.failures(*c) > 0))
        .collect();
    // Only stages that failed requests get a row: a clean run would otherwise show one row of
    // zeros per cell, which hides the answer ("nothing failed") in noise.
    let failure_stages: Vec<FailureStage> = results
        .cells
        .iter()
        .filter(|r| r.failed > 0)
        .map(|r| {
            let examples: Vec<String> = results
                .failures
                .iter()
                .filter(|f| f.cell_key == r.cell_key && f.request.is_empty())
                .map(|f| match f.code.as_str() {
                    "" => format!("{}: {}", f.class, f.example),
                    code => format!("{} [{code}] × {}: {}", f.class, f.count, f.example),
                })
                .collect();
            FailureStage {
                stage: stage_label(r),
                total: r.failed,
                counts: seen.iter().map(|c| r.failures(*c)).collect(),
                counters: moved_summary(r),
                examples: examples.join(" · "),
            }
        })
        .collect();

    (seen, failure_stages)
}

/// The charts: per regime, slow latency, steady throughput and failure rate against users.
fn chart_section(stacks: &[String], stress: &[&CellRow], stats: &Stats) -> Vec<Chart> {
    let mut charts = Vec::new();
    for regime in regimes(stress) {
        for (column, title, unit, scale, axis) in [
            (
                col::LATENCY_P95,
                "\"Slow\" latency (1-in-20, p95)",
                "ms",
                1e-3,
                chart::YAxis::Auto,
            ),
            (
                col::THROUGHPUT_STEADY,
                "Steady-state requests per second",
                "req/s",
                1.0,
                chart::YAxis::Auto,
            ),
            (
                col::SUCCESS_RATE,
                "Failure rate under load",
                "requests failed (%)",
                -100.0,
                chart::YAxis::Percent,
            ),
        ] {
            let series: Vec<Series> = stacks
                .iter()
                .map(|s| Series {
                    label: label(s),
                    style: chart::palette_index(s, stacks),
                    points: levels(stress, &regime)
                        .into_iter()
                        .filter_map(|c| {
                            let v = if column == col::THROUGHPUT_STEADY {
                                stats.throughput(s, &regime, c)?.0.mean
                            } else {
                                stats.figure(s, &regime, c, column)?.mean
                            };
                            let y = if scale < 0.0 {
                                (1.0 - v) * -scale
                            } else {
                                v * scale
                            };
                            Some((c as f64, y))
                        })
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            charts.push(Chart {
                svg: chart::line_chart_on(
                    &format!("{title} — {regime}"),
                    "concurrent users",
                    unit,
                    &series,
                    true,
                    axis,
                ),
            });
        }
    }
    charts
}

// The kernel's counters (`cells.csv`'s `net_*` columns) as the report words them.

/// A counter's value in a row, 0 when empty (the phase did not run, or an older run).
fn counter_value(row: &CellRow, column: &str) -> u64 {
    row.number(column).map_or(0, |v| v as u64)
}

fn host_wide(row: &CellRow) -> bool {
    row.net_counters_scope.as_deref() == Some(results::rows::NetScope::Host.as_str())
}

/// The counters that moved in a row, for the report's failure table: `listen_overflows 12 ·
/// syncookies_sent 40`, marked `(host-wide)` when other processes may have added to them; `—`
/// when none moved or the row has no counters (an older run).
fn moved_summary(row: &CellRow) -> String {
    let moved: Vec<String> = results::rows::net_counter_columns()
        .filter_map(|column| {
            let n = counter_value(row, column);
            (n > 0).then(|| format!("{} {n}", column.trim_start_matches("net_")))
        })
        .collect();
    if moved.is_empty() {
        return "—".into();
    }
    let scope = if host_wide(row) { " (host-wide)" } else { "" };
    format!("{}{scope}", moved.join(" · "))
}

/// One note per mechanism whose counters moved in any row, naming the cells (largest first)
/// and the knob that moves it: the load generator sees these only as timeouts, resets or a
/// long tail, the counters say which queue overflowed.
fn mechanism_notes(rows: &[CellRow]) -> Vec<String> {
    // The cells where `column` moved, largest first, with the total: "N … in a (n), b (m)".
    let moved = |column: &str| -> Option<(u64, String)> {
        let mut cells: Vec<(u64, &CellRow)> = rows
            .iter()
            .map(|r| (counter_value(r, column), r))
            .filter(|(n, _)| *n > 0)
            .collect();
        if cells.is_empty() {
            return None;
        }
        cells.sort_by_key(|c| std::cmp::Reverse(c.0));
        let total = cells.iter().map(|(n, _)| n).sum();
        const SHOWN: usize = 4;
        let mut names: Vec<String> = cells
            .iter()
            .take(SHOWN)
            .map(|(n, r)| {
                let key = &r.cell_key;
                let scope = if host_wide(r) { ", host-wide" } else { "" };
                format!("{key} ({n}{scope})")
            })
            .collect();
        if cells.len() > SHOWN {
            names.push(format!("{} more cells", cells.len() - SHOWN));
        }
        Some((total, names.join(", ")))
    };
    let mut notes = Vec::new();
    if let Some((n, cells)) = moved("net_udp_rcvbuf_errors") {
        notes.push(format!("UDP receive buffer overflowed {n} times in {cells}: the QUIC socket dropped datagrams the kernel could not queue, and quinn recovers them only by loss detection and retransmission (a tail, or request timeouts); see `udp_buffer_bytes` (capped by net.core.rmem_max)."));
    }
    if let Some((n, cells)) = moved("net_udp_sndbuf_errors") {
        notes.push(format!("UDP send buffer was full {n} times in {cells}: datagrams were dropped before leaving the sender; see `udp_buffer_bytes` (capped by net.core.wmem_max)."));
    }
    let rcvbuf: u64 = rows
        .iter()
        .map(|r| counter_value(r, "net_udp_rcvbuf_errors"))
        .sum();
    if let Some((n, cells)) = moved("net_udp_in_errors").filter(|(n, _)| *n > rcvbuf) {
        notes.push(format!("UDP input errors {n} in {cells}, {rcvbuf} of them receive-buffer overflows: the rest are checksum or socket-memory errors (net.ipv4.udp_mem)."));
    }
    if let Some((n, cells)) = moved("net_listen_overflows") {
        let drops: u64 = rows
            .iter()
            .map(|r| counter_value(r, "net_listen_drops"))
            .sum();
        notes.push(format!("Listen queue overflowed {n} times in {cells}, {drops} connection attempts dropped at the listener in all: the server accepted more slowly than handshakes completed, so the kernel dropped SYNs or final ACKs and a connection opened only after a retransmission (a SYN's after 1 s, then 2 s …: a connect-time tail, or connect timeouts); see `backlog` and `somaxconn` (the listen backlog is capped at net.core.somaxconn)."));
    } else if let Some((n, cells)) = moved("net_listen_drops") {
        notes.push(format!("Listeners dropped {n} connection attempts in {cells} without an accept-queue overflow (SYN queue or memory pressure); see `backlog` and `somaxconn`."));
    }
    if let Some((n, cells)) = moved("net_syncookies_sent") {
        notes.push(format!("The SYN queue was full: the kernel answered {n} SYNs with SYN cookies in {cells} (the connection still opens, but the handshake is stateless until the ACK and a lost ACK loses the connection); see `backlog` and `somaxconn` (and net.ipv4.tcp_max_syn_backlog)."));
    }
    if let Some((n, cells)) = moved("net_tcp_out_rsts") {
        let estab: u64 = rows
            .iter()
            .map(|r| counter_value(r, "net_tcp_estab_resets"))
            .sum();
        notes.push(format!("TCP sent {n} resets in {cells}, with {estab} established connections reset in all: a close with unread data, a `linger_zero` close, or a segment for a connection the peer no longer has (after a listen overflow or a timeout); compare with the `reset` failure class."));
    } else if let Some((n, cells)) = moved("net_tcp_estab_resets") {
        notes.push(format!("{n} established TCP connections were reset in {cells}: a peer aborted (`linger_zero`, a crashed server); compare with the `reset` failure class."));
    }
    if let Some((n, cells)) = moved("net_tcp_retrans_segs") {
        let timeouts: u64 = rows
            .iter()
            .map(|r| counter_value(r, "net_tcp_timeouts"))
            .sum();
        notes.push(format!("TCP retransmitted {n} segments in {cells}, with {timeouts} retransmission timeouts in all (each at least 200 ms, the minimum RTO): segments were lost — emulated loss under `netem`, otherwise a queue that overflowed (see the listen and buffer notes) — and each retransmission is latency in the tail."));
    } else if let Some((n, cells)) = moved("net_tcp_timeouts") {
        notes.push(format!("TCP retransmission timers expired {n} times in {cells}: each adds at least 200 ms (the minimum RTO) to a request."));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_counters_name_their_mechanism_and_cells() {
        let rows = vec![
            CellRow {
                cell_key: "h3/reuse/c500/r1".into(),
                net_udp_rcvbuf_errors: Some(6661),
                net_udp_in_errors: Some(6661),
                net_counters_scope: Some("namespace".into()),
                ..CellRow::default()
            },
            CellRow {
                cell_key: "h1/new-conn/c200/r1".into(),
                net_listen_overflows: Some(12),
                net_listen_drops: Some(12),
                net_tcp_retrans_segs: Some(3),
                net_counters_scope: Some("host".into()),
                ..CellRow::default()
            },
            // An older run without the columns says nothing.
            CellRow {
                cell_key: "h2/reuse/c1/r1".into(),
                ..CellRow::default()
            },
        ];
        let notes = mechanism_notes(&rows);
        assert!(
            notes[0].starts_with(
                "UDP receive buffer overflowed 6661 times in h3/reuse/c500/r1 (6661):"
            ),
            "{notes:?}"
        );
        assert!(notes[0].contains("`udp_buffer_bytes`"));
        // In-errors that are all buffer overflows get no note of their own.
        assert!(
            !notes.iter().any(|n| n.starts_with("UDP input errors")),
            "{notes:?}"
        );
        let listen = notes
            .iter()
            .find(|n| n.starts_with("Listen queue overflowed 12 times"))
            .unwrap();
        assert!(
            listen.contains("h1/new-conn/c200/r1 (12, host-wide)")
                && listen.contains("`somaxconn`"),
            "{listen}"
        );
        assert!(notes
            .iter()
            .any(|n| n.starts_with("TCP retransmitted 3 segments")));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            moved_summary(&rows[1]),
            "tcp_retrans_segs 3 · listen_overflows 12 · listen_drops 12 (host-wide)"
        );
        assert_eq!(moved_summary(&rows[2]), "—");
        assert!(mechanism_notes(&rows[2..]).is_empty());
    }
}
