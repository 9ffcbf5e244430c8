//! h3-quinn 0.0.10 panicked when a receive stream was stopped while a read held it
//! (hyperium/h3#330): tonic-h3's client body does exactly that when tonic drops it on an early
//! error. The workspace carries the upstream fix (vendor/h3-quinn); this test fails without it.

use std::future::poll_fn;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bench_core::tls::{self, ClientTls, HandshakeVariant, ServerIdentity};
use bytes::Bytes;
use h3::quic::{BidiStream, RecvStream};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

const ALPN: &[u8] = b"stop-test";
/// H3_REQUEST_CANCELLED: the code the application asks for must be the one the peer sees.
const STOP_CODE: u64 = 0x10c;

#[tokio::test]
async fn stopping_a_stream_during_a_read_sends_the_code_after_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let paths = tls::ensure_certs(dir.path()).unwrap();
    let identity = ServerIdentity::load(&paths).unwrap();
    let server_tls = tls::server_config(&identity, ALPN, false).unwrap();
    let server_config = quinn::ServerConfig::with_crypto(Arc::new(
        QuicServerConfig::try_from((*server_tls).clone()).unwrap(),
    ));
    let server =
        quinn::Endpoint::server(server_config, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    let server_addr = server.local_addr().unwrap();

    let ca = tls::load_ca(&paths.ca_cert()).unwrap();
    let client_tls =
        tls::client_config(&ClientTls::suite(ca, HandshakeVariant::Full), ALPN).unwrap();
    let mut client = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    client.set_default_client_config(quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from((*client_tls).clone()).unwrap(),
    )));

    // The client is plain quinn; the server's side of the stream goes through h3-quinn.
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let client_task = tokio::spawn(async move {
        let conn = client
            .connect(server_addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(b"x").await.unwrap();
        // Nothing more is sent until the server has stopped its side during a read.
        release_rx.await.unwrap();
        send.write_all(b"late").await.unwrap();
        let stopped = tokio::time::timeout(Duration::from_secs(5), send.stopped())
            .await
            .expect("STOP_SENDING within 5 s")
            .expect("stream stopped, not reset");
        conn.close(0u32.into(), b"done");
        stopped.map(|code| code.into_inner())
    });

    let conn = server.accept().await.unwrap().await.unwrap();
    let mut h3_conn = h3_quinn::Connection::new(conn);
    let stream = poll_fn(|cx| h3::quic::Connection::<Bytes>::poll_accept_bidi(&mut h3_conn, cx))
        .await
        .unwrap();
    let (_send, mut recv) = BidiStream::<Bytes>::split(stream);
    let first = poll_fn(|cx| recv.poll_data(cx)).await.unwrap();
    assert_eq!(first.as_deref(), Some(&b"x"[..]));
    let id = recv.recv_id();

    // A read that cannot finish yet: the stream is inside the read future now.
    let pending = poll_fn(|cx| Poll::Ready(recv.poll_data(cx).is_pending())).await;
    assert!(
        pending,
        "the client has sent nothing more, so the read must wait"
    );
    recv.stop_sending(STOP_CODE); // 0.0.10: `Option::unwrap()` on a `None` value
    assert_eq!(
        recv.recv_id(),
        id,
        "the id is known during a read (hyperium/h3#351)"
    );

    release_tx.send(()).unwrap();
    let late = poll_fn(|cx| recv.poll_data(cx)).await.unwrap();
    assert_eq!(late.as_deref(), Some(&b"late"[..]));
    let seen = client_task.await.unwrap();
    assert_eq!(seen, Some(STOP_CODE), "the peer sees the code asked for");
}
