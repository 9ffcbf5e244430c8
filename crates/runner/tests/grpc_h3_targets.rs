//! `[targets.grpc]` over HTTP/3 through the runner: the stack choice says the transport. A
//! run without `stacks` sends over HTTP/2 only (most gRPC services have no HTTP/3);
//! `--stacks grpc,grpc-h3` measures one service over both, both regimes, every call
//! validated against descriptors compiled from `proto/bench.proto`. The service is the
//! suite's own gRPC servers (`runner serve`, HTTP/2 on TCP and HTTP/3 on UDP of one port);
//! the third-party server (tonic-h3, with reflection) is `stack-grpc-h3`'s `tests/targets.rs`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

mod common;

use common::*;
use results::rows::{self, CellRow};

/// `runner serve` of `stack` on `port` of 127.0.0.1 (0: any); killed when dropped.
struct Served(Child, u16);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(stack: &str, certs: &Path, port: u16) -> Served {
    let mut child = runner()
        .args(["serve", "--stack", stack, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--certs")
        .arg(certs)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
    let addr: std::net::SocketAddr = ready["addr"].as_str().unwrap().parse().unwrap();
    Served(child, addr.port())
}

#[test]
fn grpc_targets_go_over_http3_when_grpc_h3_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    bench_core::tls::ensure_certs(&certs).unwrap();
    let h2 = serve("grpc", &certs, 0);
    // HTTP/3 on the UDP port of the same number.
    let _h3 = serve("grpc-h3", &certs, h2.1);
    let file = tmp.path().join("service.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"grpc-service\"\n\n[targets.ids]\nfrom = 1\nto = 500\n\n[targets.grpc]\naddress = \"https://127.0.0.1:{port}\"\nserver_name = \"localhost\"\nca = \"{ca}\"\nmethod = \"bench.v1.ItemService/GetItem\"\nproto = [\"{proto}\"]\nrequest = '{{\"id\": {{{{id}}}}}}'\nexpect_fields = [\"name\", \"tags\"]\n",
            port = h2.1,
            ca = bench_core::tls::CertPaths::new(&certs).ca_cert().display(),
            proto = workspace().join("proto/bench.proto").display(),
        ),
    )
    .unwrap();

    // Without `stacks`: gRPC over HTTP/2 alone.
    let check = runner().arg("check").arg(&file).output().unwrap();
    let text = output_text(&check);
    assert!(check.status.success(), "{text}");
    assert!(
        text.contains("your service's grpc target (grpc):") && !text.contains("grpc-h3"),
        "{text}"
    );

    // Named: the same target over both transports, both regimes, every call validated.
    let run = run_ok(&[
        "--experiment",
        file.to_str().unwrap(),
        "--stacks",
        "grpc,grpc-h3",
        "--concurrency",
        "2",
        "--requests",
        "40",
        "--baseline-seconds",
        "0",
    ]);
    let dir = run.dir();
    let cells = rows::read::<CellRow>(&dir.join("cells.csv")).unwrap().rows;
    let mut seen: Vec<(&str, &str)> = cells
        .iter()
        .map(|r| (r.stack.as_str(), r.regime.as_str()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("grpc", "new-conn"),
            ("grpc", "reuse"),
            ("grpc-h3", "new-conn"),
            ("grpc-h3", "reuse"),
        ]
    );
    for row in &cells {
        assert!(row.ran() && row.ok > 0, "{row:?}");
        assert_eq!(row.failed, 0, "every call validated: {row:?}");
        assert_eq!(row.ok, row.sent, "{row:?}");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let target = &manifest["service"]["targets"][0];
    assert_eq!(target["api"], "grpc", "{manifest}");
    assert_eq!(
        target["stacks"],
        serde_json::json!(["grpc", "grpc-h3"]),
        "{manifest}"
    );
}
