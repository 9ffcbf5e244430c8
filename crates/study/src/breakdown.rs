//! The paper's "Where QUIC's cost goes" section, from the instruction counts that
//! `scripts/quic-breakdown` writes (`results/quic-breakdown/breakdown.csv`): instructions and
//! system calls per request, grouped by what the code does, for each stack, regime and side.
//! The section only formats and compares the committed figures; the grouping is the script's.
//! Beside them, `cpu.csv` (same script, same cells run natively and pinned) gives the user and
//! kernel CPU time per 1,000 requests, which instruction counts cannot show.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use anyhow::{bail, Context};

use crate::claims::BreakdownFocus;
use crate::run::{Run, View};
use crate::stacks::label;
use crate::templates;
use crate::text::thousands;

/// The groups in the order the script reports them, with the row label the paper prints.
pub const GROUPS: [(&str, &str); 10] = [
    (
        "handshake_crypto",
        "handshake cryptography (ECDHE, ECDSA, key schedule, certificate)",
    ),
    (
        "packet_protection",
        "packet/record protection (AEAD, QUIC header protection)",
    ),
    ("tls_quic_state", "TLS and QUIC state machines"),
    ("http", "HTTP layer and request handling"),
    ("socket_io", "socket I/O in user space (UDP/TCP)"),
    ("setup_teardown", "endpoint/connection setup and teardown"),
    ("runtime", "runtime scheduling (tokio, timers, locks)"),
    ("allocation", "allocation"),
    ("instrument", "load generator and measurement"),
    ("other", "other"),
];

/// Figures of one stack, regime and side: instructions and system calls per request by group.
#[derive(Debug, Default, Clone)]
pub struct Side {
    pub instructions: BTreeMap<String, f64>,
    pub syscalls: BTreeMap<String, f64>,
    /// The same cell run natively: (user, kernel) CPU ms per 1,000 requests.
    pub native_cpu_ms_per_1k: Option<(f64, f64)>,
}

impl Side {
    pub fn total_instructions(&self) -> f64 {
        self.instructions.values().sum()
    }
    pub fn total_syscalls(&self) -> f64 {
        self.syscalls.values().sum()
    }
    fn ir(&self, group: &str) -> f64 {
        self.instructions.get(group).copied().unwrap_or(0.0)
    }
}

/// `breakdown.csv`, keyed by (stack, regime, side).
#[derive(Debug, Default)]
pub struct Breakdown {
    pub cells: BTreeMap<(String, String, String), Side>,
    /// The commit the manifest beside the CSV records, if any.
    pub commit: Option<String>,
    pub concurrency: Option<u64>,
    /// `changes.md` beside the CSV: the changes this breakdown led to, each with the row it
    /// moved, written by whoever made them. Its figures come from runs that are not committed,
    /// so the paper only names the file.
    pub changes: Option<String>,
}

