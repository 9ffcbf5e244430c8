//! HTTP/2 servers that misbehave one way each (issue 14's hostile-server corpus, HTTP/2 part),
//! measured the way a user measures any server: `runner --target 127.0.0.1:PORT --stacks h2
//! --plaintext` (h2c with prior knowledge; `--stacks grpc` where the request needs a body).
//! For each: the failure class docs/results-schema.md documents (or success, where the answers are valid),
//! every request accounted (`ok + failed = sent = requested`), the cell within its timeout bound
//! and the load generator under 64 MB.
//!
//! Where the `h2` crate can produce the behaviour (RST_STREAM, GOAWAY, a stream limit of 0, a
//! window of 0) the server is `h2`'s, which also decodes the request's `:path` so that answers
//! are the workload's. What `h2` never sends (an HPACK bomb, a CONTINUATION flood) is written
//! as raw frames on a plain TCP socket.

mod common;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::workload::{
    padding, ServerWorkload, ITEM_CURRENCY, ITEM_IN_STOCK, ITEM_NAME, ITEM_PRICE_CENTS, ITEM_TAGS,
};
use bench_core::{FailureClass, PayloadProfile, ServiceTimeSpec};
use bytes::Bytes;
use common::{num, output_text, read_csv, results_dir, runner};
use prost::Message;
use stack_grpc::pb::{GetItemRequest, Item};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Row = HashMap<String, String>;

/// Workers of every cell.
const CONCURRENCY: u32 = 2;
/// `--timeout`: request, connect and handshake timeouts, in seconds.
const TIMEOUT_S: f64 = 1.0;
/// `--max-cell-seconds`: a hung cell is cut short (and fails `check_bounds`) rather than
/// hanging the test.
const MAX_CELL_SECONDS: u32 = 20;
/// Added to a cell's timeout bound for process start, connects and closes.
const SLACK_S: f64 = 3.0;
/// The load generator's RSS bound every hostile server must keep it under.
const CLIENT_RSS_BOUND_BYTES: f64 = 64.0 * 1024.0 * 1024.0;
/// How often the runner sends a request the server did not process again (at most 3 times,
/// docs/results-schema.md); then it counts as `conn_reset`.
const MAX_MOVES: u64 = 3;
/// Each hostile connection is dropped after this long, whatever it is doing.
const CONNECTION_BOUND: Duration = Duration::from_secs(10);
/// Connections a hostile server accepts at most.
const MAX_CONNECTIONS: u64 = 1_000;
/// Frames a raw server reads from one connection at most.
const MAX_FRAMES_READ: u64 = 10_000;

// ---- the runner, as a user runs it ----

/// One cell of `requests` against `addr` with `CONCURRENCY` workers; returns its row.
fn measure(addr: SocketAddr, stack: &str, regime: &str, requests: u32, extra: &[&str]) -> Row {
    let out = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let output = runner()
        .args([
            "--target",
            &addr.to_string(),
            "--stacks",
            stack,
            "--plaintext",
        ])
        .args([
            "--regime",
            regime,
            "--concurrency",
            &CONCURRENCY.to_string(),
        ])
        .args(["--requests", &requests.to_string()])
        .args(["--timeout", &TIMEOUT_S.to_string()])
        .args(["--baseline-seconds", "0", "--warmup-fraction", "0"])
        .args(["--max-cell-seconds", &MAX_CELL_SECONDS.to_string()])
        .args(extra)
        .arg("--certs")
        .arg(certs.path())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{stack} {regime} {extra:?}: {}",
        output_text(&output)
    );
    let dir = results_dir(out.path());
    let rows = read_csv(&dir.join("cells.csv"));
    assert_eq!(rows.len(), 1, "one cell");
    let mut row = rows.into_iter().next().unwrap();
    // Each class's example message, as `example_<class>`.
    for failure in read_csv(&dir.join("failures.csv")) {
        row.insert(
            format!("example_{}", failure["class"]),
            failure["example"].clone(),
        );
    }
    eprintln!(
        "{} {extra:?}: sent {} ok {} failed {} moved {} connections {} elapsed {} s, rss {} B, \
         received {} B/request, failures {:?}",
        row["cell_key"],
        row["sent"],
        row["ok"],
        row["failed"],
        row["requests_moved"],
        row["connections_established"],
        row["elapsed_s"],
        row["client_rss_peak_bytes"],
        row["wire_received_bytes_per_request"],
        failures(&row),
    );
    for (class, _) in failures(&row) {
        eprintln!("  {class}: {}", row[&format!("example_{class}")]);
    }
    row
}

