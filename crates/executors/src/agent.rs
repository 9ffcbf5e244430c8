//! `runner agent`: one cell's load, or one cell's server, at a time for a runner on another
//! host (or in another network namespace, or pod), controlled over TLS instead of a child's
//! stdin and stdout. The agent runs the job exactly as the runner runs it locally (a
//! `runner load` or `runner serve` child of its own), samples that child's RSS and CPU itself
//! with the runner's sampler (the runner cannot see another host's processes), and relays
//! the child's messages; the runner is the barrier (`go` to every load agent) and marks the
//! server's measured phase (`measure`, `finish`).
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

use crate::load_child::{LoadJob, LoadProcess, Message};
use crate::serve::{ServeOptions, ServerProcess};
use load::sampler::{ResourceSummary, Sample, Sampler};

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
    /// Start the cell's server (`runner serve` with these options; the agent's own
    /// certificate directory replaces `certs`).
    Serve {
        options: Box<ServeOptions>,
    },
    /// The server's measured phase starts: sample it every `interval_ms`.
    Measure {
        interval_ms: u64,
    },
    /// The server's measured phase is over; it lasted `phase_s` (as the load generators timed
    /// it).
    Finish {
        phase_s: f64,
    },
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
    /// The server accepts connections at `addr` (as it bound it).
    Serving {
        addr: SocketAddr,
    },
    /// The server's first reading is taken: the measured phase may start.
    Sampling,
    /// The server over the measured phase: its summary and samples, and its exit status if
    /// it died.
    ServerResources {
        server: ResourceSummary,
        samples: Vec<Sample>,
        exited: Option<String>,
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

/// Tells the runner a job could not start (`failed`), then fails with the same error.
async fn report_failure<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    e: anyhow::Error,
) -> anyhow::Result<()> {
    send(
        w,
        &FromAgent::Failed {
            error: format!("{e:#}"),
        },
    )
    .await?;
    Err(e)
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
    match serde_json::from_str::<ToAgent>(&line).context("expected a job")? {
        ToAgent::Job { job } => load_session(*job, lines, write, options).await,
        ToAgent::Serve { options: serve } => serve_session(*serve, lines, write, options).await,
        _ => bail!("expected a job"),
    }
}

type SessionLines = Lines<BufReader<ReadHalf<Tls<TcpStream>>>>;
type SessionWrite = WriteHalf<Tls<TcpStream>>;

