//! `runner serve`: one stack's server in its own process, so its RSS and CPU are measured
//! apart from the load generator; and the handle the runner uses to start and stop it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bench_core::tls::{ensure_certs, ServerIdentity};
use bench_core::{FaultSpec, PayloadProfile, ServerSettings, Stack};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The line a server prints once it accepts connections.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReadyLine {
    pub stack: String,
    pub addr: SocketAddr,
    pub pid: u32,
}

/// What `runner serve` needs; also what the runner passes to its children.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub stack: String,
    pub listen: SocketAddr,
    pub plaintext: bool,
    pub payload: PayloadProfile,
    pub fault: Option<FaultSpec>,
    pub threads: u32,
    pub backlog: u32,
    pub certs: PathBuf,
    pub cpu: Option<usize>,
    pub tuning: bench_core::Tuning,
    /// Processing time of each item request.
    pub service: bench_core::ServiceSpec,
}

/// Runs a server until SIGINT/SIGTERM (in the `serve` process).
pub fn serve_blocking(stack: &'static dyn Stack, opts: ServeOptions) -> anyhow::Result<()> {
    if let Some(cpu) = opts.cpu {
        crate::exec::pin::pin_current_thread(cpu)?;
    }
    crate::exec::pin::raise_nofile_soft_limit()?;
    if !opts.listen.ip().is_loopback() {
        eprintln!(
            "warning: serving on {}, which is not a loopback address",
            opts.listen
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads as usize)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        bench_core::tls::install_crypto_provider();
        let tls = if opts.plaintext {
            if !stack.supports_plaintext() {
                bail!("stack {} has no plaintext form", stack.name());
            }
            None
        } else {
            let paths = ensure_certs(&opts.certs)?;
            Some(Arc::new(ServerIdentity::load(&paths)?))
        };
        let bound = stack
            .bind(ServerSettings {
                listen: opts.listen,
                tls,
                payload: opts.payload,
                fault: opts.fault,
                backlog: opts.backlog,
                tuning: opts.tuning.clone(),
                service: opts.service,
            })
            .await
            .with_context(|| format!("cannot listen on {}", opts.listen))?;
        let ready = ReadyLine {
            stack: stack.name().to_string(),
            addr: bound.local_addr,
            pid: std::process::id(),
        };
        println!("{}", serde_json::to_string(&ready)?);
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            res = bound.serving => res?,
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm.recv() => {}
        }
        Ok(())
    })?;
    // Connection tasks may still hold sockets; don't wait for them on the way out.
    runtime.shutdown_timeout(Duration::from_millis(200));
    Ok(())
}

/// A `runner serve` child process.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    pub pid: u32,
}

impl ServerProcess {
    /// Starts the child and waits (bounded) for its ready line.
    pub async fn start(opts: &ServeOptions) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the runner executable")?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve")
            .args(["--stack", &opts.stack])
            .args(["--listen", &opts.listen.to_string()])
            .args(["--payload", opts.payload.as_str()])
            .args(["--threads", &opts.threads.to_string()])
            .args(["--backlog", &opts.backlog.to_string()])
            .arg("--certs")
            .arg(&opts.certs);
        if opts.plaintext {
            cmd.arg("--plaintext");
        }
        if let Some(fault) = &opts.fault {
            cmd.args(["--fault", &fault.to_string()]);
        }
        if let Some(cpu) = opts.cpu {
            cmd.args(["--cpu", &cpu.to_string()]);
        }
        if opts.tuning != bench_core::Tuning::default() {
            cmd.args(["--tuning", &serde_json::to_string(&opts.tuning)?]);
        }
        if let Some(time) = opts.service.time {
            cmd.args(["--service-time", &time.to_string()])
                .args(["--service-time-seed", &opts.service.seed.to_string()]);
        }
        if !opts.service.cpu.is_zero() {
            let us = opts.service.cpu.as_micros().to_string();
            cmd.args(["--service-cpu-us", &us]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("cannot start the server process")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(15), lines.next_line())
            .await
            .map_err(|_| anyhow!("{} server did not become ready within 15 s", opts.stack))??;
        let Some(line) = line else {
            let status = child.wait().await?;
            bail!(
                "{} server exited before it was ready ({status})",
                opts.stack
            );
        };
        let ready: ReadyLine = serde_json::from_str(&line)
            .with_context(|| format!("unexpected ready line from server: {line}"))?;
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ServerProcess {
            child,
            addr: ready.addr,
            pid: ready.pid,
        })
    }

    /// The exit status if the server has already died.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within two seconds.
    pub async fn stop(mut self) -> Option<String> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        None
    }
}

/// The certificate directory used when none is given: `certs/` of this checkout.
pub fn default_certs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../certs")
}

/// The server a cell measures: a child the runner started, or one already running that the
/// user pointed the runner at (`--target`, for comparisons with other load tools).
pub enum ServerHandle {
    Child(ServerProcess),
    External { addr: SocketAddr, pid: Option<u32> },
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        match self {
            ServerHandle::Child(p) => p.addr,
            ServerHandle::External { addr, .. } => *addr,
        }
    }
    pub fn pid(&self) -> Option<u32> {
        match self {
            ServerHandle::Child(p) => Some(p.pid),
            ServerHandle::External { pid, .. } => *pid,
        }
    }
    pub fn exited(&mut self) -> Option<String> {
        match self {
            ServerHandle::Child(p) => p.exited(),
            ServerHandle::External { .. } => None,
        }
    }
    /// Stops a child; leaves an external server running.
    pub async fn stop(self) -> Option<String> {
        match self {
            ServerHandle::Child(p) => p.stop().await,
            ServerHandle::External { .. } => None,
        }
    }
}
