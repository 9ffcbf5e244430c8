//! A grpcio (Python) server of `fixtures/catalog.proto` (`shop.v1.Catalog/GetItem`), in
//! plaintext h2c or TLS with the suite's certificate, with or without reflection. It logs
//! every requested id (and its `x-tenant` metadata) to a file before it answers, and exits
//! when its stdin closes or after two minutes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bench_core::tls::CertPaths;

use crate::{skip, Process};

/// The server prints its port after compiling the .proto and binding.
const START_BOUND: Duration = Duration::from_secs(30);

/// This crate's fixtures: `catalog.proto` and `catalog_server.py`.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A running grpcio server; stopped when dropped.
pub struct Grpcio {
    _process: Process,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Grpcio {
    /// Starts the server; `None` (after a note) when python3 with grpcio, grpcio-reflection
    /// and grpcio-tools is missing and `TBENCH_REQUIRE_GRPCIO` is not `1`.
    pub fn start(tls: Option<&CertPaths>, reflection: bool) -> Option<Grpcio> {
        let importable = Command::new("python3")
            .args([
                "-c",
                "import grpc, grpc_reflection.v1alpha.reflection, grpc_tools.protoc",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !importable {
            skip(
                "python3 with grpcio, grpcio-reflection and grpcio-tools",
                "TBENCH_REQUIRE_GRPCIO",
                "pip install -r scripts/requirements.txt",
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("ids.log");
        let mut command = Command::new("python3");
        command
            .arg(fixtures().join("catalog_server.py"))
            .arg("--log")
            .arg(&log)
            // Keep __pycache__ out of the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(paths) = tls {
            command
                .arg("--cert")
                .arg(paths.server_cert())
                .arg("--key")
                .arg(paths.server_key());
        }
        if !reflection {
            command.arg("--no-reflection");
        }
        let mut child = command.spawn().expect("python3 runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let process = Process(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(START_BOUND)
            .expect("the grpcio server printed its port in time");
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the grpcio server's first line is a port: {line:?}"));
        assert_ne!(port, 0, "grpcio could not bind");
        Some(Grpcio {
            _process: process,
            port,
            log,
            _dir: dir,
        })
    }

    /// (id, x-tenant) of every call the server received, in arrival order.
    pub fn logged(&self) -> Vec<(u64, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (id, tenant) = l.split_once(' ').expect("id and tenant");
                (id.parse().expect("id"), tenant.to_string())
            })
            .collect()
    }
}
