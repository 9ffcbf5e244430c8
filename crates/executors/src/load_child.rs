//! Each cell's load generator runs in a process of its own (`runner load`), as each cell's
//! server does: the client RSS and CPU a row reports are that cell's alone, not what earlier
//! cells left in the allocator or QUIC endpoints still closing, and a client that crashes
//! fails its cell instead of the run.
//!
//! The runner writes one [`LoadJob`] line to the child's stdin; the child answers with
//! [`Message`] lines on stdout: `measuring` when the warm-up is over, upon which the runner
//! starts sampling and writes a `go` line, `progress` every 200 ms (with the measured phase's
//! figures so far when the run serves live metrics), and `finished` with both phases'
//! measurements.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bench_core::{ClientSettings, ClientTls, HandshakeVariant, PayloadProfile, Tuning};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use load::engine::{self, LoadSpec, Progress};
use load::measurements::Measurements;
use load::measurements::SteadyWindow;

/// Longest wait for the warm-up's connections to finish closing: quinn's closing period is
/// three probe timeouts, well under a second on loopback.
const SETTLE_BOUND: Duration = Duration::from_secs(5);

/// Everything the child needs to build the client and run both phases.

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadJob {
    pub stack: String,
    pub target: SocketAddr,
    pub server_name: String,
    /// `None`: plaintext.
    pub tls: Option<HandshakeVariant>,
    pub connect_timeout_ms: u64,
    pub handshake_timeout_ms: u64,
    pub payload: PayloadProfile,
    pub tuning: Tuning,
    pub client_threads: usize,
    /// Poll for I/O instead of sleeping during the measured phase ([`experiment::settings::Experiment::busy_poll`]).
    #[serde(default)]
    pub busy_poll: bool,
    /// The user's service (`[targets]`): the requests are its calls, TLS is the target's;
    /// `None` = our server's item workload.
    #[serde(default)]
    pub service: Option<bench_core::user_service::Targets>,
    /// Send the measured phase's figures so far with each progress line (the run serves
    /// live metrics).
    #[serde(default)]
    pub live: bool,
    /// Warm-up phase (not measured), run first when `Some`.
    pub warmup: Option<LoadSpec>,
    pub measured: LoadSpec,
}

impl crate::target::Timeouts for LoadJob {
    fn connect_ms(&self) -> u64 {
        self.connect_timeout_ms
    }
    fn handshake_ms(&self) -> u64 {
        self.handshake_timeout_ms
    }
    fn tuning(&self) -> Tuning {
        self.tuning.clone()
    }
}

impl LoadJob {
    /// Longest the child may take: both phases' bounds plus connection setup and teardown.
    pub fn deadline(&self) -> Duration {
        let phase = |s: &LoadSpec| s.max_duration + s.connect_bound + s.request_timeout;
        self.warmup.as_ref().map_or(Duration::ZERO, phase)
            + phase(&self.measured)
            + Duration::from_secs(30)
    }
}

/// One line from the child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Message {
    Measuring,
    Progress {
        done: u64,
        failed: u64,
        /// The phase's figures so far, when the job asks for them ([`LoadJob::live`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        live: Option<Box<load::live::LiveSnapshot>>,
    },
    Finished {
        warmup: Box<Measurements>,
        measured: Box<Measurements>,
        elapsed_s: f64,
        /// Wall-clock start of the measured phase, seconds since the Unix epoch (this host's
        /// clock).
        #[serde(default)]
        started_unix_s: Option<f64>,
        cut_short: bool,
        /// Whole request budgets the measured phase opened (1 without a repeat).
        budget_repeats: u64,
        steady: Option<SteadyWindow>,
        /// The cell has nothing to measure: its first requests all failed alike (why).
        #[serde(default)]
        hopeless: Option<String>,
    },
}