/// The non-zero `fail_<class>` columns.
fn failures(row: &Row) -> Vec<(&'static str, f64)> {
    FailureClass::ALL
        .iter()
        .map(|c| (c.as_str(), num(row, &format!("fail_{}", c.as_str()))))
        .filter(|(_, n)| *n > 0.0)
        .collect()
}

/// What every hostile cell must show: all `requests` sent (the workers moved on, nothing cut
/// short), each one counted once as a success or under one class, the phase within
/// `requests / concurrency × timeout` plus slack, and the load generator under 64 MB.
fn check_bounds(row: &Row, requests: u32) {
    let key = &row["cell_key"];
    assert_eq!(row["cut_short"], "false", "{key}: cut short");
    let (sent, ok, failed) = (num(row, "sent"), num(row, "ok"), num(row, "failed"));
    assert_eq!(sent, f64::from(requests), "{key}: every request was sent");
    assert_eq!(ok + failed, sent, "{key}: ok + failed = sent");
    let by_class: f64 = failures(row).iter().map(|(_, n)| n).sum();
    assert_eq!(by_class, failed, "{key}: each failure under one class");
    let elapsed = num(row, "elapsed_s");
    let bound = f64::from(requests) / f64::from(CONCURRENCY) * TIMEOUT_S + SLACK_S;
    assert!(elapsed <= bound, "{key}: {elapsed} s, bound {bound} s");
    let rss = num(row, "client_rss_peak_bytes");
    assert!(
        rss > 0.0 && rss < CLIENT_RSS_BOUND_BYTES,
        "{key}: load generator at {rss} B"
    );
}

/// Every request failed, all as `class`, and the class's example message names `cause`.
fn check_all_failed_as(row: &Row, class: &str, cause: &str) {
    let key = &row["cell_key"];
    assert_eq!(num(row, "ok"), 0.0, "{key}: {:?}", failures(row));
    assert_eq!(
        failures(row),
        vec![(class_name(class), num(row, "sent"))],
        "{key}: every request is {class}"
    );
    let example = &row[&format!("example_{class}")];
    assert!(
        example.contains(cause),
        "{key}: {class} example {example:?} does not name {cause}"
    );
}

fn class_name(class: &str) -> &'static str {
    FailureClass::ALL
        .iter()
        .map(|c| c.as_str())
        .find(|c| *c == class)
        .unwrap_or_else(|| panic!("unknown class {class}"))
}

/// No request waited for its timeout: the cell took less than half of what waiting would.
fn check_fast(row: &Row, requests: u32) {
    let elapsed = num(row, "elapsed_s");
    let waiting = f64::from(requests) / f64::from(CONCURRENCY) * TIMEOUT_S;
    assert!(
        elapsed < waiting / 2.0,
        "{}: {elapsed} s; waiting for the timeouts would take {waiting} s",
        row["cell_key"]
    );
}

// ---- the hostile servers ----

/// What a hostile server saw.
#[derive(Default)]
struct Stats {
    connections: AtomicU64,
    /// Request streams (HEADERS) the server's code saw.
    streams: AtomicU64,
    /// Valid answers it sent.
    answered: AtomicU64,
    /// Request bodies it received whole.
    bodies: AtomicU64,
    /// The client's SETTINGS_MAX_HEADER_LIST_SIZE, as announced (raw servers).
    max_header_list_size: AtomicU64,
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::SeqCst)
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::SeqCst);
}

