//! Thresholds: pass/fail criteria an experiment file states over the numeric columns of
//! `cells.csv` (`[[thresholds]]`, k6's idea), validated before the run, checked per cell as it
//! finishes, and written to `thresholds.csv`. A threshold with `requests = [...]` states them
//! over the columns of `requests.csv` instead, for each of those names of a request mix.
//! Evaluation is a pure function of a cell's [`CellRow`] (and its [`RequestRow`]s), so the
//! live check and the files read back agree.

use std::path::Path;

use results::rows::fmt::number;
use results::rows::{self, CellRow, RequestRow, Row, ThresholdRow};

use crate::output::row_of;
use executors::cell_result::CellResult;
use experiment::settings::Experiment;

/// The file a run's threshold checks are written to.
pub use results::folder::THRESHOLDS_FILE as FILE_NAME;

/// Friendly names for columns: `(alias, column, factor)`, alias value = column value × factor.
/// The one place an alias is defined; it must name a numeric column (tested).
pub const ALIASES: &[(&str, &str, f64)] = &[
    ("p50_ms", "latency_p50_us", 1e-3),
    ("p90_ms", "latency_p90_us", 1e-3),
    ("p95_ms", "latency_p95_us", 1e-3),
    ("p99_ms", "latency_p99_us", 1e-3),
    ("p999_ms", "latency_p999_us", 1e-3),
    ("max_ms", "latency_max_us", 1e-3),
    ("mean_ms", "latency_mean_us", 1e-3),
    ("steady_rps", "throughput_steady_rps", 1.0),
    ("server_rss_peak_mb", "server_rss_peak_bytes", 1e-6),
    ("client_rss_peak_mb", "client_rss_peak_bytes", 1e-6),
];

pub use experiment::settings::Threshold;

/// A threshold that failed validation: which one (1-based), the key at fault, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub index: usize,
    pub label: String,
    pub key: String,
    pub message: String,
}

impl Invalid {
    /// One line naming the file and line when known (`file:line: thresholds[n] (label): key: …`).
    pub fn describe(&self, file: Option<&Path>, experiment: &str) -> String {
        let what = format!(
            "thresholds[{}] ({}): {}: {}",
            self.index, self.label, self.key, self.message
        );
        let Some(path) = file else {
            return format!("experiment '{experiment}': {what}");
        };
        let line = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| key_line(&text, self.index, &self.key));
        match line {
            Some(n) => format!("{}:{n}: {what}", path.display()),
            None => format!("{}: {what}", path.display()),
        }
    }
}

/// The 1-based line of `text` that sets `key` in its `index`-th `[[thresholds]]` table, else
/// that table's header line; `None` when the file has no such table (e.g. inline arrays).
pub fn key_line(text: &str, index: usize, key: &str) -> Option<usize> {
    let mut seen = 0;
    let mut header = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !trimmed.contains('=') {
            if header.is_some() {
                break;
            }
            let header_text = trimmed.split('#').next().unwrap_or("");
            let name: String = header_text
                .chars()
                .filter(|c| !"[] ".contains(*c))
                .collect();
            if trimmed.starts_with("[[") && name == "thresholds" {
                seen += 1;
                if seen == index {
                    header = Some(i + 1);
                }
            }
            continue;
        }
        if header.is_some() {
            if let Some((k, _)) = trimmed.split_once('=') {
                if k.trim().trim_matches(['"', '\'']) == key {
                    return Some(i + 1);
                }
            }
        }
    }
    header
}

/// Which side of a bound a check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Min,
    Max,
}

/// One comparison: the key as written, the real column it reads and its unit factor.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub key: String,
    pub column: String,
    pub factor: f64,
    pub side: Side,
    pub limit: f64,
}

impl Check {
    /// `>= 26000` or `<= 25`, in the key's units.
    pub fn bound(&self) -> String {
        match self.side {
            Side::Min => format!(">= {}", number(self.limit)),
            Side::Max => format!("<= {}", number(self.limit)),
        }
    }

    fn passes(&self, value: f64) -> bool {
        match self.side {
            Side::Min => value >= self.limit,
            Side::Max => value <= self.limit,
        }
    }
}

