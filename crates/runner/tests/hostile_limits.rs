//! Servers whose answers pass a client limit (issue 31), measured as a user measures any
//! server (`runner --target`), at 50 workers: an endless HTTP/3 (and HTTP/2) body, a 1 MiB
//! HTTP/3 header, and on both gRPC stacks a length prefix announcing 4 GiB, a unary answer
//! that never stops sending messages, and an answer without trailers. Each request fails as
//! `bad_body` at its limit, whose name the example message gives, never as a timeout: the
//! timeout is 20 s and would leave `request_timeout`s behind. The load generator's kernel
//! high-water mark (VmHWM) stays under 64 MB.
//!
//! The HTTP/3 servers write raw HTTP/3 frames on quinn streams (h3's server refuses to send a
//! field section above the client's announced limit); the HTTP/2 servers are the `h2` crate's.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{num, output_text, read_csv, results_dir, runner};
use prost::Message;

type Row = HashMap<String, String>;

/// Workers of every cell, as the issue asks.
const WORKERS: u32 = 50;
/// Requests of every cell: two per worker.
const REQUESTS: u32 = 100;
/// Every timeout, in seconds: far above what failing at a limit takes.
const TIMEOUT_S: u32 = 20;
/// The load generator's RSS bound.
const CLIENT_RSS_BOUND_BYTES: f64 = 64.0 * 1024.0 * 1024.0;
/// The body limit of the endless-body cells: each worker may hold one body this large (and
/// its buffer up to twice that while it grows), so 50 workers hold at most ≈ 6 MiB on top of
/// the ≈ 40–46 MB the load generator takes at 50 workers anyway. At the default 4 MiB they
/// could hold 200 MiB: the limit times the workers is what the bound allows.
const BODY_LIMIT_BYTES: u64 = 64 * 1024;
/// The header value of the big-header server.
const BIG_HEADER_BYTES: usize = 1 << 20;
/// Each hostile stream stops writing after this much, whatever the client does.
const STREAM_BYTE_BOUND: u64 = 64 << 20;
/// Each hostile stream stops after this long.
const STREAM_TIME_BOUND: Duration = Duration::from_secs(30);

/// What a hostile server does with every request.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// A REST head, then DATA that never ends.
    EndlessBody,
    /// A REST head with one header field of 1 MiB.
    BigHeader,
    /// A small REST head with 150 header fields, above the 100 allowed.
    ManyHeaders,
    /// A gRPC head, then a length prefix announcing 2^32 − 1 bytes, then zeros.
    GrpcHugePrefix,
    /// A gRPC head, then valid messages one after another, never trailers.
    GrpcEndlessUnary,
    /// A gRPC head and one valid message, then the stream ends: no trailers.
    GrpcNoTrailers,
}

impl Misbehaviour {
    fn grpc(self) -> bool {
        !matches!(
            self,
            Misbehaviour::EndlessBody | Misbehaviour::BigHeader | Misbehaviour::ManyHeaders
        )
    }

    /// The fields of the answer's head (`:status` 200 is implied).
    fn head(self) -> Vec<(&'static str, String)> {
        let content_type = if self.grpc() {
            "application/grpc"
        } else {
            "application/json"
        };
        let mut head = vec![("content-type", content_type.to_string())];
        if let Misbehaviour::BigHeader = self {
            head.push(("x-big", "a".repeat(BIG_HEADER_BYTES)));
        }
        if let Misbehaviour::ManyHeaders = self {
            head.extend((0..150).map(|i| ("x-many", i.to_string())));
        }
        head
    }

    /// What the failure message must name.
    fn names(self) -> &'static str {
        match self {
            Misbehaviour::EndlessBody => "response_body_max_bytes",
            Misbehaviour::BigHeader => "response_head_max_bytes",
            Misbehaviour::ManyHeaders => "response_headers_max",
            Misbehaviour::GrpcHugePrefix => "grpc_max_receive_message_bytes",
            Misbehaviour::GrpcEndlessUnary => "second message",
            Misbehaviour::GrpcNoTrailers => "without grpc-status",
        }
    }
}

