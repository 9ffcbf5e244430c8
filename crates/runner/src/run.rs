//! The sweep: for each planned cell, a fresh server process, warm-up, measured load with
//! resource sampling, then one flushed row. Knows stacks only through the shared trait, and
//! where servers and load generators run only through the executor's
//! ([`executors::executor`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bench_core::tls::{ensure_certs, SERVER_NAME};
use indicatif::ProgressBar;

use crate::output::{self, Manifest, ResultsWriter};
use executors::cell_result::CellResult;
use executors::executor::{CellServer, CellSite, Executor};
use executors::load_child::{Finished, LoadJob, Message};
use executors::measure::proxies::ProxySampler;
use executors::serve::{ServeOptions, ServerHandle};
use experiment::plan::{plan, Cell};
use experiment::settings::Experiment;
use load::engine::LoadSpec;
use load::sampler::{ResourceSummary, Sample, Sampler};

/// This binary's global allocator as the manifest records it: `jemalloc` (the default build)
/// or `system` (`--no-default-features`, for heap profilers).
const ALLOCATOR: &str = if cfg!(feature = "jemalloc") {
    "jemalloc"
} else {
    "system"
};

/// Settings of the run that are not part of the experiment.
pub struct RunContext {
    pub certs_dir: PathBuf,
    pub client_threads: usize,
    pub pinning: String,
    pub server_cpu: Option<usize>,
    /// An already running server to measure instead of starting one per cell.
    pub target: Option<(std::net::SocketAddr, Option<u32>)>,
    /// The user's service (`[targets]`), resolved: measured instead of our servers.
    pub service: Option<Arc<executors::target::ServiceTargets>>,
    /// The pid of the user's service when it runs here, so its RSS and CPU are sampled.
    pub service_pid: Option<u32>,
    /// Agents that send each cell's load instead of one local load generator (and the one
    /// that runs each cell's server), for the local executor.
    pub agents: Option<Arc<executors::agent::Agents>>,
    /// The executor to use instead of the one the experiment names (tests: the kubernetes
    /// executor on a mock API server).
    pub executor: Option<Arc<dyn Executor>>,
    /// The command line as the manifest records it: secrets already redacted
    /// ([`crate::cli::argv_for_record`]).
    pub argv: Vec<String>,
    /// The live metrics endpoint's board, when the run serves one ([`crate::live`]).
    pub live: Option<Arc<live_metrics::Board>>,
}

/// What a finished (or interrupted) run left behind.
pub struct RunOutcome {
    pub dir: PathBuf,
    pub results: Vec<CellResult>,
    pub interrupted: bool,
    /// The run stopped early because a cell had nothing to measure (the line saying why).
    pub stopped: Option<String>,
}

/// Raises the flag on SIGINT or SIGTERM. The handlers are in place when this returns (not
/// when a task first runs), so a signal at any later instant stops the run cleanly.
fn watch_signals(stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!("\ninterrupted: stopping the current cell; finished rows are kept");
        stop.store(true, Ordering::SeqCst);
    });
    Ok(())
}

/// How long the open-loop stall probe spins before the first cell.
const STALL_PROBE: Duration = Duration::from_secs(1);

/// Probes the machine's stalls on the load generator's core (the runner's, which its load
/// generators inherit: CPU 1 when pinned).
async fn stall_probe(pinned: bool) -> results::manifest::StallProbe {
    let cpu = pinned.then_some(1);
    tokio::task::spawn_blocking(move || load::stalls::probe(STALL_PROBE, cpu))
        .await
        .expect("the stall probe does not panic")
}

/// Where a run's cells come from: the experiment's plan, or a search that picks each next cell
/// from the results so far (`runner capacity`).
pub trait CellSource: Send {
    /// The next cell to run, given every result of this session so far; `None` when done.
    fn next_cell(&mut self, finished: &[CellResult]) -> Option<Cell>;
    /// How many cells to expect in all (a search: its bound), for the progress lines.
    fn expected(&self) -> usize;
}

/// A fixed list of cells, in order.
struct Planned {
    cells: std::vec::IntoIter<Cell>,
    len: usize,
}

impl CellSource for Planned {
    fn next_cell(&mut self, _: &[CellResult]) -> Option<Cell> {
        self.cells.next()
    }
    fn expected(&self) -> usize {
        self.len
    }
}

