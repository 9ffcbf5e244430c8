//! The sweep: for each planned cell, a fresh server process, warm-up, measured load with
//! resource sampling, then one flushed row. Knows stacks only through the shared trait.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bench_core::tls::{ensure_certs, load_ca, CertificateDer, SERVER_NAME};
use bench_core::{ClientSettings, ClientTls, Stack};
use indicatif::{ProgressBar, ProgressStyle};

use crate::experiment::Experiment;
use crate::load::{self, LoadSpec, Progress};
use crate::output::{self, CellResult, Manifest, ResultsWriter};
use crate::plan::{plan, Cell};
use crate::registry;
use crate::sampler::Sampler;
use crate::serve::{ServeOptions, ServerHandle, ServerProcess};
use crate::stats::Measurements;

/// Settings of the run that are not part of the experiment.
pub struct RunContext {
    pub certs_dir: PathBuf,
    pub client_threads: usize,
    pub pinning: String,
    pub server_cpu: Option<usize>,
    /// An already running server to measure instead of starting one per cell.
    pub target: Option<(std::net::SocketAddr, Option<u32>)>,
    pub argv: Vec<String>,
}

/// What a finished (or interrupted) run left behind.
pub struct RunOutcome {
    pub dir: PathBuf,
    pub results: Vec<CellResult>,
    pub interrupted: bool,
}

/// Waits for SIGINT or SIGTERM and raises the flag.
fn watch_signals(stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("\ninterrupted: stopping the current cell; finished rows are kept");
        stop.store(true, Ordering::SeqCst);
    });
}

