//! Servers that misbehave, measured as a user would measure any server (`runner --target`):
//! each request gets the right failure class, every worker moves on, the cell ends within its
//! timeout bound, and the load generator's memory stays bounded. (The HTTP/1.1 response
//! framing corpus runs against the client directly in `stack-h1/tests/hostile.rs`.)

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;

/// The load generator's RSS bound every hostile server must keep it under.
const CLIENT_RSS_BOUND_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// A `runner serve` child and its address; killed when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(stack: &str, certs: &Path) -> Served {
    let mut child = runner()
        .args(["serve", "--stack", stack, "--listen", "127.0.0.1:0"])
        .arg("--certs")
        .arg(certs)
        .stdout(Stdio::piped())
        .spawn()
        .expect("runner serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready JSON");
    let addr = ready["addr"].as_str().expect("addr").to_string();
    Served { child, addr }
}

/// One new-conn cell of `requests` against `addr`, with every timeout `timeout_s`; returns the
/// row.
fn measure(
    stack: &str,
    addr: &str,
    certs: &Path,
    requests: u32,
    timeout_s: f64,
) -> std::collections::HashMap<String, String> {
    let out = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["--target", addr, "--stacks", stack, "--regime", "new-conn"])
        .args(["--concurrency", "2", "--baseline-seconds", "0"])
        .args([
            "--warmup-fraction",
            "0",
            "--requests",
            &requests.to_string(),
        ])
        .args(["--timeout", &timeout_s.to_string()])
        .arg("--certs")
        .arg(certs)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{stack}: {}", output_text(&output));
    let rows = read_csv(&results_dir(out.path()).join("cells.csv"));
    assert_eq!(rows.len(), 1);
    rows.into_iter().next().unwrap()
}

/// Every request failed in `class`, none was lost, and the client stayed small.
fn assert_all_failed_as(row: &std::collections::HashMap<String, String>, class: &str) {
    let sent = num(row, "sent");
    assert!(sent > 0.0, "{}: nothing was sent", row["cell_key"]);
    assert_eq!(num(row, "ok"), 0.0, "{}", row["cell_key"]);
    assert_eq!(
        num(row, &format!("fail_{class}")),
        sent,
        "{}: every request is {class}: {row:?}",
        row["cell_key"]
    );
    let rss = num(row, "client_rss_peak_bytes");
    assert!(
        rss < CLIENT_RSS_BOUND_BYTES,
        "{}: load generator at {rss} bytes",
        row["cell_key"]
    );
}

