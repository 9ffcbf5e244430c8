//! hypercorn (with aioquic for HTTP/3) serving `fixtures/asgi_app.py` over TLS with the
//! suite's certificate: HTTP/1.1 and HTTP/2 by ALPN on a TCP port, HTTP/3 on the same UDP
//! port number, and plaintext HTTP/1.1 on another TCP port. The app appends every request
//! (method, path, HTTP version, body) to a log file as a JSON line before it answers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::seen::{Recorder, Seen};
use crate::{read_text, wait_listening, wait_until, Process};

/// A running hypercorn; stopped when dropped.
pub struct Hypercorn {
    // Declared first: the process stops before its directory goes.
    _process: Process,
    dir: tempfile::TempDir,
    /// TLS over TCP (HTTP/1.1 and HTTP/2 by ALPN) and QUIC (HTTP/3) on the same port number.
    pub addr: SocketAddr,
    /// Plaintext HTTP/1.1.
    pub plain: SocketAddr,
}

/// The ASGI app, in this crate's `fixtures` folder.
pub fn app_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/asgi_app.py")
}

impl Hypercorn {
    /// The server process's pid (hypercorn runs its app in this process: `--workers 0`).
    pub fn pid(&self) -> u32 {
        self._process.0.id()
    }

    /// Starts hypercorn with the certificates in `cert_dir` and waits until it serves TCP and
    /// QUIC; `None` (after a note) when python3, hypercorn or aioquic is missing and
    /// `TBENCH_REQUIRE_HYPERCORN` is not `1`.
    pub fn start(cert_dir: &Path) -> Option<Hypercorn> {
        Self::start_with(cert_dir, &[])
    }

    /// [`Hypercorn::start`] with further hypercorn arguments (e.g. `--ca-certs FILE
    /// --cert-reqs 2`: clients must present a certificate that CA signed).
    pub fn start_with(cert_dir: &Path, extra: &[&str]) -> Option<Hypercorn> {
        const HINT: &str = "pip install -r scripts/requirements.txt (hypercorn[h3], aioquic)";
        let python = crate::python_with(
            "hypercorn, aioquic",
            "hypercorn with aioquic",
            "TBENCH_REQUIRE_HYPERCORN",
            HINT,
        )?;
        let certs = bench_core::tls::ensure_certs(cert_dir).expect("certificates");
        let dir = tempfile::tempdir().expect("temp dir");
        let (port, plain_port) = (crate::free_tcp_udp_port(), crate::free_port());
        let stderr = dir.path().join("hypercorn.log");
        let child = Command::new(&python)
            .args(["-m", "hypercorn", "--workers", "0", "--log-level", "info"])
            .arg("--certfile")
            .arg(certs.server_cert())
            .arg("--keyfile")
            .arg(certs.server_key())
            .arg("--bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--quic-bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--insecure-bind")
            .arg(format!("127.0.0.1:{plain_port}"))
            .args(extra)
            .arg(format!("{}:app", app_path().display()))
            .env("TBENCH_ASGI_LOG", dir.path().join("requests.jsonl"))
            // Keep __pycache__ out of the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("log file"))
            .spawn()
            .expect("start hypercorn");
        let mut process = Process(child);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let plain: SocketAddr = ([127, 0, 0, 1], plain_port).into();
        // The sockets are bound before the app serves; its QUIC line comes last.
        if let Err(e) = wait_until(&mut process.0, || read_text(&stderr).contains("(QUIC)")) {
            panic!(
                "hypercorn did not report serving QUIC: {e}; its log:\n{}",
                read_text(&stderr)
            );
        }
        wait_listening(addr, &mut process.0);
        wait_listening(plain, &mut process.0);
        Some(Hypercorn {
            _process: process,
            dir,
            addr,
            plain,
        })
    }
}

impl Recorder for Hypercorn {
    fn name(&self) -> &'static str {
        "hypercorn"
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn seen(&self) -> Vec<Seen> {
        read_text(&self.dir.path().join("requests.jsonl"))
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                Seen {
                    method: text("method"),
                    path: text("path"),
                    http_version: text("http_version"),
                    x_seq: v["x_seq"].as_str().map(str::to_string),
                    body: v["body"].as_str().map(str::to_string),
                }
            })
            .collect()
    }
}
