//! The generated "Threats to validity" section: each point is computed from the runs (machine,
//! loopback vs emulated cells, shared cores, repetitions, throughput definition, provenance).

use std::fmt::Write;

use crate::text::thousands;

use results::labels::{is_cell, levels, regimes};

use crate::stacks::order as stack_order;

use crate::provenance::Provenance;
use crate::run::{fval, Run, ELAPSED_RPS, STEADY_RPS};
use stats::cv;

use results::rows::CellRow as Row;

/// Min and max of server + client CPU % over stress cells that have both figures, and how
/// many cells had none (short cells may leave CPU empty as unreliable).
pub(crate) fn cpu_sum_range(rows: &[&Row]) -> (Option<(f64, f64)>, usize) {
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
pub(crate) fn rep_spread(run: &Run) -> String {
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
        stats::median(&cvs).unwrap_or(f64::NAN) * 100.0,
        cvs.len(),
        cvs[cvs.len() - 1] * 100.0
    )
}

/// Whether a run's cells ran on the hosts executor: server and load generators in network
/// namespaces of this machine joined by a bridge, not on loopback.
fn bridged(run: &Run) -> bool {
    run.results.manifest["experiment"]["executor"].as_str() == Some("hosts")
}

/// The emulated cells of runs whose NFQUEUE emulator held packets as they left the sender
/// (`OUTPUT`: a manifest with `emulator` = `nfqueue` and no `emulator_delays_at`), where TCP
/// Small Queues can throttle a TCP sender under delay; nothing when there are none.
fn held_on_send(out: &mut String, runs: &[&Run], is_emulated: &dyn Fn(&Row) -> bool) {
    let mut named = Vec::new();
    let mut cells = 0;
    for run in runs {
        let m = &run.results.manifest;
        if m["emulator"].as_str() != Some("nfqueue") || !m["emulator_delays_at"].is_null() {
            continue;
        }
        let n = run.stress().iter().filter(|r| is_emulated(r)).count();
        let name = format!("`{}`", run.name());
        if n > 0 {
            cells += n;
            if !named.contains(&name) {
                named.push(name);
            }
        }
    }
    if cells > 0 {
        let _ = writeln!(
            out,
            "- **Emulated delay held on send.** {} (runs {}) were measured while the emulator held each packet as it left its sender (their manifests have no `emulator_delays_at`): a held packet still counted against its socket, and TCP Small Queues can then throttle a TCP sender under delay (the project's own account, docs/conditions.md: a TCP download under emulated delay was held far below its link's rate this way; no committed result measures it). Later runs hold packets on receipt. Whether and how much this moved these request cells is not measured by them.",
            crate::text::count(cells, "emulated cell", "emulated cells"),
            named.join(", ")
        );
    }
}

/// Whether a row ran on the hosts executor in namespaces kept across cells
/// (`host_namespaces` = "sweep" or the default "run", not "cell"), so that TIME_WAIT
/// accumulates from level to level.
fn kept_across_cells(run: &Run, row: &Row) -> bool {
    let e = &run.results.manifest["experiment"];
    let variant = e["variants"].as_array().and_then(|vs| {
        vs.iter()
            .find(|v| v["name"].as_str() == Some(row.variant.as_str()))
    });
    let namespaces = variant
        .and_then(|v| v["host_namespaces"].as_str())
        .or_else(|| e["host_namespaces"].as_str());
    bridged(run) && namespaces != Some("cell")
}

/// What the threats need to know of the sessions: how many (none: one session), whether they
/// ran on more than one machine, each one's machine, and the runs only session 1 has (mesh,
/// scale), whose cells the counts include once.
#[derive(Clone, Copy)]
pub(crate) struct SessionScope<'a> {
    pub(crate) count: Option<usize>,
    pub(crate) machines_differ: bool,
    pub(crate) machines: &'a [(String, String)],
    pub(crate) single_runs: &'a [String],
}