/// A loopback server on a runtime of its own that runs `handler` on every accepted connection
/// (each for at most `CONNECTION_BOUND`); stopped when dropped.
struct Hostile {
    addr: SocketAddr,
    stats: Arc<Stats>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Hostile {
    fn start<H, F>(handler: H) -> Hostile
    where
        H: Fn(TcpStream, Arc<Stats>) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind on loopback");
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let shared = stats.clone();
        runtime.spawn(async move {
            while get(&shared.connections) < MAX_CONNECTIONS {
                let Ok((tcp, _)) = listener.accept().await else {
                    break;
                };
                let _ = tcp.set_nodelay(true);
                bump(&shared.connections);
                let conn = handler(tcp, shared.clone());
                tokio::spawn(tokio::time::timeout(CONNECTION_BOUND, conn));
            }
        });
        Hostile {
            addr,
            stats,
            runtime: Some(runtime),
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

// -- h2 servers --

/// The workload's REST answer for the request's method and `:path`, exactly what our servers
/// send.
fn rest_answer(
    workload: &ServerWorkload,
    req: &http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) -> bool {
    let reply = workload.rest(req.method().as_str(), req.uri().path());
    let head = http::Response::builder()
        .status(reply.status)
        .header("content-type", reply.content_type)
        .body(())
        .expect("valid head");
    match respond.send_response(head, false) {
        Ok(mut body) => body.send_data(reply.body, true).is_ok(),
        Err(_) => false,
    }
}

/// Reads a unary gRPC call's request body to its end, then answers the workload's item for
/// its id (the fields our gRPC server sets) with grpc-status 0.
async fn grpc_answer(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    stats: Arc<Stats>,
) {
    let mut body = req.into_body();
    let mut message = Vec::new();
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else {
            return;
        };
        message.extend_from_slice(&chunk);
        if message.len() > 1 << 16 {
            return;
        }
    }
    bump(&stats.bodies);
    let Some(request) = message
        .get(5..)
        .and_then(|m| GetItemRequest::decode(m).ok())
    else {
        return;
    };
    let item = Item {
        id: request.id,
        name: ITEM_NAME.to_string(),
        price_cents: ITEM_PRICE_CENTS,
        currency: ITEM_CURRENCY.to_string(),
        in_stock: ITEM_IN_STOCK,
        tags: ITEM_TAGS.iter().map(|t| t.to_string()).collect(),
        description: padding(PayloadProfile::Small),
    }
    .encode_to_vec();
    let mut framed = vec![0];
    framed.extend_from_slice(&(item.len() as u32).to_be_bytes());
    framed.extend_from_slice(&item);
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .expect("valid head");
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    if send.send_data(Bytes::from(framed), false).is_err() {
        return;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    if send.send_trailers(trailers).is_ok() {
        bump(&stats.answered);
    }
}

/// Answers `n` requests of each connection with the workload's item, then shuts the connection
/// down as `h2` (and hyper on top of it) does: GOAWAY(2^31-1), a PING, GOAWAY(last processed
/// stream) once the PING is answered, and the close once the open streams are done. A stream
/// that reached the server before the final GOAWAY is answered too.
async fn goaway_after(tcp: TcpStream, stats: Arc<Stats>, workload: Arc<ServerWorkload>, n: u64) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let mut answered = 0;
    while let Some(Ok((req, respond))) = conn.accept().await {
        bump(&stats.streams);
        if rest_answer(&workload, &req, respond) {
            bump(&stats.answered);
        }
        answered += 1;
        if answered == n {
            conn.graceful_shutdown();
        }
    }
}

/// Resets every request stream with RST_STREAM(`reason`); the connection stays up.
async fn reset_every_stream(tcp: TcpStream, stats: Arc<Stats>, reason: h2::Reason) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    while let Some(Ok((_req, mut respond))) = conn.accept().await {
        bump(&stats.streams);
        respond.send_reset(reason);
    }
}

/// Resets every second stream with RST_STREAM(INTERNAL_ERROR) and answers the others with the
/// workload's item after 20 ms, so that a reset comes while another stream is in flight.
async fn reset_every_other_stream(
    tcp: TcpStream,
    stats: Arc<Stats>,
    workload: Arc<ServerWorkload>,
) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let mut n = 0u64;
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        bump(&stats.streams);
        n += 1;
        if n.is_multiple_of(2) {
            respond.send_reset(h2::Reason::INTERNAL_ERROR);
            continue;
        }
        let (workload, stats) = (workload.clone(), stats.clone());
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if rest_answer(&workload, &req, respond) {
                bump(&stats.answered);
            }
        });
    }
}

/// SETTINGS_MAX_CONCURRENT_STREAMS = 0: `h2` refuses every stream (RST_STREAM REFUSED_STREAM,
/// RFC 9113 §5.1.2) before the application sees it.
async fn no_streams(tcp: TcpStream, stats: Arc<Stats>) {
    let handshake = h2::server::Builder::new()
        .max_concurrent_streams(0)
        .handshake::<_, Bytes>(tcp);
    let Ok(mut conn) = handshake.await else {
        return;
    };
    while let Some(Ok(_request)) = conn.accept().await {
        bump(&stats.streams);
    }
}

