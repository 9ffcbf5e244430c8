//! The proxies of an edge or sidecar path (docs/mesh.md): each hop's configuration written
//! from the cell ([`config`]), the proxy started in its own process group (in a host's
//! namespace when it has one) under a guard process ([`guard_main`]), awaited until it
//! listens, and killed with its whole group when dropped, so that no proxy outlives its cell,
//! also after an error or an interruption; the guard stops it when the runner is killed.
//! [`MeshServer`] puts a cell's proxies in front of its server for the cell loop.

pub mod config;

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use async_trait::async_trait;

use crate::executor::{CellServer, ServerReadings};
use crate::measure::proxies::{ProxyGroup, ProxyRecord};
pub use config::{Hop, ListenTls, UpstreamTls};
use experiment::plan::Cell;
use experiment::settings::ProxyKind;
use load::sampler::Role;
use results::exit::Status;

/// How long a proxy may take to listen.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// The port a client-side sidecar listens on in its host's loopback (Istio's outbound port).
pub const SIDECAR_PORT: u16 = 15001;

/// Where a program lives: Debian puts haproxy and nginx in /usr/sbin, which a non-root
/// PATH lacks.
fn program_path(program: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(dir).join(program);
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from(program)
}

/// Whether `kind`'s program is installed.
pub fn installed(kind: ProxyKind) -> bool {
    program_path(kind.as_str()).is_file()
}

/// The proxy's version line as it prints it (`not installed` without it).
pub fn version(kind: ProxyKind) -> String {
    static CACHE: std::sync::Mutex<Vec<(ProxyKind, String)>> = std::sync::Mutex::new(Vec::new());
    let mut cache = CACHE.lock().expect("not poisoned");
    if let Some((_, v)) = cache.iter().find(|(k, _)| *k == kind) {
        return v.clone();
    }
    let arg = match kind {
        ProxyKind::Haproxy => "-v",
        ProxyKind::Nginx => "-v",
        ProxyKind::Caddy => "version",
    };
    let v = Command::new(program_path(kind.as_str()))
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| {
            // nginx prints its version on stderr.
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "not installed".into());
    cache.push((kind, v.clone()));
    v
}

/// The hops of `cell`'s path, their certificates from the suite's CA in `certs`.
pub struct PathPlan<'a> {
    pub cell: &'a Cell,
    pub certs: &'a Path,
}

impl PathPlan<'_> {
    fn hop(
        &self,
        role: &'static str,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> anyhow::Result<Hop> {
        let e = &self.cell.settings;
        let stack = stacks::find(&self.cell.stack)
            .ok_or_else(|| anyhow!("unknown stack {}", self.cell.stack))?;
        let carried = experiment::settings::mesh::carries(e.proxy, e.path, stack)
            .map_err(|why| anyhow!("{why}"))?;
        Ok(Hop {
            kind: e.proxy,
            role,
            listen,
            listen_tls: None,
            upstream,
            upstream_tls: None,
            carried,
            pool: e.pool,
            threads: e.proxy_threads,
            connect_timeout_ms: e.connect_timeout_ms,
            request_timeout_ms: e.request_timeout_ms,
        })
    }

    /// The certificate files, as absolute paths: a proxy does not run in the runner's working
    /// directory (HAProxy in a host's namespace could not load a relative `certs/ca.pem`,
    /// the default `--certs`).
    fn paths(&self) -> bench_core::tls::CertPaths {
        let dir = std::path::absolute(self.certs).unwrap_or_else(|_| self.certs.to_path_buf());
        bench_core::tls::CertPaths::new(dir)
    }

    /// An edge proxy on `listen`, terminating TLS with the server's certificate, in front of
    /// the plaintext server at `server`.
    pub fn edge(&self, listen: SocketAddr, server: SocketAddr) -> anyhow::Result<Hop> {
        let paths = self.paths();
        Ok(Hop {
            listen_tls: Some(ListenTls {
                cert: paths.server_cert(),
                key: paths.server_key(),
                client_ca: None,
            }),
            ..self.hop("edge", listen, server)?
        })
    }

    /// A client-side sidecar on `listen` (plaintext), reaching the server-side one at
    /// `server_side` with mutual TLS.
    pub fn client_sidecar(
        &self,
        listen: SocketAddr,
        server_side: SocketAddr,
    ) -> anyhow::Result<Hop> {
        let paths = self.paths();
        if !paths.client_cert().is_file() || !paths.client_key().is_file() {
            bail!(
                "{} has no client certificate (client.pem, client.key), which the sidecars' mutual TLS needs: it was made before them or by hand; remove the directory to have the suite make it again",
                self.certs.display()
            );
        }
        Ok(Hop {
            upstream_tls: Some(UpstreamTls {
                ca: paths.ca_cert(),
                server_name: bench_core::tls::SERVER_NAME.into(),
                cert: paths.client_cert(),
                key: paths.client_key(),
            }),
            ..self.hop("client-sidecar", listen, server_side)?
        })
    }

    /// A server-side sidecar on `listen`, requiring a client certificate from the suite's
    /// CA, in front of the plaintext server at `server`.
    pub fn server_sidecar(&self, listen: SocketAddr, server: SocketAddr) -> anyhow::Result<Hop> {
        let paths = self.paths();
        Ok(Hop {
            listen_tls: Some(ListenTls {
                cert: paths.server_cert(),
                key: paths.server_key(),
                client_ca: Some(paths.ca_cert()),
            }),
            ..self.hop("server-sidecar", listen, server)?
        })
    }
}