/// Runs the experiment into a new results directory, or, with `resume`, runs the cells that
/// directory does not have yet and appends them.
pub async fn run(
    exp: Experiment,
    ctx: RunContext,
    resume: Option<PathBuf>,
) -> anyhow::Result<RunOutcome> {
    run_cells(exp, ctx, resume, None).await
}

/// [`run`], with the cells from `source` instead of the plan when given (the plan's cells
/// then only decide what the manifest calls planned: none for a search).
pub async fn run_cells(
    exp: Experiment,
    ctx: RunContext,
    resume: Option<PathBuf>,
    source: Option<Box<dyn CellSource>>,
) -> anyhow::Result<RunOutcome> {
    let mut ctx = ctx;
    let mut exp = exp;
    // A new run's random cell order gets its seed now; the manifest records it, and a resumed
    // run (whose manifest has it, or, from before seeds, kept the planned order) replays it.
    if resume.is_none()
        && source.is_none()
        && exp.cell_order == experiment::settings::CellOrder::Random
        && exp.cell_order_seed.is_none()
    {
        exp.cell_order_seed = Some(experiment::plan::draw_cell_order_seed());
    }
    // First: from here on an interrupt ends the run with its manifest and rows kept.
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;
    if netns_in_use(&exp) {
        executors::netem::netns::remove_stale();
    }
    // What the executor sets up (the hosts executor's namespaces and agents) lives as long
    // as the run.
    let executor = match ctx.executor.take() {
        Some(e) => e,
        None => executor_for_run(&exp, &ctx.certs_dir, ctx.agents.clone()).await?,
    };
    let ctx = Arc::new(ctx);
    let searching = source.is_some();
    let planned = if searching { Vec::new() } else { plan(&exp) };
    let mut resumed = None;
    let (dir, done, started_utc, run_id) = match resume {
        Some(dir) => {
            let checked =
                results::folder::check::<Manifest>(&dir, results::folder::Purpose::Resume)
                    .map_err(anyhow::Error::msg)?;
            let done = checked.cells.clone();
            let before = &checked.manifest;
            // A resumed run is the same run: it keeps the id (a run from before ids gets one).
            let run_id = before
                .run_id
                .clone()
                .unwrap_or_else(|| output::new_run_id(chrono::Utc::now()));
            let started = before.started_utc.clone();
            resumed = Some(checked);
            (dir, done, started, run_id)
        }
        None => {
            let now = chrono::Utc::now();
            let stamp = now.format("%Y%m%dT%H%M%SZ");
            let dir = output::create_run_dir(&exp.out, &format!("{stamp}-{}", exp.name))?;
            (
                dir,
                Default::default(),
                now.to_rfc3339(),
                output::new_run_id(now),
            )
        }
    };
    let cells: Vec<Cell> = planned
        .iter()
        .filter(|c| !done.contains(&c.key()))
        .cloned()
        .collect();
    let mut source: Box<dyn CellSource> = source.unwrap_or_else(|| {
        Box::new(Planned {
            len: cells.len(),
            cells: cells.into_iter(),
        })
    });
    let mut manifest = Manifest {
        run_id: Some(run_id),
        experiment: exp.for_record(),
        started_utc,
        finished_utc: None,
        status: "running".into(),
        cells_planned: planned.len(),
        cells_done: done.len(),
        git_commit: output::git_commit(),
        rustc: env!("RUNNER_RUSTC_VERSION").to_string(),
        crate_versions: output::crate_versions(),
        kernel: output::kernel(),
        cpu_model: executors::measure::environment::this_cpu_model(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        online_cpus: executors::measure::environment::online_cpus(),
        pinning: ctx.pinning.clone(),
        client_threads: ctx.client_threads,
        server_threads: exp.server_threads,
        argv: ctx.argv.clone(),
        emulator: None,
        emulator_delays_at: None,
        stacks: output::registered_stacks(),
        stack_settings: exp
            .stacks
            .iter()
            .filter_map(|s| stacks::find(s))
            .map(|s| {
                // With targets the server is the user's: our servers' settings do not apply.
                let server = match &ctx.service {
                    Some(service) => vec![(
                        "server",
                        format!(
                            "your service at {}",
                            service.for_stack(s.name()).endpoint.authority
                        ),
                    )],
                    None => s.server_settings(),
                };
                let settings = std::iter::once(("stack", s.description().to_string()))
                    .chain(server)
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                (s.name().to_string(), settings)
            })
            .collect(),
        service: ctx.service.as_ref().map(|s| s.record(&exp)),
        merged_from: Vec::new(),
        proxies: Vec::new(),
        environment: Some(executors::measure::environment::Environment::read(
            exp.udp_buffer_bytes
                .unwrap_or(bench_core::stack::DEFAULT_SERVER_UDP_BUFFER_BYTES),
            ALLOCATOR,
        )),
    };
    // The folder is whole before anything is measured: locked, its manifest written (and,
    // resumed, what a cut-off cell left dropped). A new folder that cannot be made whole
    // (a full disk) is removed again rather than left behind half-made.
    let opened = ResultsWriter::open(&dir).and_then(|writer| {
        manifest.write(&dir)?;
        if let Some(checked) = &resumed {
            for note in output::unfinished::prune_unfinished(&dir, checked)? {
                eprintln!("resume: {note}");
            }
        }
        Ok(writer)
    });
    let mut writer = match opened {
        Ok(writer) => writer,
        Err(e) => {
            if resumed.is_none() && std::fs::remove_dir_all(&dir).is_ok() {
                return Err(e.context(format!(
                    "nothing was measured; {} was removed",
                    dir.display()
                )));
            }
            return Err(e);
        }
    };
    if searching || planned.iter().any(|c| c.rate().is_some()) {
        let probe = stall_probe(exp.pin).await;
        eprintln!("open loop: {}", probe.describe());
        if let Some(env) = manifest.environment.as_mut() {
            env.stall_probe = Some(probe);
        }
    }
    manifest.write(&dir)?;
    // Made once here, before any server or load generator reads them.
    ensure_certs(&ctx.certs_dir)?;
    eprintln!("writing results to {}", dir.display());
    // Without a terminal the bars draw nothing, so each finished cell gets a line instead.
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut results = Vec::new();
    let mut stopped = None;
    let mut i = 0;
    while let Some(cell) = source.next_cell(&results) {
        let cell = &cell;
        if i > 0 {
            pause(Duration::from_millis(cell.settings.cell_pause_ms), &stop).await;
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let expected = source.expected().max(i + 1);
        let bar = crate::console::cell_bar(cell, i, expected);
        let snapshot = executors::measure::environment::CellSnapshot::take();
        if let Some(live) = &ctx.live {
            live.begin_cell(crate::live::labels(cell));
        }
        let outcome = run_isolated(cell, &ctx, &*executor, &bar, &stop, i).await;
        let cell_environment = snapshot.finish();
        let (mut result, samples) = match outcome {
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
        // The namespace recorded its emulator on the result; keep it beside load and steal.
        let emulation = result.environment.and_then(|e| e.emulation);
        let net = result.environment.and_then(|e| e.net);
        result.environment = Some(executors::measure::environment::CellEnvironment {
            emulation,
            net,
            ..cell_environment
        });
        // Each threshold that selects this cell is checked as it finishes (✓/✗ on its line).
        let marks = crate::output::thresholds::cell_marks(&cell.settings.thresholds, &result);
        bar.finish_with_message(format!(
            "{:.0} req/s, {} failed{marks}",
            result.throughput_rps(),
            result.measured.failed()
        ));
        if !interactive {
            let line = crate::console::cell_line(&result);
            eprintln!("[{}/{}] {line}{marks}", i + 1, expected);
        }
        writer.write_cell(&result, &samples)?;
        if let Some(live) = &ctx.live {
            live.end_cell(crate::live::last(&result));
        }
        if let Some(e) = result.environment.and_then(|e| e.emulation) {
            manifest.emulator = Some(e.kind.as_str().to_string());
            manifest.emulator_delays_at = Some(e.kind.delays_at().to_string());
        }
        manifest.add_proxies(&result);
        manifest.cells_done += 1;
        manifest.write(&dir)?;
        let hopeless = result.hopeless.clone();
        results.push(result);
        if let Some(why) = hopeless {
            stopped = Some(format!(
                "stopped at {}: {why}; nothing can be measured until that is fixed (--keep-going measures it anyway)",
                cell.key()
            ));
            break;
        }
        i += 1;
    }
    if searching {
        // A search plans as it goes: what it ran is what it planned.
        manifest.cells_planned = manifest.cells_done;
    }
    let interrupted = (stop.load(Ordering::SeqCst) || stopped.is_some())
        && (searching || manifest.cells_done < planned.len());
    manifest.status = if interrupted {
        "interrupted"
    } else {
        "completed"
    }
    .into();
    manifest.finished_utc = Some(chrono::Utc::now().to_rfc3339());
    manifest.write(&dir)?;
    results::summary::write(&dir)?;
    Ok(RunOutcome {
        dir: writer.dir.clone(),
        results,
        interrupted,
        stopped,
    })
}

/// Waits `length` between cells, or less if the run is interrupted.
async fn pause(length: Duration, stop: &AtomicBool) {
    let until = tokio::time::Instant::now() + length;
    while tokio::time::Instant::now() < until && !stop.load(Ordering::SeqCst) {
        tokio::time::sleep_until(
            until.min(tokio::time::Instant::now() + Duration::from_millis(50)),
        )
        .await;
    }
}

fn failed_cell(cell: &Cell, error: String) -> (CellResult, Vec<Sample>) {
    (
        CellResult {
            error: Some(error),
            ..CellResult::unmeasured(cell.clone())
        },
        Vec::new(),
    )
}

/// Runs one cell; `None` when the run was interrupted during it (the cell is then not written,
/// so a resumed run measures it again).
/// The server of `cell` as `runner serve` flags: listening on `listen`, certificates in
/// `certs`, pinned to `cpu` (the Kubernetes manifests start the same server).
pub fn serve_options(
    cell: &Cell,
    listen: std::net::SocketAddr,
    certs: std::path::PathBuf,
    cpu: Option<usize>,
) -> ServeOptions {
    let exp = &*cell.settings;
    ServeOptions {
        stack: cell.server_stack().to_string(),
        listen,
        plaintext: cell.server_plaintext(),
        payload: cell.payload(),
        fault: exp.server_fault.as_ref().map(|f| *f.value()),
        threads: exp.server_threads,
        backlog: exp.backlog,
        certs: Some(certs),
        cpu,
        service_time: exp.service_time_spec().time,
        service_time_seed: exp.service_time_seed,
        service_cpu_us: exp.service_cpu_us,
        tuning: Some(bench_core::Tuning {
            // A full-handshake cell resumes nothing: its server issues no tickets, so that
            // full vs resumed isolates resumption.
            no_session_tickets: cell.handshake() == bench_core::HandshakeVariant::Full,
            ..exp.tuning()
        }),
    }
}

async fn run_cell(
    cell: &Cell,
    ctx: &RunContext,
    site: &dyn CellSite,
    bar: &ProgressBar,
    stop: &Arc<AtomicBool>,
) -> Option<(CellResult, Vec<Sample>)> {
    let exp = &*cell.settings;
    let client_threads = match exp.client_threads {
        0 => ctx.client_threads,
        n => n as usize,
    };
    // The executor's site chooses the address the server listens on.
    let serve = serve_options(
        cell,
        "127.0.0.1:0".parse().expect("address"),
        ctx.certs_dir.clone(),
        ctx.server_cpu,
    );
    let service = ctx.service.as_ref().map(|s| s.for_stack(&cell.stack));
    let mut server: Box<dyn CellServer> = match (service, ctx.target) {
        (Some(target), _) => Box::new(ServerHandle::External {
            addr: target.addr,
            pid: ctx.service_pid,
        }),
        (None, Some((addr, pid))) => Box::new(ServerHandle::External { addr, pid }),
        (None, None) => match site.start_server(serve, stop).await {
            Ok(s) => s,
            // Interrupted while the server was starting: the cell is not written.
            Err(_) if stop.load(Ordering::SeqCst) => return None,
            Err(e) => return Some(failed_cell(cell, format!("server did not start: {e:#}"))),
        },
    };
    let spec = LoadSpec {
        regime: cell.regime,
        concurrency: cell.concurrency,
        requests: cell.requests(),
        connections: cell.connections(),
        request_timeout: Duration::from_millis(exp.request_timeout_ms),
        connect_bound: Duration::from_millis(
            exp.connect_timeout_ms + exp.handshake_timeout_ms + exp.request_timeout_ms,
        ),
        max_duration: Duration::from_secs(cell.duration_s().unwrap_or(exp.max_cell_seconds)),
        ends_by_time: cell.duration_s().is_some(),
        min_duration: match cell.duration_s() {
            Some(_) => Duration::ZERO,
            None => Duration::from_secs_f64(exp.min_cell_seconds),
        },
        first_id: 1_000_000,
        rate: cell.rate(),
        pacing: exp.pacing,
        ids: ctx.service.as_ref().map(|s| s.targets.ids),
        seq_base: 0,
        mix: match (&ctx.service, service) {
            (Some(s), Some(r)) => s.targets.mix(r.api).expect("validated before the run"),
            _ => None,
        },
        stop_after_identical_failures: exp.stop_after_identical_failures,
    };
    let job = LoadJob {
        stack: cell.stack.clone(),
        target: server.addr(),
        server_name: service.map_or(SERVER_NAME.to_string(), |t| t.server_name.clone()),
        tls: match service {
            Some(target) => target.tls.is_some().then_some(cell.handshake()),
            None => (!cell.client_plaintext()).then_some(cell.handshake()),
        },
        service: ctx.service.as_ref().map(|s| s.targets.clone()),
        connect_timeout_ms: exp.connect_timeout_ms,
        handshake_timeout_ms: exp.handshake_timeout_ms,
        payload: cell.payload(),
        tuning: exp.tuning(),
        client_threads,
        busy_poll: exp.busy_poll,
        live: ctx.live.is_some(),
        warmup: (cell.warmup_requests() > 0).then(|| LoadSpec {
            requests: cell.warmup_requests(),
            first_id: 0,
            max_duration: Duration::from_secs(exp.max_cell_seconds),
            ends_by_time: false,
            min_duration: Duration::ZERO,
            ..spec.clone()
        }),
        measured: spec,
    };
    let interval = Duration::from_millis(exp.sample_interval_ms);
    let timed = cell.duration_s().is_some();
    let live = ctx.live.as_deref();
    let outcome = supervised(&job, site, &mut *server, interval, bar, timed, stop, live).await;
    let server_exit = server.exited();
    let proxy_records = server.proxy_records();
    server.stop().await;
    let Supervised {
        finished,
        samples,
        server: server_res,
        client: client_res,
        net,
        per_agent,
        proxy_client,
        proxy_server,
    } = match outcome? {
        Ok(done) => done,
        Err(e) => return Some(failed_cell(cell, format!("{e:#}"))),
    };
    Some((
        CellResult {
            cell: cell.clone(),
            elapsed_s: finished.elapsed.as_secs_f64(),
            measured_start_unix_s: finished.started_unix_s,
            agents: per_agent.len().max(1) as u32,
            cut_short: finished.cut_short,
            extended: finished.budget_repeats > 1,
            budget_repeats: (!timed).then_some(finished.budget_repeats),
            steady: finished.steady,
            measured: finished.measured,
            warmup: finished.warmup,
            server: server_res,
            client: client_res,
            server_exit,
            // Recorded as a cell that did not run, with what its requests met.
            error: finished
                .hopeless
                .as_ref()
                .map(|why| format!("nothing to measure: {why}")),
            hopeless: finished.hopeless,
            emulated_packets: None,
            environment: Some(executors::measure::environment::CellEnvironment {
                net,
                ..Default::default()
            }),
            per_agent,
            proxies: (!proxy_records.is_empty()).then_some(
                executors::measure::proxies::ProxyReadings {
                    client: proxy_client,
                    server: proxy_server,
                    records: proxy_records,
                },
            ),
        },
        samples,
    ))
}

/// What a supervised measured phase gave.
struct Supervised {
    /// The phase's figures, added up over the load generators.
    finished: Finished,
    /// The resource samples of the phase.
    samples: Vec<Sample>,
    server: ResourceSummary,
    client: ResourceSummary,
    /// The kernel counters over the phase (read on this runtime's thread, so in the cell's
    /// namespace when it has one).
    net: Option<executors::measure::netcounters::CellCounters>,
    /// Each agent's outcome (empty when no agent ran the load).
    per_agent: Vec<executors::shard::AgentOutcome>,
    /// The client- and server-side proxies' usage over the phase (`None`: none in that role).
    proxy_client: Option<executors::measure::proxies::ProxyUsage>,
    proxy_server: Option<executors::measure::proxies::ProxyUsage>,
}

/// Runs the cell's load generators while updating the bar (in seconds when `timed`, else in
/// requests), sampling the server and a local generator during the measured phase. Every
/// generator's warm-up ends before any measures (the runner is the barrier: `go` to all at
/// once); a generator that fails fails the cell and the others are stopped. `None` when the
/// run was interrupted (the children are then ended and the cell not written).
#[allow(clippy::too_many_arguments)] // The cell's parts, each from its own owner.
async fn supervised(
    job: &LoadJob,
    site: &dyn CellSite,
    server: &mut dyn CellServer,
    interval: Duration,
    bar: &ProgressBar,
    timed: bool,
    stop: &Arc<AtomicBool>,
    live: Option<&live_metrics::Board>,
) -> Option<anyhow::Result<Supervised>> {
    let gens = match site.start_loadgens(job).await {
        Ok(g) => g,
        Err(_) if stop.load(Ordering::SeqCst) => return None,
        Err(e) => return Some(Err(e)),
    };
    let server_pid = server.pid();
    if job.warmup.is_some() {
        bar.set_message("warm-up");
    }
    let n = gens.len();
    // Each generator is driven by a task of its own that forwards its messages; the
    // supervisor answers on a channel per generator.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, anyhow::Result<Message>)>(64);
    let mut controls = Vec::new();
    let mut pids = Vec::new();
    let mut labels = Vec::new();
    let mut tasks = Vec::new();
    for (i, mut gen) in gens.into_iter().enumerate() {
        pids.push(gen.pid());
        labels.push(gen.label());
        let (ctl_tx, mut ctl_rx) = tokio::sync::mpsc::channel::<Control>(4);
        controls.push(ctl_tx);
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    m = gen.next() => {
                        let done = !matches!(m, Ok(Message::Measuring) | Ok(Message::Progress { .. }));
                        if tx.send((i, m)).await.is_err() {
                            gen.kill().await;
                            return None;
                        }
                        if done {
                            // Finished or failed: wait for the verdict (keep alive, or kill).
                            return match ctl_rx.recv().await {
                                Some(Control::Release) => {
                                    let client = gen.resources();
                                    gen.wait().await;
                                    Some(client)
                                }
                                _ => {
                                    gen.kill().await;
                                    None
                                }
                            };
                        }
                    }
                    c = ctl_rx.recv() => match c {
                        Some(Control::Go) => {
                            if let Err(e) = gen.go().await {
                                let _ = tx.send((i, Err(e))).await;
                            }
                        }
                        Some(Control::Release) | Some(Control::Kill) | None => {
                            gen.kill().await;
                            return None;
                        }
                    },
                }
            }
        }));
    }
    drop(tx);
    let kill_all = |controls: &Vec<tokio::sync::mpsc::Sender<Control>>| {
        for c in controls {
            let _ = c.try_send(Control::Kill);
        }
    };
    let mut sampler: Option<Sampler> = None;
    let mut proxy_sampler: Option<ProxySampler> = None;
    let mut net_before: Option<executors::measure::netcounters::Before> = None;
    let mut measuring_since = std::time::Instant::now();
    let mut measuring = vec![false; n];
    let mut progress = vec![(0u64, 0u64); n];
    let mut finished: Vec<Option<Finished>> = (0..n).map(|_| None).collect();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let outcome: anyhow::Result<()> = loop {
        let (i, message) = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => break Err(anyhow::anyhow!("the load generators went away")),
            },
            _ = tick.tick() => {
                if stop.load(Ordering::SeqCst) {
                    kill_all(&controls);
                    for t in tasks {
                        let _ = t.await;
                    }
                    if let Some(s) = sampler {
                        s.finish(Duration::ZERO);
                    }
                    return None;
                }
                continue;
            }
        };
        match message {
            Ok(Message::Measuring) => {
                measuring[i] = true;
                if measuring.iter().all(|m| *m) {
                    // A local generator is sampled here; agents sample their own.
                    let local = pids.iter().flatten().next().copied();
                    let readings = live.map(|l| l.readings());
                    sampler = Some(Sampler::start_with(server_pid, local, interval, readings));
                    let groups = server.proxies();
                    if !groups.is_empty() {
                        proxy_sampler = Some(ProxySampler::start(groups, interval));
                    }
                    // A server measured where it runs takes its first reading now too.
                    if let Err(e) = server.measuring(interval).await {
                        kill_all(&controls);
                        break Err(e.context("the server's agent"));
                    }
                    net_before = executors::measure::netcounters::Before::take();
                    measuring_since = std::time::Instant::now();
                    for c in &controls {
                        let _ = c.send(Control::Go).await;
                    }
                }
            }
            Ok(Message::Progress {
                done,
                failed,
                live: figures,
            }) => {
                if let (Some(board), Some(figures)) = (live, figures) {
                    board.progress(i, n, *figures);
                }
                progress[i] = (done, failed);
                let done: u64 = progress.iter().map(|p| p.0).sum();
                let failed: u64 = progress.iter().map(|p| p.1).sum();
                let elapsed = measuring_since.elapsed();
                let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
                if timed {
                    bar.set_position(elapsed.as_secs().min(bar.length().unwrap_or(u64::MAX)));
                    bar.set_message(format!("{done} done, {rate:.0} req/s, {failed} failed"));
                } else {
                    bar.set_position(done);
                    bar.set_message(format!("{rate:.0} req/s, {failed} failed"));
                }
            }
            Ok(Message::Finished {
                warmup,
                measured,
                elapsed_s,
                started_unix_s,
                cut_short,
                budget_repeats,
                steady,
                hopeless,
            }) => {
                finished[i] = Some(Finished {
                    warmup: *warmup,
                    measured: *measured,
                    elapsed: Duration::from_secs_f64(elapsed_s),
                    started_unix_s,
                    cut_short,
                    budget_repeats,
                    steady,
                    hopeless,
                });
                if finished.iter().all(Option::is_some) {
                    break Ok(());
                }
            }
            Err(e) => {
                kill_all(&controls);
                break Err(if n > 1 {
                    e.context(format!("load generator {} of {n} ({})", i + 1, labels[i]))
                } else {
                    e
                });
            }
        }
    };
    if let Err(e) = outcome {
        for t in tasks {
            let _ = t.await;
        }
        if let Some(s) = sampler {
            s.finish(Duration::ZERO);
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        return Some(Err(e));
    }
    // The boundary reading, taken as soon as every phase is over.
    let finished: Vec<Finished> = finished.into_iter().flatten().collect();
    let phase = finished.iter().map(|f| f.elapsed).max().unwrap_or_default();
    let net = net_before.as_ref().and_then(|b| b.finish());
    let (mut samples, mut server_res, local_client) = match sampler {
        Some(s) => s.finish(phase),
        None => Default::default(),
    };
    let (proxy_client, proxy_server) = match proxy_sampler {
        Some(p) => {
            let (proxy_samples, client, server) = p.finish();
            samples.extend(proxy_samples);
            (client, server)
        }
        None => (None, None),
    };
    match server.finished(phase).await {
        Ok(Some((res, remote_samples))) => {
            server_res = res;
            samples.extend(remote_samples);
        }
        Ok(None) => {}
        Err(e) => {
            kill_all(&controls);
            for t in tasks {
                let _ = t.await;
            }
            return Some(Err(e.context("the server's agent")));
        }
    }
    for c in &controls {
        let _ = c.send(Control::Release).await;
    }
    let mut shards = Vec::new();
    for ((task, f), label) in tasks.into_iter().zip(finished).zip(&labels) {
        let remote = task.await.ok().flatten().flatten();
        let client = match remote {
            Some(c) => c,
            None => local_client,
        };
        shards.push(executors::shard::ShardResult {
            finished: f,
            client,
            label: label.clone(),
        });
    }
    let (finished, client, per_agent) = executors::shard::combine(shards);
    // Agents' own rows only when agents ran the load (a local child has none).
    let per_agent = if pids.iter().all(Option::is_none) {
        per_agent
    } else {
        Vec::new()
    };
    Some(Ok(Supervised {
        finished,
        samples,
        server: server_res,
        client,
        net,
        per_agent,
        proxy_client,
        proxy_server,
    }))
}

