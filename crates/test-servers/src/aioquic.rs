//! A bare aioquic HTTP/3 server (`fixtures/big_header_h3.py`) whose every answer has a 1 MiB
//! response head: the HTTP/3 clients' `response_head_max_bytes` against a server nobody here
//! wrote. Needs what hypercorn's HTTP/3 needs (python3 with aioquic), so it skips, or fails
//! under `TBENCH_REQUIRE_HYPERCORN=1`, as [`crate::hypercorn`] does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{read_text, wait_until, Process};

/// What the server sends of each answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BigHead {
    /// The whole HEADERS frame (1,048,744 B), a small body, and the end of the stream.
    Whole,
    /// The HEADERS frame's header and the first KiB of its payload, then nothing more.
    Stall,
}

impl BigHead {
    fn arg(self) -> &'static str {
        match self {
            BigHead::Whole => "whole",
            BigHead::Stall => "stall",
        }
    }
}

/// The server script, in this crate's `fixtures` folder.
pub fn big_header_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/big_header_h3.py")
}

/// A running big-header server; stopped when dropped.
pub struct BigHeaderH3 {
    // Declared first: the process stops before its directory goes.
    _process: Process,
    _dir: tempfile::TempDir,
    /// Its UDP address.
    pub addr: SocketAddr,
}

impl BigHeaderH3 {
    /// Starts the server with the certificates in `cert_dir` and waits until its socket is
    /// bound; `None` (after a note) when python3 or aioquic is missing and
    /// `TBENCH_REQUIRE_HYPERCORN` is not `1`.
    pub fn start(cert_dir: &Path, sends: BigHead) -> Option<BigHeaderH3> {
        const HINT: &str = "pip install -r scripts/requirements.txt (hypercorn[h3], aioquic)";
        let python = crate::python_with("aioquic", "aioquic", "TBENCH_REQUIRE_HYPERCORN", HINT)?;
        let certs = bench_core::tls::ensure_certs(cert_dir).expect("certificates");
        let dir = tempfile::tempdir().expect("temp dir");
        let port = crate::free_tcp_udp_port();
        let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let child = Command::new(&python)
            .arg(big_header_script())
            .arg(certs.server_cert())
            .arg(certs.server_key())
            .arg(port.to_string())
            .arg(sends.arg())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("log file"))
            .stderr(std::fs::File::create(&stderr).expect("log file"))
            .spawn()
            .expect("start the aioquic server");
        let mut process = Process(child);
        if let Err(e) = wait_until(&mut process.0, || read_text(&stdout).contains("listening")) {
            panic!(
                "the aioquic server did not start: {e}; its stderr:\n{}",
                read_text(&stderr)
            );
        }
        Some(BigHeaderH3 {
            _process: process,
            _dir: dir,
            addr: ([127, 0, 0, 1], port).into(),
        })
    }
}