/// Runs the experiment into a new results directory, or, with `resume`, runs the cells that
/// directory does not have yet and appends them.
pub async fn run(
    exp: Experiment,
    ctx: RunContext,
    resume: Option<PathBuf>,
) -> anyhow::Result<RunOutcome> {
    let ctx = Arc::new(ctx);
    if netns_in_use(&exp) {
        crate::netns::remove_stale();
    }
    let planned = plan(&exp);
    let (dir, done, started_utc) = match resume {
        Some(dir) => {
            let done = output::finished_cells(&dir)?;
            let started = Manifest::read(&dir)?.started_utc;
            (dir, done, started)
        }
        None => {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
            let dir = exp.out.join(format!("{stamp}-{}", exp.name));
            (dir, Default::default(), chrono::Utc::now().to_rfc3339())
        }
    };
    let cells: Vec<Cell> = planned
        .iter()
        .filter(|c| !done.contains(&c.key()))
        .cloned()
        .collect();
    let mut writer = ResultsWriter::open(&dir)?;
    let mut manifest = Manifest {
        experiment: exp.clone(),
        started_utc,
        finished_utc: None,
        status: "running".into(),
        cells_planned: planned.len(),
        cells_done: done.len(),
        git_commit: output::git_commit(),
        rustc: env!("RUNNER_RUSTC_VERSION").to_string(),
        crate_versions: output::crate_versions(),
        kernel: output::kernel(),
        cpu_model: output::cpu_model(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        pinning: ctx.pinning.clone(),
        client_threads: ctx.client_threads,
        server_threads: exp.server_threads,
        argv: ctx.argv.clone(),
        stack_settings: exp
            .stacks
            .iter()
            .filter_map(|s| registry::find(s))
            .map(|s| {
                let settings = std::iter::once(("stack", s.description().to_string()))
                    .chain(s.server_settings())
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                (s.name().to_string(), settings)
            })
            .collect(),
    };
    manifest.write(&dir)?;
    let certs = ensure_certs(&ctx.certs_dir)?;
    let ca = load_ca(&certs.ca_cert())?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone());
    eprintln!("writing results to {}", dir.display());
    let mut results = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stack = registry::find(&cell.stack).expect("validated stack");
        let bar = ProgressBar::new(match cell.duration_s {
            Some(_) => 0,
            None => cell.requests,
        });
        bar.set_style(
            ProgressStyle::with_template("{prefix:<28} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(format!("[{}/{}] {}", i + 1, cells.len(), cell.key()));
        let outcome = run_isolated(stack, cell, &ctx, &ca, &bar, &stop, i).await;
        let (result, samples) = match outcome {
            Ok(Some(done)) => done,
            Ok(None) => {
                bar.abandon_with_message("interrupted");
                break;
            }
            Err(e) => {
                bar.abandon_with_message("could not run");
                failed_cell(cell, format!("{e:#}"))
            }
        };
        bar.finish_with_message(format!(
            "{:.0} req/s, {} failed",
            result.throughput_rps(),
            result.measured.failed()
        ));
        writer.write_cell(&result, &samples)?;
        manifest.cells_done += 1;
        manifest.write(&dir)?;
        results.push(result);
    }
    let interrupted = stop.load(Ordering::SeqCst) && manifest.cells_done < planned.len();
    manifest.status = if interrupted {
        "interrupted"
    } else {
        "completed"
    }
    .into();
    manifest.finished_utc = Some(chrono::Utc::now().to_rfc3339());
    manifest.write(&dir)?;
    crate::summary::write(&dir)?;
    Ok(RunOutcome {
        dir: writer.dir.clone(),
        results,
        interrupted,
    })
}

fn failed_cell(cell: &Cell, error: String) -> (CellResult, Vec<crate::sampler::Sample>) {
    (
        CellResult {
            cell: cell.clone(),
            measured: Measurements::default(),
            elapsed_s: 0.0,
            cut_short: true,
            warmup: Measurements::default(),
            server: Default::default(),
            client: Default::default(),
            server_exit: None,
            error: Some(error),
            emulated_packets: None,
        },
        Vec::new(),
    )
}

/// Runs one cell; `None` when the run was interrupted during it (the cell is then not written,
/// so a resumed run measures it again).
async fn run_cell(
    stack: &'static dyn Stack,
    cell: &Cell,
    ctx: &RunContext,
    ca: &[CertificateDer<'static>],
    bar: &ProgressBar,
    stop: &Arc<AtomicBool>,
) -> Option<(CellResult, Vec<crate::sampler::Sample>)> {
    let exp = &*cell.exp;
    let serve = ServeOptions {
        stack: cell.stack.clone(),
        listen: "127.0.0.1:0".parse().expect("address"),
        plaintext: cell.plaintext,
        payload: cell.payload,
        fault: exp
            .server_fault
            .as_deref()
            .map(|f| f.parse().expect("validated fault")),
        threads: exp.server_threads,
        backlog: exp.backlog,
        certs: ctx.certs_dir.clone(),
        cpu: ctx.server_cpu,
        tuning: exp.tuning(),
    };
    let mut server = match ctx.target {
        Some((addr, pid)) => ServerHandle::External { addr, pid },
        None => match ServerProcess::start(&serve).await {
            Ok(s) => ServerHandle::Child(s),
            Err(e) => return Some(failed_cell(cell, format!("server did not start: {e:#}"))),
        },
    };
    let settings = ClientSettings {
        target: server.addr(),
        server_name: SERVER_NAME.to_string(),
        tls: (!cell.plaintext).then(|| ClientTls {
            ca: ca.to_vec(),
            variant: cell.handshake,
        }),
        connect_timeout: Duration::from_millis(exp.connect_timeout_ms),
        handshake_timeout: Duration::from_millis(exp.handshake_timeout_ms),
        payload: cell.payload,
        tuning: exp.tuning(),
    };
    let client = match stack.client(&settings) {
        Ok(c) => c,
        Err(e) => {
            server.stop().await;
            return Some(failed_cell(cell, format!("client setup failed: {e:#}")));
        }
    };
    let spec = LoadSpec {
        regime: cell.regime,
        concurrency: cell.concurrency,
        requests: cell.requests,
        connections: cell.connections,
        request_timeout: Duration::from_millis(exp.request_timeout_ms),
        connect_bound: Duration::from_millis(
            exp.connect_timeout_ms + exp.handshake_timeout_ms + exp.request_timeout_ms,
        ),
        max_duration: Duration::from_secs(cell.duration_s.unwrap_or(exp.max_cell_seconds)),
        first_id: 1_000_000,
        rate: cell.rate,
    };
    let warmup = if cell.warmup_requests > 0 {
        bar.set_message("warm-up");
        let warm = LoadSpec {
            requests: cell.warmup_requests,
            first_id: 0,
            max_duration: Duration::from_secs(exp.max_cell_seconds),
            ..spec
        };
        let progress = Arc::new(Progress::default());
        let result = supervised(
            load::run(client.clone(), warm, progress.clone()),
            &progress,
            bar,
            stop,
            false,
        )
        .await;
        let Some(result) = result else {
            server.stop().await;
            return None;
        };
        result.measurements
    } else {
        Measurements::default()
    };
    let sampler = Sampler::start(server.pid(), Duration::from_millis(exp.sample_interval_ms));
    let progress = Arc::new(Progress::default());
    let measured = supervised(
        load::run(client, spec, progress.clone()),
        &progress,
        bar,
        stop,
        true,
    )
    .await;
    let (samples, server_res, client_res) = sampler.finish();
    let server_exit = server.exited();
    server.stop().await;
    let measured = measured?;
    Some((
        CellResult {
            cell: cell.clone(),
            elapsed_s: measured.elapsed.as_secs_f64(),
            cut_short: measured.cut_short,
            measured: measured.measurements,
            warmup,
            server: server_res,
            client: client_res,
            server_exit,
            error: None,
            emulated_packets: None,
        },
        samples,
    ))
}

/// Runs a load phase while updating the bar; on interruption stops it and gives it two
/// seconds to finish in-flight requests before abandoning it.
async fn supervised(
    phase: impl std::future::Future<Output = load::LoadResult>,
    progress: &Arc<Progress>,
    bar: &ProgressBar,
    stop: &Arc<AtomicBool>,
    show: bool,
) -> Option<load::LoadResult> {
    tokio::pin!(phase);
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            result = &mut phase => {
                return (!stop.load(Ordering::SeqCst)).then_some(result);
            }
            _ = tick.tick() => {
                if show {
                    let done = progress.done.load(Ordering::Relaxed);
                    bar.set_position(done);
                    let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-3);
                    bar.set_message(format!("{rate:.0} req/s, {} failed", progress.failed.load(Ordering::Relaxed)));
                }
                if stop.load(Ordering::SeqCst) {
                    progress.stop.store(true, Ordering::SeqCst);
                    let _ = tokio::time::timeout(Duration::from_secs(2), &mut phase).await;
                    return None;
                }
            }
        }
    }
}

