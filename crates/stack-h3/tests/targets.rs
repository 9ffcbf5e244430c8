//! The HTTP/3 client sending a REST target's requests: to hypercorn + aioquic (an ASGI app
//! streaming its answer in several DATA frames, HEAD, POST bodies; skipped when missing
//! unless `TBENCH_REQUIRE_HYPERCORN=1`), and to a small h3 server written here for what
//! hypercorn does not do on request: trailers, a stream rejected with H3_REQUEST_REJECTED
//! and a GOAWAY.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::tls::{ensure_certs, ServerIdentity};
use bench_core::{ClientImplementation, FailureClass, Stack};
use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use stack_h3::Http3;
use test_servers::hypercorn::Hypercorn;
use test_servers::rest::{calls, client_settings, hypercorn_checks, send, REQUEST_BOUND};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypercorn_answers_target_requests_over_http3() {
    let certs = tempfile::tempdir().expect("temp dir");
    let Some(hypercorn) = Hypercorn::start(certs.path()) else {
        return;
    };
    hypercorn_checks(
        &Http3,
        ClientImplementation::Library,
        &hypercorn,
        certs.path(),
        "3",
    )
    .await;
}

/// The item JSON the edge server answers, cut into three DATA frames.
fn item(id: &str) -> [Bytes; 3] {
    let text = format!(r#"{{"id":{id},"name":"edge","pad":"{}"}}"#, "x".repeat(40));
    let text = Bytes::from(text);
    let third = text.len() / 3;
    [
        text.slice(..third),
        text.slice(third..2 * third),
        text.slice(2 * third..),
    ]
}

/// An h3 server on loopback, stopped when dropped. `/trailers/{id}`: the item in three DATA
/// frames, then trailers. `/reject/{id}`: the stream reset with H3_REQUEST_REJECTED.
/// `/goaway/{id}`: the item, then GOAWAY, and the connection held open without serving.
/// `/stop/{id}`: the request's body is not read (STOP_SENDING with H3_NO_ERROR) and the item
/// answered in full. `/reset/{id}`: the item with its content-length, then the answer's
/// stream reset with H3_NO_ERROR instead of ended; `/cut/{id}`: the same, but the
/// content-length promises 10 bytes more than come.
struct EdgeServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EdgeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn edge_server(cert_dir: &Path) -> EdgeServer {
    let identity = ServerIdentity::load(&ensure_certs(cert_dir).expect("certs")).expect("identity");
    let tls = bench_core::tls::server_config(&identity, stack_h3::ALPN, true).expect("TLS");
    let crypto = QuicServerConfig::try_from((*tls).clone()).expect("QUIC TLS");
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    // A small stream window, so that a large request body waits for credit from the server
    // (and meets the server's STOP_SENDING on `/stop`).
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(quinn::VarInt::from_u32(16 * 1024));
    config.transport_config(Arc::new(transport));
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = endpoint.local_addr().expect("address");
    let task = tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                if let Ok(conn) = incoming.await {
                    let _ = serve(conn).await;
                }
            });
        }
    });
    EdgeServer { addr, task }
}

async fn serve(conn: quinn::Connection) -> Result<(), Box<dyn std::error::Error>> {
    let mut h3 = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await?;
    while let Some(resolver) = h3.accept().await? {
        let (req, mut stream) = resolver.resolve_request().await?;
        let path = req.uri().path().to_string();
        let (kind, id) = path[1..].split_once('/').unwrap_or(("", ""));
        if kind == "stop" {
            stream.stop_sending(h3::error::Code::H3_NO_ERROR);
        } else {
            while stream.recv_data().await?.is_some() {}
        }
        if kind == "reject" {
            stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
            continue;
        }
        let length =
            item(id).iter().map(Bytes::len).sum::<usize>() + usize::from(kind == "cut") * 10;
        let resp = http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("content-length", length)
            .body(())?;
        stream.send_response(resp).await?;
        for part in item(id) {
            stream.send_data(part).await?;
        }
        if kind == "reset" || kind == "cut" {
            // The client reads the answer as it comes; the reset follows well after it (a
            // reset overtaking the data would discard it in quinn, as RFC 9000 §3.2 allows).
            tokio::time::sleep(Duration::from_millis(200)).await;
            stream.stop_stream(h3::error::Code::H3_NO_ERROR);
            continue;
        }
        if kind == "trailers" {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-checksum", "abc".parse()?);
            stream.send_trailers(trailers).await?;
        }
        stream.finish().await?;
        if kind == "goaway" {
            h3.shutdown(0).await?;
            // Hold the connection: the client must go by the GOAWAY, not by a close.
            tokio::time::sleep(Duration::from_secs(30)).await;
            return Ok(());
        }
    }
    Ok(())
}

