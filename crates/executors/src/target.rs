//! Measuring the user's own service (`[targets]`): where each stack's load goes (resolved
//! once, printed before the run), the client's TLS towards it, the checks that refuse a bad
//! target before any request, and the confirmation a large run to another host needs.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use bench_core::tls::ServerIdentity;
use bench_core::user_service::{Api, Endpoint, TargetTls, Targets};
use bench_core::{ClientSettings, ClientTls, FailureClass, HandshakeVariant};

use experiment::plan::plan;
use experiment::settings::Experiment;

/// Runs larger than this (warm-up and measured requests) to an address that is not on
/// loopback need `--yes` or a confirmation on the terminal.
pub const CONFIRM_ABOVE_REQUESTS: u64 = 10_000;

/// One API family's target, resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub api: Api,
    pub endpoint: Endpoint,
    pub addr: SocketAddr,
    /// The name verified in the certificate (and SNI).
    pub server_name: String,
    /// `None`: plaintext (`http://`).
    pub tls: Option<TargetTls>,
}

/// The experiment's targets with each family's address resolved.
#[derive(Debug, Clone)]
pub struct ServiceTargets {
    pub targets: Targets,
    pub resolved: BTreeMap<&'static str, Resolved>,
}

impl ServiceTargets {
    /// `None` when the experiment has no targets (our own servers are measured).
    pub fn resolve(exp: &Experiment) -> Result<Option<ServiceTargets>, String> {
        if exp.targets.is_empty() {
            return Ok(None);
        }
        let mut resolved = BTreeMap::new();
        for api in [Api::Rest, Api::Grpc] {
            let Some(target) = exp.targets.for_api(api) else {
                continue;
            };
            let endpoint = target.endpoint()?;
            let addr = endpoint
                .resolve()
                .map_err(|e| format!("targets.{}: {e}", api.as_str()))?;
            let tls = target.tls();
            resolved.insert(
                api.as_str(),
                Resolved {
                    api,
                    server_name: tls.server_name.clone().unwrap_or(endpoint.host.clone()),
                    tls: endpoint.https.then_some(tls),
                    endpoint,
                    addr,
                },
            );
        }
        Ok(Some(ServiceTargets {
            targets: exp.targets.clone(),
            resolved,
        }))
    }

    /// The target the stack named `stack` sends to (validation made sure there is one).
    pub fn for_stack(&self, stack: &str) -> &Resolved {
        let api = stacks::find(stack).expect("validated stack").api();
        &self.resolved[api.as_str()]
    }

    /// What the run will do, printed before it starts.
    pub fn describe(&self, exp: &Experiment) -> String {
        self.describe_addresses(exp) + &self.describe_load(exp)
    }

    /// Each target the run sends to, its resolved address and security, one line each.
    pub fn describe_addresses(&self, exp: &Experiment) -> String {
        let mut out = String::new();
        for r in self.resolved.values() {
            let stacks = stacks_of(exp, r.api);
            // A target no selected stack sends to is not part of this run.
            if stacks.is_empty() {
                continue;
            }
            out.push_str(&format!(
                "your service's {} target ({}): {} -> {} ({})\n",
                r.api.as_str(),
                stacks.join(", "),
                r.endpoint.authority,
                r.addr,
                r.security(),
            ));
        }
        out
    }

    /// The planned load's line of [`describe`](Self::describe).
    fn describe_load(&self, exp: &Experiment) -> String {
        let mut out = String::new();
        let (requests, seconds) = planned_load(exp);
        let load = match (requests, seconds) {
            (r, 0) => format!("{r} requests"),
            (0, s) => format!("{s} s of time-bound cells"),
            (r, s) => format!("{r} requests plus {s} s of time-bound cells"),
        };
        let open_loop = match (&exp.rates, exp.rate) {
            (Some(sweep), _) => {
                let rates = &sweep.value().rates_rps;
                format!(
                    ", open loop at {} rates up to {} req/s",
                    rates.len(),
                    rates.last().copied().unwrap_or_default()
                )
            }
            (None, Some(r)) => format!(", open loop at {r} req/s"),
            (None, None) => String::new(),
        };
        out.push_str(&format!("planned: {load}{open_loop}\n"));
        out
    }