/// One valid gRPC message (an item), length-prefixed.
fn grpc_message() -> Vec<u8> {
    let item = stack_grpc::pb::Item {
        id: 1,
        name: "x".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0];
    framed.extend_from_slice(&(item.len() as u32).to_be_bytes());
    framed.extend_from_slice(&item);
    framed
}

/// The body pieces after the head: `(piece, repeat it until stopped)`.
fn body_plan(m: Misbehaviour) -> (Vec<u8>, Vec<u8>) {
    match m {
        Misbehaviour::EndlessBody => (Vec::new(), vec![b' '; 16 * 1024]),
        Misbehaviour::BigHeader | Misbehaviour::ManyHeaders => (b"{}".to_vec(), Vec::new()),
        Misbehaviour::GrpcHugePrefix => (vec![0, 0xff, 0xff, 0xff, 0xff], vec![0; 16 * 1024]),
        Misbehaviour::GrpcEndlessUnary => (Vec::new(), grpc_message().repeat(64)),
        Misbehaviour::GrpcNoTrailers => (grpc_message(), Vec::new()),
    }
}

// ---- the runner, as a user runs it ----

/// One reuse cell of `REQUESTS` at `WORKERS` against `addr`; the row with each class's
/// example message as `example_<class>`.
fn measure(addr: SocketAddr, stack: &str, certs: &Path, extra: &[&str]) -> Row {
    let cell = Cell {
        regime: "reuse",
        workers: WORKERS,
        requests: REQUESTS,
        timeout_s: TIMEOUT_S,
    };
    measure_cell(addr, stack, certs, cell, extra)
}

/// What one measured cell is.
#[derive(Clone, Copy)]
struct Cell {
    regime: &'static str,
    workers: u32,
    requests: u32,
    timeout_s: u32,
}

/// One cell as `cell` says against `addr`; the row with each class's example message as
/// `example_<class>`.
fn measure_cell(addr: SocketAddr, stack: &str, certs: &Path, cell: Cell, extra: &[&str]) -> Row {
    let out = tempfile::tempdir().unwrap();
    let output = runner()
        .args(["--target", &addr.to_string(), "--stacks", stack])
        .args(["--regime", cell.regime])
        .args(["--concurrency", &cell.workers.to_string()])
        .args(["--requests", &cell.requests.to_string()])
        .args(["--timeout", &cell.timeout_s.to_string()])
        .args(["--baseline-seconds", "0", "--warmup-fraction", "0"])
        // Every request failing alike would stop the run: here that is the point.
        .arg("--keep-going")
        .args(extra)
        .arg("--certs")
        .arg(certs)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{stack} {extra:?}: {}",
        output_text(&output)
    );
    let dir = results_dir(out.path());
    let rows = read_csv(&dir.join("cells.csv"));
    assert_eq!(rows.len(), 1, "one cell");
    let mut row = rows.into_iter().next().unwrap();
    for failure in read_csv(&dir.join("failures.csv")) {
        row.insert(
            format!("example_{}", failure["class"]),
            failure["example"].clone(),
        );
    }
    eprintln!(
        "{stack} {} {extra:?}: sent {} ok {} bad_body {} request_timeout {} elapsed {} s, \
         client VmHWM {} B; bad_body: {:?}",
        cell.regime,
        row["sent"],
        row["ok"],
        row["fail_bad_body"],
        row["fail_request_timeout"],
        row["elapsed_s"],
        row["client_rss_hwm_bytes"],
        row.get("example_bad_body"),
    );
    row
}

