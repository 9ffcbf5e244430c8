//! Command dispatch: what `runner` does with its command line.

use std::process::ExitCode;

use results::exit::{Status, Stopped};

use crate::cli::Command;
use crate::output::thresholds;
use crate::run;
use crate::{cli, output};
use executors::netem::netns;
use executors::serve::default_certs_dir;
use executors::{pin, serve};
use experiment::plan;
use experiment::settings;

pub fn main() -> ExitCode {
    match dispatch(cli::parse()) {
        Ok(code) => code,
        Err(stopped) => {
            error_line(&stopped);
            stopped.status.into()
        }
    }
}

/// The one way a command's error reaches the terminal: `error: ` and one line. A command that
/// stops prints it once, from [`main`]; a run that goes on past a failure (a file it could not
/// write, a probe `--keep-going` measures anyway) prints it where it goes on.
fn error_line(e: &dyn std::fmt::Display) {
    eprintln!("error: {e}");
}

/// Bad input, as [`Stopped`].
fn invalid(e: impl std::fmt::Display) -> Stopped {
    Stopped::invalid(e.to_string())
}

/// A failure after the input was accepted (an error's whole chain), as [`Stopped`].
fn failed(e: impl std::fmt::Display) -> Stopped {
    Stopped::failed(format!("{e:#}"))
}

/// What the command line asks, done: the exit code, or why it stopped ([`main`] prints it).
fn dispatch(cli: cli::Cli) -> Result<ExitCode, Stopped> {
    let done = Status::Success.into();
    match cli.command {
        Some(Command::Serve(opts)) => {
            let Some(stack) = stacks::find(&opts.stack) else {
                return Err(invalid(format!(
                    "unknown stack '{}', expected one of {}",
                    opts.stack,
                    stacks::names().join(", ")
                )));
            };
            serve::serve_blocking(stack, opts).map_err(failed)?;
            Ok(done)
        }
        Some(Command::Agent {
            listen,
            certs,
            cert,
            key,
            token_file,
        }) => {
            let token = executors::agent::read_token(token_file.as_deref())
                .map_err(|e| invalid(format!("{e:#}")))?;
            let options = executors::agent::AgentOptions {
                listen,
                certs: certs.unwrap_or_else(default_certs_dir),
                identity: cert.zip(key),
                token,
            };
            executors::agent::serve_blocking(options)
                .map_err(|e| failed(format!("agent: {e:#}")))?;
            Ok(done)
        }
        Some(Command::Load { certs, .. }) => {
            executors::load_child::child_main(&certs)
                .map_err(|e| failed(format!("load generator: {e:#}")))?;
            Ok(done)
        }
        Some(Command::ProxyGuard { dir, command }) => {
            Ok(executors::proxy::guard_main(&dir, &command).into())
        }
        Some(Command::Stacks { .. }) => {
            let json = serde_json::to_string(&output::registered_stacks()).map_err(failed)?;
            println!("{json}");
            Ok(done)
        }
        Some(Command::Completions { shell }) => {
            let mut cmd = cli::command();
            clap_complete::generate(shell, &mut cmd, "runner", &mut std::io::stdout());
            Ok(done)
        }
        Some(Command::Man) => {
            let cmd = cli::command();
            match clap_mangen::Man::new(cmd).render(&mut std::io::stdout()) {
                // `runner man | head` closes the pipe early: not an error.
                Ok(()) => Ok(done),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(done),
                Err(e) => Err(failed(format!("cannot write the man page: {e}"))),
            }
        }
        Some(Command::Report { dir }) => {
            let path = report::page::write(&dir).map_err(|e| invalid(format!("{e:#}")))?;
            println!("report: {}", path.display());
            Ok(done)
        }
        Some(Command::Compare {
            base,
            new,
            out,
            fail_on_regression,
            format,
        }) => report::compare::command(&base, &new, out.as_deref(), fail_on_regression, format),
        Some(Command::Merge { dirs, out }) => output::merge::command(&dirs, &out),
        Some(Command::K8s {
            command: cli::K8sCommand::Render { experiment, out },
        }) => {
            let args = cli::RunArgs {
                experiment: Some(experiment),
                ..cli.run
            };
            let exp = validated(&args).map_err(invalid)?;
            k8s_render(&exp, out.as_deref())?;
            Ok(done)
        }
        Some(Command::Capacity { search, run }) => capacity(&search, &run.or(cli.run)),
        Some(Command::Check { file, probe, run }) => {
            let args = cli::RunArgs {
                experiment: Some(file.clone()),
                ..run.or(cli.run)
            };
            let mut exp = validated(&args).map_err(invalid)?;
            let service = service_targets(&mut exp, None, false).map_err(invalid)?;
            if let Some(service) = &service {
                print!("{}", service.describe(&exp));
                let (lines, all) = service.try_connections(&exp);
                for line in &lines {
                    println!("{line}");
                }
                if !all {
                    return Err(invalid(format!(
                        "{}: some stacks cannot reach your service (FAILED above): fix what the line says, or leave those stacks out of `stacks` (the protocols the service speaks are the ones that connected)",
                        file.display()
                    )));
                }
                if probe {
                    probe_requests(service, &exp)?;
                }
            }
            let cells = plan::plan(&exp);
            println!(
                "{}: ok ({} cells; {})",
                file.display(),
                cells.len(),
                describe_estimate(&plan::estimate(&cells))
            );
            Ok(done)
        }
        None if cli.run.resume.is_some() => {
            let dir = cli.run.resume.clone().expect("checked");
            let mut exp = resumed(&cli.run, &dir).map_err(invalid)?;
            let service = service_targets(&mut exp, Some(true), false).map_err(invalid)?;
            let agents = agents_for(&exp, &cli.run).map_err(invalid)?;
            run_sweep(exp, service, agents, &cli.run, Some(dir))
        }
        None => {
            let mut exp = validated(&cli.run)
                .and_then(|e| ready_certs(&cli.run).map(|()| e))
                .map_err(invalid)?;
            if cli.run.is_first_look() {
                println!("{}", cli::first_look_banner());
            }
            let skip_unreached = cli.run.is_first_look() && !cli.run.keep_going;
            let service =
                service_targets(&mut exp, Some(cli.run.yes), skip_unreached).map_err(invalid)?;
            if let Some(service) = &service {
                // --keep-going measures failing requests: the probe then only informs.
                if !cli.run.no_probe {
                    match probe_requests(service, &exp) {
                        Err(stopped) if cli.run.keep_going => error_line(&stopped),
                        other => other?,
                    }
                }
            }
            let agents = agents_for(&exp, &cli.run).map_err(invalid)?;
            run_sweep(exp, service, agents, &cli.run, None)
        }
    }
}