/// SETTINGS_INITIAL_WINDOW_SIZE = 0 and never a WINDOW_UPDATE for a stream (`h2` sends one
/// only when the application releases capacity, which this one never does); a request whose
/// body arrives anyway is answered.
async fn shut_window(tcp: TcpStream, stats: Arc<Stats>) {
    let handshake = h2::server::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp);
    let Ok(mut conn) = handshake.await else {
        return;
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        bump(&stats.streams);
        tokio::spawn(tokio::time::timeout(
            CONNECTION_BOUND,
            grpc_answer(req, respond, stats.clone()),
        ));
    }
}

// -- raw-frame servers --

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;
/// The default SETTINGS_MAX_FRAME_SIZE, which the client keeps.
const MAX_FRAME: usize = 16_384;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A header block as HEADERS plus CONTINUATION frames of at most `MAX_FRAME` bytes, ending
/// the stream.
fn header_frames(stream: u32, block: &[u8]) -> Vec<u8> {
    let chunks: Vec<&[u8]> = block.chunks(MAX_FRAME).collect();
    let mut out = Vec::with_capacity(block.len() + 9 * chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let last = if i + 1 == chunks.len() {
            END_HEADERS
        } else {
            0
        };
        if i == 0 {
            out.extend(frame(HEADERS, END_STREAM | last, stream, chunk));
        } else {
            out.extend(frame(CONTINUATION, last, stream, chunk));
        }
    }
    out
}

/// An HPACK integer (RFC 7541 §5.1) with `prefix_bits`, the bits above them set from `first`.
fn hpack_int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, value: usize) {
    let max = (1usize << prefix_bits) - 1;
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

/// The indexed HPACK bomb: `:status 200`, one field as large as the client's 4,096-byte
/// dynamic table allows, inserted once (literal with incremental indexing), then referenced
/// `BOMB_REFS` times by its one-byte index: 24 KB on the wire, 81 MB decoded.
const BOMB_NAME: &[u8] = b"x-bomb";
const BOMB_VALUE_LEN: usize = 4_000;
const BOMB_REFS: usize = 20_000;

fn indexed_bomb() -> Vec<u8> {
    let mut block = vec![0x88]; // :status 200 (static index 8)
    block.push(0x40); // literal with incremental indexing, new name
    hpack_int(&mut block, 0, 7, BOMB_NAME.len());
    block.extend_from_slice(BOMB_NAME);
    hpack_int(&mut block, 0, 7, BOMB_VALUE_LEN);
    block.extend(std::iter::repeat_n(b'a', BOMB_VALUE_LEN));
    // The entry just inserted is the first dynamic one: index 62.
    block.extend(std::iter::repeat_n(0x80 | 62, BOMB_REFS));
    block
}

/// The decoded size of [`indexed_bomb`] as SETTINGS_MAX_HEADER_LIST_SIZE counts it (each field
/// its name, value and 32 bytes, RFC 9113 §6.5.2).
fn indexed_bomb_list_size() -> usize {
    let status = ":status".len() + 3 + 32;
    status + (BOMB_REFS + 1) * (BOMB_NAME.len() + BOMB_VALUE_LEN + 32)
}

/// A dynamic table size update to 1 MiB (the client allows the default 4,096; RFC 7541 §4.2,
/// §6.3), then `:status 200`.
fn table_size_bomb() -> Vec<u8> {
    let mut block = Vec::new();
    hpack_int(&mut block, 0x20, 5, 1 << 20);
    block.push(0x88);
    block
}

/// What a raw server answers each request stream with.
#[derive(Clone, Copy)]
enum Raw {
    /// This header block (ending the stream), in HEADERS + CONTINUATION frames.
    Block(fn() -> Vec<u8>),
    /// HEADERS without END_HEADERS, then CONTINUATION frames of `frame_len` bytes without end.
    Flood(Flood),
}

#[derive(Clone, Copy)]
struct Flood {
    frame_len: usize,
    /// Stop when the client closes its side (else only a failed write stops it).
    until_client_closes: bool,
    /// A pause after each write, so a long flood does not take the test machine's cores.
    pause: Duration,
}

/// Every flood ends after this long or this many bytes, whatever the client does.
const FLOOD_TIME_BOUND: Duration = Duration::from_secs(3);
const FLOOD_BYTE_BOUND: u64 = 64 << 20;

/// Reads frames from a raw connection.
struct Frames<R> {
    rd: R,
    buf: Vec<u8>,
    read: u64,
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    async fn fill(&mut self, n: usize) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        while self.buf.len() < n {
            match self.rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
            }
        }
        true
    }

    async fn preface(&mut self) -> bool {
        self.fill(PREFACE.len()).await
            && self.buf.drain(..PREFACE.len()).eq(PREFACE.iter().copied())
    }

    /// The next frame; `None` at the end of the connection or after `MAX_FRAMES_READ`.
    async fn next(&mut self) -> Option<Frame> {
        if self.read >= MAX_FRAMES_READ || !self.fill(9).await {
            return None;
        }
        self.read += 1;
        let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        if len > MAX_FRAME || !self.fill(9 + len).await {
            return None;
        }
        let bytes: Vec<u8> = self.buf.drain(..9 + len).collect();
        Some(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
            payload: bytes[9..].to_vec(),
        })
    }
}