    /// What the manifest records.
    pub fn record(&self, exp: &Experiment) -> results::manifest::ServiceRecord {
        results::manifest::ServiceRecord {
            insecure: self.targets.insecure(),
            targets: self
                .resolved
                .values()
                .map(|r| results::manifest::TargetRecord {
                    api: r.api.as_str().to_string(),
                    stacks: exp
                        .stacks
                        .iter()
                        .filter(|s| stacks::find(s).is_some_and(|s| s.api() == r.api))
                        .cloned()
                        .collect(),
                    authority: r.endpoint.authority.clone(),
                    host: r.endpoint.host.clone(),
                    port: r.endpoint.port,
                    address: r.addr.ip().to_string(),
                    loopback: r.addr.ip().is_loopback(),
                    transport: if r.tls.is_some() { "tls" } else { "plaintext" }.into(),
                    trust: match &r.tls {
                        None => "none".into(),
                        Some(t) if t.insecure => "not verified".into(),
                        Some(t) => t.ca.as_ref().map_or_else(
                            || {
                                let source = bench_core::tls::system_trust_source();
                                source.strip_prefix("the ").unwrap_or(&source).to_string()
                            },
                            |p| format!("CA {}", p.display()),
                        ),
                    },
                    server_name: r.server_name.clone(),
                })
                .collect(),
        }
    }

    /// Whether some target is not on loopback.
    pub fn leaves_this_host(&self) -> bool {
        self.resolved.values().any(|r| !r.addr.ip().is_loopback())
    }

    /// Refuses (or asks on a terminal) before more than [`CONFIRM_ABOVE_REQUESTS`] requests
    /// go to an address that is not on loopback.
    pub fn confirm(&self, exp: &Experiment, yes: bool) -> Result<(), String> {
        let (requests, seconds) = planned_load(exp);
        self.confirm_load(requests, seconds, yes)
    }

    /// [`confirm`](Self::confirm) for a load stated by the caller (a capacity search: its
    /// budget), `requests` plus `seconds` of time-bound cells.
    pub fn confirm_load(&self, requests: u64, seconds: u64, yes: bool) -> Result<(), String> {
        if yes || !self.leaves_this_host() || (requests <= CONFIRM_ABOVE_REQUESTS && seconds == 0) {
            return Ok(());
        }
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(format!(
                "targets: {requests} requests to a host that is not this machine: give --yes to confirm"
            ));
        }
        eprint!("send {requests} requests to the addresses above? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = stdin.lock().read_line(&mut answer);
        if matches!(answer.trim(), "y" | "Y" | "yes") {
            Ok(())
        } else {
            Err("targets: not confirmed; nothing was sent".into())
        }
    }