/// Sends the probe's real requests ([`executors::target::ServiceTargets::request_probe`])
/// and prints their lines; bad input when one failed (the error says what to do).
fn probe_requests(
    service: &executors::target::ServiceTargets,
    exp: &settings::Experiment,
) -> Result<(), Stopped> {
    let (passed, lines) = match service.request_probe(exp) {
        Ok(lines) => (true, lines),
        Err(lines) => (false, lines),
    };
    for line in lines {
        println!("{line}");
    }
    if passed {
        Ok(())
    } else {
        Err(invalid("a probe's request failed (above): every such request of the run would fail alike; fix the target, or measure the failures anyway with --no-probe"))
    }
}

/// `estimated duration 2 min 10 s: …`, stating what the estimate assumes.
fn describe_estimate(e: &plan::Estimate) -> String {
    let mut parts = Vec::new();
    if e.baseline_cells > 0 {
        parts.push(format!(
            "{} baselines {}",
            e.baseline_cells,
            plan::human_duration(e.baseline_s)
        ));
    }
    if e.stress_cells > 0 {
        parts.push(format!(
            "{} stress cells ≈ {} assuming ≥ {:.0} req/s reuse and ≥ {:.0} req/s new-conn (or the open-loop rate, or fewer under emulated RTT), bulk objects at the shaped rate or else {:.0} Mbit/s",
            e.stress_cells,
            plan::human_duration(e.stress_s),
            plan::ASSUMED_RPS_REUSE,
            plan::ASSUMED_RPS_NEW_CONN,
            plan::ASSUMED_BULK_BITS_PER_S / 1e6
        ));
    }
    parts.push(format!(
        "{} × {:.0} s to start and stop servers and load generators",
        e.baseline_cells + e.stress_cells,
        plan::ASSUMED_CELL_OVERHEAD_S
    ));
    format!(
        "estimated duration {}: {}",
        plan::human_duration(e.total_s()),
        parts.join(", ")
    )
}

