//! What a run prints on the terminal: each cell's progress bar and, without a terminal, its
//! line; after the run, the stress table, the failures per cell and the closing warning.
//! Files on disk are [`crate::output`]'s.

use bench_core::FailureClass;
use indicatif::{ProgressBar, ProgressStyle};

use executors::cell_result::CellResult;
use experiment::plan::Cell;
use experiment::settings::Experiment;
use load::measurements::LatencySummary;

/// The progress bar of cell number `index` (from 0) of `total`: seconds for a time-bound cell
/// (baseline, soak), requests for a budgeted one.
pub fn cell_bar(cell: &Cell, index: usize, total: usize) -> ProgressBar {
    let (len, template) = match cell.duration_s() {
        Some(s) => (s, "{prefix:<28} [{bar:30}] {pos}/{len} s {msg}"),
        None => (cell.requests(), "{prefix:<28} [{bar:30}] {pos}/{len} {msg}"),
    };
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("[{}/{}] {}", index + 1, total, cell.key()));
    bar
}

/// The knobs of `e` that differ from the defaults (the study's conditions), as `key value`
/// in definition order, so that a table from an emulated or constrained run cannot pass for a
/// default one. Every knob counts except those that shape the plan itself (the table shows
/// those), so a new knob is listed without being named here.
pub fn conditions(e: &Experiment) -> Vec<String> {
    /// Knobs the table's rows and columns already show, or that do not change a cell.
    const PLAN_SHAPE: [&str; 17] = [
        "name",
        "stacks",
        "regimes",
        "concurrency",
        "repetitions",
        "cell_order",
        "cell_order_seed",
        "requests_reuse",
        "requests_new_conn",
        "warmup_fraction",
        "baseline_seconds",
        "max_cell_seconds",
        "cell_pause_ms",
        "out",
        "variants",
        "thresholds",
        "targets",
    ];
    let value = serde_json::to_value(e).expect("settings serialize");
    let default = serde_json::to_value(Experiment::default()).expect("settings serialize");
    experiment::settings::KEYS
        .iter()
        .filter(|key| !PLAN_SHAPE.contains(key) && value.get(**key) != default.get(**key))
        .map(|key| {
            let text = value
                .get(*key)
                .and_then(experiment::settings::value_text)
                .unwrap_or_else(|| "none".into());
            format!("{key} {text}")
        })
        .collect()
}

/// One line for a finished cell, for logs without a terminal (where no bar is drawn).
pub fn cell_line(r: &CellResult) -> String {
    let p95_ms = LatencySummary::of(&r.measured.latency).p95 as f64 / 1000.0;
    let mut line = format!(
        "{}: {:.0} req/s, p95 {p95_ms:.3} ms, {} failed",
        r.cell.key(),
        r.throughput_rps(),
        r.measured.failed()
    );
    // A bulk cell moves a few objects a second: its rate is its goodput.
    if let Some(bytes_per_s) = r.goodput_bytes_per_s() {
        line.push_str(&format!(", goodput {:.1} Mbit/s", bytes_per_s * 8e-6));
    }
    if let Some(e) = &r.error {
        line.push_str(&format!(", could not run: {}", one_line(e, 200)));
    }
    line
}