impl Breakdown {
    pub fn load(csv_path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(csv_path)
            .with_context(|| format!("cannot read {}", csv_path.display()))?;
        let mut b = Self::parse(&text).with_context(|| format!("{}", csv_path.display()))?;
        let manifest = csv_path.with_file_name("manifest.json");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let m: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", manifest.display()))?;
            b.commit = m["commit"].as_str().map(str::to_string);
            b.concurrency = m["concurrency"].as_u64();
        }
        b.changes = std::fs::read_to_string(csv_path.with_file_name("changes.md")).ok();
        let cpu = csv_path.with_file_name("cpu.csv");
        if let Ok(text) = std::fs::read_to_string(&cpu) {
            b.add_native(&text)
                .with_context(|| format!("{}", cpu.display()))?;
        }
        Ok(b)
    }

    /// Adds `cpu.csv`'s native user and kernel CPU to the cells the instruction counts have.
    pub fn add_native(&mut self, text: &str) -> anyhow::Result<()> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let [stack, regime, side, user, kernel] = columns(
            reader.headers()?,
            [
                "stack",
                "regime",
                "side",
                "user_ms_per_1k",
                "kernel_ms_per_1k",
            ],
        )?;
        for row in reader.records() {
            let row = row?;
            let key = (row[stack].into(), row[regime].into(), row[side].into());
            if let Some(cell) = self.cells.get_mut(&key) {
                cell.native_cpu_ms_per_1k = Some((number(&row, user)?, number(&row, kernel)?));
            }
        }
        Ok(())
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let [stack, regime, side, group, ir, sc] = columns(
            reader.headers()?,
            [
                "stack",
                "regime",
                "side",
                "group",
                "instructions_per_request",
                "syscalls_per_request",
            ],
        )?;
        let mut b = Breakdown::default();
        for row in reader.records() {
            let row = row?;
            let group_name = &row[group];
            if !GROUPS.iter().any(|(g, _)| *g == group_name) {
                bail!("unknown group '{group_name}'");
            }
            let cell = b
                .cells
                .entry((row[stack].into(), row[regime].into(), row[side].into()))
                .or_default();
            cell.instructions
                .insert(group_name.into(), number(&row, ir)?);
            cell.syscalls.insert(group_name.into(), number(&row, sc)?);
        }
        if b.cells.is_empty() {
            bail!("no rows");
        }
        Ok(b)
    }

    fn get(&self, stack: &str, regime: &str, side: &str) -> Option<&Side> {
        self.cells
            .get(&(stack.to_string(), regime.to_string(), side.to_string()))
    }

    /// The stacks measured, the explained one (`last`) last, so the table reads "TCP stack,
    /// then HTTP/3".
    fn stacks(&self, last: &str) -> Vec<String> {
        let mut s: Vec<String> = self.cells.keys().map(|k| k.0.clone()).collect();
        s.dedup();
        s.sort_by_key(|name| (name == last, name.clone()));
        s.dedup();
        s
    }
}

/// The positions of `names` in a CSV's header row.
fn columns<const N: usize>(
    headers: &csv::StringRecord,
    names: [&str; N],
) -> anyhow::Result<[usize; N]> {
    let mut positions = [0; N];
    for (position, name) in positions.iter_mut().zip(names) {
        *position = headers
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("no column {name}"))?;
    }
    Ok(positions)
}

fn number(row: &csv::StringRecord, i: usize) -> anyhow::Result<f64> {
    row[i]
        .parse::<f64>()
        .with_context(|| format!("'{}' is not a number", &row[i]))
}

/// Thousands of instructions, one decimal below 10k.
fn kinstr(x: f64) -> String {
    let k = x / 1e3;
    if k.abs() < 10.0 {
        format!("{k:.1}")
    } else {
        thousands(k)
    }
}

/// Measured CPU ms per 1,000 requests of a stack, regime and side at `c` workers in the
/// reference run (mean over repetitions), to set the instruction counts beside.
pub type MeasuredCpu<'a> = &'a dyn Fn(&str, &str, &str) -> Option<f64>;

/// The reference run's CPU per 1,000 requests at the breakdown's concurrency, if it has it.
pub(crate) fn reference_cpu(
    reference: &Run,
    c: u64,
) -> impl Fn(&str, &str, &str) -> Option<f64> + '_ {
    move |stack: &str, regime: &str, side: &str| {
        let col = format!("{side}_cpu_ms_per_1k_ok");
        View::new(reference, None)
            .stat(stack, regime, c, &col)
            .map(|iv| iv.mean)
    }
}

