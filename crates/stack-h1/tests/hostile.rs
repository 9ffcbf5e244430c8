//! Small loopback servers that each misbehave one way (or frame their answers in a way the
//! workload's server never does), driven through the `Client`/`Connection` traits the way
//! the runner's reuse worker drives them: a failure whose class breaks the connection
//! closes it and the next request connects again. Each test checks the outcome per request,
//! that every request ends within its timeout, how many connections the server saw, and
//! that the process's RSS grows by less than 64 MB.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::workload::{ItemRenderer, ITEMS_PATH};
use bench_core::{Client, FailureClass, PayloadProfile};
use common::{drive, rss_bytes, settings};
use stack_h1::client::H1Client;
use stack_h1::response::ResponseLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The tests measure RSS and time, so they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const TIMEOUT: Duration = Duration::from_secs(2);
const RSS_BOUND: u64 = 64 * 1024 * 1024;

/// A scripted server: every accepted connection runs the handler. Stops when dropped.
struct Server {
    addr: SocketAddr,
    accepts: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One accepted connection, with the request counter shared by all of them.
struct Peer {
    stream: TcpStream,
    buf: Vec<u8>,
    requests: Arc<AtomicU64>,
}

impl Peer {
    /// The id of the next request's `GET /items/<id>`, and its number on this server;
    /// `None` once the client has closed.
    async fn next_request(&mut self) -> Option<(u64, u64)> {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 4);
                let path = head.split(' ').nth(1)?;
                let id = path.strip_prefix(ITEMS_PATH)?.parse().ok()?;
                return Some((id, self.requests.fetch_add(1, Ordering::SeqCst)));
            }
            let mut chunk = [0u8; 1024];
            match self.stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }
}

async fn serve<H, F>(handler: H) -> Server
where
    H: Fn(Peer) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let accepts = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let counted = accepts.clone();
    let task = tokio::spawn(async move {
        // Dropping the set (when the server is dropped) ends every connection's task.
        let mut peers = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            counted.fetch_add(1, Ordering::SeqCst);
            peers.spawn(handler(Peer {
                stream,
                buf: Vec::new(),
                requests: requests.clone(),
            }));
            while peers.try_join_next().is_some() {}
        }
    });
    Server {
        addr,
        accepts,
        task,
    }
}

fn item(id: u64) -> bytes::Bytes {
    ItemRenderer::new(PayloadProfile::Small).json(id)
}

/// A complete keep-alive answer with Content-Length.
fn answer(id: u64, extra_headers: &str) -> Vec<u8> {
    let body = item(id);
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra_headers}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

fn client(addr: SocketAddr) -> H1Client {
    H1Client::new(&settings(addr)).expect("client")
}