/// A private directory for one proxy's files (owner only), removed with the proxy.
fn private_dir() -> anyhow::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tbench-proxy-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// A running proxy: its process group is killed, and its directory removed, when dropped.
pub struct ProxyProcess {
    /// `runner proxy-guard`, the proxy's parent; its stdin is our end of a pipe whose
    /// closing (drop, or this process's death however it dies) makes it stop the proxy.
    guard: Child,
    /// The proxy's pid, which is its process group's id.
    pid: u32,
    dir: PathBuf,
    /// [`Role::ProxyClient`] or [`Role::ProxyServer`].
    pub role: Role,
    pub record: ProxyRecord,
    pub listen: SocketAddr,
    /// Its clients arrive over QUIC: the listener's UDP socket is awaited too.
    quic: bool,
}

impl ProxyProcess {
    /// Writes `hop`'s configuration, starts the proxy (inside network namespace `netns` when
    /// given, else in the caller's) and waits until it listens.
    pub fn start(hop: &Hop, netns: Option<&str>) -> anyhow::Result<ProxyProcess> {
        for addr in [hop.listen, hop.upstream] {
            if !crate::netem::netns::suite_address(addr.ip()) {
                bail!(
                    "{} ({}): {addr} is neither loopback nor inside 198.18.0.0/15; proxies stay off the host's network",
                    hop.kind.as_str(),
                    hop.role
                );
            }
        }
        let role = if hop.role == "client-sidecar" {
            Role::ProxyClient
        } else {
            Role::ProxyServer
        };
        Launch {
            kind: hop.kind,
            role_name: hop.role,
            role,
            listen: hop.listen,
            quic: hop.carried.front == bench_core::HttpVersion::Http3,
            netns,
            cpu: None,
        }
        .start(|dir| config::render(hop, dir))
    }

    /// Starts a server nobody here wrote (`server`), pinned to `cpu` when given, in the
    /// caller's network namespace, and waits until it listens: its object written first.
    pub fn start_origin(
        origin: &config::Origin,
        cpu: Option<usize>,
    ) -> anyhow::Result<ProxyProcess> {
        if !crate::netem::netns::suite_address(origin.listen.ip()) {
            bail!(
                "{}: {} is neither loopback nor inside 198.18.0.0/15",
                origin.kind.as_str(),
                origin.listen
            );
        }
        let Some(kind) = origin.kind.program() else {
            bail!("our own server is `runner serve`");
        };
        Launch {
            kind,
            role_name: ORIGIN_ROLE,
            role: Role::Server,
            listen: origin.listen,
            quic: origin.version == bench_core::HttpVersion::Http3,
            netns: None,
            cpu,
        }
        .start(|dir| config::origin(origin, dir))
    }

    /// Its pid, which leads its process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process group to sample.
    pub fn group(&self) -> ProxyGroup {
        ProxyGroup {
            role: self.role,
            pgid: self.pid,
        }
    }

    /// What the proxy wrote on stderr (its last lines), for an error message.
    fn stderr_tail(&self) -> String {
        stderr_tail(&self.dir)
    }

    /// Waits until the proxy's listening socket (and its UDP one, for QUIC) shows in its
    /// network namespace.
    fn wait_listening(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let pid = self.pid;
        loop {
            // The guard ends when the proxy does, with its status.
            if let Some(status) = self.guard.try_wait()? {
                bail!(
                    "{} ({}) exited before it listened ({status}): {}",
                    self.record.proxy,
                    self.record.role,
                    self.stderr_tail()
                );
            }
            if listening(pid, self.listen) && (!self.quic || bound_udp(pid, self.listen)) {
                return Ok(());
            }
            if started.elapsed() > READY_WITHIN {
                bail!(
                    "{} ({}) did not listen on {} within {READY_WITHIN:?}: {}",
                    self.record.proxy,
                    self.record.role,
                    self.listen,
                    self.stderr_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its exit status if it has died.
    pub fn exited(&mut self) -> Option<String> {
        match self.guard.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} ({}) exited: {status}: {}",
                self.record.proxy,
                self.record.role,
                self.stderr_tail()
            )),
            _ => None,
        }
    }
}