/// Every request sent failed as `bad_body` naming the misbehaviour's limit (none waited for
/// a timeout), and the load generator's high-water mark stayed under the bound.
fn check_failed_at_limit(row: &Row, m: Misbehaviour) {
    let key = &row["cell_key"];
    let sent = num(row, "sent");
    assert_eq!(sent, f64::from(REQUESTS), "{key} {m:?}: every request sent");
    assert_eq!(num(row, "ok"), 0.0, "{key} {m:?}");
    assert_eq!(
        num(row, "fail_bad_body"),
        sent,
        "{key} {m:?}: every request is bad_body (request_timeout {})",
        row["fail_request_timeout"]
    );
    let example = &row["example_bad_body"];
    assert!(
        example.contains(m.names()),
        "{key} {m:?}: example {example:?} does not name {}",
        m.names()
    );
    let hwm = num(row, "client_rss_hwm_bytes");
    assert!(
        hwm > 0.0 && hwm < CLIENT_RSS_BOUND_BYTES,
        "{key} {m:?}: load generator high-water mark {hwm} B"
    );
}

// ---- HTTP/3: raw frames on quinn ----

/// A QUIC variable-length integer (RFC 9000 §16).
fn varint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=63 => out.push(v as u8),
        64..=16_383 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        16_384..=1_073_741_823 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// An HTTP/3 frame.
fn h3_frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 16);
    varint(&mut f, kind);
    varint(&mut f, payload.len() as u64);
    f.extend_from_slice(payload);
    f
}

/// A QPACK/HPACK prefixed integer with `bits` of prefix, the bits above them from `first`.
fn prefixed_int(out: &mut Vec<u8>, first: u8, bits: u32, value: usize) {
    let max = (1usize << bits) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A HEADERS frame: `:status 200` (QPACK static index 25) and `fields` as literals with
/// literal names, no dynamic table (RFC 9204 §4.5).
fn h3_headers(fields: &[(&str, String)]) -> Vec<u8> {
    let mut block = vec![0x00, 0x00, 0xc0 | 25];
    for (name, value) in fields {
        prefixed_int(&mut block, 0x20, 3, name.len());
        block.extend_from_slice(name.as_bytes());
        prefixed_int(&mut block, 0x00, 7, value.len());
        block.extend_from_slice(value.as_bytes());
    }
    h3_frame(0x01, &block)
}

/// A loopback HTTP/3 server on a runtime of its own that answers every request as `m` says;
/// stopped when dropped.
struct H3Hostile {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for H3Hostile {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn h3_hostile(certs: &Path, m: Misbehaviour) -> H3Hostile {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let paths = bench_core::tls::ensure_certs(certs).unwrap();
    let identity = bench_core::tls::ServerIdentity::load(&paths).unwrap();
    let tls = bench_core::tls::server_config(&identity, b"h3", false).unwrap();
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from((*tls).clone()).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let endpoint = runtime
        .block_on(async { quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()) })
        .unwrap();
    let addr = endpoint.local_addr().unwrap();
    runtime.spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                if let Ok(conn) = incoming.await {
                    serve_h3(conn, m).await;
                }
            });
        }
    });
    H3Hostile {
        addr,
        runtime: Some(runtime),
    }
}

async fn serve_h3(conn: quinn::Connection, m: Misbehaviour) {
    // The control stream (type 0) with empty SETTINGS, kept open for the connection's life.
    let Ok(mut control) = conn.open_uni().await else {
        return;
    };
    let mut settings = vec![0x00];
    settings.extend(h3_frame(0x04, &[]));
    if control.write_all(&settings).await.is_err() {
        return;
    }
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(tokio::time::timeout(
            STREAM_TIME_BOUND,
            answer_h3(send, recv, m),
        ));
    }
    drop(control);
}

async fn answer_h3(mut send: quinn::SendStream, mut recv: quinn::RecvStream, m: Misbehaviour) {
    if recv.read_to_end(1 << 16).await.is_err() {
        return;
    }
    if send.write_all(&h3_headers(&m.head())).await.is_err() {
        return;
    }
    let (first, repeated) = body_plan(m);
    if !first.is_empty() && send.write_all(&h3_frame(0x00, &first)).await.is_err() {
        return;
    }
    let frame = h3_frame(0x00, &repeated);
    let mut written = 0u64;
    while !repeated.is_empty() && written < STREAM_BYTE_BOUND {
        if send.write_all(&frame).await.is_err() {
            return;
        }
        written += frame.len() as u64;
        // The other streams' turn: one worker thread serves them all.
        tokio::task::yield_now().await;
    }
    let _ = send.finish();
    let _ = send.stopped().await;
}