/// Appends the section; `focus` (from the claims table) names the stack explained and the
/// claims its findings bear on.
pub(crate) fn section(
    out: &mut String,
    b: &Breakdown,
    source: &Path,
    measured: MeasuredCpu,
    focus: &BreakdownFocus,
) -> anyhow::Result<()> {
    let stacks = b.stacks(focus.stack);
    templates::render(
        out,
        "breakdown.md",
        minijinja::context! {
            source => source.display().to_string(),
            workers => b.concurrency,
            commit => b.commit.as_deref().map(|c| &c[..c.len().min(12)]),
        },
    )?;
    for regime in ["new-conn", "reuse"] {
        let cols: Vec<(&str, &String)> = ["client", "server"]
            .iter()
            .flat_map(|side| stacks.iter().map(move |s| (*side, s)))
            .filter(|(side, s)| b.get(s, regime, side).is_some())
            .collect();
        if cols.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {regime}\n");
        let mut head = String::from("| group |");
        let mut rule = String::from("|---|");
        for (side, s) in &cols {
            let role = if *side == "client" {
                "load generator"
            } else {
                "server"
            };
            let _ = write!(head, " {role} {} |", label(s));
            rule.push_str("---:|");
        }
        let _ = writeln!(out, "{head}\n{rule}");
        for (group, name) in GROUPS {
            let mut row = format!("| {name} |");
            for (side, s) in &cols {
                let v = b.get(s, regime, side).map_or(0.0, |c| c.ir(group));
                let _ = write!(row, " {} |", kinstr(v));
            }
            let _ = writeln!(out, "{row}");
        }
        let mut total = String::from("| **total** |");
        let mut sys = String::from("| system calls per request |");
        for (side, s) in &cols {
            let c = b.get(s, regime, side).expect("listed");
            let _ = write!(total, " **{}** |", kinstr(c.total_instructions()));
            let _ = write!(sys, " {:.1} |", c.total_syscalls());
        }
        let _ = writeln!(out, "{total}\n{sys}");
        if cols.iter().any(|(side, s)| {
            b.get(s, regime, side)
                .is_some_and(|c| c.native_cpu_ms_per_1k.is_some())
        }) {
            let mut user = String::from("| CPU natively, user (ms per 1,000 requests) |");
            let mut kernel = String::from("| CPU natively, kernel (ms per 1,000 requests) |");
            for (side, s) in &cols {
                let native = b.get(s, regime, side).and_then(|c| c.native_cpu_ms_per_1k);
                let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
                let _ = write!(user, " {} |", cell(native.map(|n| n.0)));
                let _ = write!(kernel, " {} |", cell(native.map(|n| n.1)));
            }
            let _ = writeln!(out, "{user}\n{kernel}");
        }
        out.push('\n');
    }
    if b.cells.values().any(|c| c.native_cpu_ms_per_1k.is_some()) {
        let _ = writeln!(
            out,
            "_The two CPU rows are the same cells run natively (`cpu.csv`), server pinned to one core and load generator to the other, each process's user and kernel CPU time differenced between two request counts; the kernel's split of a process's CPU time into user and kernel follows timer-tick samples, so the split is an estimate and the sum is exact._\n"
        );
    }
    for line in findings(b, measured, focus) {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
    // Its figures were measured by hand in runs that are not committed: the paper names the
    // file and takes no number from it.
    if b.changes.is_some() {
        let _ = writeln!(
            out,
            "`changes.md` beside `breakdown.csv` lists the changes this breakdown led to, with figures measured by hand in runs that are not committed results; none of its figures is repeated here.\n"
        );
    }
    Ok(())
}

/// The computed sentences: the explained stack's gap per regime and side, what explains it,
/// and what that means for the ceiling claim (a handshake-rate cap) and the memory claim.
pub(crate) fn findings(
    b: &Breakdown,
    measured: MeasuredCpu,
    focus: &BreakdownFocus,
) -> Vec<String> {
    let mut lines = Vec::new();
    let quic = focus.stack;
    let stacks = b.stacks(quic);
    let Some(tcp) = stacks.iter().find(|s| s.as_str() != quic) else {
        return lines;
    };
    for regime in ["new-conn", "reuse"] {
        for side in ["client", "server"] {
            let (Some(q), Some(t)) = (b.get(quic, regime, side), b.get(tcp, regime, side)) else {
                continue;
            };
            let (qt, tt) = (q.total_instructions(), t.total_instructions());
            if tt <= 0.0 || qt <= tt {
                continue;
            }
            let gap = qt - tt;
            let mut parts: Vec<(f64, &str)> = GROUPS
                .iter()
                .map(|(g, name)| (q.ir(g) - t.ir(g), *name))
                .filter(|(d, _)| *d > 0.0)
                .collect();
            parts.sort_by(|a, b| b.0.total_cmp(&a.0));
            let top: Vec<String> = parts
                .iter()
                .take(3)
                .map(|(d, name)| format!("{name} {:.0} %", d / gap * 100.0))
                .collect();
            let crypto = q.ir("handshake_crypto") - t.ir("handshake_crypto");
            let crypto_note = if parts
                .iter()
                .take(3)
                .any(|(_, n)| n.starts_with("handshake"))
            {
                String::new()
            } else {
                format!(
                    "; handshake cryptography accounts for {:.0} % of it",
                    crypto / gap * 100.0
                )
            };
            let role = if side == "client" {
                "load generator"
            } else {
                "server"
            };
            let native = match (q.native_cpu_ms_per_1k, t.native_cpu_ms_per_1k) {
                (Some((qu, qk)), Some((tu, tk))) if tu + tk > 0.0 => Some(format!(
                    " Natively it used {qu:.0} + {qk:.0} ms of user + kernel CPU per 1,000 requests against {tu:.0} + {tk:.0} ({:.1}×; user alone {:.1}×, kernel {:.1}×): {}",
                    (qu + qk) / (tu + tk),
                    if tu > 0.0 { qu / tu } else { 0.0 },
                    if tk > 0.0 { qk / tk } else { 0.0 },
                    against_instructions(
                        (qu + qk) / (tu + tk),
                        qt / tt,
                        "much more than the instruction ratio, so part of the gap is what callgrind does not count (the kernel's socket and UDP path, cache misses).",
                        (tu > 0.0 && tk > 0.0).then(|| (qu / tu, qk / tk)),
                    )
                )),
                _ => None,
            };
            let cpu = match (measured(quic, regime, side), measured(tcp, regime, side)) {
                _ if native.is_some() => native.unwrap_or_default(),
                (Some(q), Some(t)) if t > 0.0 => format!(
                    " The reference run (at its own commit) measured {:.0} against {:.0} ms of CPU per 1,000 requests at {} workers ({:.1}×): {}",
                    q,
                    t,
                    b.concurrency.unwrap_or(0),
                    q / t,
                    against_instructions(
                        q / t,
                        qt / tt,
                        "much more than the instruction ratio, so most of the measured gap is outside user-space instructions (the kernel's socket and UDP path, page faults, cache misses), which callgrind does not count.",
                        None,
                    )
                ),
                _ => String::new(),
            };
            lines.push(format!(
                "{regime}, {role}: {} executes {}k instructions per request, {} {}k ({:.1}×). Of the difference ({}k), the largest shares are {}{crypto_note}, and {} makes {:.1} system calls per request against {:.1}.{cpu}",
                label(quic),
                kinstr(qt),
                label(tcp),
                kinstr(tt),
                qt / tt,
                kinstr(gap),
                top.join(", "),
                label(quic),
                q.total_syscalls(),
                t.total_syscalls(),
            ));
        }
    }
    if let (Some(c), Some(s)) = (
        b.get(quic, "new-conn", "client"),
        b.get(quic, "new-conn", "server"),
    ) {
        let per_conn = c.total_instructions() + s.total_instructions();
        lines.push(format!(
            "{} ({}): one new {} connection with its request costs client and server together {}k instructions in the breakdown's run{}, so a cap of {:.0} connections per second would mean a machine retiring no more than {:.0} million instructions per second for them: the study's cap is not the protocol's CPU cost. What this cost does bound is the new-connection rate on two shared cores, and the rows above say which part of it is cryptography any TLS 1.3 handshake pays and which is QUIC's and quinn's machinery.",
            focus.cap_id,
            focus.cap_short,
            label(quic),
            kinstr(per_conn),
            b.commit
                .as_deref()
                .map(|c| format!(" (at `{}`)", &c[..c.len().min(12)]))
                .unwrap_or_default(),
            focus.cap_high_rps,
            focus.cap_high_rps * per_conn / 1e6,
        ));
    }
    if let (Some(q), Some(t)) = (
        b.get(quic, "reuse", "server"),
        b.get(tcp, "reuse", "server"),
    ) {
        lines.push(format!(
            "{} ({}): instruction counts do not measure memory. What they add is that a reused-connection request costs the {} server more allocator work ({}k instructions in the allocator against {}k on {}): that counts how often it allocates and frees, not what stays resident; the resident memory per open connection is the fit under {} above.",
            focus.memory_id,
            focus.memory_short,
            label(quic),
            kinstr(q.ir("allocation")),
            kinstr(t.ir("allocation")),
            label(tcp),
            focus.memory_id,
        ));
    }
    lines
}

/// How a measured CPU ratio reads against the instruction ratio: within a quarter either way
/// "about" it; above, `above`; below, what the user/kernel split (`split`, where measured)
/// says of it, else only that it is below.
fn against_instructions(
    cpu_ratio: f64,
    instruction_ratio: f64,
    above: &str,
    split: Option<(f64, f64)>,
) -> String {
    let near = |x: f64| x <= 1.25 * instruction_ratio && x * 1.25 >= instruction_ratio;
    if cpu_ratio > 1.25 * instruction_ratio {
        above.to_string()
    } else if cpu_ratio * 1.25 < instruction_ratio {
        match split {
            Some((user, kernel)) if near(user) && kernel < user => format!(
                "less than the instruction ratio ({instruction_ratio:.1}×), while user CPU alone ({user:.1}×) is about it: the kernel's CPU, which callgrind does not count, differs less ({kernel:.1}×) and narrows the total."
            ),
            _ => format!(
                "less than the instruction ratio ({instruction_ratio:.1}×); these figures do not say where the instructions' extra cost went."
            ),
        }
    } else {
        "about the instruction ratio.".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_ratio_reads_about_the_instruction_ratio_only_within_a_quarter() {
        let about = "about the instruction ratio.";
        assert_eq!(against_instructions(1.6, 1.4, "more", None), about);
        assert_eq!(against_instructions(1.8, 1.4, "more", None), "more");
        assert_eq!(against_instructions(2.4, 3.0, "more", None), about);
        let below = against_instructions(2.0, 3.0, "more", None);
        assert!(
            below.starts_with("less than the instruction ratio (3.0×)"),
            "{below}"
        );
        assert!(below.contains("do not say"), "{below}");
        let split = against_instructions(2.0, 3.0, "more", Some((3.1, 1.4)));
        assert!(
            split.contains("user CPU alone (3.1×)") && split.contains("(1.4×)"),
            "{split}"
        );
        // A user ratio far from the instructions' does not explain it.
        let unexplained = against_instructions(2.0, 3.0, "more", Some((2.0, 1.9)));
        assert!(unexplained.contains("do not say"), "{unexplained}");
    }
    use crate::claims::breakdown_focus;

    const FIXTURE: &str = "stack,regime,side,group,instructions_per_request,syscalls_per_request,requests_low,requests_high
h1,new-conn,client,handshake_crypto,200000,0.00,40,120
h1,new-conn,client,tls_quic_state,50000,0.00,40,120
h1,new-conn,client,socket_io,10000,6.00,40,120
h3,new-conn,client,handshake_crypto,210000,0.00,40,120
h3,new-conn,client,tls_quic_state,300000,0.00,40,120
h3,new-conn,client,setup_teardown,90000,4.50,40,120
h3,new-conn,client,socket_io,40000,9.00,40,120
h3,new-conn,server,tls_quic_state,250000,1.00,40,120
";

    /// The section with no reference run to compare against.
    fn render(b: &Breakdown) -> String {
        let mut out = String::new();
        section(
            &mut out,
            b,
            Path::new("results/quic-breakdown/breakdown.csv"),
            &|_: &str, _: &str, _: &str| None,
            &breakdown_focus(),
        )
        .unwrap();
        out
    }

    #[test]
    fn parses_and_finds_the_gap() {
        let b = Breakdown::parse(FIXTURE).unwrap();
        let c = b.get("h3", "new-conn", "client").unwrap();
        assert_eq!(c.total_instructions(), 640_000.0);
        assert_eq!(c.total_syscalls(), 13.5);
        assert_eq!(b.stacks("h3"), vec!["h1".to_string(), "h3".to_string()]);
        assert_eq!(b.stacks("h1"), vec!["h3".to_string(), "h1".to_string()]);
        let measured = |stack: &str, regime: &str, side: &str| match (stack, regime, side) {
            ("h3", "new-conn", "client") => Some(770.0),
            ("h1", "new-conn", "client") => Some(300.0),
            _ => None,
        };
        let lines = findings(&b, &measured, &breakdown_focus());
        // 640k vs 260k: the gap of 380k is 250k state machines (66 %), 90k setup, 30k I/O;
        // crypto only 10k of it.
        assert!(
            lines[0].contains("640k") || lines[0].contains("640"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("2.5×"), "{}", lines[0]);
        assert!(
            lines[0].contains("TLS and QUIC state machines 66 %"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("handshake cryptography accounts for 3 %"),
            "{}",
            lines[0]
        );
        // 770 / 300 = 2.6× measured against 2.5× in instructions: "about the ratio".
        assert!(
            lines[0].contains("(2.6×): about the instruction ratio"),
            "{}",
            lines[0]
        );
        assert!(lines.iter().any(|l| l.starts_with("C4")));
        let out = render(&b);
        assert!(out.contains("## Where QUIC's cost goes"));
        // No manifest beside the fixture: neither workers nor a commit is named.
        assert!(
            out.contains("_From `results/quic-breakdown/breakdown.csv`, written by"),
            "{out}"
        );
        assert!(
            out.contains("| **total** | **260** | **640** | **250** |"),
            "{out}"
        );
        assert!(
            out.contains("| system calls per request | 6.0 | 13.5 | 1.0 |"),
            "{out}"
        );
    }

    #[test]
    fn native_cpu_rows_and_findings_come_from_cpu_csv() {
        let mut b = Breakdown::parse(FIXTURE).unwrap();
        b.add_native(
            "stack,regime,side,user_ms_per_1k,kernel_ms_per_1k,requests_low,requests_high
h1,new-conn,client,200.0,25.0,2000,6000
h3,new-conn,client,400.0,100.0,2000,6000
h9,new-conn,client,1.0,1.0,2000,6000
",
        )
        .unwrap();
        let c = b.get("h3", "new-conn", "client").unwrap();
        assert_eq!(c.native_cpu_ms_per_1k, Some((400.0, 100.0)));
        assert!(
            b.get("h9", "new-conn", "client").is_none(),
            "no cell without counts"
        );
        // Natively 500 vs 225 (2.2×) against 2.5× in instructions: about the ratio, and the
        // native figures replace the reference run's.
        let lines = findings(
            &b,
            &|_: &str, _: &str, _: &str| Some(1.0),
            &breakdown_focus(),
        );
        assert!(
            lines[0].contains("Natively it used 400 + 100 ms of user + kernel CPU per 1,000 requests against 200 + 25 (2.2×; user alone 2.0×, kernel 4.0×): about the instruction ratio."),
            "{}",
            lines[0]
        );
        assert!(!lines[0].contains("reference run"), "{}", lines[0]);
        let out = render(&b);
        assert!(
            out.contains("| CPU natively, kernel (ms per 1,000 requests) | 25.0 | 100.0 | – |"),
            "{out}"
        );
        assert!(b.add_native("stack,regime\nh1,reuse\n").is_err());
        b.changes = Some("### Changes this breakdown led to\n\nA row moved 85 → 1.5 KB.\n".into());
        let out = render(&b);
        assert!(out.contains("`changes.md` beside `breakdown.csv`"), "{out}");
        assert!(
            !out.contains("A row moved"),
            "hand-written figures in the paper: {out}"
        );
    }

    #[test]
    fn rejects_an_unknown_group_or_column() {
        let bad = FIXTURE.replace("h1,new-conn,client,socket_io", "h1,new-conn,client,sockets");
        assert!(Breakdown::parse(&bad).is_err());
        assert!(Breakdown::parse("stack,regime\nh1,reuse\n").is_err());
    }
}