    /// Builds every stack's client once (templates, environment variables, data file, TLS
    /// files, descriptors from `.proto` files or reflection), so a bad target fails the run
    /// before it starts; the clients' notes (each line once) for the user.
    pub fn preflight(&self, exp: &Experiment) -> Result<Vec<String>, String> {
        let mut notes: Vec<String> = Vec::new();
        for name in &exp.stacks {
            let stack = stacks::find(name).expect("validated stack");
            let r = self.for_stack(name);
            let settings = client_settings(
                &self.targets,
                stack.api(),
                r.addr,
                &r.server_name,
                r.tls.as_ref().map(|t| (t, exp.handshake)),
                exp,
            )
            .map_err(|e| format!("targets.{}: {e:#}", r.api.as_str()))?;
            let client = stack
                .client(&settings)
                .map_err(|e| format!("targets.{} ({name}): {e:#}", r.api.as_str()))?;
            for note in client.notes() {
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
        Ok(notes)
    }
}

/// One stack's probe of its target ([`ServiceTargets::probes`]).
struct Probe {
    /// The stack that opened it.
    stack: String,
    /// What `runner check` prints for it.
    line: String,
    /// `None`: connected. `Some(true)`: failed on the target's settings (the server speaks
    /// TLS where the target says plaintext, or its certificate or handshake was refused),
    /// which no request of a run could pass; `Some(false)`: failed otherwise (not reached).
    failed: Option<bool>,
}

impl ServiceTargets {
    /// `runner check`: one connection (TCP or QUIC, and TLS) to its target from every selected
    /// stack, each reported in one line; whether all of them opened.
    pub fn try_connections(&self, exp: &Experiment) -> (Vec<String>, bool) {
        let probes = self.probes(exp);
        let all = probes.iter().all(|p| p.failed.is_none());
        (probes.into_iter().map(|p| p.line).collect(), all)
    }

    /// Before a run's load, the same probe as `runner check`'s: a stack whose connection
    /// fails on the target's settings (TLS where the URL says `http://`, a refused
    /// certificate) stops the run with that line, since every request would fail alike;
    /// the stacks that did not reach their target otherwise, each with its line (a first look
    /// skips them; other runs warn, since the load may come from other hosts).
    pub fn probe(&self, exp: &Experiment) -> Result<Vec<(String, String)>, String> {
        let probes = self.probes(exp);
        if let Some(p) = probes.iter().find(|p| p.failed == Some(true)) {
            return Err(p.line.clone());
        }
        Ok(probes
            .into_iter()
            .filter(|p| p.failed.is_some())
            .map(|p| (p.stack, p.line))
            .collect())
    }

    fn probes(&self, exp: &Experiment) -> Vec<Probe> {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                return exp
                    .stacks
                    .iter()
                    .map(|stack| Probe {
                        stack: stack.clone(),
                        line: format!("cannot start a runtime: {e}"),
                        failed: Some(false),
                    })
                    .collect()
            }
        };
        bench_core::tls::install_crypto_provider();
        // Whether each plaintext target answers a TLS hello, asked once per target.
        let mut speaks_tls: BTreeMap<&'static str, bool> = BTreeMap::new();
        let mut probes = Vec::new();
        for name in &exp.stacks {
            let stack = stacks::find(name).expect("validated stack");
            let r = self.for_stack(name);
            let head = format!(
                "{} ({}) to your service's {} target {} ({})",
                stack.label(),
                name,
                r.api.as_str(),
                r.endpoint.authority,
                r.addr
            );
            if r.tls.is_none() {
                let within = Duration::from_millis(exp.handshake_timeout_ms.min(SNIFF_BOUND_MS));
                let tls = *speaks_tls.entry(r.api.as_str()).or_insert_with(|| {
                    runtime.block_on(bench_core::tls::speaks_tls(r.addr, &r.server_name, within))
                });
                if tls {
                    probes.push(Probe {
                        stack: name.clone(),
                        line: format!("{head}: FAILED: {}", r.speaks_tls_hint()),
                        failed: Some(true),
                    });
                    continue;
                }
            }
            let opened = runtime.block_on(async {
                let settings = client_settings(
                    &self.targets,
                    stack.api(),
                    r.addr,
                    &r.server_name,
                    r.tls.as_ref().map(|t| (t, HandshakeVariant::Full)),
                    exp,
                )
                .map_err(|e| (format!("{e:#}"), true))?;
                let client = stack
                    .client(&settings)
                    .map_err(|e| (format!("{e:#}"), true))?;
                let connected = client.connect().await.map_err(|f| {
                    let tls = f.class == FailureClass::TlsFailed;
                    // Not a TLS record in answer to the hello: a plaintext server.
                    if tls && f.detail.contains("InvalidContentType") {
                        (format!("{f}: {}", r.plaintext_hint()), true)
                    } else {
                        (f.to_string(), tls)
                    }
                })?;
                connected.conn.close().await;
                Ok::<_, (String, bool)>(())
            });
            probes.push(match opened {
                Ok(()) => Probe {
                    stack: name.clone(),
                    line: format!("{head}: connected, {}", r.security()),
                    failed: None,
                },
                Err((e, settings)) => Probe {
                    stack: name.clone(),
                    line: format!("{head}: FAILED: {e}"),
                    failed: Some(settings),
                },
            });
        }
        runtime.shutdown_timeout(Duration::from_millis(200));
        probes
    }
}

/// The most draws searched for a `seq` that a mix sends to one of its entries: an entry's
/// weight would have to be under one in this many for the search to miss it.
const MIX_SEARCH_DRAWS: u64 = 1_000_000;