/// What the supervisor tells a load generator's task.
enum Control {
    /// Start the measured phase.
    Go,
    /// The cell is over: let it exit after the last reading.
    Release,
    Kill,
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
            nix::unistd::access(probe, nix::unistd::AccessFlags::W_OK).map_err(|e| {
                format!(
                    "results directory {}: {} is not writable ({e})",
                    out.display(),
                    probe.display()
                )
            })?;
            // access() says yes to root everywhere, /proc and read-only mounts included:
            // only creating (and removing) a directory there shows that a run could.
            let trial = probe.join(format!(".runner-probe-{}", std::process::id()));
            return std::fs::create_dir(&trial)
                .and_then(|()| std::fs::remove_dir(&trial))
                .map_err(|e| {
                    format!(
                        "results directory {}: cannot create directories in {} ({e})",
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

/// Runs one cell with the cell's open-file limit (inherited by its load generator, restored
/// afterwards) at the site the executor gives it: on the run's runtime or, when the site has
/// threads enter a namespace (the cell's own, or the server's host), on a runtime of its own
/// whose thread enters it, so that the server and the load generator it starts live there.
/// The site removes what it created for the cell afterwards, also after a failure or an
/// interruption.
async fn run_isolated(
    cell: &Cell,
    ctx: &Arc<RunContext>,
    executor: &dyn Executor,
    bar: &ProgressBar,
    stop: &Arc<AtomicBool>,
    index: usize,
) -> anyhow::Result<Option<(CellResult, Vec<Sample>)>> {
    let site = executor.cell(cell, index)?;
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    let (soft_before, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    if let Some(n) = cell.settings.client_nofile {
        executors::pin::set_nofile_soft_limit(n.min(hard))?;
    }
    let mut outcome = match site.enter() {
        None => {
            let outcome = run_cell(cell, ctx, &*site, bar, stop).await;
            close(&*site).await;
            let _ = executors::pin::set_nofile_soft_limit(soft_before);
            outcome
        }
        Some(enter) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .on_thread_start(move || enter())
                .build()
                .context("cannot start the cell's runtime")?;
            let (cell, ctx, bar, stop) = (cell.clone(), ctx.clone(), bar.clone(), stop.clone());
            let inner = site.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let outcome = runtime.block_on(async move {
                    // Spawned, so that the cell runs on a worker thread (inside the namespace).
                    tokio::spawn(async move {
                        let outcome = run_cell(&cell, &ctx, &*inner, &bar, &stop).await;
                        close(&*inner).await;
                        outcome
                    })
                    .await
                });
                runtime.shutdown_timeout(Duration::from_millis(500));
                outcome
            })
            .await?;
            let _ = executors::pin::set_nofile_soft_limit(soft_before);
            outcome?
        }
    };
    if let Some((result, _)) = outcome.as_mut() {
        site.account(result);
    }
    drop(site);
    Ok(outcome)
}

/// Removes what the cell's site created; a failure to is reported, not fatal to the run.
async fn close(site: &dyn CellSite) {
    if let Err(e) = site.close().await {
        eprintln!("warning: cleaning up after the cell: {e:#}");
    }
}

fn netns_in_use(exp: &Experiment) -> bool {
    exp.variant_experiments()
        .iter()
        .any(|(_, e)| e.needs_netns())
}

/// The executor the experiment names, set up for the run (the hosts executor creates its
/// namespaces and agents here; the kubernetes executor connects to the API server).
pub async fn executor_for_run(
    exp: &experiment::settings::Experiment,
    certs_dir: &Path,
    agents: Option<Arc<executors::agent::Agents>>,
) -> anyhow::Result<Arc<dyn executors::executor::Executor>> {
    Ok(match exp.executor {
        experiment::settings::Executor::Local => {
            Arc::new(executors::local::Local::new(certs_dir, agents))
        }
        experiment::settings::Executor::Hosts => {
            Arc::new(executors::hosts::HostsExecutor::create(exp, certs_dir)?)
        }
        experiment::settings::Executor::Kubernetes => {
            Arc::new(executors::kubernetes::Kubernetes::connect(exp, certs_dir).await?)
        }
    })
}
