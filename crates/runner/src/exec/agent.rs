//! `runner agent`: one cell's load at a time for a runner on another host (or in another
//! network namespace), controlled over TLS instead of a child's stdin and stdout. The agent
//! runs the job exactly as the runner runs it locally (a `runner load` child of its own),
//! samples that child's RSS and CPU itself (the runner cannot see another host's processes),
//! and relays the child's messages; the runner is the barrier (`go` to every agent).
//!
//! The channel is TLS 1.3 (ALPN `tbench-agent/1`), verified against the suite's CA or one the
//! user gives, and the first line must carry the shared token (from a file or the
//! environment, never the command line); anything else is refused before a job is read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};

use crate::exec::loadgen::{LoadJob, LoadProcess, Message};
use crate::measure::sampler::{ResourceSummary, Sampler};

/// The control channel's ALPN: a runner and an agent of different protocol versions refuse
/// each other in the handshake.
pub const ALPN: &[u8] = b"tbench-agent/1";
/// The environment variable that holds the shared token (or `agent_token_file`).
pub const TOKEN_ENV: &str = "TBENCH_AGENT_TOKEN";
/// How long a runner gets to say hello after connecting.
const HELLO_BOUND: Duration = Duration::from_secs(10);

/// What the runner says to an agent, one JSON line each.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ToAgent {
    Hello {
        token: String,
    },
    Job {
        job: Box<LoadJob>,
    },
    /// Start the measured phase (after every agent said `measuring`).
    Go,
}

/// What an agent says besides relaying its load generator's [`Message`]s.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FromAgent {
    Welcome,
    Refused {
        reason: String,
    },
    Load {
        message: Box<Message>,
    },
    /// The load generator's resources over the measured phase, after `finished`.
    Resources {
        client: ResourceSummary,
    },
    Failed {
        error: String,
    },
}

/// Reads the shared token: from `file` when given, else from [`TOKEN_ENV`]; never empty.
pub fn read_token(file: Option<&Path>) -> anyhow::Result<String> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the agent token file {}", path.display()))?,
        None => std::env::var(TOKEN_ENV).map_err(|_| {
            anyhow!(
                "no agent token: set {TOKEN_ENV} or give a token file (never on the command line)"
            )
        })?,
    };
    let token = token.trim().to_string();
    if token.len() < 16 {
        bail!("the agent token must be at least 16 characters");
    }
    Ok(token)
}

/// Equal in time independent of where the strings differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// How an agent serves.
pub struct AgentOptions {
    pub listen: SocketAddr,
    pub certs: PathBuf,
    /// The agent's certificate chain and key (default: the suite's server certificate).
    pub identity: Option<(PathBuf, PathBuf)>,
    pub token: String,
}

type Tls<S> = tokio_rustls::server::TlsStream<S>;

/// Serves jobs until the process ends, one connection (one cell) at a time.
pub fn serve_blocking(options: AgentOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(options))
}

async fn serve(options: AgentOptions) -> anyhow::Result<()> {
    bench_core::tls::install_crypto_provider();
    let paths = bench_core::tls::ensure_certs(&options.certs)?;
    let identity = match &options.identity {
        Some((cert, key)) => bench_core::tls::ServerIdentity::from_files(cert, key)?,
        None => bench_core::tls::ServerIdentity::load(&paths)?,
    };
    let config = bench_core::tls::server_config(&identity, ALPN, false)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    // The ready line, as `runner serve` prints one: scripts and tests learn the port.
    println!(
        "{}",
        serde_json::json!({ "agent": listener.local_addr()?.to_string(), "pid": std::process::id() })
    );
    loop {
        let (tcp, peer) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let tls = match tokio::time::timeout(HELLO_BOUND, acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                eprintln!("agent: {peer}: TLS handshake failed: {e}");
                continue;
            }
            Err(_) => continue,
        };
        if let Err(e) = session(tls, &options).await {
            eprintln!("agent: {peer}: {e:#}");
        }
    }
}

