//! The client's last TLS handshake flight (its Finished) reaches the server in the same read as
//! the client's first request (`net::LastFlight`), so a server never answers the Finished on
//! its own before the request arrives (Node's session tickets, then its answer held by Nagle
//! behind them until the client's delayed ACK: a 40 ms stall; see `crates/runner/tests/
//! delayed_ack.rs`). The server here is rustls over a plain socket, so the test sees what
//! each read from the socket held.

use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use bench_core::net::TcpConnector;
use bench_core::testkit::client_settings;
use bench_core::tls::{ensure_certs, server_config, ServerIdentity};
use bench_core::PayloadProfile;
use tokio::io::AsyncWriteExt;

const REQUEST: &[u8] = b"GET /items/1 HTTP/1.1\r\nhost: localhost\r\n\r\n";

/// What the server saw once its handshake completed.
#[derive(Debug)]
struct Completed {
    /// Request bytes that came in the same read as the client's Finished.
    with_finished: Vec<u8>,
}

/// Accepts one connection and runs a TLS 1.3 server handshake (session tickets on, as Node's)
/// on it, one socket read at a time, until the handshake completes.
fn serve_one(listener: TcpListener, certs: &std::path::Path) -> Completed {
    let paths = ensure_certs(certs).unwrap();
    let identity = ServerIdentity::load(&paths).unwrap();
    let config = server_config(&identity, b"http/1.1", true).unwrap();
    let (mut tcp, _) = listener.accept().unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::ServerConnection::new(config).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tcp.read(&mut buf).expect("the client's next flight");
        assert!(n > 0, "the client closed during the handshake");
        let mut read = &buf[..n];
        while !read.is_empty() {
            tls.read_tls(&mut read).unwrap();
        }
        tls.process_new_packets().expect("a valid handshake");
        while tls.wants_write() {
            tls.write_tls(&mut tcp).unwrap();
        }
        if !tls.is_handshaking() {
            let mut with_finished = Vec::new();
            let _ = tls.reader().read_to_end(&mut with_finished);
            return Completed { with_finished };
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_first_request_goes_in_the_segment_of_the_clients_finished() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let certs = dir.path().to_path_buf();
    ensure_certs(&certs).unwrap();
    let server = std::thread::spawn(move || serve_one(listener, &certs));

    let settings = client_settings(addr, dir.path(), false, PayloadProfile::Small);
    let connector = Arc::new(TcpConnector::new(&settings, b"http/1.1").unwrap());
    let (mut stream, timing, _closer) = connector.connect().await.expect("connect");
    assert!(timing.handshake > Duration::ZERO);
    // A client that waits a little between its handshake and its first request: without the
    // held flight the server reads the Finished alone, well before the request.
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(REQUEST).await.unwrap();
    stream.flush().await.unwrap();

    let completed = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert_eq!(
        completed.with_finished,
        REQUEST,
        "the request did not come in the read that carried the client's Finished: {:?}",
        String::from_utf8_lossy(&completed.with_finished)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_connection_that_never_sends_a_request_still_completes_its_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let certs = dir.path().to_path_buf();
    ensure_certs(&certs).unwrap();
    let server = std::thread::spawn(move || serve_one(listener, &certs));

    let settings = client_settings(addr, dir.path(), false, PayloadProfile::Small);
    let connector = Arc::new(TcpConnector::new(&settings, b"http/1.1").unwrap());
    let (stream, _timing, _closer) = connector.connect().await.expect("connect");
    // Nothing written: the held Finished leaves when the kernel's cork expires (200 ms).
    let completed = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert!(completed.with_finished.is_empty());
    drop(stream);
}
