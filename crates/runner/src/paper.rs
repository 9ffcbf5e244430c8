//! `runner paper`: the reproduction write-up (Markdown) generated from a reference run of the
//! default sweep and the claim experiments' runs, with a verdict per study claim computed from
//! the numbers, never typed by hand.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::report::{label, levels, mean_of, ms, num, regimes, stack_order, Results, Row};

/// Rows of one run, its manifest and where it is.
struct Run {
    dir: PathBuf,
    results: Results,
}

impl Run {
    fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Run {
            dir: dir.to_path_buf(),
            results: Results::load(dir)?,
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
            .filter(|r| r["stage"] == "stress")
            .collect()
    }
    fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.results.cells {
            if !v.contains(&r["variant"]) {
                v.push(r["variant"].clone());
            }
        }
        v
    }
    /// The stress rows of one variant.
    fn of_variant(&self, variant: &str) -> Vec<&Row> {
        self.stress()
            .into_iter()
            .filter(|r| r["variant"] == variant)
            .collect()
    }
}

fn stress_table(out: &mut String, rows: &[&Row], regime: &str) {
    let _ = writeln!(out, "| users | stack | median (ms) | p95 (ms) | p99 (ms) | req/s | failed % | server RSS (MB) | server CPU (%) | client CPU ms / 1k |");
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in levels(rows, regime) {
        for s in stack_order(rows) {
            let m = |col| mean_of(rows, &s, regime, c, col);
            let (
                Some(p50),
                Some(p95),
                Some(p99),
                Some(rps),
                Some(ok),
                Some(rss),
                Some(cpu),
                Some(ccpu),
            ) = (
                m("latency_p50_us"),
                m("latency_p95_us"),
                m("latency_p99_us"),
                m("throughput_rps"),
                m("success_rate"),
                m("server_rss_peak_bytes"),
                m("server_cpu_pct_mean"),
                m("client_cpu_ms_per_1k_ok"),
            )
            else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {c} | {} | {} | {} | {} | {rps:.0} | {:.2} | {:.1} | {cpu:.0} | {ccpu:.0} |",
                label(&s),
                ms(p50),
                ms(p95),
                ms(p99),
                (1.0 - ok) * 100.0,
                rss / 1e6
            );
        }
    }
    out.push('\n');
}

/// A claim's check on one variant's rows: whether it holds and the numbers behind it.
type Check = fn(&[&Row]) -> Option<(bool, String)>;

fn c1(rows: &[&Row]) -> Option<(bool, String)> {
    let top = *levels(rows, "reuse").last()?;
    let rps = mean_of(rows, "grpc", "reuse", top, "throughput_rps")?;
    let p95 = mean_of(rows, "grpc", "reuse", top, "latency_p95_us")? / 1000.0;
    let all: Vec<f64> = levels(rows, "reuse")
        .iter()
        .filter_map(|c| mean_of(rows, "grpc", "reuse", *c, "throughput_rps"))
        .collect();
    let spread =
        all.iter().cloned().fold(f64::MIN, f64::max) / all.iter().cloned().fold(f64::MAX, f64::min);
    // The study's machine is not this one: the claim holds if gRPC reaches at least its
    // throughput with its latency bound.
    let holds = rps >= 26_000.0 && p95 <= 25.0;
    Some((holds, format!("gRPC at {top} workers: {rps:.0} req/s, p95 {p95:.2} ms; max/min throughput across levels {spread:.2}")))
}

fn c2(rows: &[&Row]) -> Option<(bool, String)> {
    let c = if levels(rows, "new-conn").contains(&200) {
        200
    } else {
        *levels(rows, "new-conn").last()?
    };
    let h1 = mean_of(rows, "h1", "new-conn", c, "success_rate")?;
    let grpc = mean_of(rows, "grpc", "new-conn", c, "success_rate")?;
    let holds = h1 < 0.5 && grpc < 0.5;
    let classes = failure_summary(
        rows.iter()
            .filter(|r| r["regime"] == "new-conn" && num(r, "concurrency") as u64 == c)
            .copied(),
    );
    Some((
        holds,
        format!(
            "success at {c} workers: HTTP/1.1 {:.2} %, gRPC {:.2} %{classes}",
            h1 * 100.0,
            grpc * 100.0
        ),
    ))
}