/// The results directory a run would write, checked before anything is created.
pub fn check_out_dir(out: &Path) -> Result<(), String> {
    let mut probe = out;
    loop {
        if probe.exists() {
            if !probe.is_dir() {
                return Err(format!(
                    "results directory {}: {} is not a directory",
                    out.display(),
                    probe.display()
                ));
            }
            return nix::unistd::access(probe, nix::unistd::AccessFlags::W_OK).map_err(|e| {
                format!(
                    "results directory {}: {} is not writable ({e})",
                    out.display(),
                    probe.display()
                )
            });
        }
        match probe.parent() {
            Some(p) if !p.as_os_str().is_empty() => probe = p,
            _ => return Ok(()),
        }
    }
}

/// Runs one cell with the cell's open-file limit (restored afterwards): on the run's runtime,
/// or, when the cell needs a private network namespace or other client threads, on a runtime
/// of its own whose threads enter the namespace.
async fn run_isolated(
    stack: &'static dyn Stack,
    cell: &Cell,
    ctx: &Arc<RunContext>,
    ca: &[CertificateDer<'static>],
    bar: &ProgressBar,
    stop: &Arc<AtomicBool>,
    index: usize,
) -> anyhow::Result<Option<(CellResult, Vec<crate::sampler::Sample>)>> {
    let netns = if cell.exp.needs_netns() {
        Some(Arc::new(crate::netns::Netns::create(&cell.exp, index)?))
    } else {
        None
    };
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    let (soft_before, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    if let Some(n) = cell.exp.client_nofile {
        crate::pin::set_nofile_soft_limit(n.min(hard))?;
    }
    let threads = match cell.exp.client_threads {
        0 => ctx.client_threads,
        n => n as usize,
    };
    if netns.is_none() && threads == ctx.client_threads {
        // The run's own runtime: its threads (and their allocator arenas) live on from cell
        // to cell, so memory freed by one cell is reused by the next rather than held by
        // the arenas of exited threads.
        let outcome = run_cell(stack, cell, ctx, ca, bar, stop).await;
        let _ = crate::pin::set_nofile_soft_limit(soft_before);
        return Ok(outcome);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads).enable_all();
    if let Some(ns) = &netns {
        let ns = ns.clone();
        builder.on_thread_start(move || {
            ns.enter()
                .expect("cannot enter the cell's network namespace");
        });
    }
    let runtime = builder.build().context("cannot start the cell's runtime")?;
    let (cell, ctx, ca, bar, stop) = (
        cell.clone(),
        ctx.clone(),
        ca.to_vec(),
        bar.clone(),
        stop.clone(),
    );
    let outcome = tokio::task::spawn_blocking(move || {
        let outcome = runtime.block_on(async move {
            // Spawned, so that the cell runs on a worker thread (inside the namespace).
            tokio::spawn(async move { run_cell(stack, &cell, &ctx, &ca, &bar, &stop).await }).await
        });
        runtime.shutdown_timeout(Duration::from_millis(500));
        outcome
    })
    .await?;
    let _ = crate::pin::set_nofile_soft_limit(soft_before);
    let mut outcome = outcome?;
    if let (Some(ns), Some((result, _))) = (&netns, outcome.as_mut()) {
        result.emulated_packets = Some(ns.emulated_packets());
    }
    drop(netns);
    Ok(outcome)
}

fn netns_in_use(exp: &Experiment) -> bool {
    exp.variant_experiments()
        .iter()
        .any(|(_, e)| e.needs_netns())
}
