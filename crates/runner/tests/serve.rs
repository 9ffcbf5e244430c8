//! `runner serve` as a user would run it: a ready line, real answers, clean stop on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

mod common;

use bench_core::testkit::client_settings;
use bench_core::PayloadProfile;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stack_serves_as_a_process_and_stops_on_sigterm() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().unwrap();
    // Every registered stack, from the registry itself.
    for stack in stacks::names() {
        let mut child = runner()
            .args([
                "serve",
                "--stack",
                stack,
                "--listen",
                "127.0.0.1:0",
                "--payload",
                "4k",
            ])
            .arg("--certs")
            .arg(certs.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ready["stack"], stack);
        assert_eq!(ready["pid"], child.id());
        let addr: std::net::SocketAddr = ready["addr"].as_str().unwrap().parse().unwrap();
        assert!(addr.ip().is_loopback());

        let s = stacks::find(stack).expect("a registered stack");
        let client = s
            .client(&client_settings(
                addr,
                certs.path(),
                false,
                PayloadProfile::K4,
            ))
            .unwrap();
        let connected = client.connect().await.unwrap();
        for id in 0..5 {
            connected
                .conn
                .request(bench_core::Call::item(id))
                .await
                .unwrap();
        }
        connected.conn.close().await;

        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{stack}: {status}");
    }
}
