//! Node.js (Debian's `nodejs`) serving `fixtures/node_server.js` over TLS with the suite's
//! certificate: `http2.createSecureServer({ allowHTTP1: true })`, so HTTP/2 and HTTP/1.1 by
//! ALPN on one port, `GET /items/{id}` answered with a small JSON body. Node's own socket
//! defaults are kept (Nagle on), which is what makes it a good target for client-side
//! segment bugs. The script logs, for the first HTTP/1.1 request of every connection, whether
//! it was read in the same I/O turn as the client's last handshake flight
//! ([`Node::handshake_turns`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{find_binary, read_text, skip, wait_listening, wait_until, Process};

/// A running Node server; stopped when dropped.
pub struct Node {
    // Declared first: the process stops before its directory goes.
    _process: Process,
    dir: tempfile::TempDir,
    /// TLS (HTTP/2 and HTTP/1.1 by ALPN).
    pub addr: SocketAddr,
}

/// The server script, in this crate's `fixtures` folder.
pub fn script_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node_server.js")
}

impl Node {
    /// Starts the server with the certificates in `cert_dir`; `None` (after a note) when
    /// `node` is not installed and `TBENCH_REQUIRE_NODE` is not `1`.
    pub fn start(cert_dir: &Path) -> Option<Node> {
        let Some(node) = find_binary(&["node", "nodejs"], "--version") else {
            skip("node", "TBENCH_REQUIRE_NODE", "apt-get install nodejs");
            return None;
        };
        let certs = bench_core::tls::ensure_certs(cert_dir).expect("certificates");
        let dir = tempfile::tempdir().expect("temp dir");
        let port = crate::free_port();
        let log = dir.path().join("node.log");
        let child = Command::new(&node)
            .arg(script_path())
            .arg(certs.server_cert())
            .arg(certs.server_key())
            .arg(port.to_string())
            .arg(dir.path().join("turns.log"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start node");
        let mut process = Process(child);
        if let Err(e) = wait_until(&mut process.0, || read_text(&log).contains("listening")) {
            panic!(
                "node did not start listening: {e}; its log:\n{}",
                read_text(&log)
            );
        }
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        wait_listening(addr, &mut process.0);
        Some(Node {
            _process: process,
            dir,
            addr,
        })
    }

    /// Connections whose first HTTP/1.1 request came in the same read as the client's last
    /// handshake flight (`.0`), and those whose request came in a later read (`.1`).
    pub fn handshake_turns(&self) -> (usize, usize) {
        let log = read_text(&self.dir.path().join("turns.log"));
        let together = log.lines().filter(|l| *l == "together").count();
        let apart = log.lines().filter(|l| *l == "apart").count();
        (together, apart)
    }
}