/// Certificates whose CA the client trusts but whose server certificate names another host.
fn wrong_name_certs(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = CertificateParams::new(vec!["wrong.example".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

/// A server whose certificate is valid but for another name: every handshake fails as
/// `tls_failed` on every stack (TLS over TCP and QUIC), and the cell ends at once.
#[test]
fn a_server_with_the_wrong_name_fails_every_handshake_as_tls() {
    let certs = tempfile::tempdir().unwrap();
    wrong_name_certs(certs.path());
    for stack in stacks::names() {
        let server = serve(stack, certs.path());
        let row = measure(stack, &server.addr, certs.path(), 6, 5.0);
        assert_all_failed_as(&row, "tls_failed");
        // A refused certificate is an answer, not a wait: far below one timeout per request.
        let elapsed = num(&row, "elapsed_s");
        assert!(
            elapsed < 5.0,
            "{stack}: {elapsed} s for 6 refused handshakes"
        );
    }
}

/// A QUIC server that never answers (a UDP socket that reads and drops every datagram): every
/// request is a `handshake_timeout`, each after the handshake timeout, and the cell ends
/// within requests / workers × that timeout (plus slack).
#[test]
fn a_quic_server_that_never_answers_times_out_each_handshake() {
    let certs = tempfile::tempdir().unwrap();
    bench_core::tls::ensure_certs(certs.path()).unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let drained = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sink = {
        let (stop, drained) = (stop.clone(), drained.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if socket.recv_from(&mut buf).is_ok() {
                    drained.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let timeout_s = 0.5;
    let requests = 4;
    let h3 = stacks::stacks()
        .into_iter()
        .find(|s| s.supports_zero_rtt())
        .expect("a QUIC stack")
        .name();
    let row = measure(h3, &addr, certs.path(), requests, timeout_s);
    stop.store(true, Ordering::Relaxed);
    sink.join().unwrap();
    assert_all_failed_as(&row, "handshake_timeout");
    assert!(
        drained.load(Ordering::Relaxed) >= u64::from(requests),
        "the client's Initials reached the silent server"
    );
    let elapsed = num(&row, "elapsed_s");
    let bound = f64::from(requests) / 2.0 * timeout_s;
    assert!(
        elapsed >= bound * 0.9 && elapsed < bound + 2.0,
        "{elapsed} s for {requests} handshakes timing out at {timeout_s} s on 2 workers"
    );
}

/// How a test HTTP/1.1 server frames each answer.
#[derive(Clone, Copy, Debug)]
enum H1Framing {
    /// `Transfer-Encoding: chunked`, the body in three chunks with an extension, and a trailer.
    Chunked,
    /// Content-Length, then `Connection: close` and the server closes.
    CloseAfterEach,
    /// A head without length or chunking and a body that never ends.
    Endless,
}

/// A plaintext HTTP/1.1 server on 127.0.0.1 (a std thread per connection) answering the workload's item with
/// `framing`; bounded: 200 connections, 2 s per connection, and it stops with the test.
fn h1_server(framing: H1Framing) -> (String, Arc<AtomicBool>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let workload = Arc::new(bench_core::workload::ServerWorkload::new(
            bench_core::PayloadProfile::Small,
            None,
            bench_core::ServiceTimeSpec::default(),
        ));
        let mut accepted = 0;
        while !done.load(Ordering::Relaxed) && accepted < 200 {
            let Ok((mut tcp, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            };
            accepted += 1;
            let workload = workload.clone();
            std::thread::spawn(move || {
                tcp.set_nonblocking(false).unwrap();
                tcp.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                    .unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                loop {
                    while !head.ends_with(b"\r\n\r\n") {
                        match tcp.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => break,
                        }
                    }
                    if !head.ends_with(b"\r\n\r\n") {
                        break;
                    }
                    let line = String::from_utf8_lossy(&head);
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    head.clear();
                    let body = workload.rest("GET", &path).body;
                    let ok = match framing {
                        H1Framing::Chunked => {
                            let (a, rest) = body.split_at(body.len() / 3);
                            let (b, c) = rest.split_at(rest.len() / 2);
                            let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                            for part in [a, b, c] {
                                out.extend(format!("{:x};ext=1\r\n", part.len()).bytes());
                                out.extend(part);
                                out.extend(b"\r\n");
                            }
                            out.extend(b"0\r\nx-trailer: done\r\n\r\n");
                            tcp.write_all(&out).is_ok()
                        }
                        H1Framing::CloseAfterEach => {
                            let mut out = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len()).into_bytes();
                            out.extend(&body[..]);
                            let _ = tcp.write_all(&out);
                            false
                        }
                        H1Framing::Endless => {
                            let _ = tcp.write_all(
                                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n",
                            );
                            let chunk = [b' '; 16 * 1024];
                            let until =
                                std::time::Instant::now() + std::time::Duration::from_secs(2);
                            while std::time::Instant::now() < until && tcp.write_all(&chunk).is_ok()
                            {
                            }
                            false
                        }
                    };
                    if !ok {
                        break;
                    }
                }
            });
        }
    });
    (addr, stop)
}

/// One plaintext HTTP/1.1 cell against `addr` (reuse, 2 workers, 1 s timeout).
fn measure_h1(addr: &str, requests: u32) -> std::collections::HashMap<String, String> {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let h1 = stacks::stacks()
        .into_iter()
        .find(|s| s.alpn() == b"http/1.1")
        .expect("an HTTP/1.1 stack")
        .name();
    let output = runner()
        .args([
            "--target",
            addr,
            "--stacks",
            h1,
            "--plaintext",
            "--regime",
            "reuse",
        ])
        .args([
            "--concurrency",
            "2",
            "--baseline-seconds",
            "0",
            "--warmup-fraction",
            "0",
        ])
        .args(["--requests", &requests.to_string(), "--timeout", "1"])
        .arg("--certs")
        .arg(certs.path())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    read_csv(&results_dir(out.path()).join("cells.csv"))
        .into_iter()
        .next()
        .unwrap()
}

/// The HTTP/1.1 framings real servers send, measured as cells: chunked answers and
/// `Connection: close` after every answer succeed (the closed sockets are reopened and counted
/// with the cell's connections, not as failures); an endless body is `bad_body` at the body
/// limit, within the timeout bound, with the load generator under 64 MB.
#[test]
fn http1_framings_of_real_servers_measured_as_cells() {
    let requests = 20;
    let (addr, stop) = h1_server(H1Framing::Chunked);
    let row = measure_h1(&addr, requests);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        (num(&row, "ok"), num(&row, "failed")),
        (20.0, 0.0),
        "chunked"
    );
    assert_eq!(
        num(&row, "connections_established"),
        2.0,
        "chunked keeps the connections"
    );

    let (addr, stop) = h1_server(H1Framing::CloseAfterEach);
    let row = measure_h1(&addr, requests);
    stop.store(true, Ordering::Relaxed);
    assert_eq!((num(&row, "ok"), num(&row, "failed")), (20.0, 0.0), "close");
    // Two pooled connections opened before the clock, one reopen per answer after the first on
    // each: every socket is counted.
    assert!(
        num(&row, "connections_established") >= 18.0,
        "reopened sockets are counted: {}",
        row["connections_established"]
    );

    let (addr, stop) = h1_server(H1Framing::Endless);
    let row = measure_h1(&addr, 4);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(num(&row, "ok"), 0.0);
    assert_eq!(
        num(&row, "fail_bad_body") + num(&row, "fail_request_timeout"),
        4.0,
        "an endless body fails at the body limit or the timeout: {row:?}"
    );
    assert!(num(&row, "elapsed_s") < 4.0 / 2.0 * 1.0 + 3.0);
    assert!(num(&row, "client_rss_peak_bytes") < CLIENT_RSS_BOUND_BYTES);
}