/// The manifest's role of a server nobody here wrote (`server = "caddy"`), beside the
/// proxies' `edge`, `client-sidecar` and `server-sidecar`.
pub const ORIGIN_ROLE: &str = "origin-server";

/// How one third-party program is started: what it is, where it listens, in which namespace
/// and on which CPU.
struct Launch<'a> {
    kind: ProxyKind,
    role_name: &'static str,
    role: Role,
    listen: SocketAddr,
    /// Its clients arrive over QUIC: the listener's UDP socket is awaited too.
    quic: bool,
    netns: Option<&'a str>,
    cpu: Option<usize>,
}

impl Launch<'_> {
    /// Writes the configuration `render` makes in a private directory (and the generated
    /// files it names), starts the program under its guard and waits until it listens.
    fn start(
        self,
        render: impl FnOnce(&Path) -> anyhow::Result<config::Rendered>,
    ) -> anyhow::Result<ProxyProcess> {
        let dir = private_dir()?;
        let rendered = match render(&dir).and_then(|r| write_files(&r, &dir).map(|text| (r, text)))
        {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let (rendered, config_text) = rendered;
        let program = program_path(rendered.program);
        let mut cmd = Command::new(guard_exe()?);
        cmd.arg("proxy-guard").arg("--dir").arg(&dir).arg("--");
        if let Some(ns) = self.netns {
            cmd.args(["ip", "netns", "exec", ns]);
        }
        // taskset execs the program: same pid, and every thread it makes inherits the CPU.
        if let Some(cpu) = self.cpu {
            let cpu = cpu.to_string();
            cmd.args(["taskset", "-c", cpu.as_str()]);
        }
        let stderr = std::fs::File::create(dir.join("stderr.log"))?;
        cmd.arg(&program)
            .args(&rendered.args)
            .envs(rendered.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Its own group (and the proxy gets another): a terminal's Ctrl-C reaches the
            // runner alone, which stops the proxy, and the proxy's whole group (nginx's
            // workers) goes at once.
            .process_group(0);
        let mut guard = cmd
            .spawn()
            .with_context(|| format!("cannot start the guard of {}", program.display()))?;
        // The guard's first line is the proxy's pid; none means it could not start it.
        let mut line = String::new();
        if let Some(out) = guard.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        let Ok(pid) = line.trim().parse::<u32>() else {
            let status = guard.wait()?;
            let tail = stderr_tail(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            bail!("cannot start {} ({status}): {tail}", program.display());
        };
        let mut proxy = ProxyProcess {
            guard,
            pid,
            dir,
            role: self.role,
            record: ProxyRecord {
                role: self.role_name.into(),
                proxy: self.kind.as_str().into(),
                version: version(self.kind),
                config: config_text,
            },
            listen: self.listen,
            quic: self.quic,
        };
        proxy.wait_listening()?;
        Ok(proxy)
    }
}

/// Writes a rendered configuration's files (keys owner-only) and generated objects into
/// `dir`; returns the configuration file's text, for the manifest.
fn write_files(rendered: &config::Rendered, dir: &Path) -> anyhow::Result<String> {
    let mut config_text = String::new();
    for (name, contents, secret) in &rendered.files {
        let mode = if *secret { 0o600 } else { 0o644 };
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(dir.join(name))
                .with_context(|| format!("cannot write {name}"))?,
            contents.as_bytes(),
        )?;
        if *name == rendered.config_file {
            config_text = contents.clone();
        }
    }
    for (name, bytes) in &rendered.generated {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        // Slices of the one generated chunk, as our servers send: the same bytes.
        let chunk = bench_core::bulk::chunk();
        let mut left = *bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            out.write_all(&chunk[..n])
                .with_context(|| format!("cannot write {}", path.display()))?;
            left -= n as u64;
        }
        out.flush()?;
    }
    Ok(config_text)
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        // End of input: the guard reaps the proxy and exits.
        drop(self.guard.stdin.take());
        let _ = self.guard.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The last lines a proxy wrote on stderr (`stderr.log` in its directory), for a message.
fn stderr_tail(dir: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(dir.join("stderr.log")) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

/// The runner binary that runs the guard: this process when it is the runner; a test
/// binary that starts proxies itself finds `runner` in cargo's folder above its own.
fn guard_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the runner executable")?;
    if exe.file_stem().is_some_and(|n| n == "runner") {
        return Ok(exe);
    }
    // target/<profile>/deps/<test>-<hash> → target/<profile>/runner
    match exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("runner"))
    {
        Some(runner) if runner.is_file() => Ok(runner),
        _ => bail!(
            "cannot find the runner executable, which guards each proxy (looked beside {})",
            exe.display()
        ),
    }
}

