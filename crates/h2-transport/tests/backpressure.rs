//! Flow control is real for a streamed answer: against a server no one here wrote (the `h2`
//! crate's server over h2c on 127.0.0.1), a reader that stops taking data holds the server to
//! one stream window, another stream on the same connection goes on meanwhile, and the rest
//! arrives once the reader goes on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::net::TcpConnector;
use bench_core::testkit::client_settings;
use bench_core::PayloadProfile;
use bytes::Bytes;
use h2_transport::{H2Conn, RequestHead, StreamEvent};

/// Our stream window (what the server may send ahead of the reader) and the answer's size.
const STREAM_WINDOW: u32 = 256 * 1024;
const CONNECTION_WINDOW: u32 = 8 << 20;
const ANSWER_BYTES: u64 = 4 << 20;
const CHUNK: usize = 16 * 1024;
/// How long `/slow` takes to answer, and how long a reader stalls while it is awaited.
const SLOW_ANSWER: Duration = Duration::from_millis(300);
const STALL: Duration = Duration::from_secs(3);

/// h2's server: `/big` answers [`ANSWER_BYTES`] in chunks as flow control gives capacity,
/// counting what it was allowed to send; any other path a short answer.
async fn h2_server(sent: Arc<AtomicU64>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(socket).await.unwrap();
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            let sent = sent.clone();
            tokio::spawn(async move {
                let big = request.uri().path() == "/big";
                if request.uri().path() == "/slow" {
                    tokio::time::sleep(SLOW_ANSWER).await;
                }
                let head = http::Response::builder().status(200).body(()).unwrap();
                let mut send = respond.send_response(head, false).unwrap();
                if !big {
                    let _ = send.send_data(Bytes::from_static(b"small"), true);
                    return;
                }
                let mut left = ANSWER_BYTES as usize;
                while left > 0 {
                    send.reserve_capacity(left.min(CHUNK));
                    let granted = match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                        Some(Ok(n)) if n > 0 => n.min(left),
                        Some(Ok(_)) => continue,
                        _ => return,
                    };
                    sent.fetch_add(granted as u64, Ordering::SeqCst);
                    left -= granted;
                    if send
                        .send_data(Bytes::from(vec![7u8; granted]), left == 0)
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A connection to `addr` with our windows.
async fn connect(addr: std::net::SocketAddr) -> Arc<H2Conn> {
    let certs = tempfile::tempdir().unwrap();
    let settings = client_settings(addr, certs.path(), true, PayloadProfile::Small);
    let (stream, _, closer) = TcpConnector::new(&settings, b"h2")
        .unwrap()
        .connect()
        .await
        .unwrap();
    let authority = format!("localhost:{}", addr.port());
    Arc::new(H2Conn::open(
        stream,
        closer,
        &authority,
        false,
        STREAM_WINDOW,
        CONNECTION_WINDOW,
    ))
}

fn head(path: &'static str) -> RequestHead<'static> {
    RequestHead {
        method: "GET",
        path,
        fields: &[],
        keep: &[],
        answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_holds_the_server_to_one_stream_window() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let sent = Arc::new(AtomicU64::new(0));
        let addr = h2_server(sent.clone()).await;
        let conn = connect(addr).await;
        let big = head("/big");
        let mut call = conn
            .open_streamed(&big, None, Instant::now())
            .await
            .unwrap();
        let mut taken = 0u64;
        match call.next().await.unwrap() {
            StreamEvent::Data { data, status, .. } => {
                assert_eq!(status, 200);
                taken += data.len() as u64;
            }
            StreamEvent::End(_) => panic!("the answer ended at once"),
        }
        // The reader stops. Another stream on the connection reads the socket meanwhile (and so
        // takes in whatever the server may send on the stalled one).
        let small = head("/small");
        for _ in 0..20 {
            let answer = conn.exchange(&small, None, Instant::now()).await.unwrap();
            assert_eq!(&answer.body[..], b"small");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let allowed = sent.load(Ordering::SeqCst);
        assert!(
            allowed <= taken + u64::from(STREAM_WINDOW),
            "the server sent {allowed} B while the reader had taken {taken} B: more than one \
             {STREAM_WINDOW} B window ahead"
        );
        assert!(
            allowed >= u64::from(STREAM_WINDOW) / 2,
            "the server was held back before the window filled: {allowed} B"
        );
        assert!(allowed < ANSWER_BYTES, "the stall held the answer back");
        // The reader goes on: everything arrives, the window reopening as it is taken.
        let answer = loop {
            match call.next().await.unwrap() {
                StreamEvent::Data { data, .. } => {
                    assert!(data.iter().all(|b| *b == 7));
                    taken += data.len() as u64;
                }
                StreamEvent::End(answer) => break answer,
            }
        };
        assert_eq!(taken, ANSWER_BYTES);
        assert_eq!(answer.status, 200);
        assert!(answer.body.is_empty(), "the body went to the reader");
        assert_eq!(sent.load(Ordering::SeqCst), ANSWER_BYTES);
        drop(call);
        conn.close().await;
    })
    .await
    .expect("within the test's bound");
}

/// A reader that stops after taking data does not keep the socket from the connection's other
/// streams: a request already waiting when the reader last read gets its answer while the
/// reader stalls. (Which task tokio wakes for the socket decides whether the stalled reader
/// would be the one; the driver hands the socket over whenever a reader takes data, so it
/// never is.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_does_not_hold_the_socket_from_a_waiting_stream() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let addr = h2_server(Arc::new(AtomicU64::new(0))).await;
        let conn = connect(addr).await;
        let resumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The waiting stream: sent first, answered after SLOW_ANSWER.
        let waiting = {
            let (conn, resumed) = (conn.clone(), resumed.clone());
            tokio::spawn(async move {
                let slow = head("/slow");
                let answer = conn.exchange(&slow, None, Instant::now()).await.unwrap();
                assert_eq!(&answer.body[..], b"small");
                resumed.load(Ordering::SeqCst)
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The reader reads (so it polled the socket last), then stalls past the slow answer.
        let big = head("/big");
        let mut call = conn
            .open_streamed(&big, None, Instant::now())
            .await
            .unwrap();
        for _ in 0..4 {
            assert!(matches!(
                call.next().await.unwrap(),
                StreamEvent::Data { .. }
            ));
        }
        tokio::time::sleep(STALL).await;
        resumed.store(true, Ordering::SeqCst);
        let answered_after_the_stall = waiting.await.unwrap();
        assert!(
            !answered_after_the_stall,
            "the waiting stream's answer came only once the stalled reader read again"
        );
        drop(call);
        conn.close().await;
    })
    .await
    .expect("within the test's bound");
}