/// A validated threshold: its label, selectors (as text, compared with the row's) and
/// checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub label: String,
    selectors: Vec<(&'static str, Vec<String>)>,
    /// The mix entries whose own figures the checks read; `None`: the cell's.
    pub requests: Option<Vec<String>>,
    pub checks: Vec<Check>,
}

impl Parsed {
    /// Whether the cell of this row is one the threshold speaks about.
    pub fn selects(&self, row: &CellRow) -> bool {
        self.selectors
            .iter()
            .all(|(column, wanted)| row.text(column).is_some_and(|v| wanted.contains(&v)))
    }

    /// `grpc · reuse · c500` (the selectors that narrow it), for display.
    pub fn scope(&self) -> String {
        let parts: Vec<String> = self
            .selectors
            .iter()
            .filter(|(column, values)| !(*column == "stage" && values == &["stress"]))
            .map(|(column, values)| match *column {
                "concurrency" => values
                    .iter()
                    .map(|v| format!("c{v}"))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => values.join(","),
            })
            .collect();
        if parts.is_empty() {
            "every stress cell".into()
        } else {
            parts.join(" · ")
        }
    }
}

/// One threshold check of one cell: a row of `thresholds.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub threshold: String,
    pub cell_key: String,
    /// The mix entry checked; empty: the cell.
    pub request: String,
    /// The key as written (an alias or a column); `value` and `bound` are in its units.
    pub column: String,
    /// `None` when the cell has no value for it (empty column, or the cell could not run).
    pub value: Option<f64>,
    pub bound: String,
    pub pass: bool,
}

/// Every column of `cells.csv`, with whether it is numeric: the columns of [`CellRow`], so
/// a threshold names a real column or is refused.
pub fn columns() -> Vec<(String, bool)> {
    columns_of::<CellRow>()
}

/// The columns of a row type, with whether each is numeric.
fn columns_of<T: Row>() -> Vec<(String, bool)> {
    T::COLUMNS
        .iter()
        .map(|c| (c.to_string(), T::numeric(c) == Some(true)))
        .collect()
}

/// The real column and unit factor a threshold key reads from `file`'s `columns`, or why it
/// cannot be used.
fn resolve(key: &str, columns: &[(String, bool)], file: &str) -> Result<(String, f64), String> {
    let alias = ALIASES.iter().find(|(alias, _, _)| *alias == key);
    let (column, factor) = alias.map_or((key, 1.0), |(_, column, factor)| (*column, *factor));
    match columns.iter().find(|(c, _)| c == column) {
        Some((_, true)) => Ok((column.to_string(), factor)),
        Some((_, false)) => Err(format!("column '{column}' of {file} is not numeric")),
        None if alias.is_some() => Err(format!(
            "'{key}' stands for {column}, which {file} does not have"
        )),
        None => {
            // Aliases first: they are the short names a newcomer was reaching for.
            let near: Vec<&str> = ALIASES
                .iter()
                .filter(|(a, _, _)| a.contains(key) || key.contains(a))
                .filter(|(_, column, _)| columns.iter().any(|(c, _)| c == column))
                .map(|(a, _, _)| *a)
                .chain(
                    columns
                        .iter()
                        .filter(|(c, numeric)| {
                            *numeric && (c.contains(key) || key.contains(c.as_str()))
                        })
                        .map(|(c, _)| c.as_str()),
                )
                .take(4)
                .collect();
            let hint = if near.is_empty() {
                "see docs/results-schema.md".to_string()
            } else {
                format!("did you mean {}?", near.join(", "))
            };
            Err(format!(
                "unknown column '{key}': not a column of {file} nor an alias ({hint})"
            ))
        }
    }
}