/// Runs `body` alone, with the RSS check around it.
async fn isolated<F: std::future::Future<Output = ()>>(body: F) {
    let _serial = SERIAL.lock().await;
    let before = rss_bytes();
    body.await;
    let after = rss_bytes();
    assert!(
        after.saturating_sub(before) < RSS_BOUND,
        "RSS grew by {} MB",
        (after - before) >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_drip_of_the_head_within_the_timeout_succeeds() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, _)) = peer.next_request().await {
                let answer = answer(id, "x-drip: yes\r\n");
                let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                for byte in &answer[..head_end] {
                    if !peer.send(&[*byte]).await {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                if !peer.send(&answer[head_end..]).await {
                    return;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!((tally.ok, tally.failures()), (3, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_drip_past_the_timeout_is_a_request_timeout() {
    isolated(async {
        let server = serve(|mut peer| async move {
            if peer.next_request().await.is_some() {
                let (mut reader, mut writer) = peer.stream.split();
                let drip = async {
                    let head = b"HTTP/1.1 200 OK\r\nx-slow: ";
                    for byte in head.iter().chain([b'a'; 10_000].iter()) {
                        if writer.write_all(&[*byte]).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                // Until the client gives up and closes.
                let mut sink = [0u8; 64];
                tokio::select! {
                    _ = drip => {}
                    _ = reader.read(&mut sink) => {}
                }
            }
        })
        .await;
        let timeout = Duration::from_millis(300);
        let tally = drive(&client(server.addr), 3, timeout, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::RequestTimeout, 3)])
        );
        assert!(tally.slowest >= timeout);
        assert_eq!(server.accepts.load(Ordering::SeqCst), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_body_is_refused_at_the_body_limit() {
    isolated(async {
        // No length and no chunking: the body would run to a close that never comes.
        let server = serve(|mut peer| async move {
            if peer.next_request().await.is_some() {
                let block = vec![b'x'; 64 * 1024];
                if !peer.send(b"HTTP/1.1 200 OK\r\n\r\n").await {
                    return;
                }
                while peer.send(&block).await {}
            }
        })
        .await;
        let started = Instant::now();
        let tally = drive(&client(server.addr), 3, TIMEOUT, Duration::ZERO).await;
        // One failure per answer; the connection is replaced inside the client.
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 3)])
        );
        assert!(tally
            .example(FailureClass::BadBody)
            .contains("over the limit (response_body_max_bytes)"));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 3);
        assert!(started.elapsed() < 3 * TIMEOUT);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_chunked_body_in_tiny_chunks_stays_bounded() {
    isolated(async {
        let server = serve(|mut peer| async move {
            if peer.next_request().await.is_some() {
                let block = b"1\r\nx\r\n".repeat(8192);
                if !peer
                    .send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await
                {
                    return;
                }
                while peer.send(&block).await {}
            }
        })
        .await;
        let limits = ResponseLimits {
            max_body_bytes: 256 << 10,
            ..ResponseLimits::default()
        };
        let client = H1Client::with_limits(&settings(server.addr), limits).expect("client");
        let tally = drive(&client, 2, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 2)])
        );
        assert!(tally
            .example(FailureClass::BadBody)
            .contains("over the limit"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_beyond_the_limit_is_refused_before_reading() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while peer.next_request().await.is_some() {
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1099511627776\r\n\r\n";
                if !peer.send(head).await || !peer.send(&[b'x'; 4096]).await {
                    return;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 3)])
        );
        assert!(tally
            .example(FailureClass::BadBody)
            .contains("over the limit"));
        assert!(tally.slowest < Duration::from_millis(500));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_longer_than_content_length_succeeds_and_drops_the_connection() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, _)) = peer.next_request().await {
                let mut bytes = answer(id, "");
                bytes.extend_from_slice(b"and some bytes nobody asked for");
                if !peer.send(&bytes).await {
                    return;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 5, TIMEOUT, Duration::ZERO).await;
        // Each answer is complete and valid; what follows it is not trusted, so every next
        // request goes on a new connection.
        assert_eq!((tally.ok, tally.failures()), (5, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 5);
    })
    .await;
}

/// The limits are knobs (`response_head_max_bytes`, `response_headers_max` reach the client
/// through its tuning): a head the default accepts fails under a lower limit, and passes
/// again when the limit is raised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_limits_come_from_the_settings() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, _)) = peer.next_request().await {
                let extra: String = (0..12)
                    .map(|i| format!("x-h{i}: {}\r\n", "v".repeat(300)))
                    .collect();
                if !peer.send(&answer(id, &extra)).await {
                    return;
                }
            }
        })
        .await;
        let limited = |headers: Option<usize>, head: Option<usize>| {
            let mut s = settings(server.addr);
            s.tuning.response_headers_max = headers;
            s.tuning.response_head_max_bytes = head;
            H1Client::new(&s).expect("client")
        };
        let tally = drive(&client(server.addr), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (3, vec![]),
            "defaults accept it"
        );
        let tally = drive(&limited(Some(8), None), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 3)])
        );
        let tally = drive(&limited(None, Some(2048)), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 3)])
        );
        assert!(tally
            .example(FailureClass::BadBody)
            .contains("head too long (above response_head_max_bytes)"));
        let tally = drive(&limited(Some(20), Some(8192)), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (3, vec![]),
            "raised limits accept it"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_header_is_refused() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, _)) = peer.next_request().await {
                let big = format!("x-big: {}\r\n", "b".repeat(1 << 20));
                if !peer.send(&answer(id, &big)).await {
                    return;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 4, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::BadBody, 4)])
        );
        assert!(tally
            .example(FailureClass::BadBody)
            .contains("head too long"));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 4);
        assert!(tally.slowest < Duration::from_secs(1));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_answers_after_interim_responses_succeed_on_one_connection() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, _)) = peer.next_request().await {
                let body = item(id);
                let (a, b) = body.split_at(body.len() / 3);
                let parts: [Vec<u8>; 5] = [
                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n".to_vec(),
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec(),
                    [format!("{:x};part=one\r\n", a.len()).as_bytes(), a, b"\r\n"].concat(),
                    [format!("{:X}\r\n", b.len()).as_bytes(), b, b"\r\n"].concat(),
                    b"0\r\nx-checksum: none\r\n\r\n".to_vec(),
                ];
                for part in parts {
                    if !peer.send(&part).await {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 50, TIMEOUT, Duration::ZERO).await;
        assert_eq!((tally.ok, tally.failures()), (50, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_close_after_each_answer_reopens_without_failures() {
    isolated(async {
        let server = serve(|mut peer| async move {
            if let Some((id, _)) = peer.next_request().await {
                if peer.send(&answer(id, "connection: close\r\n")).await {
                    let _ = peer.stream.shutdown().await;
                    // Wait for the client's FIN, as a server that closes first does.
                    let mut sink = [0u8; 64];
                    let _ =
                        tokio::time::timeout(Duration::from_secs(1), peer.stream.read(&mut sink))
                            .await;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 20, TIMEOUT, Duration::ZERO).await;
        assert_eq!((tally.ok, tally.failures()), (20, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 20);
        // Every socket after the first was opened inside a request, and the reply says so
        // (the runner counts its setup with the connections it opened).
        assert_eq!(tally.reopened, 19);
        // Wire bytes add up over the connection's sockets.
        let body = item(1).len() as u64;
        assert!(tally.received >= 20 * body, "{} B received", tally.received);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_delimited_answers_succeed() {
    isolated(async {
        let server = serve(|mut peer| async move {
            if let Some((id, n)) = peer.next_request().await {
                let version = if n % 2 == 0 { "1.1" } else { "1.0" };
                let head =
                    format!("HTTP/{version} 200 OK\r\ncontent-type: application/json\r\n\r\n");
                let body = item(id);
                let (a, b) = body.split_at(body.len() / 2);
                if peer.send(head.as_bytes()).await && peer.send(a).await {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    if peer.send(b).await {
                        let _ = peer.stream.shutdown().await;
                    }
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 20, TIMEOUT, Duration::ZERO).await;
        assert_eq!((tally.ok, tally.failures()), (20, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 20);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodiless_statuses_keep_the_connection() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, n)) = peer.next_request().await {
                let bytes = match n % 3 {
                    0 => answer(id, ""),
                    // Framing fields on a 204 or 304 describe nothing: no body follows.
                    1 => b"HTTP/1.1 204 No Content\r\ncontent-length: 20\r\n\r\n".to_vec(),
                    _ => {
                        b"HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n".to_vec()
                    }
                };
                if !peer.send(&bytes).await {
                    return;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 9, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (3, vec![(FailureClass::BadStatus, 6)])
        );
        assert_eq!(server.accepts.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framing_error_counts_once_and_closes_the_connection() {
    isolated(async {
        // The first answer is unreadable; every later one is fine.
        let first_closed = Arc::new(tokio::sync::Notify::new());
        let notify = first_closed.clone();
        let server = serve(move |mut peer| {
            let notify = notify.clone();
            async move {
                while let Some((id, n)) = peer.next_request().await {
                    let bytes = if n == 0 {
                        b"HTTP/1.1 200 OK\r\ncontent-length: twelve\r\n\r\n{\"id\":0}".to_vec()
                    } else {
                        answer(id, "")
                    };
                    if !peer.send(&bytes).await {
                        return;
                    }
                    if n == 0 {
                        // The client must drop this connection without being asked to.
                        let mut rest = [0u8; 64];
                        if let Ok(Ok(0) | Err(_)) =
                            tokio::time::timeout(TIMEOUT, peer.stream.read(&mut rest)).await
                        {
                            notify.notify_one();
                        }
                        return;
                    }
                }
            }
        })
        .await;
        let client = client(server.addr);
        let conn = client.connect().await.expect("connect").conn;
        let failure = conn
            .request(bench_core::Call::item(0))
            .await
            .expect_err("unreadable answer");
        assert_eq!(failure.class, FailureClass::BadBody, "{failure}");
        // bad_body keeps the connection in the runner, so this one must stay usable.
        assert!(!failure.class.breaks_connection());
        tokio::time::timeout(Duration::from_secs(1), first_closed.notified())
            .await
            .expect("the out-of-step socket is closed right away");
        for id in 1..10 {
            conn.request(bench_core::Call::item(id))
                .await
                .expect("later answers are fine");
        }
        conn.close().await;
        assert_eq!(server.accepts.load(Ordering::SeqCst), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_close_by_the_server_is_not_a_failure() {
    isolated(async {
        // Keep-alive answers, but the server drops idle connections after 10 ms.
        let server = serve(|mut peer| async move {
            if let Some((id, _)) = peer.next_request().await {
                if peer.send(&answer(id, "")).await {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let _ = peer.stream.shutdown().await;
                }
            }
        })
        .await;
        let tally = drive(&client(server.addr), 5, TIMEOUT, Duration::from_millis(60)).await;
        assert_eq!((tally.ok, tally.failures()), (5, vec![]));
        assert_eq!(server.accepts.load(Ordering::SeqCst), 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_request_does_not_fail_the_next_one() {
    isolated(async {
        let server = serve(|mut peer| async move {
            while let Some((id, n)) = peer.next_request().await {
                if n == 0 {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
                if !peer.send(&answer(id, "")).await {
                    return;
                }
            }
        })
        .await;
        let client = client(server.addr);
        let conn = client.connect().await.expect("connect").conn;
        let timed_out = tokio::time::timeout(
            Duration::from_millis(100),
            conn.request(bench_core::Call::item(0)),
        )
        .await;
        assert!(timed_out.is_err(), "the first answer is late");
        // Another worker sharing the connection: its request is not failed for the
        // abandoned one, whose answer may still be on the way.
        let reply = conn
            .request(bench_core::Call::item(1))
            .await
            .expect("next request");
        assert!(reply.body_bytes > 0);
        assert_eq!(server.accepts.load(Ordering::SeqCst), 2);
        conn.close().await;
        let after_close = conn
            .request(bench_core::Call::item(2))
            .await
            .expect_err("closed");
        assert_eq!(after_close.class, FailureClass::ConnReset);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_closed_before_the_answer_is_a_reset() {
    isolated(async {
        let server = serve(|mut peer| async move {
            if peer.next_request().await.is_some() {
                let _ = peer
                    .send(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{")
                    .await;
            }
        })
        .await;
        let tally = drive(&client(server.addr), 3, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (0, vec![(FailureClass::ConnReset, 3)])
        );
        assert_eq!(server.accepts.load(Ordering::SeqCst), 3);
    })
    .await;
}