fn target(server: &EdgeServer, path: &str) -> String {
    format!(
        "[ids]\nfrom = 1\nto = 9\n[rest]\nurl = \"https://localhost:{}{path}\"\n\
         expect_json = [\"/id\", \"/name\"]\n",
        server.addr.port()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_are_read_and_rejected_requests_are_unprocessed() {
    let certs = tempfile::tempdir().expect("temp dir");
    let server = edge_server(certs.path());
    let settings = |path: &str| {
        client_settings(
            server.addr,
            certs.path(),
            calls(&target(&server, path)),
            ClientImplementation::Library,
        )
    };

    // Several DATA frames and trailers, on one connection again and again.
    let run = send(&Http3, &settings("/trailers/{{id}}"), 5).await;
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let full = item("1").iter().map(Bytes::len).sum::<usize>() as u64;
    assert!(run.replies.iter().all(|r| r.body_bytes == full));

    // H3_REQUEST_REJECTED: not processed, so a caller may send it again elsewhere.
    let run = send(&Http3, &settings("/reject/{{id}}"), 2).await;
    assert_eq!(run.failures.len(), 2, "{:?}", run.replies);
    for f in &run.failures {
        assert!(
            f.is_unprocessed() && f.class == FailureClass::ConnReset,
            "{f}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_after_the_servers_goaway_is_unprocessed() {
    let certs = tempfile::tempdir().expect("temp dir");
    let server = edge_server(certs.path());
    let settings = client_settings(
        server.addr,
        certs.path(),
        calls(&target(&server, "/goaway/{{id}}")),
        ClientImplementation::Library,
    );
    let client = Http3.client(&settings).expect("client");
    let conn = client.connect().await.expect("connect").conn;
    let first = conn.request(bench_core::Call::item(1)).await;
    assert!(first.is_ok(), "{first:?}");
    // The GOAWAY follows the answer on the control stream; give it time to arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let second = tokio::time::timeout(REQUEST_BOUND, conn.request(bench_core::Call::item(2)))
        .await
        .expect("the request ends at once, without the server's help");
    let f = second.expect_err("no request after GOAWAY");
    assert!(
        f.is_unprocessed() && f.class == FailureClass::ConnReset,
        "{f}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    conn.close().await;
}

/// RFC 9114 §4.1: a stream the server aborts with H3_NO_ERROR once its answer is complete is
/// a success, whether it stops reading the request (STOP_SENDING, while a large body is still
/// being sent) or resets its answer's stream after the whole answer; an answer cut short
/// before its content-length is a failure that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_with_h3_no_error_after_a_complete_answer_is_a_success() {
    let certs = tempfile::tempdir().expect("temp dir");
    let server = edge_server(certs.path());
    let settings = |path: &str, extra: &str| {
        client_settings(
            server.addr,
            certs.path(),
            calls(&format!("{}{extra}", target(&server, path))),
            ClientImplementation::Library,
        )
    };
    let full = item("1").iter().map(Bytes::len).sum::<usize>() as u64;

    // A 1 MB body against a 16 KiB stream window: the STOP_SENDING meets the upload.
    let body = format!("method = \"POST\"\nbody = \"{}\"\n", "b".repeat(1 << 20));
    let run = send(&Http3, &settings("/stop/{{id}}", &body), 3).await;
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert!(run.replies.iter().all(|r| r.body_bytes == full));

    let run = send(&Http3, &settings("/reset/{{id}}", ""), 3).await;
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert!(run.replies.iter().all(|r| r.body_bytes == full));

    let run = send(&Http3, &settings("/cut/{{id}}", ""), 2).await;
    assert_eq!(run.failures.len(), 2, "{:?}", run.replies);
    for f in &run.failures {
        assert_eq!(f.class, FailureClass::ConnReset, "{f}");
        assert!(
            f.detail.contains("H3_NO_ERROR") && f.detail.contains("incomplete"),
            "{f}"
        );
    }
}