/// The bounds of one key: `{ min = …, max = … }`, numbers, min ≤ max.
fn parse_bound(key: &str, value: &toml::Value) -> Result<(Option<f64>, Option<f64>), String> {
    let expected = format!("expected a bound like {key} = {{ max = 25 }} or {{ min = 0.999 }}");
    let table = value.as_table().ok_or_else(|| expected.clone())?;
    let (mut min, mut max) = (None, None);
    for (side, v) in table {
        let n = match v {
            toml::Value::Integer(i) => *i as f64,
            toml::Value::Float(f) if f.is_finite() => *f,
            _ => return Err(format!("{side} must be a finite number")),
        };
        match side.as_str() {
            "min" => min = Some(n),
            "max" => max = Some(n),
            other => return Err(format!("unknown bound '{other}' ({expected})")),
        }
    }
    match (min, max) {
        (None, None) => Err(expected),
        (Some(lo), Some(hi)) if lo > hi => Err(format!("min {lo} is greater than max {hi}")),
        bounds => Ok(bounds),
    }
}

/// Validates the thresholds' names, bounds and columns (not the selectors against a plan).
pub fn parse(thresholds: &[Threshold]) -> Result<Vec<Parsed>, Invalid> {
    thresholds
        .iter()
        .enumerate()
        .map(|(i, t)| parse_one(i + 1, t))
        .collect()
}

fn parse_one(index: usize, t: &Threshold) -> Result<Parsed, Invalid> {
    let label = t.name.clone().unwrap_or_else(|| format!("T{index}"));
    let fail = |key: &str, message: String| Invalid {
        index,
        label: label.clone(),
        key: key.to_string(),
        message,
    };
    if t.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(fail("name", "must not be empty".into()));
    }
    let stage = t.stage.clone().unwrap_or_else(|| "stress".into());
    if stage != "stress" && stage != "baseline" {
        return Err(fail(
            "stage",
            format!("unknown stage '{stage}', expected stress or baseline"),
        ));
    }
    let mut selectors = vec![("stage", vec![stage])];
    let lists: [(&'static str, &'static str, Option<Vec<String>>); 4] = [
        ("stacks", "stack", t.stacks.clone()),
        (
            "regimes",
            "regime",
            t.regimes
                .as_ref()
                .map(|r| r.iter().map(|r| r.as_str().to_string()).collect()),
        ),
        (
            "concurrency",
            "concurrency",
            t.concurrency
                .as_ref()
                .map(|c| c.iter().map(|c| c.to_string()).collect()),
        ),
        ("variants", "variant", t.variants.clone()),
    ];
    for (key, column, values) in lists {
        if let Some(values) = values {
            if values.is_empty() {
                return Err(fail(
                    key,
                    "is empty: leave it out to select every cell".into(),
                ));
            }
            selectors.push((column, values));
        }
    }
    if let Some(requests) = &t.requests {
        if requests.is_empty() {
            return Err(fail(
                "requests",
                "is empty: leave it out to check the cells' figures".into(),
            ));
        }
        let twice = requests
            .iter()
            .enumerate()
            .find(|(i, n)| requests[..*i].contains(n));
        if let Some((_, name)) = twice {
            return Err(fail("requests", format!("'{name}' is named twice")));
        }
    }
    // A per-name threshold reads requests.csv, whose columns are a subset of cells.csv's.
    let (columns, file) = match &t.requests {
        Some(_) => (columns_of::<RequestRow>(), results::folder::REQUESTS_FILE),
        None => (columns(), "cells.csv"),
    };
    let mut checks = Vec::new();
    for (key, value) in &t.bounds {
        let (column, factor) = resolve(key, &columns, file).map_err(|m| fail(key, m))?;
        let (min, max) = parse_bound(key, value).map_err(|m| fail(key, m))?;
        for (side, limit) in [(Side::Min, min), (Side::Max, max)] {
            if let Some(limit) = limit {
                checks.push(Check {
                    key: key.clone(),
                    column: column.clone(),
                    factor,
                    side,
                    limit,
                });
            }
        }
    }
    if checks.is_empty() {
        return Err(fail(
            "thresholds",
            "states no bound (e.g. p95_ms = { max = 25 })".into(),
        ));
    }
    Ok(Parsed {
        label,
        selectors,
        requests: t.requests.clone(),
        checks,
    })
}