/// `text` on one line, cut to `max_chars`, for examples quoted in the terminal.
fn one_line(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// Per cell that failed requests (or could not run): its failure share and its three most
/// frequent classes with one example each, so the cause is on screen, not only in
/// `failures.csv`. Empty when nothing failed.
pub fn failure_report(results: &[CellResult]) -> String {
    let mut out = String::new();
    for r in results {
        let m = &r.measured;
        if let Some(e) = &r.error {
            out.push_str(&format!(
                "  {}: could not run: {}\n",
                r.cell.key(),
                one_line(e, 300)
            ));
            continue;
        }
        if m.failed() == 0 {
            continue;
        }
        out.push_str(&format!(
            "  {}: {} of {} requests failed ({:.2} %)\n",
            r.cell.key(),
            m.failed(),
            m.sent,
            (1.0 - r.success_rate()) * 100.0
        ));
        let mut classes: Vec<_> = FailureClass::ALL
            .iter()
            .filter(|c| m.failures[c.index()] > 0)
            .collect();
        classes.sort_by_key(|c| std::cmp::Reverse(m.failures[c.index()]));
        for c in classes.iter().take(3) {
            let example = m.failure_examples[c.index()].as_deref().unwrap_or("");
            out.push_str(&format!(
                "    {} × {}: {}\n",
                m.failures[c.index()],
                c.as_str(),
                one_line(example, 160)
            ));
        }
        if classes.len() > 3 {
            out.push_str(&format!("    … and {} more classes\n", classes.len() - 3));
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("failures (top classes per cell, one example each):\n{out}")
    }
}

/// The closing warning of a run in which requests failed or cells did not run.
pub fn failure_warning(results: &[CellResult]) -> Option<String> {
    let failing = results
        .iter()
        .filter(|r| r.error.is_some() || r.measured.failed() > 0)
        .count();
    (failing > 0).then(|| {
        format!(
            "warning: {failing} of {} cells had failed requests or did not run; see failures.csv and the error column of cells.csv",
            results.len()
        )
    })
}

/// Cells named in the saturation warning; the rest are counted.
const SATURATED_CELLS_NAMED: usize = 5;

/// After a run: the cells whose load generator was saturated (see
/// [`load::sampler::client_saturated`]) on the `client_cores` it may use, with the server's
/// CPU beside its own, since their throughput and latency may then be the load generator's
/// limit, not the server's. Left out: a cell with several agents (their cores are theirs) and
/// one whose load generator polls by design (`busy_poll`, or an open loop's spinning pacer),
/// where the CPU reads full whatever the load; pacing lag tells those.
pub fn saturation_warning(results: &[CellResult], client_cores: usize) -> Option<String> {
    let pct = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.0} %"));
    let polls = |r: &CellResult| {
        let s = &r.cell.settings;
        s.busy_poll || (r.cell.rate().is_some() && s.pacing == load::regime::Pacing::Spin)
    };
    let saturated: Vec<String> = results
        .iter()
        .filter(|r| r.error.is_none() && r.agents <= 1 && !polls(r))
        .filter(|r| {
            r.client
                .cpu_pct_mean
                .is_some_and(|cpu| load::sampler::client_saturated(cpu, client_cores))
        })
        .map(|r| {
            format!(
                "{} (client {}, server {})",
                r.cell.key(),
                pct(r.client.cpu_pct_mean),
                pct(r.server.cpu_pct_mean)
            )
        })
        .collect();
    if saturated.is_empty() {
        return None;
    }
    let mut named = saturated[..saturated.len().min(SATURATED_CELLS_NAMED)].join(", ");
    if saturated.len() > SATURATED_CELLS_NAMED {
        named.push_str(&format!(
            " and {} more",
            saturated.len() - SATURATED_CELLS_NAMED
        ));
    }
    Some(format!(
        "warning: the load generator was saturated in {} of {} cells (client CPU at least {:.0} % of the {} its threads may use): their throughput and latency may be its limit, not the server's: {named}. See docs/fairness.md, \"When the load generator is the limit\"",
        saturated.len(),
        results.len(),
        load::sampler::CLIENT_CPU_SATURATED_SHARE * 100.0,
        if client_cores == 1 { "core".to_string() } else { format!("{client_cores} cores") },
    ))
}

/// After a run with failed requests and no thresholds, which exits 0: how to make CI fail on
/// failures. `None` when nothing failed or thresholds are set.
pub fn ci_hint(results: &[CellResult], has_thresholds: bool) -> Option<String> {
    let failed: u64 = results.iter().map(|r| r.measured.failed()).sum();
    let not_run = results.iter().filter(|r| r.error.is_some()).count();
    (!has_thresholds && (failed > 0 || not_run > 0)).then(|| {
        "note: this run exits 0 despite its failures: it has no thresholds. To make CI fail, add to an experiment file `[[thresholds]]` with `success_rate = { min = 0.999 }` (any cells.csv column; see docs/running.md, \"Thresholds\"): a threshold not met exits 99".to_string()
    })
}

/// Seed 000's stress table: stack, users, median, p95, p99, req/s, failure %. Conditions that
/// differ from the defaults head it; a footnote explains the baseline's `1*`.
pub fn summary_table(results: &[CellResult]) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for r in results {
        if seen.contains(&r.cell.variant.as_str()) {
            continue;
        }
        seen.push(&r.cell.variant);
        let differs = conditions(&r.cell.settings);
        if !differs.is_empty() {
            let label = match r.cell.variant.as_str() {
                "default" => "conditions".to_string(),
                v => format!("conditions of variant {v}"),
            };
            out.push_str(&format!("{label}: {}\n", differs.join(", ")));
        }
    }
    // The stack column fits the longest name run (`grpc-h3`), so the columns stay aligned.
    let w = results
        .iter()
        .map(|r| r.cell.stack.len())
        .max()
        .unwrap_or(0)
        .max(6);
    out.push_str(&format!(
        "{:<w$} {:<9} {:>6} {:>4} {:>11} {:>11} {:>11} {:>11} {:>9} {:>11} {:>11}\n",
        "stack",
        "regime",
        "users",
        "rep",
        "median ms",
        "p95 ms",
        "p99 ms",
        "req/s",
        "fail %",
        "srv RSS MB",
        "srv CPU %"
    ));
    for r in results {
        let s = LatencySummary::of(&r.measured.latency);
        out.push_str(&format!(
            "{:<w$} {:<9} {:>6} {:>4} {:>11.3} {:>11.3} {:>11.3} {:>11.1} {:>9.2} {:>11} {:>11}\n",
            r.cell.stack,
            r.cell.regime.as_str(),
            match r.cell.stage {
                experiment::plan::Stage::Baseline => "1*".to_string(),
                experiment::plan::Stage::Stress => r.cell.concurrency.to_string(),
            },
            r.cell.repetition,
            s.p50 as f64 / 1000.0,
            s.p95 as f64 / 1000.0,
            s.p99 as f64 / 1000.0,
            r.throughput_rps(),
            (1.0 - r.success_rate()) * 100.0,
            if r.server.sampled {
                format!(
                    "{:.1}",
                    r.server.rss_hwm_bytes.unwrap_or(r.server.rss_peak_bytes) as f64 / 1e6
                )
            } else {
                "-".to_string()
            },
            r.server
                .cpu_pct_mean
                .map_or("-".to_string(), |v| format!("{v:.1}")),
        ));
    }
    if let Some(b) = results
        .iter()
        .find(|r| r.cell.stage == experiment::plan::Stage::Baseline)
    {
        out.push_str(&format!(
            "1* = single-user baseline: one worker for {} s (baseline_seconds), not a stress level\n",
            b.cell.duration_s().unwrap_or(0)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_list_only_what_differs_from_the_defaults() {
        assert!(conditions(&Experiment::default()).is_empty());
        let e = Experiment {
            netem: Some("rtt=20ms,loss=1%".into()),
            port_range: Some("40000 40999".into()),
            backlog: 64,
            ..Experiment::default()
        };
        assert_eq!(
            conditions(&e),
            [
                "backlog 64",
                "netem rtt=20ms,loss=1%",
                "port_range 40000 40999"
            ]
        );
    }

    /// A finished cell of the default plan whose load generator used `client` % and whose
    /// server used `server` % of a core.
    fn cell_with_cpu(index: usize, client: Option<f64>, server: Option<f64>) -> CellResult {
        let cell = experiment::plan::plan(&Experiment::default())[index].clone();
        CellResult {
            elapsed_s: 1.0,
            cut_short: false,
            server: load::sampler::ResourceSummary {
                cpu_pct_mean: server,
                ..Default::default()
            },
            client: load::sampler::ResourceSummary {
                cpu_pct_mean: client,
                ..Default::default()
            },
            ..CellResult::unmeasured(cell)
        }
    }

    #[test]
    fn a_saturated_load_generator_is_named_with_both_cpus() {
        let results = [
            cell_with_cpu(0, Some(99.4), Some(77.0)),
            cell_with_cpu(1, Some(60.0), Some(99.0)),
            cell_with_cpu(2, None, None),
        ];
        let warning = saturation_warning(&results, 1).expect("one cell saturated");
        let key = results[0].cell.key();
        assert!(warning.contains("in 1 of 3 cells"), "{warning}");
        assert!(
            warning.contains(&format!("{key} (client 99 %, server 77 %)")),
            "{warning}"
        );
        assert!(!warning.contains(&results[1].cell.key()), "{warning}");
        // The same CPU on two cores is half of them: not saturated.
        assert_eq!(saturation_warning(&results, 2), None);
        // Several agents' CPU is theirs, not one load generator's.
        let mut shared = cell_with_cpu(0, Some(180.0), Some(50.0));
        shared.agents = 2;
        assert_eq!(saturation_warning(&[shared], 1), None);
        // A polling load generator reads full whatever the load.
        let mut polling = cell_with_cpu(0, Some(99.0), Some(20.0));
        let mut settings = (*polling.cell.settings).clone();
        settings.busy_poll = true;
        polling.cell.settings = std::sync::Arc::new(settings);
        assert_eq!(saturation_warning(&[polling], 1), None);
    }

    #[test]
    fn long_examples_are_cut_to_one_line() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
