//! The driver over a real loopback socket against a scripted h2c server: GOAWAY while streams
//! are in flight, a 1xx that ends its stream, and an abandoned request. The server writes its
//! frames by hand, so what the client receives is exactly what the test says.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bench_core::net::TcpConnector;
use bench_core::testkit::client_settings;
use bench_core::{FailureClass, PayloadProfile};
use h2_transport::{H2Conn, RequestHead};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const GET: RequestHead<'static> = RequestHead {
    method: "GET",
    path: "/items/1",
    fields: &[],
    keep: &[],
    answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
};

const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const DATA: u8 = 0x0;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The server side: reads the preface, exchanges SETTINGS, then reads frames on demand.
struct Server {
    socket: TcpStream,
}

impl Server {
    async fn accept(listener: &TcpListener) -> Server {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        socket.read_exact(&mut preface).await.unwrap();
        assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let mut s = Server { socket };
        s.send(&frame(SETTINGS, 0, 0, &[])).await;
        s
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).await.unwrap();
    }

    /// The next frame from the client: kind, flags, stream, payload.
    async fn next(&mut self) -> (u8, u8, u32, Vec<u8>) {
        let mut head = [0u8; 9];
        self.socket.read_exact(&mut head).await.unwrap();
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let mut payload = vec![0; len];
        self.socket.read_exact(&mut payload).await.unwrap();
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        (head[3], head[4], stream, payload)
    }

    /// Reads until `count` request HEADERS arrived, answering the client's SETTINGS.
    async fn requests(&mut self, count: usize) -> Vec<u32> {
        let mut ids = Vec::new();
        while ids.len() < count {
            let (kind, flags, stream, _) = self.next().await;
            match kind {
                HEADERS => ids.push(stream),
                SETTINGS if flags & 1 == 0 => self.send(&frame(SETTINGS, 1, 0, &[])).await,
                _ => {}
            }
        }
        ids
    }
}

async fn connect(addr: SocketAddr) -> H2Conn {
    let certs = tempfile::tempdir().unwrap();
    let settings = client_settings(addr, certs.path(), true, PayloadProfile::Small);
    let connector = TcpConnector::new(&settings, b"h2").unwrap();
    let (stream, _, closer) = connector.connect().await.unwrap();
    H2Conn::open(stream, closer, "localhost", false, 1 << 20, 4 << 20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goaway_finishes_streams_up_to_the_last_id_and_moves_the_rest() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut s = Server::accept(&listener).await;
        let ids = s.requests(2).await;
        assert_eq!(ids, [1, 3]);
        let mut goaway = 1u32.to_be_bytes().to_vec();
        goaway.extend_from_slice(&0u32.to_be_bytes());
        s.send(&frame(GOAWAY, 0, 0, &goaway)).await;
        s.send(&frame(HEADERS, END_HEADERS, 1, &[0x88])).await;
        s.send(&frame(DATA, END_STREAM, 1, b"one")).await;
        // Keep the socket open until the client is done.
        let mut rest = Vec::new();
        let _ = s.socket.read_to_end(&mut rest).await;
    });
    let conn = std::sync::Arc::new(connect(addr).await);
    let first = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.exchange(&GET, None, Instant::now()).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.exchange(&GET, None, Instant::now()).await })
    };
    let bound = Duration::from_secs(5);
    let first = tokio::time::timeout(bound, first).await.unwrap().unwrap();
    let second = tokio::time::timeout(bound, second).await.unwrap().unwrap();
    assert_eq!(
        &first.expect("stream 1 is below the last id").body[..],
        b"one"
    );
    let moved = second.expect_err("stream 3 is above the last id");
    assert!(moved.is_unprocessed(), "{moved}");
    let next = conn.exchange(&GET, None, Instant::now()).await.unwrap_err();
    assert!(next.is_unprocessed(), "{next}");
    conn.close().await;
    server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informational_response_that_ends_the_stream_does_not_hang() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut s = Server::accept(&listener).await;
        let ids = s.requests(1).await;
        // :status 100 as a literal without indexing, ending the stream.
        let block = [0x08, 0x03, b'1', b'0', b'0'];
        s.send(&frame(HEADERS, END_HEADERS | END_STREAM, ids[0], &block))
            .await;
        let mut rest = Vec::new();
        let _ = s.socket.read_to_end(&mut rest).await;
    });
    let conn = connect(addr).await;
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(5), conn.exchange(&GET, None, started))
        .await
        .expect("no hang until the request timeout");
    assert_eq!(answer.unwrap_err().class, FailureClass::BadBody);
    conn.close().await;
    server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_request_is_cancelled_without_a_deadlock() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut s = Server::accept(&listener).await;
        let ids = s.requests(1).await;
        loop {
            let (kind, _, stream, payload) = s.next().await;
            if kind == RST_STREAM {
                assert_eq!((stream, &payload[..]), (ids[0], &8u32.to_be_bytes()[..]));
                break;
            }
        }
        let ids = s.requests(1).await;
        s.send(&frame(HEADERS, END_HEADERS | END_STREAM, ids[0], &[0x88]))
            .await;
        let mut rest = Vec::new();
        let _ = s.socket.read_to_end(&mut rest).await;
    });
    let conn = connect(addr).await;
    let abandoned = tokio::time::timeout(
        Duration::from_millis(50),
        conn.exchange(&GET, None, Instant::now()),
    )
    .await;
    assert!(abandoned.is_err());
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        conn.exchange(&GET, None, Instant::now()),
    )
    .await
    .expect("the connection is still usable");
    assert_eq!(answer.unwrap().status, 200);
    conn.close().await;
    server.await.unwrap();
}