// ---- HTTP/2: the h2 crate ----

/// A loopback plaintext HTTP/2 server on a runtime of its own that answers every request as
/// `m` says; stopped when dropped.
struct H2Hostile {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for H2Hostile {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn h2_hostile(m: Misbehaviour) -> H2Hostile {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(tokio::time::timeout(STREAM_TIME_BOUND, serve_h2(tcp, m)));
        }
    });
    H2Hostile {
        addr,
        runtime: Some(runtime),
    }
}

async fn serve_h2(tcp: tokio::net::TcpStream, m: Misbehaviour) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        tokio::spawn(answer_h2(req, respond, m));
    }
}

async fn answer_h2(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    m: Misbehaviour,
) {
    let mut body = req.into_body();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let mut head = http::Response::builder().status(200);
    for (name, value) in m.head() {
        head = head.header(name, value);
    }
    let Ok(mut send) = respond.send_response(head.body(()).unwrap(), false) else {
        return;
    };
    let (first, repeated) = body_plan(m);
    let ends = repeated.is_empty();
    if !first.is_empty() && send.send_data(Bytes::from(first), ends).is_err() {
        return;
    }
    let repeated = Bytes::from(repeated);
    let mut written = 0u64;
    let started = Instant::now();
    while !ends && written < STREAM_BYTE_BOUND && started.elapsed() < STREAM_TIME_BOUND {
        // Wait for the client's window, so a stopped client stops the writing.
        send.reserve_capacity(repeated.len());
        match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(_)) => {}
            _ => return,
        }
        if send.send_data(repeated.clone(), false).is_err() {
            return;
        }
        written += repeated.len() as u64;
        // The connection task's turn to write it: one worker thread serves them all.
        tokio::task::yield_now().await;
    }
}

// ---- the cases ----

/// REST over HTTP/3: an endless body fails at `response_body_max_bytes` (set to 64 KiB, so
/// that 50 workers' bodies fit the bound), a 1 MiB header at `response_head_max_bytes` (64 KiB)
/// and 150 header fields at `response_headers_max` (100), all as `bad_body`.
#[test]
fn http3_answers_fail_at_the_head_and_body_limits() {
    let certs = tempfile::tempdir().unwrap();
    let body_limit = BODY_LIMIT_BYTES.to_string();
    for (m, extra) in [
        (
            Misbehaviour::EndlessBody,
            &["--response-body-max-bytes", &body_limit][..],
        ),
        (Misbehaviour::BigHeader, &[][..]),
        (Misbehaviour::ManyHeaders, &[][..]),
    ] {
        let server = h3_hostile(certs.path(), m);
        let row = measure(server.addr, "h3", certs.path(), extra);
        check_failed_at_limit(&row, m);
    }
}

/// REST over HTTP/2: an endless body fails at `response_body_max_bytes` too.
#[test]
fn http2_endless_body_fails_at_the_body_limit() {
    let certs = tempfile::tempdir().unwrap();
    let m = Misbehaviour::EndlessBody;
    let server = h2_hostile(m);
    let body_limit = BODY_LIMIT_BYTES.to_string();
    let row = measure(
        server.addr,
        "h2",
        certs.path(),
        &["--plaintext", "--response-body-max-bytes", &body_limit],
    );
    check_failed_at_limit(&row, m);
}

const GRPC_CASES: [Misbehaviour; 3] = [
    Misbehaviour::GrpcHugePrefix,
    Misbehaviour::GrpcEndlessUnary,
    Misbehaviour::GrpcNoTrailers,
];