fn c3(rows: &[&Row]) -> Option<(bool, String)> {
    let rates: Vec<(u64, f64)> = levels(rows, "new-conn")
        .into_iter()
        .filter_map(|c| Some((c, mean_of(rows, "h3", "new-conn", c, "success_rate")?)))
        .collect();
    if rates.is_empty() {
        return None;
    }
    let worst = rates
        .iter()
        .cloned()
        .fold((0, f64::MAX), |a, b| if b.1 < a.1 { b } else { a });
    let holds = rates.iter().all(|(_, r)| *r > 0.9994);
    Some((
        holds,
        format!(
            "HTTP/3 lowest success {:.3} % (at {} workers){}",
            worst.1 * 100.0,
            worst.0,
            failure_summary(rows.iter().filter(|r| r["stack"] == "h3").copied())
        ),
    ))
}

fn c4(rows: &[&Row]) -> Option<(bool, String)> {
    let rps: Vec<(u64, f64)> = levels(rows, "new-conn")
        .into_iter()
        .filter_map(|c| Some((c, mean_of(rows, "h3", "new-conn", c, "throughput_rps")?)))
        .collect();
    if rps.is_empty() {
        return None;
    }
    let max = rps.iter().map(|r| r.1).fold(f64::MIN, f64::max);
    let holds = rps.iter().all(|(_, r)| *r <= 50.0);
    let list: Vec<String> = rps.iter().map(|(c, r)| format!("{c}: {r:.0}")).collect();
    Some((
        holds,
        format!(
            "HTTP/3 new-conn req/s by workers: {} (max {max:.0})",
            list.join(", ")
        ),
    ))
}

fn c5(rows: &[&Row]) -> Option<(bool, String)> {
    let top = *levels(rows, "reuse").last()?;
    let h3 = mean_of(rows, "h3", "reuse", top, "server_rss_peak_bytes")? / 1e6;
    let grpc = mean_of(rows, "grpc", "reuse", top, "server_rss_peak_bytes")? / 1e6;
    let h3c = mean_of(rows, "h3", "reuse", top, "client_rss_peak_bytes")? / 1e6;
    let holds = h3 / grpc >= 6.0;
    Some((holds, format!("server peak RSS at {top} workers: HTTP/3 {h3:.1} MB, gRPC {grpc:.1} MB ({:.1}×); runner (client) with HTTP/3 {h3c:.1} MB", h3 / grpc)))
}

