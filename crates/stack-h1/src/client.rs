//! HTTP/1.1 client: requests written and responses parsed (httparse) on the connection's own
//! stream by the worker's task, one at a time, as HTTP/1.1 without pipelining requires.
//! hyper's client hands every request to a connection task over a channel and the response
//! back over another, which cost the load generator a fifth more CPU per request than wrk
//! (scripts/compare-anchors). Bodies are delimited by Content-Length, which the workload's
//! servers always send; a chunked or unbounded answer is a bad body.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::net::{Closer, Stream, TcpConnector, WireCounters};
use bench_core::workload::{item_path, rest_reply};
use bench_core::{
    classify_error, Client, ClientSettings, Connected, Connection, Failure, FailureClass,
    PayloadProfile, Phase, Reply, WireBytes,
};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

/// Most response header lines the parser accepts (hyper's server sends three).
const MAX_HEADERS: usize = 32;
/// A response head longer than this is not one of the workload's.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The read buffer's size while no longer answer needs more: a small answer (head and 256 B
/// body) fits, and rustls holds the decrypted record anyway, so a read this size costs
/// nothing extra. Every open connection holds one, so it is kept small; a 4k or
/// 64k body grows it to exactly the message's size.
const READ_CHUNK: usize = 4 * 1024;

pub struct H1Client {
    connector: TcpConnector,
    payload: PayloadProfile,
}

impl H1Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(H1Client {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
        })
    }
}

#[async_trait]
impl Client for H1Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (stream, timing, closer) = self.connector.connect().await?;
        let counters = stream.counters();
        Ok(Connected {
            conn: Arc::new(H1Connection {
                io: Mutex::new(Some(Io {
                    stream,
                    buf: BytesMut::with_capacity(READ_CHUNK),
                    request: Vec::with_capacity(128),
                    in_flight: false,
                })),
                closer: std::sync::Mutex::new(Some(closer)),
                counters,
                payload: self.payload,
            }),
            timing,
        })
    }
}

struct H1Connection {
    /// `None` once closed.
    io: Mutex<Option<Io>>,
    closer: std::sync::Mutex<Option<Closer>>,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
}

struct Io {
    stream: Stream,
    /// Bytes read and not yet consumed.
    buf: BytesMut,
    /// The request being written, reused.
    request: Vec<u8>,
    /// Set while a request is out: still set at the next request means the last one was
    /// abandoned (timed out) half-way, and its answer may still arrive on this stream.
    in_flight: bool,
}

/// The parts of a response head the client acts on.
struct Head {
    status: u16,
    len: usize,
    content_length: usize,
}

impl Io {
    async fn exchange(
        &mut self,
        id: u64,
        started: Instant,
    ) -> Result<(u16, Duration, Bytes), Failure> {
        if self.in_flight {
            return Err(Failure::new(
                FailureClass::ConnReset,
                "an abandoned request left this connection unusable",
            ));
        }
        self.in_flight = true;
        self.request.clear();
        write!(
            self.request,
            "GET {} HTTP/1.1\r\nhost: {}\r\n\r\n",
            item_path(id),
            bench_core::tls::SERVER_NAME
        )
        .expect("writing to a Vec");
        let io_err = |e: std::io::Error| classify_error(Phase::Request, &e);
        self.stream.write_all(&self.request).await.map_err(io_err)?;
        self.stream.flush().await.map_err(io_err)?;
        let head = loop {
            if let Some(head) = parse_head(&self.buf)? {
                break head;
            }
            if self.buf.len() > MAX_HEAD_BYTES {
                return Err(Failure::new(
                    FailureClass::BadBody,
                    "response head too long",
                ));
            }
            self.fill(0).await?;
        };
        let ttfb = started.elapsed();
        let message_len = head.len + head.content_length;
        while self.buf.len() < message_len {
            self.fill(message_len).await?;
        }
        let mut message = self.buf.split_to(head.len + head.content_length);
        let body = message.split_off(head.len).freeze();
        self.in_flight = false;
        Ok((head.status, ttfb, body))
    }

    /// Reads more into the buffer: room for the whole `message_len` when it is known (so a
    /// large body is read into one buffer of its size), else for [`READ_CHUNK`] more bytes.
    /// Once the last answer's bytes are dropped, `reserve` reuses the same allocation.
    async fn fill(&mut self, message_len: usize) -> Result<(), Failure> {
        let want = message_len
            .saturating_sub(self.buf.len())
            .max(READ_CHUNK / 4);
        if self.buf.capacity() - self.buf.len() < want {
            self.buf.reserve(want.max(READ_CHUNK));
        }
        match self.stream.read_buf(&mut self.buf).await {
            Ok(0) => Err(Failure::new(
                FailureClass::ConnReset,
                "connection closed before the response was complete",
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(classify_error(Phase::Request, &e)),
        }
    }
}

/// The response head at the start of `buf`, `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, Failure> {
    let bad = |what: String| Failure::new(FailureClass::BadBody, what);
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(format!("malformed HTTP/1.1 response head: {e}"))),
    };
    let mut content_length = None;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| bad("unreadable Content-Length".into()))?;
            content_length = Some(value);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(bad(
                "chunked response; the workload's servers send Content-Length".into(),
            ));
        }
    }
    Ok(Some(Head {
        status: response.code.unwrap_or(0),
        len,
        content_length: content_length
            .ok_or_else(|| bad("response without Content-Length".into()))?,
    }))
}

#[async_trait]
impl Connection for H1Connection {
    async fn request(&self, id: u64) -> Result<Reply, Failure> {
        let mut guard = self.io.lock().await;
        let io = guard
            .as_mut()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        let started = Instant::now();
        let (status, ttfb, body) = io.exchange(id, started).await?;
        let total = started.elapsed();
        drop(guard);
        rest_reply(status, &body, id, self.payload, ttfb, total)
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        // TLS close_notify and FIN from our side, then the server's FIN.
        let io = self.io.lock().await.take();
        if let Some(mut io) = io {
            let _ = tokio::time::timeout(Duration::from_secs(1), io.stream.shutdown()).await;
        }
        let closer = self.closer.lock().expect("closer lock").take();
        if let Some(closer) = closer {
            closer.finish(Duration::from_secs(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_parsing_needs_a_complete_head_and_a_content_length() {
        let full =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello";
        let head = parse_head(full).unwrap().unwrap();
        assert_eq!((head.status, head.content_length), (200, 5));
        assert_eq!(&full[head.len..], b"hello");
        assert!(parse_head(&full[..20]).unwrap().is_none());
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(
            parse_head(chunked).err().unwrap().class,
            FailureClass::BadBody
        );
        let unbounded = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(
            parse_head(unbounded).err().unwrap().class,
            FailureClass::BadBody
        );
        assert!(parse_head(b"HTTP/9 nonsense\r\n\r\n").is_err());
    }
}