/// gRPC over HTTP/2: a 4 GiB prefix fails at `grpc_max_receive_message_bytes`, a unary answer
/// that never ends at its second message, an answer without trailers as a broken answer. The
/// library client (tonic) holds the same message limit, from the same knob.
#[test]
fn grpc_answers_fail_at_their_limits() {
    let certs = tempfile::tempdir().unwrap();
    for m in GRPC_CASES {
        let server = h2_hostile(m);
        let row = measure(server.addr, "grpc", certs.path(), &["--plaintext"]);
        check_failed_at_limit(&row, m);
    }
    let m = Misbehaviour::GrpcHugePrefix;
    let server = h2_hostile(m);
    let row = measure(
        server.addr,
        "grpc",
        certs.path(),
        &["--plaintext", "--client", "library"],
    );
    assert_eq!(row["client"], "library");
    check_failed_at_limit(&row, m);
}

/// gRPC over HTTP/3: the same three, on the same limits. (tonic-h3, the library client, is
/// not run here: its refusal at the limit stops the stream through h3-quinn 0.0.10's
/// `stop_sending`, which panics while a read is in flight; the lean client never calls it.)
#[test]
fn grpc_h3_answers_fail_at_their_limits() {
    let certs = tempfile::tempdir().unwrap();
    for m in GRPC_CASES {
        let server = h3_hostile(certs.path(), m);
        let row = measure(server.addr, "grpc-h3", certs.path(), &[]);
        check_failed_at_limit(&row, m);
    }
}

// ---- HTTP/3: a third-party server (aioquic) ----

/// The aioquic cells' request timeout, in seconds. Their worker is alone, so one request that
/// waited for the timeout makes its cell last at least this long.
const AIOQUIC_TIMEOUT_S: u32 = 20;

/// Over HTTP/3 against aioquic (`test_servers::aioquic`), whose every answer has a 1 MiB head
/// (16 fields of 64 KiB − 1: aioquic's QPACK encoder refuses a longer value, and its server
/// then sends nothing at all, so a server asked for one 1 MiB field leaves every request to
/// `request_timeout`, rightly: issue 40, item 17): on both HTTP/3 stacks, in both regimes (10 requests on one
/// connection; 5 on a new connection each), every request fails as `bad_body` at
/// `response_head_max_bytes`, refused at the HEADERS frame's header. Against the server that
/// sends the frame's header and its first KiB and then stalls, too: h3 decodes a field
/// section only once it holds the whole frame, so a client checking only the decoded size
/// would wait for the timeout there. No request waits for it: each cell ends in under a
/// quarter of the request timeout (`elapsed_s` against the cell's own `request_timeout_ms`).
#[test]
fn http3_head_limit_acts_at_the_frame_header_against_aioquic() {
    use test_servers::aioquic::{BigHead, BigHeaderH3};
    let certs = tempfile::tempdir().unwrap();
    for sends in [BigHead::Whole, BigHead::Stall] {
        let Some(server) = BigHeaderH3::start(certs.path(), sends) else {
            return;
        };
        for stack in ["h3", "grpc-h3"] {
            for (regime, requests) in [("reuse", 10), ("new-conn", 5)] {
                let cell = Cell {
                    regime,
                    workers: 1,
                    requests,
                    timeout_s: AIOQUIC_TIMEOUT_S,
                };
                let row = measure_cell(server.addr, stack, certs.path(), cell, &[]);
                let what = format!("{stack} {regime} against aioquic sending {sends:?}");
                let sent = num(&row, "sent");
                assert_eq!(sent, f64::from(requests), "{what}: every request sent");
                assert_eq!(
                    (
                        num(&row, "fail_bad_body"),
                        num(&row, "fail_request_timeout")
                    ),
                    (sent, 0.0),
                    "{what}: every request is bad_body, none request_timeout"
                );
                let example = &row["example_bad_body"];
                assert!(
                    example.contains("response_head_max_bytes")
                        && example.contains("refused at its frame header"),
                    "{what}: example {example:?}"
                );
                let (elapsed_s, timeout_s) = (
                    num(&row, "elapsed_s"),
                    num(&row, "request_timeout_ms") / 1000.0,
                );
                assert!(
                    elapsed_s < timeout_s / 4.0,
                    "{what}: the cell took {elapsed_s} s, a request timeout is {timeout_s} s"
                );
            }
        }
    }
}