/// A validation failure named by where it came from: the flag that set the key, else the
/// file, line and column (when the key can be found in it), else the experiment.
fn describe_invalid(
    args: &cli::RunArgs,
    exp: &settings::Experiment,
    invalid: &settings::Invalid,
) -> String {
    if let Some(flag) = args.flag_for(&invalid.key) {
        return match &invalid.variant {
            Some(v) => format!("{flag}: variant '{v}': {}", invalid.message),
            None => format!("{flag}: {}", invalid.message),
        };
    }
    let text = args
        .experiment
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok());
    let position = text
        .as_deref()
        .and_then(|t| settings::file::key_position(t, invalid.variant.as_deref(), &invalid.key));
    match (&args.experiment, position) {
        (Some(path), Some((line, column))) => {
            format!("{}:{line}:{column}: {invalid}", path.display())
        }
        (Some(path), None) => format!("{}: {invalid}", path.display()),
        (None, _) => format!("experiment '{}': {invalid}", exp.name),
    }
}

/// `runner k8s render`: the first cell's manifests, to stdout as one YAML stream or to `out`
/// as one file per object; which cell it is goes to stderr (and the stream's header).
/// A manifest that cannot be rendered is bad input; a folder that cannot be written is a
/// failure.
fn k8s_render(exp: &settings::Experiment, out: Option<&std::path::Path>) -> Result<(), Stopped> {
    use executors::kubernetes;
    let cells = plan::plan(exp);
    let first = cells
        .first()
        .ok_or_else(|| Stopped::invalid("the experiment has no cell"))?;
    let (header, docs) = kubernetes::render(exp, first, 1, cells.len())
        .map_err(|e| Stopped::invalid(format!("{e:#}")))?;
    eprintln!(
        "manifests of cell 1 of {} ({}); the runner creates one such set per cell",
        cells.len(),
        first.key()
    );
    match out {
        None => print!("{}", kubernetes::render_stream(&header, &docs)),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Stopped::failed(format!("{}: cannot create: {e}", dir.display())))?;
            for (name, doc) in &docs {
                let path = dir.join(name);
                std::fs::write(&path, format!("{header}{doc}")).map_err(|e| {
                    Stopped::failed(format!("{}: cannot write: {e}", path.display()))
                })?;
            }
            eprintln!("{} manifests in {}", docs.len(), dir.display());
        }
    }
    Ok(())
}

fn validated(args: &cli::RunArgs) -> Result<settings::Experiment, String> {
    let exp = args.experiment()?;
    if let Err(invalid) = exp.check(&stacks::names()) {
        return Err(describe_invalid(args, &exp, &invalid));
    }
    if let Err(invalid) = thresholds::validate(&exp) {
        return Err(invalid.describe(args.experiment.as_deref(), &exp.name));
    }
    if exp
        .variant_experiments()
        .iter()
        .any(|(_, e)| e.needs_netns() || e.executor == settings::Executor::Hosts)
    {
        if let Some(why) = netns::unavailable() {
            return Err(format!("experiment '{}': {why}", exp.name));
        }
    }
    // A program the run starts (a proxy of a path, a server nobody here wrote) must be
    // there before the first cell, not fail every cell that needs it.
    for (_, e) in exp.variant_experiments() {
        let proxy = (e.path != settings::MeshPath::Direct).then_some(("proxy", e.proxy));
        let server = e.server.program().map(|p| ("server", p));
        for (key, program) in proxy.into_iter().chain(server) {
            if !executors::proxy::installed(program) {
                return Err(format!(
                    "{key} = \"{name}\": {name} is not installed here (apt-get install {name})",
                    name = program.as_str()
                ));
            }
        }
    }
    if !exp.targets.is_empty() {
        if args.target.is_some() {
            return Err("--target measures a running `runner serve`; the experiment's [targets] name your service: give one or the other".into());
        }
        executors::target::check_files(&exp.targets)?;
    } else if args.target_pid.is_some() && args.target.is_none() {
        return Err("--target-pid names the process of --target or of the [targets] service; neither is given".into());
    }
    if let Some(target) = args.target {
        if !target.ip().is_loopback() {
            return Err(format!(
                "--target {target}: only loopback servers may be measured"
            ));
        }
        if exp.stacks.len() != 1 || exp.needs_netns() || !exp.variants.is_empty() {
            return Err("--target measures one running server: give exactly one stack, no variants and no network emulation".into());
        }
    }
    run::check_out_dir(&exp.out)?;
    check_certs_dir(args)?;
    Ok(exp)
}