/// An h2c server that speaks just enough HTTP/2 (its SETTINGS, the ACKs the client waits
/// for) and answers every request stream as `raw` says.
async fn raw_h2(tcp: TcpStream, stats: Arc<Stats>, raw: Raw) {
    let (rd, mut wr) = tcp.into_split();
    if wr.write_all(&frame(SETTINGS, 0, 0, &[])).await.is_err() {
        return;
    }
    let mut frames = Frames {
        rd,
        buf: Vec::new(),
        read: 0,
    };
    if !frames.preface().await {
        return;
    }
    while let Some(f) = frames.next().await {
        let reply = match f.kind {
            SETTINGS if f.flags & ACK == 0 => {
                for entry in f.payload.chunks_exact(6) {
                    if u16::from_be_bytes([entry[0], entry[1]]) == SETTINGS_MAX_HEADER_LIST_SIZE {
                        let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
                        stats
                            .max_header_list_size
                            .store(u64::from(value), Ordering::SeqCst);
                    }
                }
                frame(SETTINGS, ACK, 0, &[])
            }
            PING if f.flags & ACK == 0 => frame(PING, ACK, 0, &f.payload),
            HEADERS => {
                bump(&stats.streams);
                match raw {
                    Raw::Block(block) => header_frames(f.stream, &block()),
                    Raw::Flood(flood) => {
                        return continuation_flood(frames, wr, f.stream, flood).await;
                    }
                }
            }
            _ => continue,
        };
        if wr.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// HEADERS (`:status 200`, no END_HEADERS) on `stream`, then CONTINUATION frames that never
/// end the block, until a write fails, the client closes (if the flood stops for that), or
/// the flood's bounds.
async fn continuation_flood<R>(
    mut frames: Frames<R>,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    stream: u32,
    flood: Flood,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    let closed = Arc::new(AtomicBool::new(false));
    if flood.until_client_closes {
        let closed = closed.clone();
        tokio::spawn(tokio::time::timeout(CONNECTION_BOUND, async move {
            // The client's GOAWAY, then its FIN.
            while frames.next().await.is_some() {}
            closed.store(true, Ordering::SeqCst);
        }));
    }
    let continuation = frame(CONTINUATION, 0, stream, &vec![0; flood.frame_len]);
    let per_write = (MAX_FRAME / continuation.len()).max(1);
    let mut batch = frame(HEADERS, END_STREAM, stream, &[0x88]);
    batch.extend(continuation.repeat(per_write));
    let started = Instant::now();
    let mut written = 0u64;
    while !closed.load(Ordering::SeqCst)
        && started.elapsed() < FLOOD_TIME_BOUND
        && written < FLOOD_BYTE_BOUND
    {
        let left = FLOOD_TIME_BOUND.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, wr.write_all(&batch)).await {
            Ok(Ok(())) => written += batch.len() as u64,
            _ => break,
        }
        batch = continuation.repeat(per_write);
        if flood.pause.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(flood.pause).await;
        }
    }
}

// ---- the corpus ----