pub(crate) fn threats(
    out: &mut String,
    runs: &[&Run],
    provs: &[Provenance],
    problems: &[String],
    scope: &SessionScope,
) {
    let SessionScope {
        count: sessions,
        machines_differ,
        machines: session_machines,
        single_runs,
    } = *scope;
    let _ = writeln!(out, "## Threats to validity\n");
    let _ = writeln!(
        out,
        "_Generated from the runs above; each point says what in the data it rests on.{}_\n",
        match sessions {
            Some(n) => format!(
                " Counts of cells are over every run of all {n} sessions{}; figures \"in the reference run\" are session 1's.",
                match single_runs {
                    [] => String::new(),
                    names => format!(
                        " and the run{} only session 1 has ({})",
                        if names.len() == 1 { "" } else { "s" },
                        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    ),
                }
            ),
            None => String::new(),
        }
    );
    // Every session's machine counts, not only the runs the provenance table lists.
    let mut machines: Vec<String> = provs
        .iter()
        .map(crate::sessions::machine_of)
        .chain(session_machines.iter().map(|(_, m)| m.clone()))
        .collect();
    machines.sort();
    machines.dedup();
    let where_each = if machines.len() > 1 {
        " (one machine at a time; which session ran on which is listed under Sessions)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "- **One machine.** Every run used {}{where_each}: {}. Server and load generator ran on the same machine (on loopback, or in network namespaces joined by a bridge), so nothing here measures a network card, a switch or a second kernel; the study's numbers came from another setup (see [study.md](study.md)) and absolute values are not comparable, only orders of magnitude and shapes.",
        crate::text::count(machines.len(), "machine configuration", "machine configurations"),
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
    let is_emulated = |r: &Row| r.netem.as_deref().is_some_and(|n| !n.trim().is_empty());
    let emulated = all.iter().filter(|r| is_emulated(r)).count();
    // Cells across the hosts executor's bridge, without emulation.
    let bridge_only: usize = runs
        .iter()
        .filter(|r| bridged(r))
        .map(|r| r.stress().iter().filter(|x| !is_emulated(x)).count())
        .sum();
    let mut others = Vec::new();
    if bridge_only > 0 {
        others.push(format!(
            "{} crossed a bridge between network namespaces of this machine (the hosts executor: a kernel's veth and bridge path, still no wire)",
            thousands(bridge_only as f64)
        ));
    }
    if emulated > 0 {
        others.push(format!(
            "{} ran with emulated delay/loss (below)",
            thousands(emulated as f64)
        ));
    }
    let _ = writeln!(
        out,
        "- **Loopback.** {} of {} stress cells ran on plain loopback, where a round trip costs no time and a handshake costs only CPU{}. Loopback hides exactly the round trips in which the protocols' handshakes differ.",
        thousands((all.len() - emulated - bridge_only) as f64),
        thousands(all.len() as f64),
        if others.is_empty() {
            String::new()
        } else {
            format!("; of the others, {}", others.join(", and "))
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
        "- **Client implementations differ.** HTTP/1.1, HTTP/2 and gRPC are driven by lean clients of our own (the HTTP/2 and gRPC ones share a minimal HTTP/2 implementation), HTTP/3 by the general-purpose quinn + h3 libraries. Part of any HTTP/3 gap is therefore client cost, not protocol cost; the servers are general-purpose libraries for every stack. The library clients an application would run (hyper, tonic's generated client) can be measured instead (`client = \"library\"`, docs/clients.md); no run of them is part of this paper, so it quotes no figure for them."
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
            format!(
                "{}: {} no confidence interval and {} run-to-run variation is unknown.",
                if single == 1 { "1 run has one repetition".to_string() } else { format!("{single} runs have one repetition") },
                if single == 1 { "its figures have" } else { "their figures have" },
                if single == 1 { "its" } else { "their" }
            )
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
            "The reference tables and the knees use the steady-state figure (all workers active; the provenance table's column); the plan's rules, the answer and the mesh section use ok ÷ elapsed over the cell's fixed budget."
        } else if tput.iter().all(|c| *c == ELAPSED_RPS) {
            "No run has the steady-state column, so throughput is `ok / elapsed_s` everywhere, which includes ramp-up and drain and understates the steady rate of short cells."
        } else {
            "Runs differ: some report steady-state throughput, others only `ok / elapsed_s` (see the provenance table); the two are not directly comparable. The plan's rules, the answer and the mesh section always use ok ÷ elapsed."
        }
    );
    let _ = writeln!(
        out,
        "- **Emulator limits.** Where the kernel has no `sch_netem` (this machine), delay and loss are applied by a user-space emulator thread in the runner (the `emulator` column says which ran): it shares the same cores as server and client (so emulated runs have less CPU for the protocols), it drops a GSO super-packet as one unit (one loss event can remove several QUIC datagrams at once, unlike a wire), and it draws loss and jitter from one fixed seed, so each emulated cell is one sample of the loss pattern, not an average over patterns."
    );
    held_on_send(out, runs, &is_emulated);
    issue_33_threats(out, runs, sessions, machines_differ);
    if !problems.is_empty() {
        let _ = writeln!(
            out,
            "- **Mixed provenance.** The runs were accepted with `--allow-mixed` although they are not from one commit on one machine ({} problem(s), listed at the top).",
            problems.len()
        );
    }
    out.push('\n');
}

/// Session drift, what loopback does to TIME_WAIT, the steady-window bias, sub-second cells
/// and what VmHWM covers: each counted over the stress cells of every run.
fn issue_33_threats(
    out: &mut String,
    runs: &[&Run],
    sessions: Option<usize>,
    machines_differ: bool,
) {
    let all: Vec<&Row> = runs.iter().flat_map(|r| r.stress()).collect();
    let _ = writeln!(
        out,
        "- **Session drift.** {}",
        match sessions {
            Some(n) => format!(
                "{n} sessions at one commit are aggregated: the plan's verdicts pool them (counts for a proportion, session means for a mean) and compare each session's own verdict part by part, and the reference tables give throughput and p99 an interval over the session means beside the one over a session's repetitions.{}",
                if machines_differ {
                    " The sessions did not all run on one machine (each session's is listed under \"Sessions\"), so a bound over session means also covers the change of machine."
                } else {
                    ""
                }
            ),
            None => "Every interval here is over one session's repetitions. Sessions of the same code on the same machine can differ by more than these intervals (machine state, time of day), so a difference between two sessions is no finding; `scripts/reproduce-paper --sessions 3` gives the between-session interval.".to_string(),
        }
    );
    let spread = all
        .iter()
        .filter(|r| r.source_addresses.is_some_and(|n| n > 1))
        .count();
    let in_namespace = |r: &Row| r.net_counters_scope.as_deref() == Some("namespace");
    let kept: usize = runs
        .iter()
        .map(|run| {
            run.stress()
                .iter()
                .filter(|r| in_namespace(r) && kept_across_cells(run, r))
                .count()
        })
        .sum();
    let private = all.iter().filter(|r| in_namespace(r)).count() - kept;
    let tw_reuse: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            crate::provenance::find_first(&r.results.manifest, "net.ipv4.tcp_tw_reuse")
                .map(|v| crate::provenance::scalar(&v))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let _ = writeln!(
        out,
        "- **Loopback TIME_WAIT.** Socket exhaustion, the study's explanation of the collapse, is mostly switched off on loopback as run here: the host's `net.ipv4.tcp_tw_reuse` = {} (2 reuses TIME_WAIT ports on loopback only; variants that set their own value run in their own namespace), {} of {} stress cells spread their clients over more than one source address, and {} ran in a network namespace made for that cell alone, so TIME_WAIT never accumulates across levels. The two-host contrast experiment (`experiments/claims/c2c3-two-hosts.toml`) is where it can: {} cells ran in hosts' namespaces kept across cells (for a sweep, or the whole run).",
        if tw_reuse.is_empty() {
            "not recorded".to_string()
        } else {
            tw_reuse.join(" / ")
        },
        thousands(spread as f64),
        thousands(all.len() as f64),
        thousands(private as f64),
        thousands(kept as f64),
    );
    let with_steady: Vec<&&Row> = all
        .iter()
        .filter(|r| fval(r, STEADY_RPS).is_some())
        .collect();
    let invalid = with_steady.iter().filter(|r| !r.steady_valid()).count();
    let _ = writeln!(
        out,
        "- **Steady-window bias.** The steady-state rate counts only the window in which all workers are active; with few requests per worker that window is short and holds the fastest requests, which inflates the rate of a cell in trouble. {} of {} stress cells with a steady window had one too short (fewer than {} successes per worker or under {} % of the phase): the reference tables and the knees use `ok / elapsed_s` for them, and both figures are printed beside them; the plan's rules always use ok ÷ elapsed.",
        thousands(invalid as f64),
        thousands(with_steady.len() as f64),
        crate::text::plain(results::rows::MIN_STEADY_OK_PER_WORKER),
        crate::text::plain(results::rows::MIN_STEADY_FRACTION_OF_ELAPSED * 100.0)
    );
    let short = all.iter().filter(|r| r.elapsed_s < 1.0).count();
    let _ = writeln!(
        out,
        "- **Sub-second cells.** {} of {} stress cells measured for less than a second: one scheduler hiccup or one retransmission timeout is a large share of such a cell, and memory still rising at its end has not peaked.",
        thousands(short as f64),
        thousands(all.len() as f64)
    );
    let _ = writeln!(
        out,
        "- **What VmHWM covers.** `server_rss_hwm_bytes` is the kernel's high-water mark of the server process, reset before the measured phase: it covers that phase only, not warm-up, and not the memory a longer run would reach."
    );
    let data_lock = runs.first().and_then(|r| lock_at_data_commit(r));
    let (lock, whose) = match &data_lock {
        Some(lock) => (lock.as_str(), "Cargo.lock at the data commit"),
        None => (
            CARGO_LOCK,
            "Cargo.lock of this build: the data commit's was not readable",
        ),
    };
    let lock_version = |name: &str| locked_version(lock, name).unwrap_or("unknown");
    let _ = writeln!(
        out,
        "- **One QUIC implementation, one version, and our client's closing.** Every QUIC figure here is quinn {} with h3 {} ({whose}); the study names no QUIC implementation or version, so whose stack its 440 MB was cannot be told from it, and other QUIC stacks (quiche, ngtcp2, msquic) are not measured. The HTTP/3 load generator's connection-per-endpoint mode (`quic_endpoint = \"per-connection\"`, the default) is ours: after the client's CONNECTION_CLOSE it drops quinn's endpoint state and a bare socket holds the closing period, where quinn's own endpoint would keep the connection's state through that period; `quic_endpoint = \"shared\"` keeps quinn's own closing on one socket for all connections, and the two-host contrast runs both.",
        lock_version("quinn"),
        lock_version("h3")
    );
    let allocators: std::collections::BTreeSet<String> = runs
        .iter()
        .filter_map(|r| {
            crate::provenance::find_first(&r.results.manifest, "allocator")
                .map(|v| crate::provenance::scalar(&v))
        })
        .collect();
    let _ = writeln!(
        out,
        "- **The allocator.** Servers and load generators are one binary, built with {} as the global allocator (recorded per run); resident memory depends on it, so RSS figures are this allocator's, as an application's would be its own.",
        if allocators.is_empty() {
            "an allocator the manifests do not record".to_string()
        } else {
            allocators
                .into_iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(" / ")
        }
    );
}

/// Cargo.lock as committed at the commit the run recorded (`git show`, in the run's folder).
fn lock_at_data_commit(run: &Run) -> Option<String> {
    let commit = run.provenance().commit;
    let commit = commit.trim_end_matches("-dirty");
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&run.dir)
        .args(["show", &format!("{commit}:Cargo.lock")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The workspace's Cargo.lock as built (the code-drift check keeps it equal to the data
/// commit's unless told otherwise).
const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");

/// The version Cargo.lock pins for a package (the first entry of that name).
fn locked_version<'a>(lock: &'a str, name: &str) -> Option<&'a str> {
    let entry = lock
        .split("[[package]]")
        .find(|e| e.lines().any(|l| l.trim() == format!("name = \"{name}\"")))?;
    entry
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
}

#[cfg(test)]
mod lock_tests {
    use super::*;

    #[test]
    fn the_locked_version_is_read_from_the_package_entry() {
        let lock = "[[package]]\nname = \"h3-quinn\"\nversion = \"9.9.9\"\n\n[[package]]\nname = \"quinn\"\nversion = \"0.11.12\"\n";
        assert_eq!(locked_version(lock, "quinn"), Some("0.11.12"));
        assert_eq!(locked_version(lock, "h3"), None);
        assert!(locked_version(CARGO_LOCK, "quinn").is_some());
    }
}