fn failure_summary<'a>(rows: impl Iterator<Item = &'a Row>) -> String {
    let mut by_class: std::collections::BTreeMap<String, f64> = Default::default();
    for r in rows {
        for (k, v) in r.iter() {
            if let Some(class) = k.strip_prefix("fail_") {
                let n: f64 = v.parse().unwrap_or(0.0);
                if n > 0.0 {
                    *by_class.entry(class.to_string()).or_default() += n;
                }
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

const CLAIMS: [(&str, &str, &str, Check); 5] = [
    (
        "C1",
        "c1-",
        "gRPC ≈ 26,000 req/s with p95 ≤ 25 ms at 500 workers (reuse)",
        c1,
    ),
    (
        "C2",
        "c2-",
        "HTTP/1.1 and gRPC collapse at 200 workers under new connections",
        c2,
    ),
    (
        "C3",
        "c3-",
        "HTTP/3 success > 99.94 % at every level (new connections)",
        c3,
    ),
    (
        "C4",
        "c4-",
        "HTTP/3 capped at 36–39 req/s under new connections",
        c4,
    ),
    (
        "C5",
        "c5-",
        "QUIC RSS ≈ 440 MB vs gRPC ≈ 37 MB under reuse (12×)",
        c5,
    ),
];

/// Writes `out_dir/reproduction.md` from the reference run and the claim runs.
pub fn write(reference: &Path, claims: &[PathBuf], out_dir: &Path) -> anyhow::Result<PathBuf> {
    let reference = Run::load(reference)?;
    let claim_runs: Vec<Run> = claims
        .iter()
        .map(|d| Run::load(d))
        .collect::<anyhow::Result<_>>()?;
    let m = &reference.results.manifest;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Reproducing \"gRPC over QUIC vs REST in saturated meshes\" on one machine\n"
    );
    let _ = writeln!(out, "_Generated by `runner paper` from `{}` and {} claim runs; every number below comes from their CSVs._\n", reference.dir.display(), claim_runs.len());
    let _ = writeln!(out, "## Setup\n");
    let _ = writeln!(out, "- Machine: {}, {} cores, Linux {}; client and server on the same host (loopback), pinning: {}.", m["cpu_model"].as_str().unwrap_or("?"), m["cores"], m["kernel"].as_str().unwrap_or("?"), m["pinning"].as_str().unwrap_or("none"));
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
        m["git_commit"].as_str().unwrap_or("?")
    );
    let e = &m["experiment"];
    let _ = writeln!(out, "- Workload: `GET /items/{{id}}` (JSON) and unary `GetItem` (protobuf), payload `{}`, TLS 1.3 with ECDSA P-256 and full handshakes; closed loop; {} requests per reuse cell and {} per new-connection cell, {} % warm-up; {} repetition(s).\n", e["payload"].as_str().unwrap_or("?"), e["requests_reuse"], e["requests_new_conn"], e["warmup_fraction"].as_f64().unwrap_or(0.0) * 100.0, e["repetitions"]);
    let _ = writeln!(out, "## Reference sweep\n");
    let stress = reference.stress();
    for regime in regimes(&stress) {
        let _ = writeln!(out, "### {regime}\n");
        stress_table(&mut out, &stress, &regime);
    }
    let _ = writeln!(
        out,
        "Figures (from `scripts/plot.py {}`):\n",
        reference.dir.display()
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
    let _ = writeln!(out, "| claim | verdict | evidence (default conditions) |");
    let _ = writeln!(out, "|---|---|---|");
    let mut sections = String::new();
    for (id, prefix, text, check) in CLAIMS {
        let run = claim_runs.iter().find(|r| r.name().starts_with(prefix));
        let mut holding = Vec::new();
        let mut default_evidence = String::from("—");
        let mut default_holds = false;
        let _ = writeln!(sections, "### {id}: {text}\n");
        match run {
            None => {
                let _ = writeln!(
                    sections,
                    "No claim run was given; the reference sweep only.\n"
                );
                if let Some((holds, ev)) = check(&stress) {
                    default_holds = holds;
                    default_evidence = ev;
                }
            }
            Some(run) => {
                let _ = writeln!(
                    sections,
                    "From `{}` (experiment `{}`):\n",
                    run.dir.display(),
                    run.name()
                );
                let _ = writeln!(sections, "| variant | claim holds | numbers |");
                let _ = writeln!(sections, "|---|---|---|");
                for variant in run.variants() {
                    let rows = run.of_variant(&variant);
                    let Some((holds, evidence)) = check(&rows) else {
                        continue;
                    };
                    let _ = writeln!(
                        sections,
                        "| {variant} | {} | {evidence} |",
                        if holds { "yes" } else { "no" }
                    );
                    if variant == "default" {
                        default_holds = holds;
                        default_evidence = evidence;
                    } else if holds {
                        holding.push(variant);
                    }
                }
                sections.push('\n');
            }
        }
        let verdict = if default_holds {
            "confirmed".to_string()
        } else if holding.is_empty() {
            "not reproduced".to_string()
        } else {
            format!("reproduced only under {}", holding.join(", "))
        };
        let _ = writeln!(out, "| {id}: {text} | **{verdict}** | {default_evidence} |");
    }
    out.push('\n');
    out.push_str(&sections);
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let path = out_dir.join("reproduction.md");
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