/// What the child measured.
pub struct Finished {
    pub warmup: Measurements,
    pub measured: Measurements,
    pub elapsed: Duration,
    /// Wall-clock start of the measured phase, seconds since the Unix epoch.
    pub started_unix_s: Option<f64>,
    pub cut_short: bool,
    /// Whole request budgets the measured phase opened to meet the minimum measured duration
    /// (1 without a repeat).
    pub budget_repeats: u64,
    pub steady: Option<SteadyWindow>,
    /// The first requests all failed alike, so the load stopped (why).
    pub hopeless: Option<String>,
}

/// `runner load --certs DIR`: reads the job from stdin, runs it, reports on stdout.
pub fn child_main(certs_dir: &Path) -> anyhow::Result<()> {
    crate::parent::follow("runner load");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("cannot read the load job from stdin")?;
    let job: LoadJob = serde_json::from_str(&line).context("malformed load job")?;
    let stack = stacks::find(&job.stack)
        .ok_or_else(|| anyhow!("unknown stack '{}' in the load job", job.stack))?;
    bench_core::tls::install_crypto_provider();
    let settings = match &job.service {
        Some(targets) => {
            let api = stack.api();
            let target_tls = targets
                .for_api(api)
                .map(|t| t.tls())
                .context("the load job has no target for this stack")?;
            crate::target::client_settings(
                targets,
                api,
                job.target,
                &job.server_name,
                job.tls.map(|variant| (&target_tls, variant)),
                &job,
            )?
        }
        None => {
            let tls = match job.tls {
                Some(variant) => {
                    let certs = bench_core::tls::ensure_certs(certs_dir)?;
                    Some(ClientTls::suite(
                        bench_core::tls::load_ca(&certs.ca_cert())?,
                        variant,
                    ))
                }
                None => None,
            };
            ClientSettings {
                target: job.target,
                server_name: job.server_name.clone(),
                tls,
                connect_timeout: Duration::from_millis(job.connect_timeout_ms),
                handshake_timeout: Duration::from_millis(job.handshake_timeout_ms),
                payload: job.payload,
                tuning: job.tuning.clone(),
                calls: Default::default(),
            }
        }
    };
    // One thread: tokio's current-thread scheduler, which spends no atomics or wake-ups on
    // handing tasks between workers.
    let runtime = match job.client_threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?,
    };

    let client = stack
        .client(&settings)
        .map_err(|e| anyhow!("client setup failed: {e:#}"))?;
    let pool = runtime.block_on(async move {
        // Reuse: the connections are opened before any phase and kept across both, so that
        // the measured phase starts on open connections; their setup is reported with the
        // measured phase's connections (connect_*, handshake_* columns), not in its latency.
        let pool = engine::Pool::for_spec(&job.measured);
        let setup = pool.open_all(client.clone(), &job.measured).await;
        let (warmup, warmup_hopeless) = match job.warmup {
            Some(spec) => {
                let progress = Arc::new(Progress::for_spec(&spec));
                let result = engine::run(client.clone(), spec, pool.clone(), progress).await;
                (result.measurements, result.hopeless)
            }
            None => (Measurements::default(), None),
        };
        // The warm-up's QUIC connections finish their closing period before measuring starts.
        client.settle(SETTLE_BOUND).await;
        send(&Message::Measuring)?;
        // The measured phase starts once the runner's sampler has taken its first reading.
        tokio::task::spawn_blocking(|| {
            let mut go = String::new();
            std::io::stdin().read_line(&mut go)
        })
        .await??;
        let progress = Arc::new(Progress::for_spec(&job.measured));
        // A warm-up where nothing succeeded leaves nothing to measure: the measured phase
        // sends nothing.
        if warmup_hopeless.is_some() {
            progress.stop.store(true, Ordering::Relaxed);
        }
        let ticker = {
            let progress = progress.clone();
            let live = job.live;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(200));
                loop {
                    tick.tick().await;
                    let _ = send(&Message::Progress {
                        done: progress.done.load(Ordering::Relaxed),
                        failed: progress.failed.load(Ordering::Relaxed),
                        live: live
                            .then(|| progress.live_snapshot())
                            .flatten()
                            .map(Box::new),
                    });
                }
            })
        };
        // A task that always yields keeps each runtime thread polling the I/O driver
        // (epoll with no timeout) instead of sleeping in it.
        let poller_count = if job.busy_poll {
            job.client_threads.max(1)
        } else {
            0
        };
        let pollers: Vec<_> = (0..poller_count)
            .map(|_| {
                tokio::spawn(async {
                    loop {
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let started = std::time::SystemTime::now();
        let mut result = engine::run(client, job.measured, pool.clone(), progress).await;
        ticker.abort();
        for poller in pollers {
            poller.abort();
        }
        result.measurements.merge_setup(&setup);
        send(&Message::Finished {
            warmup: Box::new(warmup),
            measured: Box::new(result.measurements),
            elapsed_s: result.elapsed.as_secs_f64(),
            started_unix_s: started
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64()),
            cut_short: result.cut_short,
            budget_repeats: result.budget_repeats,
            steady: result.steady,
            hopeless: warmup_hopeless
                .map(|why| format!("warm-up: {why}"))
                .or(result.hopeless),
        })?;
        anyhow::Ok(pool)
    })?;
    // Alive until the runner has taken its last reading (it then closes stdin), so that the
    // reading sees this process and all the CPU time it used.
    let mut eof = String::new();
    let _ = std::io::stdin().read_line(&mut eof);
    // The connections close after the runner's last reading: their teardown is no phase's.
    runtime.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(1), pool.close()).await;
    });
    // Closing QUIC endpoints would hold the exit for their closing period; nothing is left
    // to measure.
    runtime.shutdown_background();
    Ok(())
}

