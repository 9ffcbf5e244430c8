//! `runner serve`: one stack's server in its own process, so its RSS and CPU are measured
//! apart from the load generator; and the handle the runner uses to start and stop it.

use std::net::SocketAddr;
use std::path::PathBuf;
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

/// What `runner serve` needs: its flags, and what the runner passes to its server children
/// (as flags derived from this same struct by [`ServeOptions::to_args`]).
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeOptions {
    /// The stack to serve (required; `runner --help` lists the stacks).
    #[arg(long)]
    pub stack: String,
    /// Address to listen on; port 0 picks a free one (a non-loopback address warns).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// No TLS: h1, h2c with prior knowledge, gRPC over h2c (default: TLS 1.3).
    #[arg(long)]
    pub plaintext: bool,
    /// Payload profile of the item: small (256 B JSON), 4k or 64k.
    #[arg(long, default_value_t = experiment::settings::Experiment::default().payload)]
    pub payload: PayloadProfile,
    /// Server runtime worker threads.
    #[arg(long, default_value_t = experiment::settings::Experiment::default().server_threads)]
    pub threads: u32,
    /// Listen backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = experiment::settings::Experiment::default().backlog)]
    pub backlog: u32,
    /// Test-only fault: status | bad-body | missing-field | delay-<N>ms | stall-<N>ms, with
    /// optional :<fraction> (default: none).
    #[arg(long)]
    #[serde(with = "as_text")]
    pub fault: Option<FaultSpec>,
    /// Certificate directory, created on first use (default: certs/ in the current directory).
    #[arg(long)]
    pub certs: Option<PathBuf>,
    /// Pin the server to this CPU (default: not pinned).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Transport knobs as JSON, e.g. '{"quic_initial_rtt_ms":100,"udp_buffer_bytes":4194304}'
    /// (default: the stacks' own settings).
    #[arg(long, value_parser = parse_tuning)]
    pub tuning: Option<bench_core::Tuning>,
    /// Processing time of each item request: fixed:<D> or exp:<mean>, e.g. exp:2ms (default:
    /// none, answer at once).
    #[arg(long)]
    #[serde(with = "as_text")]
    pub service_time: Option<bench_core::ServiceTime>,
    /// Seed of the exp: draws.
    #[arg(long, default_value_t = experiment::settings::Experiment::default().service_time_seed)]
    pub service_time_seed: u64,
    /// Busy CPU work per item request on the handler's thread, in µs.
    #[arg(long, default_value_t = experiment::settings::Experiment::default().service_cpu_us)]
    pub service_cpu_us: u64,
}

fn parse_tuning(text: &str) -> Result<bench_core::Tuning, String> {
    serde_json::from_str(text).map_err(|e| format!("invalid tuning JSON: {e}"))
}

/// An optional value in JSON as the text its flag takes (`Display` out, `FromStr` in).
mod as_text {
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt::Display;
    use std::str::FromStr;

    pub fn serialize<T: Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().map(|v| v.to_string()).serialize(s)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        Option::<String>::deserialize(d)?
            .map(|t| t.parse().map_err(D::Error::custom))
            .transpose()
    }
}

impl ServeOptions {
    /// What each item request costs this server.
    pub fn service_time_spec(&self) -> bench_core::ServiceTimeSpec {
        bench_core::ServiceTimeSpec {
            time: self.service_time,
            seed: self.service_time_seed,
            cpu: Duration::from_micros(self.service_cpu_us),
        }
    }

    /// The `runner serve` flags that parse back into these options: one `--field value` per
    /// field that is set, derived from the serialized struct, so no field can be forgotten.
    pub fn to_args(&self) -> Vec<String> {
        let serde_json::Value::Object(fields) =
            serde_json::to_value(self).expect("options serialize")
        else {
            unreachable!("a struct serializes to an object")
        };
        let mut args = Vec::new();
        for (key, value) in fields {
            let flag = format!("--{}", key.replace('_', "-"));
            match value {
                serde_json::Value::Null | serde_json::Value::Bool(false) => {}
                serde_json::Value::Bool(true) => args.push(flag),
                serde_json::Value::String(s) => args.extend([flag, s]),
                other => args.extend([flag, other.to_string()]),
            }
        }
        args
    }
}

/// Runs a server until SIGINT/SIGTERM (in the `serve` process), or until the runner that
/// started it is gone.
pub fn serve_blocking(stack: &'static dyn Stack, opts: ServeOptions) -> anyhow::Result<()> {
    crate::parent::follow("runner serve");
    if let Some(cpu) = opts.cpu {
        crate::pin::pin_current_thread(cpu)?;
    }
    crate::pin::raise_nofile_soft_limit()?;
    // The hosts executor's servers listen inside the suite's own namespaces (198.18.0.0/15):
    // only an address outside them reaches a network the suite did not make.
    if !crate::netem::netns::suite_address(opts.listen.ip()) {
        eprintln!(
            "warning: serving on {}, which is neither loopback nor inside the suite's namespaces (198.18.0.0/15)",
            opts.listen
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads.max(1) as usize)
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
            let certs = opts.certs.clone().unwrap_or_else(default_certs_dir);
            let paths = ensure_certs(&certs)?;
            Some(Arc::new(ServerIdentity::load(&paths)?))
        };
        let bound = stack
            .bind(ServerSettings {
                listen: opts.listen,
                tls,
                payload: opts.payload,
                fault: opts.fault,
                backlog: opts.backlog,
                tuning: opts.tuning.clone().unwrap_or_default(),
                service_time: opts.service_time_spec(),
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
        cmd.arg("serve").args(opts.to_args());
        crate::parent::follow_me(&mut cmd);
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

/// The certificate directory used when none is given: `certs/` under the directory the runner
/// is started in, like `results/`, never a path compiled into the binary (an installed binary
/// would otherwise write into the source tree or cargo's build folder it came from).
pub fn default_certs_dir() -> PathBuf {
    PathBuf::from("certs")
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        opts: ServeOptions,
    }

    /// The flags the runner gives its server child parse back into the same options, with
    /// every field set away from its default (a field the flags forgot would come back as it).
    #[test]
    fn child_flags_parse_back_into_the_same_options() {
        let opts = ServeOptions {
            stack: "h2".into(),
            listen: "127.0.0.9:4433".parse().unwrap(),
            plaintext: true,
            payload: PayloadProfile::K4,
            threads: 3,
            backlog: 17,
            fault: Some("delay-5ms:0.5".parse().unwrap()),
            certs: Some(PathBuf::from("/tmp/certs dir")),
            cpu: Some(1),
            tuning: Some(bench_core::Tuning {
                quic_initial_rtt_ms: Some(7),
                linger_zero: true,
                ..Default::default()
            }),
            service_time: Some("exp:2ms".parse().unwrap()),
            service_time_seed: 99,
            service_cpu_us: 5,
        };
        let args = opts.to_args();
        let parsed = Serve::try_parse_from(std::iter::once("serve".to_string()).chain(args))
            .expect("flags parse");
        assert_eq!(parsed.opts, opts);
    }
}