impl ServiceTargets {
    /// Before the load (and `runner check --probe`): one real request per target, per mix
    /// entry and per gRPC call, sent by the first selected stack of its API over one
    /// connection and judged by that entry's checks (status, fields, values) as the load's
    /// would be. One line each; `Err` with the lines when any failed, since every such
    /// request of the run would fail alike.
    pub fn request_probe(&self, exp: &Experiment) -> Result<Vec<String>, Vec<String>> {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => return Err(vec![format!("probe: cannot start a runtime: {e}")]),
        };
        bench_core::tls::install_crypto_provider();
        let timeout = Duration::from_millis(exp.request_timeout_ms);
        let mut lines = Vec::new();
        let mut failed = false;
        for api in [Api::Rest, Api::Grpc] {
            let Some(name) = exp
                .stacks
                .iter()
                .find(|s| stacks::find(s).is_some_and(|s| s.api() == api))
            else {
                continue;
            };
            let stack = stacks::find(name).expect("validated stack");
            let r = self.for_stack(name);
            let head = format!("probe: {} via {name}", api.as_str());
            // (label, seq) of each request to send: one per mix entry, or the one request.
            let requests: Vec<(String, u64)> = match self.targets.mix(api) {
                Ok(Some(mix)) => mix
                    .names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let seq = (0..MIX_SEARCH_DRAWS)
                            .find(|s| mix.pick(*s) == i)
                            .unwrap_or(0);
                        (format!("'{n}'"), seq)
                    })
                    .collect(),
                Ok(None) => vec![(String::new(), 0)],
                Err(e) => {
                    lines.push(format!("{head}: FAILED: {e}"));
                    failed = true;
                    continue;
                }
            };
            // Not reaching the target is the connection probe's to report (a warning: the
            // load may come from elsewhere); this one judges answers.
            let outcome = runtime.block_on(async {
                let settings = client_settings(
                    &self.targets,
                    api,
                    r.addr,
                    &r.server_name,
                    r.tls.as_ref().map(|t| (t, HandshakeVariant::Full)),
                    exp,
                )
                .map_err(|e| format!("{e:#}"))?;
                let client = stack.client(&settings).map_err(|e| format!("{e:#}"))?;
                let connected = match tokio::time::timeout(timeout, client.connect()).await {
                    Ok(Ok(connected)) => connected,
                    Ok(Err(f)) => return Ok(Err(f.to_string())),
                    Err(_) => return Ok(Err("no connection within request_timeout_ms".into())),
                };
                let mut answers = Vec::new();
                for (label, seq) in &requests {
                    let call = bench_core::Call {
                        id: self.targets.ids.id(*seq),
                        seq: *seq,
                        worker: 0,
                    };
                    let answer =
                        match tokio::time::timeout(timeout, connected.conn.request(call)).await {
                            Ok(Ok(reply)) => Ok(format!(
                                "ok in {:.1} ms, {} body bytes, every check passed",
                                reply.total.as_secs_f64() * 1e3,
                                reply.body_bytes
                            )),
                            Ok(Err(f)) => Err(f.to_string()),
                            Err(_) => Err(format!(
                                "no answer within request_timeout_ms ({} ms)",
                                exp.request_timeout_ms
                            )),
                        };
                    answers.push((label.clone(), answer));
                }
                connected.conn.close().await;
                Ok::<_, String>(Ok(answers))
            });
            match outcome {
                Ok(Err(unreached)) => {
                    lines.push(format!("{head}: not sent: {unreached}"));
                }
                Ok(Ok(answers)) => {
                    for (label, answer) in answers {
                        let head = if label.is_empty() {
                            head.clone()
                        } else {
                            format!("{head} {label}")
                        };
                        match answer {
                            Ok(ok) => lines.push(format!("{head}: {ok}")),
                            Err(e) => {
                                failed = true;
                                lines.push(format!("{head}: FAILED: {e}"));
                            }
                        }
                    }
                }
                Err(e) => {
                    failed = true;
                    lines.push(format!("{head}: FAILED: {e}"));
                }
            }
        }
        runtime.shutdown_timeout(Duration::from_millis(200));
        if failed {
            Err(lines)
        } else {
            Ok(lines)
        }
    }
}

/// How long the probe of a plaintext target waits for an answer to its TLS hello (a TLS
/// server answers within a round trip; a plaintext server may wait for more bytes).
const SNIFF_BOUND_MS: u64 = 2_000;

impl Resolved {
    /// The one line for an `http://` target whose server answered a TLS hello.
    fn speaks_tls_hint(&self) -> String {
        format!(
            "the server speaks TLS on this port (it answered a TLS hello with a TLS record), but http:// sends plaintext, so every request would fail: use https://{} ({})",
            self.endpoint.authority,
            self.url_key()
        )
    }

    /// What to do when an `https://` target's server answered the TLS hello in plaintext.
    fn plaintext_hint(&self) -> String {
        format!(
            "the server answered the TLS hello with something that is not TLS, so it likely speaks plaintext on this port: use http://{} if it does ({})",
            self.endpoint.authority,
            self.url_key()
        )
    }

    /// Where the target's scheme is given.
    fn url_key(&self) -> &'static str {
        match self.api {
            Api::Rest => "targets.rest.url, or --url",
            Api::Grpc => "targets.grpc.address, or --grpc",
        }
    }

    /// How the connection is secured, with what the certificate is verified against.
    pub fn security(&self) -> String {
        match &self.tls {
            None => "plaintext".to_string(),
            Some(t) if t.insecure => "TLS 1.3, certificate NOT verified (insecure)".into(),
            Some(t) => format!(
                "TLS 1.3, verified as {} against {}",
                self.server_name,
                t.ca.as_ref()
                    .map_or_else(bench_core::tls::system_trust_source, |p| format!(
                        "the CA file {}",
                        p.display()
                    ))
            ),
        }
    }
}