fn send(message: &Message) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, message)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// The runner's side: a started child and its report stream.
pub struct LoadProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    deadline: tokio::time::Instant,
    pub pid: u32,
}

impl LoadProcess {
    /// Starts `runner load` (in the calling thread's network namespace) and hands it the job.
    pub async fn start(job: &LoadJob, certs_dir: &Path) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the runner executable")?;
        let mut cmd = Command::new(exe);
        crate::parent::follow_me(&mut cmd);
        let mut child = cmd
            .arg("load")
            .arg("--certs")
            .arg(certs_dir)
            .args(["--stack", &job.stack])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            // Its own process group: a Ctrl-C at the terminal reaches the runner, which ends
            // the child itself once it has decided what to keep.
            .process_group(0)
            .spawn()
            .context("cannot start the load-generator process")?;
        let pid = child.id().context("load generator exited at once")?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut line = serde_json::to_vec(job)?;
        line.push(b'\n');
        stdin
            .write_all(&line)
            .await
            .context("cannot hand the job to the load generator")?;
        let stdout = child.stdout.take().expect("piped stdout");
        Ok(LoadProcess {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            deadline: tokio::time::Instant::now() + job.deadline(),
            pid,
        })
    }

    /// The child's next message; an error when it died, went silent past the job's bound,
    /// or said something unreadable.
    pub async fn next(&mut self) -> anyhow::Result<Message> {
        let line = tokio::time::timeout_at(self.deadline, self.lines.next_line())
            .await
            .map_err(|_| anyhow!("load generator did not finish within its time bound"))?
            .context("cannot read from the load generator")?;
        match line {
            Some(line) => serde_json::from_str(&line)
                .with_context(|| format!("unexpected line from the load generator: {line}")),
            None => {
                let status = self.child.wait().await?;
                bail!("load generator exited before it finished ({status})")
            }
        }
    }

    /// Lets the child start its measured phase.
    pub async fn go(&mut self) -> anyhow::Result<()> {
        self.stdin
            .write_all(b"go\n")
            .await
            .context("cannot start the load generator's measured phase")
    }

    /// Ends the child (after an interruption or an error).
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Lets the child exit after its last reading and waits for it.
    pub async fn wait(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}