/// The certificate directory as validation sees it, creating nothing (`runner check` writes
/// nothing): certificates that are there must belong together; a directory still to be made
/// needs a parent that is a directory.
fn check_certs_dir(args: &cli::RunArgs) -> Result<(), String> {
    let dir = args.certs.clone().unwrap_or_else(default_certs_dir);
    let paths = bench_core::tls::CertPaths::new(&dir);
    let fail = |e: String| format!("--certs {}: {e}", dir.display());
    if paths.ca_cert().is_file() && paths.server_cert().is_file() && paths.server_key().is_file() {
        return bench_core::tls::check_certs(&paths).map_err(|e| fail(format!("{e:#}")));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(fail("not a directory".into()));
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if !dir.exists() && parent.is_some_and(|p| !p.is_dir()) {
        return Err(fail(format!(
            "cannot be made: {} is not a directory",
            parent.expect("checked").display()
        )));
    }
    Ok(())
}

/// Before a run: the certificates made if missing and checked, so that a directory that
/// cannot hold them is one line of bad input before any results folder exists.
fn ready_certs(args: &cli::RunArgs) -> Result<(), String> {
    let dir = args.certs.clone().unwrap_or_else(default_certs_dir);
    bench_core::tls::ensure_certs(&dir)
        .and_then(|paths| bench_core::tls::check_certs(&paths))
        .map_err(|e| format!("--certs {}: {e:#}", dir.display()))
}

/// The experiment of the run in `dir`, for `--resume`; no other run flag may change it but
/// the live metrics', which change nothing measured.
fn resumed(args: &cli::RunArgs, dir: &std::path::Path) -> Result<settings::Experiment, String> {
    let others = cli::RunArgs {
        resume: None,
        certs: None,
        ..cli::RunArgs::default()
    };
    let metrics = settings::Knobs {
        metrics_listen: args.knobs.metrics_listen.clone(),
        metrics_listen_public: args.knobs.metrics_listen_public,
        metrics_linger_seconds: args.knobs.metrics_linger_seconds,
        ..Default::default()
    };
    let given = cli::RunArgs {
        resume: None,
        certs: None,
        no_thresholds_exit: false,
        knobs: args.knobs.without_keys_of(&metrics),
        ..args.clone()
    };
    if given != others {
        return Err("--resume reuses the settings of the run it resumes; give no other run flags (except --certs and the --metrics-* flags)".into());
    }
    // Header, rows and manifest are checked before anything is measured.
    let manifest =
        results::folder::check::<output::Manifest>(dir, results::folder::Purpose::Resume)?.manifest;
    if !manifest.merged_from.is_empty() {
        return Err(format!(
            "--resume: {} is the output of `runner merge` (it adds up {} runs); resume the run that is missing cells, then merge again",
            dir.display(),
            manifest.merged_from.len()
        ));
    }
    // A capacity search chose its cells as it went: the experiment alone would plan others.
    let searched = cli::command()
        .try_get_matches_from(&manifest.argv)
        .is_ok_and(|m| m.subcommand_name() == Some("capacity"));
    if searched {
        return Err(format!(
            "--resume: {} is a capacity search's, which is not resumable; run the search again",
            dir.display()
        ));
    }
    let mut manifest = manifest;
    metrics.apply(&mut manifest.experiment);
    manifest.experiment.validate(&stacks::names())?;
    let recorded = serde_json::to_string(&manifest.experiment.targets).unwrap_or_default();
    if recorded.contains(bench_core::user_service::secrets::BODY_PREFIX) {
        return Err("this run's request bodies were recorded only as their size and hash (a body can hold a secret): resume is not possible; measure again, with record_bodies = true in [targets] (or --record-bodies) for a resumable run".into());
    }
    if recorded.contains("<redacted>") {
        return Err("this run's targets had a literal credential, which results never record: resume is not possible; give credentials as {{env.NAME}}".into());
    }
    Ok(manifest.experiment)
}

/// The experiment's targets resolved and every stack's client built once (`None` without
/// targets): a target that cannot be reached by name, or whose templates, files or
/// descriptors are wrong, stops the run before any request.
///
/// With `confirm` (a run: whether --yes was given), the plan and addresses are printed and a
/// large run to another host confirmed before anything is sent, the preflight included
/// (reflection sends a request); then each stack opens one connection, as `runner check`
/// does, and one that fails on the target's settings stops the run.
fn service_targets(
    exp: &mut settings::Experiment,
    confirm: Option<bool>,
    skip_unreached: bool,
) -> Result<Option<executors::target::ServiceTargets>, String> {
    let Some(service) = executors::target::ServiceTargets::resolve(exp)? else {
        return Ok(None);
    };
    if let Some(yes) = confirm {
        print!("{}", service.describe(exp));
        service.confirm(exp, yes)?;
    }
    bench_core::tls::install_crypto_provider();
    for note in service.preflight(exp)? {
        println!("note: {note}");
    }
    if confirm.is_some() {
        let unreached = service.probe(exp)?;
        // A first look runs the stacks that reached the service and names the others; when
        // none did, all stay and the first cell says why in one line (exit 3).
        if skip_unreached && !unreached.is_empty() && unreached.len() < exp.stacks.len() {
            for (stack, line) in &unreached {
                println!("skipped {stack}: {line}");
            }
            exp.stacks
                .retain(|s| !unreached.iter().any(|(stack, _)| stack == s));
        } else {
            for (_, line) in &unreached {
                eprintln!("warning: {line}");
            }
        }
    }
    Ok(Some(service))
}

/// The experiment's agents, each checked once (TLS verified, token accepted) before the run;
/// `None` without agents.
fn agents_for(
    exp: &settings::Experiment,
    args: &cli::RunArgs,
) -> Result<Option<executors::agent::Agents>, String> {
    if exp.executor == settings::Executor::Kubernetes {
        kubernetes_preflight(exp, args)?;
    }
    if exp.agents.is_empty() && exp.server_agent.is_none() {
        return Ok(None);
    }
    let certs = args.certs.clone().unwrap_or_else(default_certs_dir);
    let ca = exp
        .agent_ca
        .clone()
        .unwrap_or_else(|| bench_core::tls::CertPaths::new(&certs).ca_cert());
    bench_core::tls::install_crypto_provider();
    let fail = |e: anyhow::Error| format!("agents: {e:#}");
    let token = executors::agent::read_token(exp.agent_token_file.as_deref()).map_err(fail)?;
    let link =
        executors::agent::AgentLink::new(&ca, &exp.agent_server_name, token).map_err(fail)?;
    let resolve = |key: &str, a: &str| {
        std::net::ToSocketAddrs::to_socket_addrs(a)
            .ok()
            .and_then(|mut i| i.next())
            .ok_or_else(|| format!("{key}: '{a}' does not resolve to an address"))
    };
    let addrs = exp
        .agents
        .iter()
        .map(|a| resolve("agents", a))
        .collect::<Result<Vec<_>, _>>()?;
    let server = exp
        .server_agent
        .as_deref()
        .map(|a| resolve("server_agent", a))
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    for addr in addrs.iter().chain(&server) {
        runtime.block_on(link.check(*addr)).map_err(fail)?;
    }
    Ok(Some(executors::agent::Agents {
        addrs,
        server,
        link: std::sync::Arc::new(link),
    }))
}

/// The kubernetes executor's prerequisites, checked before anything is created: the agents'
/// token, and an API server that the environment names, that answers and whose certificate
/// verifies.
fn kubernetes_preflight(exp: &settings::Experiment, args: &cli::RunArgs) -> Result<(), String> {
    if args.target.is_some() {
        return Err(
            "executor kubernetes: --target is not supported (the server runs in its pod)".into(),
        );
    }
    executors::agent::read_token(exp.agent_token_file.as_deref())
        .map_err(|e| format!("executor kubernetes: {e:#}"))?;
    executors::kubernetes::check_api_server()
}

fn run_sweep(
    exp: settings::Experiment,
    service: Option<executors::target::ServiceTargets>,
    agents: Option<executors::agent::Agents>,
    args: &cli::RunArgs,
    resume: Option<std::path::PathBuf>,
) -> Result<ExitCode, Stopped> {
    measure(exp, service, agents, args, resume, None)
}

/// `runner capacity`: its flags checked, the experiment validated (open-loop probes are
/// request-budgeted: no rate, rates or duration), targets resolved and the budget confirmed
/// before anything is sent, then the searches as the run's cells.
fn capacity(search: &cli::CapacityArgs, args: &cli::RunArgs) -> Result<ExitCode, Stopped> {
    // Not a first look's short timed sweep (probes are sized by the probe rule), and without a
    // file or --concurrency one level, CAPACITY_CONCURRENCY, rather than the study's five.
    let mut args = cli::RunArgs {
        full_sweep: true,
        ..args.clone()
    };
    if args.experiment.is_none() && args.knobs.concurrency.is_none() {
        args.knobs.concurrency = Some(vec![CAPACITY_CONCURRENCY]);
    }
    let args = &args;
    let prepared = (|| -> Result<_, String> {
        let settings = search.settings()?;
        if args.resume.is_some() {
            return Err("--resume: a capacity search is not resumable; run it again".into());
        }
        let exp = validated(args)?;
        ready_certs(args)?;
        if exp.rate.is_some() || exp.rates.is_some() {
            return Err("--rate/--rates: a capacity search chooses each probe's rate".into());
        }
        if exp.duration_seconds.is_some() {
            return Err("--duration: capacity probes are sized by the probe rule (--tail-samples, --probe-seconds)".into());
        }
        let service = match executors::target::ServiceTargets::resolve(&exp)? {
            Some(service) => {
                print!("{}", service.describe_addresses(&exp));
                println!(
                    "planned: a capacity search of at most {} requests within {} s, open loop up to {} req/s",
                    settings.budget_requests, settings.budget_seconds, settings.ceiling_rps
                );
                service.confirm_load(settings.budget_requests, 0, args.yes)?;
                bench_core::tls::install_crypto_provider();
                service.preflight(&exp)?;
                for (_, line) in service.probe(&exp)? {
                    eprintln!("warning: {line}");
                }
                Some(service)
            }
            None => None,
        };
        let agents = agents_for(&exp, args)?;
        Ok((settings, exp, service, agents))
    })();
    let (settings, exp, service, agents) = prepared.map_err(invalid)?;
    let client_cores = match exp.client_threads {
        0 => pin::usable_cores(),
        n => n as usize,
    };
    let searches = std::sync::Arc::new(std::sync::Mutex::new(crate::capacity::Capacity::new(
        &exp,
        settings,
        search.slo(),
        client_cores,
    )));
    measure(exp, service, agents, args, None, Some(searches))
}

/// `runner capacity`'s workers when neither a file nor --concurrency gives them.
pub const CAPACITY_CONCURRENCY: u32 = 100;

/// One line per capacity search for the terminal.
fn capacity_lines(record: &crate::output::capacity::Record) -> String {
    let mut lines = vec!["capacity:".to_string()];
    for s in &record.searches {
        let rate = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r}"));
        lines.push(format!(
            "  {}{} {} c{}: {} req/s [{}, {}) {:?}, {} probes, {} requests, {:.1} s: {}",
            if s.variant == "default" {
                String::new()
            } else {
                format!("{}: ", s.variant)
            },
            s.stack,
            s.regime,
            s.concurrency,
            rate(s.capacity_rps),
            rate(s.interval_rps[0]),
            rate(s.interval_rps[1]),
            s.outcome,
            s.probes.len(),
            s.requests_spent,
            s.seconds_spent,
            s.note
        ));
    }
    lines.join("\n")
}