/// One cell's share of the load: a `runner load` child, sampled here, its messages relayed.
async fn load_session(
    job: LoadJob,
    mut lines: SessionLines,
    mut write: SessionWrite,
    options: &AgentOptions,
) -> anyhow::Result<()> {
    let mut child = match LoadProcess::start(&job, &options.certs).await {
        Ok(c) => c,
        Err(e) => return report_failure(&mut write, e).await,
    };
    let interval = Duration::from_millis(100);
    let mut sampler: Option<Sampler> = None;
    let latest = load::sampler::Latest::default();
    loop {
        tokio::select! {
            message = child.next() => {
                let message = match message {
                    Ok(mut m) => {
                        // Live figures carry the load generator's latest reading, taken here.
                        if let Message::Progress { live: Some(figures), .. } = &mut m {
                            figures.take_reading(&latest);
                        }
                        m
                    }
                    Err(e) => {
                        child.kill().await;
                        let _ = send(&mut write, &FromAgent::Failed { error: format!("{e:#}") }).await;
                        return Err(e);
                    }
                };
                match &message {
                    Message::Measuring => sampler = Some(Sampler::start_with(None, Some(child.pid), interval, Some(latest.clone()))),
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

/// One cell's server: a `runner serve` child (the server job the runner gives its own
/// child, with this agent's certificates), sampled here between the runner's `measure` and
/// `finish` exactly as the runner samples a local server; stopped when the runner closes the
/// connection.
async fn serve_session(
    serve: ServeOptions,
    mut lines: SessionLines,
    mut write: SessionWrite,
    options: &AgentOptions,
) -> anyhow::Result<()> {
    let serve = ServeOptions {
        certs: Some(options.certs.clone()),
        ..serve
    };
    let mut server = match ServerProcess::start(&serve).await {
        Ok(s) => s,
        Err(e) => return report_failure(&mut write, e).await,
    };
    let outcome = async {
        send(&mut write, &FromAgent::Serving { addr: server.addr }).await?;
        let mut sampler: Option<Sampler> = None;
        // Until the runner closes the connection (the cell is over, or was given up).
        while let Some(line) = lines.next_line().await? {
            match serde_json::from_str::<ToAgent>(&line) {
                Ok(ToAgent::Measure { interval_ms }) => {
                    let interval = Duration::from_millis(interval_ms.max(1));
                    sampler = Some(Sampler::start(Some(server.pid), None, interval));
                    send(&mut write, &FromAgent::Sampling).await?;
                }
                Ok(ToAgent::Finish { phase_s }) => {
                    let phase = Duration::from_secs_f64(phase_s.max(0.0));
                    let (samples, summary, _) =
                        sampler.take().map(|s| s.finish(phase)).unwrap_or_default();
                    let reply = FromAgent::ServerResources {
                        server: summary,
                        samples,
                        exited: server.exited(),
                    };
                    send(&mut write, &reply).await?;
                }
                _ => bail!("unexpected line from the runner: {line}"),
            }
        }
        if let Some(s) = sampler {
            s.finish(Duration::ZERO);
        }
        Ok(())
    }
    .await;
    server.stop().await;
    outcome
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
        let mut channel = Channel::connect(addr, self).await?;
        let _ = channel.write.shutdown().await;
        Ok(())
    }
}

type ClientTlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// The runner's side of one authenticated connection to an agent.
struct Channel {
    addr: SocketAddr,
    lines: Lines<BufReader<ReadHalf<ClientTlsStream>>>,
    write: WriteHalf<ClientTlsStream>,
    deadline: tokio::time::Instant,
}

impl Channel {
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
        let mut channel = Channel {
            addr,
            lines: BufReader::new(read).lines(),
            write,
            deadline: tokio::time::Instant::now() + HELLO_BOUND,
        };
        channel
            .say(&ToAgent::Hello {
                token: link.token.clone(),
            })
            .await?;
        match channel.read().await? {
            FromAgent::Welcome => {}
            FromAgent::Refused { reason } => bail!("agent {addr} refused: {reason}"),
            other => bail!("agent {addr}: unexpected answer {other:?}"),
        }
        Ok(channel)
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

    async fn close(mut self) {
        let _ = self.write.shutdown().await;
    }
}

/// The runner's side of one agent running one cell's share of the load.
pub struct RemoteLoad {
    pub addr: SocketAddr,
    channel: Channel,
    /// The agent's resources, once it sent them.
    pub client: Option<ResourceSummary>,
}

impl RemoteLoad {
    /// Connects, authenticates and hands over the job.
    pub async fn start(addr: SocketAddr, link: &AgentLink, job: &LoadJob) -> anyhow::Result<Self> {
        let mut channel = Channel::connect(addr, link).await?;
        channel
            .say(&ToAgent::Job {
                job: Box::new(job.clone()),
            })
            .await?;
        channel.deadline = tokio::time::Instant::now() + job.deadline();
        Ok(RemoteLoad {
            addr,
            channel,
            client: None,
        })
    }

    /// The load generator's next message (its resources are kept when they come).
    pub async fn next(&mut self) -> anyhow::Result<Message> {
        match self.channel.read().await? {
            FromAgent::Load { message } => {
                if matches!(*message, Message::Finished { .. }) {
                    if let FromAgent::Resources { client } = self.channel.read().await? {
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
        self.channel.say(&ToAgent::Go).await
    }

    /// Ends the agent's job (it kills its load generator when the connection closes).
    pub async fn kill(self) {
        self.channel.close().await;
    }

    pub async fn wait(self) {
        self.channel.close().await;
    }
}

/// How long an agent's server gets to start, and to answer each of the runner's messages.
const SERVER_BOUND: Duration = Duration::from_secs(30);

/// The runner's side of one agent running one cell's server.
pub struct RemoteServer {
    /// Where clients reach the server.
    pub addr: SocketAddr,
    channel: Channel,
    exited: Option<String>,
}

impl RemoteServer {
    /// Connects to the agent at `agent`, authenticates and has it start the server `serve`
    /// describes; returns once the server accepts connections. A server bound to an
    /// unspecified address is reached at the agent's address.
    pub async fn start(
        agent: SocketAddr,
        link: &AgentLink,
        serve: &ServeOptions,
    ) -> anyhow::Result<Self> {
        let mut channel = Channel::connect(agent, link).await?;
        channel.deadline = tokio::time::Instant::now() + SERVER_BOUND;
        channel
            .say(&ToAgent::Serve {
                options: Box::new(serve.clone()),
            })
            .await?;
        let bound = match channel.read().await? {
            FromAgent::Serving { addr } => addr,
            FromAgent::Failed { error } => bail!("agent {agent}: {error}"),
            other => bail!("agent {agent}: unexpected {other:?}"),
        };
        let addr = if bound.ip().is_unspecified() {
            SocketAddr::new(agent.ip(), bound.port())
        } else {
            bound
        };
        Ok(RemoteServer {
            addr,
            channel,
            exited: None,
        })
    }

    /// The measured phase starts: the agent takes the server's first reading (returns once
    /// it is taken) and samples it every `interval`.
    pub async fn measuring(&mut self, interval: Duration) -> anyhow::Result<()> {
        self.channel.deadline = tokio::time::Instant::now() + SERVER_BOUND;
        self.channel
            .say(&ToAgent::Measure {
                interval_ms: interval.as_millis() as u64,
            })
            .await?;
        match self.channel.read().await? {
            FromAgent::Sampling => Ok(()),
            FromAgent::Failed { error } => bail!("agent {}: {error}", self.channel.addr),
            other => bail!("agent {}: unexpected {other:?}", self.channel.addr),
        }
    }

    /// The measured phase is over (it lasted `phase`): the server's summary and samples as
    /// the agent measured them.
    pub async fn finished(
        &mut self,
        phase: Duration,
    ) -> anyhow::Result<(ResourceSummary, Vec<Sample>)> {
        self.channel.deadline = tokio::time::Instant::now() + SERVER_BOUND;
        self.channel
            .say(&ToAgent::Finish {
                phase_s: phase.as_secs_f64(),
            })
            .await?;
        match self.channel.read().await? {
            FromAgent::ServerResources {
                server,
                samples,
                exited,
            } => {
                self.exited = exited;
                Ok((server, samples))
            }
            FromAgent::Failed { error } => bail!("agent {}: {error}", self.channel.addr),
            other => bail!("agent {}: unexpected {other:?}", self.channel.addr),
        }
    }

    /// The server's exit status, when the agent reported that it died.
    pub fn exited(&self) -> Option<String> {
        self.exited.clone()
    }

    /// Ends the cell's server (the agent stops it when the connection closes).
    pub async fn stop(self) -> Option<String> {
        self.channel.close().await;
        self.exited
    }
}

/// Shared by the cells of a run: the agents' addresses and how to reach them.
pub struct Agents {
    /// The agents that send the load.
    pub addrs: Vec<SocketAddr>,
    /// The agent that runs each cell's server (`server_agent`), if any.
    pub server: Option<SocketAddr>,
    pub link: Arc<AgentLink>,
}