/// `runner proxy-guard --dir DIR -- PROGRAM ARGS…`: starts the proxy in a process group of
/// its own, prints its pid, and stops that group and removes DIR when its stdin reaches its
/// end: the runner holds the other end, which the kernel closes however the runner ends
/// (SIGKILL included), so no proxy outlives it. When the proxy ends by itself, the guard
/// says how on stderr (the proxy's `stderr.log`) and fails, leaving DIR for the runner to read.
pub fn guard_main(dir: &Path, command: &[String]) -> Status {
    use nix::sys::signal::{killpg, Signal};
    use std::sync::mpsc::RecvTimeoutError;

    let Some((program, args)) = command.split_first() else {
        eprintln!("proxy-guard: no command to run");
        return Status::Invalid;
    };
    let mut proxy = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("proxy-guard: cannot start {program}: {e}");
            return Status::Failed;
        }
    };
    let pgid = nix::unistd::Pid::from_raw(proxy.id() as i32);
    let stop = |proxy: &mut Child| {
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = proxy.wait();
    };
    let told = {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", proxy.id()).and_then(|()| out.flush())
    };
    if told.is_err() {
        stop(&mut proxy);
        return Status::Failed;
    }
    let (ended, end_of_input) = std::sync::mpsc::channel::<()>();
    let watcher = std::thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(move || {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = ended.send(());
        });
    if watcher.is_err() {
        stop(&mut proxy);
        return Status::Failed;
    }
    loop {
        if let Ok(Some(status)) = proxy.try_wait() {
            // Its workers go with it; the runner reads why from DIR.
            let _ = killpg(pgid, Signal::SIGKILL);
            eprintln!("proxy-guard: {program} ended: {status}");
            return Status::Failed;
        }
        match end_of_input.recv_timeout(Duration::from_millis(100)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                stop(&mut proxy);
                let _ = std::fs::remove_dir_all(dir);
                return Status::Success;
            }
        }
    }
}

/// Whether a TCP socket listens on `addr` in `pid`'s network namespace
/// (`/proc/PID/net/tcp`: little-endian address, state 0A).
pub fn listening(pid: u32, addr: SocketAddr) -> bool {
    socket_in(pid, "tcp", addr, "0A")
}

/// Whether a UDP socket is bound to `addr` in `pid`'s network namespace
/// (`/proc/PID/net/udp`, state 07).
pub fn bound_udp(pid: u32, addr: SocketAddr) -> bool {
    socket_in(pid, "udp", addr, "07")
}

fn socket_in(pid: u32, table: &str, addr: SocketAddr, state: &str) -> bool {
    let SocketAddr::V4(v4) = addr else {
        return false;
    };
    let wanted = format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(v4.ip().octets()),
        v4.port()
    );
    std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == wanted && f[3] == state
        })
    })
}