/// The selected stacks that send to the target of `api`.
fn stacks_of(exp: &Experiment, api: Api) -> Vec<&str> {
    exp.stacks
        .iter()
        .filter(|s| stacks::find(s).is_some_and(|s| s.api() == api))
        .map(String::as_str)
        .collect()
}

/// Requests the plan sends (warm-up and measured, every cell) and seconds of time-bound cells.
pub fn planned_load(exp: &Experiment) -> (u64, u64) {
    let cells = plan(exp);
    let requests = cells
        .iter()
        .filter(|c| c.duration_s().is_none())
        .map(|c| c.requests() + c.warmup_requests())
        .sum();
    let seconds = cells.iter().filter_map(|c| c.duration_s()).sum();
    (requests, seconds)
}

/// The client's TLS towards a target: its CA file or the system store, its mTLS identity.
pub fn client_tls(tls: &TargetTls, variant: HandshakeVariant) -> anyhow::Result<ClientTls> {
    let ca = match &tls.ca {
        Some(path) => bench_core::tls::load_ca(path)?,
        None => Vec::new(),
    };
    let identity = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            Some(std::sync::Arc::new(ServerIdentity::from_files(cert, key)?))
        }
        (None, None) => None,
        _ => anyhow::bail!("client_cert and client_key go together"),
    };
    Ok(ClientTls {
        system_roots: tls.ca.is_none(),
        ca,
        variant,
        identity,
        insecure: tls.insecure,
        ca_source: tls
            .ca
            .as_ref()
            .map(|p| format!("the CA file {}", p.display())),
    })
}

/// A client's settings towards the target of `api` (the load generator's and the
/// preflight's: one definition). Environment variables of templates are read here.
pub fn client_settings(
    targets: &Targets,
    api: Api,
    addr: SocketAddr,
    server_name: &str,
    tls: Option<(&TargetTls, HandshakeVariant)>,
    exp_timeouts: &impl Timeouts,
) -> anyhow::Result<ClientSettings> {
    let calls = targets
        .calls(api, &|name| std::env::var(name).ok())
        .map_err(anyhow::Error::msg)?
        .context("no target for this stack")?;
    Ok(ClientSettings {
        target: addr,
        server_name: server_name.to_string(),
        tls: tls.map(|(t, v)| client_tls(t, v)).transpose()?,
        connect_timeout: Duration::from_millis(exp_timeouts.connect_ms()),
        handshake_timeout: Duration::from_millis(exp_timeouts.handshake_ms()),
        payload: Default::default(),
        tuning: exp_timeouts.tuning(),
        calls,
    })
}

/// What [`client_settings`] needs besides the target: the run's or the load job's values.
pub trait Timeouts {
    fn connect_ms(&self) -> u64;
    fn handshake_ms(&self) -> u64;
    fn tuning(&self) -> bench_core::Tuning;
}

impl Timeouts for Experiment {
    fn connect_ms(&self) -> u64 {
        self.connect_timeout_ms
    }
    fn handshake_ms(&self) -> u64 {
        self.handshake_timeout_ms
    }
    fn tuning(&self) -> bench_core::Tuning {
        Experiment::tuning(self)
    }
}

/// Files a target names must exist before the run (their contents are read by the preflight).
pub fn check_files(targets: &Targets) -> Result<(), String> {
    let mut files: Vec<(&str, &Path)> = Vec::new();
    if let Some(r) = &targets.rest {
        for (k, p) in [
            ("targets.rest.body_file", &r.body_file),
            ("targets.rest.ca", &r.ca),
            ("targets.rest.client_cert", &r.client_cert),
            ("targets.rest.client_key", &r.client_key),
        ] {
            if let Some(p) = p {
                files.push((k, p));
            }
        }
        for p in r.requests.iter().filter_map(|q| q.body_file.as_ref()) {
            files.push(("targets.rest.requests.body_file", p));
        }
    }
    if let Some(g) = &targets.grpc {
        for p in &g.proto {
            files.push(("targets.grpc.proto", p));
        }
        for (k, p) in [
            ("targets.grpc.ca", &g.ca),
            ("targets.grpc.client_cert", &g.client_cert),
            ("targets.grpc.client_key", &g.client_key),
        ] {
            if let Some(p) = p {
                files.push((k, p));
            }
        }
    }
    if let Some(p) = &targets.data {
        files.push(("targets.data", p));
    }
    match files.iter().find(|(_, p)| !p.is_file()) {
        Some((key, path)) => Err(format!("{key}: no file {}", path.display())),
        None => Ok(()),
    }
}