/// [`parse`], then every selector checked against the planned cells: a stack, regime,
/// concurrency, variant or stage the plan does not have, or a combination selecting no
/// cell, is refused (it would pass vacuously).
pub fn validate(exp: &Experiment) -> Result<Vec<Parsed>, Invalid> {
    let parsed = parse(&exp.thresholds)?;
    if parsed.is_empty() {
        return Ok(parsed);
    }
    let records: Vec<CellRow> = experiment::plan::plan(exp)
        .iter()
        .map(crate::output::row_of::planned)
        .collect();
    for (i, p) in parsed.iter().enumerate() {
        for (column, wanted) in &p.selectors {
            let planned: Vec<String> = {
                let mut v: Vec<String> = records.iter().filter_map(|r| r.text(column)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            if let Some(missing) = wanted.iter().find(|w| !planned.contains(w)) {
                let key = match *column {
                    "stack" => "stacks",
                    "regime" => "regimes",
                    "variant" => "variants",
                    other => other,
                };
                return Err(Invalid {
                    index: i + 1,
                    label: p.label.clone(),
                    key: key.into(),
                    message: format!(
                        "'{missing}' is not in the plan (it has {})",
                        planned.join(", ")
                    ),
                });
            }
        }
        if let Some(requests) = &p.requests {
            let names = exp.targets.request_names();
            if let Some(missing) = requests.iter().find(|n| !names.contains(n)) {
                return Err(Invalid {
                    index: i + 1,
                    label: p.label.clone(),
                    key: "requests".into(),
                    message: if names.is_empty() {
                        format!("'{missing}': the experiment has no request mix ([[targets.rest.requests]] or [[targets.grpc.calls]])")
                    } else {
                        format!(
                            "'{missing}' is not a request of the mix (it has {})",
                            names.join(", ")
                        )
                    },
                });
            }
            // A REST entry's threshold that also selected the gRPC stacks' cells (or the
            // reverse) would fail there for want of the name: refuse it before the run.
            for r in records.iter().filter(|r| p.selects(r)) {
                let Some(api) = stacks::find(&r.stack).map(|s| s.api()) else {
                    continue;
                };
                let of_api = exp.targets.request_names_of(api);
                if let Some(name) = requests.iter().find(|n| !of_api.contains(n)) {
                    return Err(Invalid {
                        index: i + 1,
                        label: p.label.clone(),
                        key: "requests".into(),
                        message: format!(
                            "'{name}' is not a request of the mix the {} stack sends: select the stacks that send it (stacks = [...])",
                            r.stack
                        ),
                    });
                }
            }
        }
        if !records.iter().any(|r| p.selects(r)) {
            return Err(Invalid {
                index: i + 1,
                label: p.label.clone(),
                key: "thresholds".into(),
                message: format!("selects no cell of the plan ({})", p.scope()),
            });
        }
    }
    Ok(parsed)
}

/// Every check of every threshold that selects this cell. A cell that could not run
/// (`error` set) has no figures, so each check of it fails with no value.
///
/// A per-name threshold checks each of its names in `requests` (the cell's `requests.csv`
/// rows); a name the cell has no row for (it sent none of them, or the cell could not run)
/// fails with no value.
pub fn evaluate(parsed: &[Parsed], row: &CellRow, requests: &[RequestRow]) -> Vec<Outcome> {
    let cell_key = row.cell_key.clone();
    let ran = row.ran();
    let mut out = Vec::new();
    for p in parsed.iter().filter(|p| p.selects(row)) {
        // (entry name, its row in this cell); one unnamed subject: the cell itself.
        let subjects: Vec<(String, Option<&RequestRow>)> = match &p.requests {
            None => vec![(String::new(), None)],
            Some(names) => names
                .iter()
                .map(|name| {
                    let mine = requests
                        .iter()
                        .rfind(|r| r.cell_key == cell_key && &r.request == name);
                    (name.clone(), mine)
                })
                .collect(),
        };
        for (request, named_row) in subjects {
            for check in &p.checks {
                let value = if request.is_empty() {
                    row.number(&check.column)
                } else {
                    named_row.and_then(|r| r.number(&check.column))
                };
                let value = value.filter(|_| ran).map(|v| v * check.factor);
                out.push(Outcome {
                    threshold: p.label.clone(),
                    cell_key: cell_key.clone(),
                    request: request.clone(),
                    column: check.key.clone(),
                    value,
                    bound: check.bound(),
                    pass: value.is_some_and(|v| check.passes(v)),
                });
            }
        }
    }
    out
}

/// The ✓/✗ suffix of a finished cell's progress line (empty when no threshold selects it):
/// ` · thresholds ✓ T1 ✗ C1 (p95_ms 31.2, bound <= 25)`.
pub fn cell_marks(thresholds: &[Threshold], result: &CellResult) -> String {
    let Ok(parsed) = parse(thresholds) else {
        return String::new();
    };
    let outcomes = evaluate(
        &parsed,
        &row_of::finished(result),
        &row_of::requests(result),
    );
    if outcomes.is_empty() {
        return String::new();
    }
    let mut marks = Vec::new();
    for p in &parsed {
        let mine: Vec<&Outcome> = outcomes.iter().filter(|o| o.threshold == p.label).collect();
        if mine.is_empty() {
            continue;
        }
        let failed: Vec<String> = mine
            .iter()
            .filter(|o| !o.pass)
            .map(|o| {
                format!(
                    "{}{} {}, bound {}",
                    named(&o.request),
                    o.column,
                    show(o.value),
                    o.bound
                )
            })
            .collect();
        marks.push(if failed.is_empty() {
            format!("✓ {}", p.label)
        } else {
            format!("✗ {} ({})", p.label, failed.join(", "))
        });
    }
    format!(" · thresholds {}", marks.join(" "))
}

fn show(value: Option<f64>) -> String {
    value.map_or_else(|| "no value".into(), number)
}

/// `"create: "` before a per-name check's figures, nothing before a cell's.
fn named(request: &str) -> String {
    if request.is_empty() {
        String::new()
    } else {
        format!("{request}: ")
    }
}

/// Evaluates the thresholds over every row of the run's `cells.csv` (resumed rows included)
/// and writes `thresholds.csv`; nothing is written when the run has no thresholds.
pub fn write(dir: &Path, thresholds: &[Threshold]) -> anyhow::Result<Vec<Outcome>> {
    if thresholds.is_empty() {
        return Ok(Vec::new());
    }
    let parsed = parse(thresholds).map_err(|e| anyhow::anyhow!(e.describe(None, "run")))?;
    let cells = dir.join("cells.csv");
    let requests = rows::read_if_present::<RequestRow>(&dir.join(results::folder::REQUESTS_FILE))?;
    let mut outcomes = Vec::new();
    if cells.is_file() {
        for row in &rows::read::<CellRow>(&cells)?.rows {
            outcomes.extend(evaluate(&parsed, row, &requests.rows));
        }
    }
    let written: Vec<ThresholdRow> = outcomes
        .iter()
        .map(|o| ThresholdRow {
            threshold: o.threshold.clone(),
            cell_key: o.cell_key.clone(),
            request: o.request.clone(),
            column: o.column.clone(),
            value: o.value,
            bound: o.bound.clone(),
            pass: o.pass,
        })
        .collect();
    rows::write(&dir.join(FILE_NAME), &written)?;
    Ok(outcomes)
}

/// The terminal summary's block: one line per threshold bound with its passing cells and, if
/// any failed, the worst one. Empty without thresholds.
pub fn summary_block(outcomes: &[Outcome]) -> String {
    if outcomes.is_empty() {
        return String::new();
    }
    // (threshold, column, bound) in first-seen order.
    let mut groups: Vec<(&str, &str, &str)> = Vec::new();
    for o in outcomes {
        let g = (o.threshold.as_str(), o.column.as_str(), o.bound.as_str());
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let failed_groups = groups
        .iter()
        .filter(|g| {
            outcomes.iter().any(|o| {
                (o.threshold.as_str(), o.column.as_str(), o.bound.as_str()) == **g && !o.pass
            })
        })
        .count();
    let mut lines = vec![if failed_groups == 0 {
        format!("thresholds: all {} passed", groups.len())
    } else {
        format!("thresholds: {failed_groups} of {} failed", groups.len())
    }];
    for (threshold, column, bound) in groups {
        let mine: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.threshold == threshold && o.column == column && o.bound == bound)
            .collect();
        let passed = mine.iter().filter(|o| o.pass).count();
        let failing: Vec<String> = mine
            .iter()
            .filter(|o| !o.pass)
            .take(3)
            .map(|o| format!("{}{} in {}", named(&o.request), show(o.value), o.cell_key))
            .collect();
        let mark = if failing.is_empty() { "✓" } else { "✗" };
        let per_name = mine.iter().any(|o| !o.request.is_empty());
        let mut line = format!(
            "  {mark} {threshold}: {column} {bound}: {passed}/{} {}",
            mine.len(),
            if per_name {
                "requests × cells"
            } else {
                "cells"
            }
        );
        if !failing.is_empty() {
            line.push_str(&format!(" (failed: {})", failing.join(", ")));
        }
        lines.push(line);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiment::settings::Regime;
    use serde::Deserialize;

    fn threshold(toml_text: &str) -> Threshold {
        #[derive(Deserialize)]
        struct File {
            thresholds: Vec<Threshold>,
        }
        let file: File = toml::from_str(toml_text).expect("valid TOML");
        file.thresholds.into_iter().next().expect("one threshold")
    }

    #[test]
    fn columns_come_from_the_cell_row_and_know_which_are_numeric() {
        let columns = columns();
        let numeric = |c: &str| columns.iter().find(|(n, _)| n == c).map(|(_, n)| *n);
        for c in [
            "latency_p95_us",
            "throughput_steady_rps",
            "success_rate",
            "rate_rps",
            "pacing_lag_p99_us",
            "server_rss_hwm_bytes",
            "requests",
            "duration_s",
            "steal_pct",
            "emulator_cpu_s",
        ] {
            assert_eq!(numeric(c), Some(true), "{c}");
        }
        for c in [
            "cell_key",
            "stack",
            "netem",
            "port_range",
            "cut_short",
            "error",
        ] {
            assert_eq!(numeric(c), Some(false), "{c}");
        }
        assert_eq!(numeric("p95_ms"), None);
        assert_eq!(columns.len(), CellRow::COLUMNS.len());
        for (alias, column, _) in ALIASES {
            assert_eq!(numeric(column), Some(true), "alias {alias} → {column}");
        }
    }

    #[test]
    fn parse_refuses_unknown_and_text_columns_and_inverted_bounds() {
        let err = parse(&[threshold("[[thresholds]]\np95 = { max = 25 }\n")]).unwrap_err();
        assert_eq!((err.index, err.key.as_str()), (1, "p95"));
        assert!(err.message.contains("unknown column 'p95'"), "{err:?}");
        assert!(
            err.message.contains("p95_ms"),
            "suggests the alias: {err:?}"
        );
        let err = parse(&[threshold("[[thresholds]]\nstack = { max = 1 }\n")]).unwrap_err();
        assert!(err.message.contains("not numeric"), "{err:?}");
        let err = parse(&[threshold(
            "[[thresholds]]\nsuccess_rate = { min = 1, max = 0.5 }\n",
        )])
        .unwrap_err();
        assert!(err.message.contains("greater than max"), "{err:?}");
        let err = parse(&[threshold("[[thresholds]]\nsuccess_rate = 0.5\n")]).unwrap_err();
        assert!(err.message.contains("expected a bound"), "{err:?}");
        let err = parse(&[threshold("[[thresholds]]\nstacks = [\"h1\"]\n")]).unwrap_err();
        assert_eq!(err.key, "thresholds");
    }

    #[test]
    fn evaluation_applies_alias_factor_selectors_and_fails_missing_values() {
        let parsed = parse(&[threshold(
            "[[thresholds]]\nname = \"C1\"\nstacks = [\"grpc\"]\nconcurrency = [500]\np95_ms = { max = 25 }\nthroughput_steady_rps = { min = 26000 }\n",
        )])
        .unwrap();
        let cell = |stack: &str, c: u32, p95_us: u64, steady: Option<f64>| CellRow {
            cell_key: "k".into(),
            variant: "default".into(),
            stage: "stress".into(),
            stack: stack.into(),
            regime: "reuse".into(),
            concurrency: c,
            latency_p95_us: p95_us,
            throughput_steady_rps: steady,
            ..CellRow::default()
        };
        assert!(evaluate(&parsed, &cell("h1", 500, 1, Some(1.0)), &[]).is_empty());
        assert!(evaluate(&parsed, &cell("grpc", 10, 1, Some(1.0)), &[]).is_empty());
        let ok = evaluate(&parsed, &cell("grpc", 500, 25000, Some(26000.5)), &[]);
        assert_eq!(ok.len(), 2);
        assert!(ok.iter().all(|o| o.pass), "{ok:?}");
        assert_eq!(ok[0].value, Some(25.0));
        assert_eq!(ok[0].bound, "<= 25");
        let bad = evaluate(&parsed, &cell("grpc", 500, 25001, None), &[]);
        assert!(bad.iter().all(|o| !o.pass), "{bad:?}");
        assert_eq!(bad[1].value, None, "an empty column is no value");
        let failed = CellRow {
            error: Some("server did not start".into()),
            ..cell("grpc", 500, 0, Some(0.0))
        };
        assert!(evaluate(&parsed, &failed, &[])
            .iter()
            .all(|o| !o.pass && o.value.is_none()));
    }

    #[test]
    fn validation_checks_selectors_against_the_plan() {
        let exp = Experiment {
            stacks: vec!["h1".into()],
            regimes: vec![Regime::Reuse],
            concurrency: vec![2],
            thresholds: vec![threshold(
                "[[thresholds]]\nconcurrency = [500]\nsuccess_rate = { min = 0.9 }\n",
            )],
            ..Experiment::default()
        };
        let err = validate(&exp).unwrap_err();
        assert_eq!(err.key, "concurrency");
        assert!(err.message.contains("'500' is not in the plan"), "{err:?}");
        let exp = Experiment {
            baseline_seconds: 0,
            thresholds: vec![threshold(
                "[[thresholds]]\nstage = \"baseline\"\nsuccess_rate = { min = 0.9 }\n",
            )],
            ..exp
        };
        assert_eq!(validate(&exp).unwrap_err().key, "stage");
    }

    #[test]
    fn key_line_finds_the_key_in_the_nth_table_or_its_header() {
        let text = "name = \"x\"\n[[thresholds]] # first\np95_ms = { max = 1 }\n\n[[thresholds]]\nstacks = [\"h1\"]\np95_ms = { max = 2 }\n[[variants]]\nname = \"a\"\n";
        assert_eq!(key_line(text, 1, "p95_ms"), Some(3));
        assert_eq!(key_line(text, 2, "p95_ms"), Some(7));
        assert_eq!(key_line(text, 2, "thresholds"), Some(5));
        assert_eq!(key_line(text, 3, "p95_ms"), None);
    }

    #[test]
    fn summary_names_failed_cells() {
        let o = |cell: &str, pass: bool| Outcome {
            threshold: "T1".into(),
            cell_key: cell.into(),
            request: String::new(),
            column: "p95_ms".into(),
            value: Some(3.5),
            bound: "<= 1".into(),
            pass,
        };
        let block = summary_block(&[o("a", true), o("b", false)]);
        assert!(block.starts_with("thresholds: 1 of 1 failed"), "{block}");
        assert!(
            block.contains("✗ T1: p95_ms <= 1: 1/2 cells (failed: 3.5 in b)"),
            "{block}"
        );
        assert!(summary_block(&[o("a", true)]).contains("✓ T1"));
    }

    #[test]
    fn a_per_name_threshold_checks_each_name_and_fails_a_name_not_sent() {
        let parsed = parse(&[threshold(
            "[[thresholds]]\nname = \"writes\"\nrequests = [\"create\", \"delete\"]\np95_ms = { max = 5 }\nsuccess_rate = { min = 0.99 }\n",
        )])
        .unwrap();
        assert_eq!(parsed[0].checks[0].column, "latency_p95_us");
        let cell = CellRow {
            cell_key: "k".into(),
            variant: "default".into(),
            stage: "stress".into(),
            stack: "h1".into(),
            regime: "reuse".into(),
            concurrency: 2,
            // The cell's own figures would pass; the name's decide.
            latency_p95_us: 1,
            success_rate: 1.0,
            ..CellRow::default()
        };
        let row = |key: &str, name: &str, p95_us: u64, rate: f64| RequestRow {
            cell_key: key.into(),
            request: name.into(),
            latency_p95_us: Some(p95_us),
            success_rate: rate,
            ..RequestRow::default()
        };
        let requests = [
            row("k", "get", 100_000, 0.0),
            row("k", "create", 6_000, 1.0),
            row("other", "delete", 1_000, 1.0),
        ];
        let out = evaluate(&parsed, &cell, &requests);
        let got: Vec<(&str, &str, Option<f64>, bool)> = out
            .iter()
            .map(|o| (o.request.as_str(), o.column.as_str(), o.value, o.pass))
            .collect();
        assert_eq!(
            got,
            [
                ("create", "p95_ms", Some(6.0), false),
                ("create", "success_rate", Some(1.0), true),
                // This cell sent no `delete` (the other cell's row is not this cell's).
                ("delete", "p95_ms", None, false),
                ("delete", "success_rate", None, false),
            ]
        );
        let block = summary_block(&out);
        assert!(
            block.contains("✗ writes: p95_ms <= 5: 0/2 requests × cells (failed: create: 6 in k, delete: no value in k)"),
            "{block}"
        );
    }

    #[test]
    fn a_per_name_threshold_reads_only_requests_csv_columns_and_known_names() {
        let err = parse(&[threshold(
            "[[thresholds]]\nrequests = [\"get\"]\nsteady_rps = { min = 1 }\n",
        )])
        .unwrap_err();
        assert_eq!(err.key, "steady_rps");
        assert!(
            err.message.contains(
                "'steady_rps' stands for throughput_steady_rps, which requests.csv does not have"
            ),
            "{err:?}"
        );
        let err = parse(&[threshold(
            "[[thresholds]]\nrequests = [\"get\", \"get\"]\np95_ms = { max = 1 }\n",
        )])
        .unwrap_err();
        assert!(err.message.contains("'get' is named twice"), "{err:?}");
        let err = parse(&[threshold(
            "[[thresholds]]\nrequests = []\np95_ms = { max = 1 }\n",
        )])
        .unwrap_err();
        assert_eq!(err.key, "requests");

        let mut exp = Experiment {
            stacks: vec!["h1".into()],
            regimes: vec![Regime::Reuse],
            concurrency: vec![2],
            thresholds: vec![threshold(
                "[[thresholds]]\nrequests = [\"gte\"]\np95_ms = { max = 1 }\n",
            )],
            ..Experiment::default()
        };
        let err = validate(&exp).unwrap_err();
        assert_eq!(err.key, "requests");
        assert!(err.message.contains("no request mix"), "{err:?}");
        exp.targets = toml::from_str(
            "[rest]\nurl = \"https://127.0.0.1:1/\"\n[[rest.requests]]\nname = \"get\"\npath = \"/\"\n[[rest.requests]]\nname = \"create\"\nmethod = \"POST\"\npath = \"/\"\n",
        )
        .expect("a REST target with a mix");
        let err = validate(&exp).unwrap_err();
        assert!(
            err.message
                .contains("'gte' is not a request of the mix (it has get, create)"),
            "{err:?}"
        );
        exp.thresholds = vec![threshold(
            "[[thresholds]]\nrequests = [\"create\"]\np95_ms = { max = 1 }\n",
        )];
        assert!(validate(&exp).is_ok());
        // With a gRPC stack in the plan, the REST entry's threshold must leave its cells out.
        exp.stacks = vec!["h1".into(), "grpc".into()];
        let err = validate(&exp).unwrap_err();
        assert!(
            err.message
                .contains("'create' is not a request of the mix the grpc stack sends"),
            "{err:?}"
        );
        exp.thresholds = vec![threshold(
            "[[thresholds]]\nstacks = [\"h1\"]\nrequests = [\"create\"]\np95_ms = { max = 1 }\n",
        )];
        assert!(validate(&exp).is_ok());
    }
}