/// An HPACK bomb of indexed references: a 24 KB header block (HEADERS + one CONTINUATION)
/// that decodes to 81 MB, over a thousand times the client's SETTINGS_MAX_HEADER_LIST_SIZE
/// and more than the RSS bound itself. The client adds up the fields' sizes without keeping
/// them and refuses the answer as a stream error (RST_STREAM CANCEL would go out if the stream
/// were still open): `bad_body`, like an HTTP/1.1 head above its limit, and the connection and
/// its HPACK table stay usable, so in reuse the two connections of the pool carry every
/// request.
///
/// A dynamic table size update above what the client allows (1 MiB against the default 4,096
/// it keeps) is a decoding error, so a connection error COMPRESSION_ERROR (RFC 7541 §6.3,
/// RFC 9113 §4.3): GOAWAY, `conn_reset`, and a new connection for the next request.
#[test]
fn hpack_bombs_are_refused_without_inflating_the_client() {
    const REQUESTS: u32 = 20;
    let bomb = indexed_bomb();
    assert!(
        bomb.len() > MAX_FRAME && bomb.len() < 32 * 1024,
        "{}",
        bomb.len()
    );
    for regime in ["reuse", "new-conn"] {
        let server = Hostile::start(|tcp, stats| raw_h2(tcp, stats, Raw::Block(indexed_bomb)));
        let row = measure(server.addr, "h2", regime, REQUESTS, &[]);
        check_bounds(&row, REQUESTS);
        check_all_failed_as(&row, "bad_body", "SETTINGS_MAX_HEADER_LIST_SIZE");
        check_fast(&row, REQUESTS);
        let announced = get(&server.stats.max_header_list_size);
        assert!(announced > 0, "the client announces its header-list limit");
        let decoded = indexed_bomb_list_size() as f64;
        assert!(
            decoded > 1000.0 * announced as f64 && decoded > CLIENT_RSS_BOUND_BYTES,
            "the bomb decodes to {decoded} B, the client allows {announced} B"
        );
        let connections = if regime == "reuse" {
            CONCURRENCY
        } else {
            REQUESTS
        };
        assert_eq!(
            num(&row, "connections_established"),
            f64::from(connections),
            "{regime}: a stream error keeps the connection"
        );
        assert_eq!(get(&server.stats.connections), u64::from(connections));
        assert_eq!(get(&server.stats.streams), u64::from(REQUESTS));
    }
    for regime in ["reuse", "new-conn"] {
        let server = Hostile::start(|tcp, stats| raw_h2(tcp, stats, Raw::Block(table_size_bomb)));
        let row = measure(server.addr, "h2", regime, REQUESTS, &[]);
        check_bounds(&row, REQUESTS);
        check_all_failed_as(&row, "conn_reset", "COMPRESSION_ERROR");
        check_fast(&row, REQUESTS);
        // A connection error: every request needed a connection of its own.
        assert_eq!(num(&row, "connections_established"), f64::from(REQUESTS));
        assert_eq!(get(&server.stats.connections), u64::from(REQUESTS));
        assert_eq!(get(&server.stats.streams), u64::from(REQUESTS));
    }
}

/// A CONTINUATION flood: HEADERS without END_HEADERS, then CONTINUATION frames that never end
/// the block. The client caps a block at 64 CONTINUATION frames and at its 64 KiB header-list
/// size (empty frames cost CPU and no bytes, so both caps are needed), and ends the connection
/// with GOAWAY(ENHANCE_YOUR_CALM) as soon as either is passed: `conn_reset`, having read a
/// bounded amount of the flood. Empty frames hit the frame cap (the server stops when the
/// client closes); 16 KiB frames hit the byte cap, from a server that ignores the client's
/// close and writes until the socket fails, which holds each of the client's closes for its
/// 1 s bound (hence fewer requests).
#[test]
fn a_continuation_flood_is_cut_off() {
    let variants = [
        (
            "empty frames, until the client closes",
            Flood {
                frame_len: 0,
                until_client_closes: true,
                pause: Duration::ZERO,
            },
            20,
        ),
        (
            "16 KiB frames, ignoring the client's close",
            Flood {
                frame_len: MAX_FRAME,
                until_client_closes: false,
                pause: Duration::from_millis(1),
            },
            4,
        ),
    ];
    for (name, flood, requests) in variants {
        for regime in ["reuse", "new-conn"] {
            let server = Hostile::start(move |tcp, stats| raw_h2(tcp, stats, Raw::Flood(flood)));
            let row = measure(server.addr, "h2", regime, requests, &[]);
            check_bounds(&row, requests);
            check_all_failed_as(&row, "conn_reset", "ENHANCE_YOUR_CALM");
            if flood.until_client_closes {
                check_fast(&row, requests);
            }
            // The client stopped reading at the cap: a header block's 64 KiB, plus what one
            // read had taken beyond it.
            let received = num(&row, "wire_received_bytes_per_request");
            assert!(
                received < 160.0 * 1024.0,
                "{name}, {regime}: the client read {received} B of the flood per request"
            );
            assert_eq!(num(&row, "connections_established"), f64::from(requests));
            assert_eq!(get(&server.stats.connections), u64::from(requests));
            assert_eq!(get(&server.stats.streams), u64::from(requests));
        }
    }
}