async fn send<W: tokio::io::AsyncWrite + Unpin>(w: &mut W, line: &FromAgent) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// One runner's connection: hello, one job, relayed to its end.
async fn session(tls: Tls<TcpStream>, options: &AgentOptions) -> anyhow::Result<()> {
    let (read, mut write) = tokio::io::split(tls);
    let mut lines = BufReader::new(read).lines();
    let hello = tokio::time::timeout(HELLO_BOUND, lines.next_line())
        .await
        .map_err(|_| anyhow!("no hello"))??
        .unwrap_or_default();
    match serde_json::from_str::<ToAgent>(&hello) {
        Ok(ToAgent::Hello { token }) if same_token(&token, &options.token) => {}
        _ => {
            send(
                &mut write,
                &FromAgent::Refused {
                    reason: "wrong token".into(),
                },
            )
            .await?;
            bail!("refused a runner with a wrong token");
        }
    }
    send(&mut write, &FromAgent::Welcome).await?;
    let Some(line) = lines.next_line().await? else {
        return Ok(());
    };
    let ToAgent::Job { job } = serde_json::from_str(&line).context("expected a job")? else {
        bail!("expected a job");
    };
    let mut child = match LoadProcess::start(&job, &options.certs).await {
        Ok(c) => c,
        Err(e) => {
            send(
                &mut write,
                &FromAgent::Failed {
                    error: format!("{e:#}"),
                },
            )
            .await?;
            return Err(e);
        }
    };
    let interval = Duration::from_millis(100);
    let mut sampler: Option<Sampler> = None;
    loop {
        tokio::select! {
            message = child.next() => {
                let message = match message {
                    Ok(m) => m,
                    Err(e) => {
                        child.kill().await;
                        let _ = send(&mut write, &FromAgent::Failed { error: format!("{e:#}") }).await;
                        return Err(e);
                    }
                };
                match &message {
                    Message::Measuring => sampler = Some(Sampler::start(None, Some(child.pid), interval)),
                    Message::Finished { elapsed_s, .. } => {
                        let phase = Duration::from_secs_f64(*elapsed_s);
                        let client = sampler
                            .take()
                            .map(|s| s.finish(phase).2)
                            .unwrap_or_default();
                        send(&mut write, &FromAgent::Load { message: Box::new(message) }).await?;
                        send(&mut write, &FromAgent::Resources { client }).await?;
                        child.wait().await;
                        return Ok(());
                    }
                    Message::Progress { .. } => {}
                }
                send(&mut write, &FromAgent::Load { message: Box::new(message) }).await?;
            }
            line = lines.next_line() => match line? {
                Some(line) if matches!(serde_json::from_str(&line), Ok(ToAgent::Go)) => child.go().await?,
                Some(line) => bail!("unexpected line from the runner: {line}"),
                // The runner went away (interrupted, or another agent failed): stop.
                None => {
                    child.kill().await;
                    if let Some(s) = sampler {
                        s.finish(Duration::ZERO);
                    }
                    return Ok(());
                }
            },
        }
    }
}

/// How the runner reaches its agents: the TLS it expects of them and the token.
#[derive(Clone)]
pub struct AgentLink {
    connector: tokio_rustls::TlsConnector,
    server_name: rustls_pki_types::ServerName<'static>,
    token: String,
}

impl AgentLink {
    /// Verifies agents against `ca` (PEM) as `server_name`.
    pub fn new(ca: &Path, server_name: &str, token: String) -> anyhow::Result<Self> {
        let tls = bench_core::ClientTls::suite(
            bench_core::tls::load_ca(ca)?,
            bench_core::HandshakeVariant::Full,
        );
        let config = bench_core::tls::client_config(&tls, ALPN)?;
        Ok(AgentLink {
            connector: tokio_rustls::TlsConnector::from(config),
            server_name: rustls_pki_types::ServerName::try_from(server_name.to_string())
                .map_err(|e| anyhow!("agent server name '{server_name}': {e}"))?,
            token,
        })
    }
}

impl AgentLink {
    /// Connects and authenticates once, without a job: the agent is reachable, its
    /// certificate verifies and it accepts the token.
    pub async fn check(&self, addr: SocketAddr) -> anyhow::Result<()> {
        let mut remote = RemoteLoad::connect(addr, self).await?;
        let _ = remote.write.shutdown().await;
        Ok(())
    }
}

type ClientTlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// The runner's side of one agent running one cell's share of the load.
pub struct RemoteLoad {
    pub addr: SocketAddr,
    lines: Lines<BufReader<ReadHalf<ClientTlsStream>>>,
    write: WriteHalf<ClientTlsStream>,
    deadline: tokio::time::Instant,
    /// The agent's resources, once it sent them.
    pub client: Option<ResourceSummary>,
}

impl RemoteLoad {
    /// Connects, authenticates and hands over the job.
    pub async fn start(addr: SocketAddr, link: &AgentLink, job: &LoadJob) -> anyhow::Result<Self> {
        let mut remote = Self::connect(addr, link).await?;
        remote
            .say(&ToAgent::Job {
                job: Box::new(job.clone()),
            })
            .await?;
        remote.deadline = tokio::time::Instant::now() + job.deadline();
        Ok(remote)
    }

    /// Connects and authenticates.
    async fn connect(addr: SocketAddr, link: &AgentLink) -> anyhow::Result<Self> {
        let tcp = tokio::time::timeout(HELLO_BOUND, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("agent {addr}: connect timed out"))?
            .with_context(|| format!("agent {addr}: cannot connect"))?;
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout(
            HELLO_BOUND,
            link.connector.connect(link.server_name.clone(), tcp),
        )
        .await
        .map_err(|_| anyhow!("agent {addr}: TLS handshake timed out"))?
        .with_context(|| format!("agent {addr}: TLS handshake failed"))?;
        let (read, write) = tokio::io::split(tls);
        let mut remote = RemoteLoad {
            addr,
            lines: BufReader::new(read).lines(),
            write,
            deadline: tokio::time::Instant::now() + HELLO_BOUND,
            client: None,
        };
        remote
            .say(&ToAgent::Hello {
                token: link.token.clone(),
            })
            .await?;
        match remote.read().await? {
            FromAgent::Welcome => {}
            FromAgent::Refused { reason } => bail!("agent {addr} refused: {reason}"),
            other => bail!("agent {addr}: unexpected answer {other:?}"),
        }
        Ok(remote)
    }

    async fn say(&mut self, line: &ToAgent) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec(line)?;
        bytes.push(b'\n');
        self.write
            .write_all(&bytes)
            .await
            .with_context(|| format!("agent {}: connection lost", self.addr))?;
        self.write.flush().await?;
        Ok(())
    }

    async fn read(&mut self) -> anyhow::Result<FromAgent> {
        let addr = self.addr;
        let line = tokio::time::timeout_at(self.deadline, self.lines.next_line())
            .await
            .map_err(|_| anyhow!("agent {addr} did not finish within the job's time bound"))?
            .with_context(|| format!("agent {addr}: connection lost"))?
            .ok_or_else(|| anyhow!("agent {addr} closed the connection before it finished"))?;
        serde_json::from_str(&line).with_context(|| format!("agent {addr}: unreadable line {line}"))
    }

    /// The load generator's next message (its resources are kept when they come).
    pub async fn next(&mut self) -> anyhow::Result<Message> {
        match self.read().await? {
            FromAgent::Load { message } => {
                if matches!(*message, Message::Finished { .. }) {
                    if let FromAgent::Resources { client } = self.read().await? {
                        self.client = Some(client);
                    }
                }
                Ok(*message)
            }
            FromAgent::Failed { error } => bail!("agent {}: {error}", self.addr),
            other => bail!("agent {}: unexpected {other:?}", self.addr),
        }
    }

    pub async fn go(&mut self) -> anyhow::Result<()> {
        self.say(&ToAgent::Go).await
    }

    /// Ends the agent's job (it kills its load generator when the connection closes).
    pub async fn kill(mut self) {
        let _ = self.write.shutdown().await;
    }

    pub async fn wait(mut self) {
        let _ = self.write.shutdown().await;
    }
}

/// Shared by the cells of a run: the agents' addresses and how to reach them.
pub struct Agents {
    pub addrs: Vec<SocketAddr>,
    pub link: Arc<AgentLink>,
}
