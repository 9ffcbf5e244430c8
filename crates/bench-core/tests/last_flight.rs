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
    serve_with(listener, config).0
}

/// The suite's server configuration, but with P-256 as its only key exchange: the client's
/// first ClientHello carries an X25519 key share, so the server answers it with a
/// HelloRetryRequest and the client sends a second ClientHello.
fn hello_retry_config(certs: &std::path::Path) -> Arc<rustls::ServerConfig> {
    let paths = ensure_certs(certs).unwrap();
    let identity = ServerIdentity::load(&paths).unwrap();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = vec![rustls::crypto::ring::kx_group::SECP256R1];
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.send_tls13_tickets = 2;
    Arc::new(config)
}

/// Runs the server side of one handshake with `config`; also says how the handshake went.
fn serve_with(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
) -> (Completed, Option<rustls::HandshakeKind>) {
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
            return (Completed { with_finished }, tls.handshake_kind());
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

/// After a HelloRetryRequest the client's second ClientHello is not held (the client then waits
/// for the server, which waits for it: the held hello went only when the kernel's cork
/// expired, 200 ms later, and that handshake's Finished then went alone); its Finished, the
/// last flight, still goes with the first request.
#[tokio::test(flavor = "current_thread")]
async fn after_a_hello_retry_the_second_hello_goes_at_once_and_the_finished_waits_for_the_request()
{
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let certs = dir.path().to_path_buf();
    ensure_certs(&certs).unwrap();
    let config = hello_retry_config(&certs);
    let server = std::thread::spawn(move || serve_with(listener, config));

    let settings = client_settings(addr, dir.path(), false, PayloadProfile::Small);
    let connector = Arc::new(TcpConnector::new(&settings, b"http/1.1").unwrap());
    let (mut stream, _timing, _closer) = connector.connect().await.expect("connect");
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(REQUEST).await.unwrap();
    stream.flush().await.unwrap();

    let (completed, kind) = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert_eq!(
        kind,
        Some(rustls::HandshakeKind::FullWithHelloRetryRequest),
        "the server did not make the client retry its hello"
    );
    assert_eq!(
        completed.with_finished,
        REQUEST,
        "after a hello retry the request did not come in the read that carried the client's \
         Finished: {:?}",
        String::from_utf8_lossy(&completed.with_finished)
    );
}

/// The hold itself: after the server has spoken, a plaintext handshake record (a second
/// ClientHello) is written at once; an encrypted record (TLS 1.3's Finished) is held.
#[tokio::test(flavor = "current_thread")]
async fn only_an_encrypted_record_is_held_after_the_server_spoke() {
    use bench_core::net::LastFlight;
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut server, _) = listener.accept().await.unwrap();
    let mut flight = LastFlight::new(client);
    // The server's first flight (a HelloRetryRequest's record header will do).
    server.write_all(&[0x16, 3, 3, 0, 1, 2]).await.unwrap();
    let mut got = [0u8; 6];
    flight.read_exact(&mut got).await.unwrap();
    // A second ClientHello (plaintext handshake record), after the fake ChangeCipherSpec.
    flight
        .write_all(&[0x14, 3, 3, 0, 1, 1, 0x16, 3, 3, 0, 2, 1, 0])
        .await
        .unwrap();
    assert!(!flight.holding(), "a second ClientHello was held");
    // The Finished flight: held until the next write.
    flight
        .write_all(&[0x14, 3, 3, 0, 1, 1, 0x17, 3, 3, 0, 1, 9])
        .await
        .unwrap();
    assert!(flight.holding(), "the Finished flight was not held");
    flight.write_all(b"request").await.unwrap();
    assert!(!flight.holding());
}