/// RST_STREAM on every stream. With an error code (INTERNAL_ERROR) the server ended the
/// stream: `conn_reset` ("GOAWAY/stream reset" in docs/results-schema.md's table), and nothing is sent
/// again. With REFUSED_STREAM the server says it did not process the request (RFC 9113 §8.7),
/// so the runner sends it again on a new connection, 3 times, and only then counts it as
/// `conn_reset`: `requests_moved` = 3 × sent and the server saw 4 streams per request.
#[test]
fn rst_stream_on_every_stream() {
    const REQUESTS: u32 = 20;
    for (reason, name, moves) in [
        (h2::Reason::INTERNAL_ERROR, "INTERNAL_ERROR", 0),
        (h2::Reason::REFUSED_STREAM, "REFUSED_STREAM", MAX_MOVES),
    ] {
        for regime in ["reuse", "new-conn"] {
            let server = Hostile::start(move |tcp, stats| reset_every_stream(tcp, stats, reason));
            let row = measure(server.addr, "h2", regime, REQUESTS, &[]);
            check_bounds(&row, REQUESTS);
            check_all_failed_as(&row, "conn_reset", name);
            check_fast(&row, REQUESTS);
            let moved = moves * u64::from(REQUESTS);
            assert_eq!(num(&row, "requests_moved"), moved as f64, "{name} {regime}");
            assert_eq!(
                get(&server.stats.streams),
                u64::from(REQUESTS) + moved,
                "{name} {regime}: streams the server reset"
            );
        }
    }
}

/// A reset stream fails its own request only (RFC 9113 §5.4.2): on one connection shared by
/// both workers (`--connections 1`), every second stream is reset while the other is in
/// flight, and the answered half succeeds on that same connection.
#[test]
fn a_reset_stream_leaves_the_shared_connection_and_its_other_streams_alone() {
    const REQUESTS: u32 = 20;
    let workload = Arc::new(ServerWorkload::new(
        PayloadProfile::Small,
        None,
        ServiceTimeSpec::default(),
    ));
    let server =
        Hostile::start(move |tcp, stats| reset_every_other_stream(tcp, stats, workload.clone()));
    let row = measure(
        server.addr,
        "h2",
        "reuse",
        REQUESTS,
        &["--connections", "1"],
    );
    check_bounds(&row, REQUESTS);
    let half = f64::from(REQUESTS / 2);
    assert_eq!(
        (num(&row, "ok"), num(&row, "fail_conn_reset")),
        (half, half),
        "{:?}",
        failures(&row)
    );
    assert_eq!(get(&server.stats.answered), u64::from(REQUESTS / 2));
    assert_eq!(
        num(&row, "connections_established"),
        1.0,
        "the connection was kept"
    );
    assert_eq!(get(&server.stats.connections), 1);
}

/// GOAWAY after N streams (3 per connection), as `h2` shuts a connection down gracefully:
/// every stream up to the last id gets the workload's valid answer, and the requests the
/// connection can no longer take move to a new one. That is success: ok = sent, no failure,
/// and the server answered each request exactly once. In reuse the moves show in
/// `requests_moved` (one new connection per move with a connection per worker; also with both
/// workers multiplexed on one connection, `--connections 1`); in new-conn no connection lives
/// to its third stream, so nothing moves.
#[test]
fn goaway_after_n_streams_moves_the_rest_to_a_new_connection() {
    const REQUESTS: u32 = 20;
    const N: u64 = 3;
    let workload = Arc::new(ServerWorkload::new(
        PayloadProfile::Small,
        None,
        ServiceTimeSpec::default(),
    ));
    for (regime, extra) in [
        ("reuse", &[][..]),
        ("reuse", &["--connections", "1"][..]),
        ("new-conn", &[][..]),
    ] {
        let w = workload.clone();
        let server = Hostile::start(move |tcp, stats| goaway_after(tcp, stats, w.clone(), N));
        let row = measure(server.addr, "h2", regime, REQUESTS, extra);
        check_bounds(&row, REQUESTS);
        assert_eq!(
            (num(&row, "ok"), num(&row, "failed")),
            (f64::from(REQUESTS), 0.0),
            "{regime} {extra:?}: every request answered: {:?}",
            failures(&row)
        );
        check_fast(&row, REQUESTS);
        assert_eq!(get(&server.stats.answered), u64::from(REQUESTS));
        assert_eq!(get(&server.stats.streams), u64::from(REQUESTS));
        let moved = num(&row, "requests_moved");
        let opened = num(&row, "connections_established");
        assert_eq!(opened, get(&server.stats.connections) as f64);
        if regime == "new-conn" {
            assert_eq!(moved, 0.0);
            assert_eq!(opened, f64::from(REQUESTS));
        } else {
            assert!(moved >= 1.0, "{regime} {extra:?}: requests moved");
            // No connection carried more than N streams plus one per worker in flight when
            // its GOAWAY came.
            let per_connection = f64::from(REQUESTS) / opened;
            assert!(
                per_connection <= (N + u64::from(CONCURRENCY)) as f64,
                "{regime} {extra:?}: {per_connection} streams per connection"
            );
            if extra.is_empty() {
                assert_eq!(
                    opened,
                    f64::from(CONCURRENCY) + moved,
                    "one connection per move"
                );
            }
        }
    }
}