/// The cores the load generator's threads may run on: with `--pin` core 1 alone (the runner
/// pins itself there before it starts them), else the cores this process may use, at most one
/// per thread. (The capacity search counts its threads' cores before pinning.)
fn client_cores(exp: &settings::Experiment) -> usize {
    let usable = if exp.pin { 1 } else { pin::usable_cores() };
    match exp.client_threads {
        0 => usable,
        n => (n as usize).min(usable),
    }
}

fn measure(
    exp: settings::Experiment,
    service: Option<executors::target::ServiceTargets>,
    agents: Option<executors::agent::Agents>,
    args: &cli::RunArgs,
    resume: Option<std::path::PathBuf>,
    capacity: Option<std::sync::Arc<std::sync::Mutex<crate::capacity::Capacity>>>,
) -> Result<ExitCode, Stopped> {
    if let Some(n) = exp.client_nofile {
        pin::set_nofile_soft_limit(n).map_err(failed)?;
    }
    let (pinning, server_cpu) = if exp.pin {
        if pin::usable_cores() < 2 {
            return Err(Stopped::failed("--pin needs at least two usable cores"));
        }
        pin::pin_current_thread(1).map_err(failed)?;
        ("server cpu 0, runner cpu 1".to_string(), Some(0))
    } else {
        ("none".to_string(), None)
    };
    let client_threads = match exp.client_threads {
        0 => pin::usable_cores(),
        n => n as usize,
    };
    let client_cores = client_cores(&exp);
    // The runner only supervises: servers and load generators are processes of their own.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(failed)?;
    // Listening before anything is created: a port in use stops the run with nothing made.
    let metrics = match &exp.metrics_listen {
        Some(listen) => {
            let addr = listen.value().0;
            let endpoint = runtime
                .block_on(live_metrics::Endpoint::bind(addr))
                .map_err(|e| Stopped::failed(format!("metrics_listen {addr}: {e}")))?;
            eprintln!("metrics: http://{}/metrics", endpoint.addr());
            Some(endpoint)
        }
        None => None,
    };
    let metrics_linger = std::time::Duration::from_secs(exp.metrics_linger_seconds);
    let ctx = run::RunContext {
        agents: agents.map(std::sync::Arc::new),
        executor: None,
        certs_dir: args.certs.clone().unwrap_or_else(default_certs_dir),
        client_threads,
        pinning,
        server_cpu,
        target: args.target.map(|addr| (addr, args.target_pid)),
        service: service.map(std::sync::Arc::new),
        service_pid: args.target_pid,
        argv: cli::argv_for_record(
            &std::env::args().collect::<Vec<_>>(),
            &exp.targets.secret_headers,
            exp.targets.record_bodies,
        ),
        live: metrics.as_ref().map(|m| m.board().clone()),
    };
    bench_core::tls::install_crypto_provider();
    let limits = exp.thresholds.clone();
    let exp_insecure = exp.targets.insecure();
    let source = capacity
        .clone()
        .map(|c| Box::new(crate::capacity::Source(c)) as Box<dyn crate::run::CellSource>);
    let outcome = runtime
        .block_on(run::run_cells(exp, ctx, resume, source))
        .map_err(failed)?;
    // Over every row of cells.csv (a resumed run's earlier cells too), written before the exit.
    let checked = thresholds::write(&outcome.dir, &limits).map_err(failed)?;
    println!("\n{}", crate::console::summary_table(&outcome.results));
    let block = thresholds::summary_block(&checked);
    if !block.is_empty() {
        println!("{block}");
    }
    let failures = crate::console::failure_report(&outcome.results);
    if !failures.is_empty() {
        println!("{failures}");
    }
    println!("results: {}", outcome.dir.display());
    let record = capacity.map(|c| c.lock().expect("not poisoned").record(outcome.interrupted));
    if let Some(record) = &record {
        println!("{}", capacity_lines(record));
    }
    // The same rows and outcomes, for a pipeline; a run that cannot write it keeps its results.
    match output::summary_json::write(&outcome.dir, &checked, record) {
        Ok(path) => println!("summary: {}", path.display()),
        // The run's results stand without it: said, and the status is the run's.
        Err(e) => error_line(&format!("{e:#}")),
    }
    if exp_insecure {
        eprintln!("warning: insecure run: a target's certificate was not verified (insecure = true); `study paper` refuses it");
    }
    if let Some(warning) = crate::console::failure_warning(&outcome.results) {
        eprintln!("{warning}");
    }
    if let Some(warning) = crate::console::saturation_warning(&outcome.results, client_cores) {
        eprintln!("{warning}");
    }
    if outcome.stopped.is_none() {
        if let Some(hint) = crate::console::ci_hint(&outcome.results, !limits.is_empty()) {
            eprintln!("{hint}");
        }
    }
    // A scrape after the last cell reads its final figures (not after an interrupt).
    if let Some(endpoint) = metrics.filter(|_| !outcome.interrupted || outcome.stopped.is_some()) {
        if !runtime.block_on(endpoint.linger(metrics_linger)) && !metrics_linger.is_zero() {
            eprintln!(
                "metrics: no scrape read the final figures within {} s (metrics_linger_seconds)",
                metrics_linger.as_secs()
            );
        }
    }
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    let status = if outcome.interrupted && outcome.stopped.is_some() {
        // A stop at the last planned cell leaves nothing to resume: the run is complete.
        Status::NothingMeasurable
    } else if outcome.interrupted {
        Status::Interrupted
    } else if checked.iter().any(|o| !o.pass) && !args.no_thresholds_exit {
        Status::ThresholdFailed
    } else {
        Status::Success
    };
    match outcome.stopped {
        // Why the run stopped early, with the status its rows earned.
        Some(message) => Err(Stopped { status, message }),
        None => Ok(status.into()),
    }
}