/// A port on `ip` in the caller's namespace free for TCP and for UDP (for an edge proxy's
/// listener, which takes both when it terminates QUIC).
pub fn free_port(ip: std::net::IpAddr) -> anyhow::Result<u16> {
    for _ in 0..64 {
        let l = std::net::TcpListener::bind((ip, 0)).context("cannot find a free port")?;
        let port = l.local_addr()?.port();
        if std::net::UdpSocket::bind((ip, port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("cannot find a port free for both TCP and UDP on {ip}")
}

/// A cell's server behind its proxies: clients reach the first proxy (`addr`); the server and
/// the proxies stop together.
pub struct MeshServer {
    pub inner: Box<dyn CellServer>,
    pub addr: SocketAddr,
    pub proxies: Vec<ProxyProcess>,
}

#[async_trait]
impl CellServer for MeshServer {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
    fn pid(&self) -> Option<u32> {
        self.inner.pid()
    }
    async fn measuring(&mut self, interval: Duration) -> anyhow::Result<()> {
        self.inner.measuring(interval).await
    }
    async fn finished(&mut self, phase: Duration) -> anyhow::Result<Option<ServerReadings>> {
        self.inner.finished(phase).await
    }
    fn exited(&mut self) -> Option<String> {
        self.inner
            .exited()
            .or_else(|| self.proxies.iter_mut().find_map(|p| p.exited()))
    }
    fn proxies(&self) -> Vec<ProxyGroup> {
        self.proxies.iter().map(ProxyProcess::group).collect()
    }
    fn proxy_records(&self) -> Vec<ProxyRecord> {
        self.proxies.iter().map(|p| p.record.clone()).collect()
    }
    async fn stop(self: Box<Self>) -> Option<String> {
        let MeshServer { inner, proxies, .. } = *self;
        drop(proxies);
        inner.stop().await
    }
}

/// A server nobody here wrote answering the cell (`server`): it listens on loopback (in the
/// cell's namespace when it has one: this thread's), pinned to the server's CPU like ours, and
/// the runner samples it as it samples ours (its pid). The manifest records its program,
/// version and configuration beside the proxies' (role `origin-server`).
pub struct OriginServer {
    process: ProxyProcess,
}

impl OriginServer {
    pub fn start(cell: &Cell, certs: &Path, cpu: Option<usize>) -> anyhow::Result<OriginServer> {
        let e = &cell.settings;
        let stack =
            stacks::find(&cell.stack).ok_or_else(|| anyhow!("unknown stack {}", cell.stack))?;
        let object = e
            .object
            .as_ref()
            .map(|o| *o.value())
            .ok_or_else(|| anyhow!("server = {}: no object to serve", e.server.as_str()))?;
        let ip: std::net::IpAddr = std::net::Ipv4Addr::LOCALHOST.into();
        let listen = SocketAddr::new(ip, free_port(ip)?);
        let paths = PathPlan { cell, certs }.paths();
        let origin = config::Origin {
            kind: e.server,
            listen,
            tls: ListenTls {
                cert: paths.server_cert(),
                key: paths.server_key(),
                client_ca: None,
            },
            version: stack.http_version(),
            object_bytes: object.bytes,
            threads: e.server_threads,
            request_timeout_ms: e.request_timeout_ms,
        };
        Ok(OriginServer {
            process: ProxyProcess::start_origin(&origin, cpu)?,
        })
    }
}

#[async_trait]
impl CellServer for OriginServer {
    fn addr(&self) -> SocketAddr {
        self.process.listen
    }
    fn pid(&self) -> Option<u32> {
        Some(self.process.pid)
    }
    fn exited(&mut self) -> Option<String> {
        self.process.exited()
    }
    fn proxy_records(&self) -> Vec<ProxyRecord> {
        vec![self.process.record.clone()]
    }
    async fn stop(self: Box<Self>) -> Option<String> {
        // Dropping the process kills its group and removes its directory.
        drop(self);
        None
    }
}

/// Puts `cell`'s edge proxy in front of `server` (already listening in plaintext on
/// loopback), its listener on `ip` (a free port when `port` is 0).
pub fn edge_in_front(
    cell: &Cell,
    certs: &Path,
    server: Box<dyn CellServer>,
    ip: std::net::IpAddr,
    port: u16,
) -> anyhow::Result<Box<dyn CellServer>> {
    let port = if port == 0 { free_port(ip)? } else { port };
    let listen = SocketAddr::new(ip, port);
    let hop = PathPlan { cell, certs }.edge(listen, server.addr())?;
    let proxy = ProxyProcess::start(&hop, None)?;
    Ok(Box::new(MeshServer {
        inner: server,
        addr: listen,
        proxies: vec![proxy],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `--certs` is relative; every file a proxy's configuration names is
    /// absolute, whatever directory the proxy runs in.
    #[test]
    fn a_proxy_is_given_absolute_certificate_paths() {
        let cell = experiment::plan::plan(&experiment::settings::Experiment {
            stacks: vec!["h1".into()],
            ..experiment::settings::Experiment::default()
        })
        .into_iter()
        .next()
        .expect("a cell");
        let plan = PathPlan {
            cell: &cell,
            certs: Path::new("certs"),
        };
        let paths = plan.paths();
        for file in [paths.ca_cert(), paths.server_cert(), paths.server_key()] {
            assert!(file.is_absolute(), "{}", file.display());
            assert!(file.ends_with(Path::new("certs").join(file.file_name().unwrap())));
        }
    }

    /// The listening-socket probe reads the kernel's table: a bound listener shows, a closed
    /// port does not.
    #[test]
    fn a_listener_shows_in_the_processs_tcp_table() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert!(listening(std::process::id(), addr));
        drop(l);
        assert!(!listening(std::process::id(), addr));
    }
}