/// SETTINGS_MAX_CONCURRENT_STREAMS = 0 from `h2`. Like h2load, the client sends its first
/// request with the preface, before the server's SETTINGS can arrive (100 streams are assumed
/// until then, as `h2`'s client assumes), and the server refuses that stream with
/// REFUSED_STREAM (RFC 9113 §5.1.2), as unprocessed: each request is sent again on a new
/// connection 3 times, meets the same refusal, and counts as `conn_reset`, quickly, not after a
/// request timeout. Every attempt took a connection of its own, and no stream reached the
/// server's application.
#[test]
fn max_concurrent_streams_zero_refuses_every_request() {
    const REQUESTS: u32 = 20;
    for regime in ["reuse", "new-conn"] {
        let server = Hostile::start(no_streams);
        let row = measure(server.addr, "h2", regime, REQUESTS, &[]);
        check_bounds(&row, REQUESTS);
        check_all_failed_as(&row, "conn_reset", "REFUSED_STREAM");
        check_fast(&row, REQUESTS);
        let attempts = (1 + MAX_MOVES) * u64::from(REQUESTS);
        assert_eq!(
            num(&row, "requests_moved"),
            (MAX_MOVES * u64::from(REQUESTS)) as f64
        );
        assert_eq!(num(&row, "connections_established"), attempts as f64);
        assert_eq!(get(&server.stats.connections), attempts);
        assert_eq!(get(&server.stats.streams), 0);
    }
}

/// A window that never opens: SETTINGS_INITIAL_WINDOW_SIZE = 0 and no WINDOW_UPDATE, against
/// gRPC, whose request has a DATA body (HEADERS are not flow-controlled, so a GET is never
/// held). The client sends a connection's first request with the preface, before the server's
/// SETTINGS arrive, within the default 65,535-byte window, which the server must accept
/// (RFC 9113 §6.9.3), so that request is answered. Every later request on the connection
/// waits for a window that never comes: `request_timeout`, and the connection is replaced.
/// So in new-conn every request succeeds; in reuse each worker alternates an answer and a
/// timeout, and only the answered requests' bodies reached the server.
#[test]
fn a_window_that_never_opens_holds_the_request_body() {
    const REQUESTS: u32 = 8;
    for regime in ["reuse", "new-conn"] {
        let server = Hostile::start(shut_window);
        let row = measure(server.addr, "grpc", regime, REQUESTS, &[]);
        check_bounds(&row, REQUESTS);
        let ok = num(&row, "ok");
        assert_eq!(
            get(&server.stats.bodies) as f64,
            ok,
            "bodies that got through"
        );
        assert_eq!(get(&server.stats.answered) as f64, ok);
        if regime == "new-conn" {
            assert_eq!(ok, f64::from(REQUESTS), "{:?}", failures(&row));
            check_fast(&row, REQUESTS);
            continue;
        }
        let timeouts = num(&row, "fail_request_timeout");
        assert_eq!(ok + timeouts, f64::from(REQUESTS), "{:?}", failures(&row));
        assert!(
            timeouts >= 1.0 && ok - timeouts >= 0.0 && ok - timeouts <= f64::from(CONCURRENCY),
            "each worker alternates: ok {ok}, request_timeout {timeouts}"
        );
        // Each timeout waited its full second.
        let elapsed = num(&row, "elapsed_s");
        let waited = (timeouts / f64::from(CONCURRENCY)).floor() * TIMEOUT_S;
        assert!(
            elapsed >= waited * 0.95,
            "{elapsed} s for {timeouts} timeouts"
        );
    }
}
