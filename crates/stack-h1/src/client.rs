//! HTTP/1.1 client: requests written and responses read on the connection's own stream by the
//! worker's task, one at a time, as HTTP/1.1 without pipelining requires. hyper's client
//! hands every request to a connection task over a channel and the response back over
//! another, which cost the load generator a fifth more CPU per request than wrk
//! (scripts/compare-anchors).
//!
//! Framing is [`crate::response`]'s. A Content-Length body is validated where it was read;
//! chunked data is moved down over its framing in the same buffer. The runner keeps a
//! connection after a success or an application-level failure, so when the server ends the
//! connection (`Connection: close`, a close-delimited body, an idle close) or its byte stream
//! can no longer be trusted (a framing error, bytes nobody asked for, an abandoned request),
//! this connection drops its socket and opens a new one for the next request: the answer
//! that caused it is counted once, and the next request is not failed for it.
//!
//! With a REST target ([`Calls::Rest`]) each request is rendered into buffers the connection
//! keeps, written the same way, and the answer judged by the target's rules.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::bulk::{self, Direction, Pieces};
use bench_core::net::{Closer, Stream, TcpConnector, WireCounters};
use bench_core::user_service::{RenderedRequest, RestCalls};
use bench_core::workload::{rest_reply, ITEMS_PATH};
use bench_core::BulkObject;
use bench_core::{
    classify_error, Call, Calls, Client, ClientSettings, Connected, Connection, Failure,
    FailureClass, PayloadProfile, Phase, Reply, WireBytes,
};
use bytes::{Buf, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::response::{Event, FramingError, ResponseLimits, ResponseParser};

/// The read buffer's size while no longer answer needs more: a small answer (head and 256 B
/// body) fits, and rustls holds the decrypted record anyway, so a read this size costs
/// nothing extra. Every open connection holds one, so it is kept small; a 4k or
/// 64k body grows it to exactly the message's size.
const READ_CHUNK: usize = 4 * 1024;
/// Consumed chunk framing is squeezed out of the buffer once it is this large, so a body
/// sent in tiny chunks takes about its own size in memory, not its size on the wire.
const COMPACT_ABOVE: usize = READ_CHUNK;
/// How long a socket the server is closing gets to finish closing in the background.
const CLOSE_BOUND: Duration = Duration::from_secs(1);
/// Sockets closing in the background per connection; past this the oldest is dropped, so a
/// server that says `Connection: close` and then never closes cannot pile up descriptors.
const MAX_CLOSING: usize = 4;
/// The most a bulk object's read takes into the buffer at once: its body is counted and
/// dropped, never held.
const SINK_READ: usize = 64 * 1024;

pub struct H1Client {
    connector: Arc<TcpConnector>,
    payload: PayloadProfile,
    calls: Calls,
    limits: ResponseLimits,
    bulk: Option<BulkObject>,
}

impl H1Client {
    /// A client bounded by the defaults, or by the limits `settings.tuning` sets.
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let limits = ResponseLimits::from_tuning(&settings.tuning);
        Self::with_limits(settings, limits)
    }

    /// A client whose responses are bounded by `limits` instead of the defaults.
    pub fn with_limits(settings: &ClientSettings, limits: ResponseLimits) -> anyhow::Result<Self> {
        if let Calls::Grpc(_) = settings.calls {
            anyhow::bail!(
                "the HTTP/1.1 stack sends REST requests; a gRPC target needs the grpc stack"
            );
        }
        Ok(H1Client {
            connector: Arc::new(TcpConnector::new(settings, crate::ALPN)?),
            payload: settings.payload,
            calls: settings.calls.clone(),
            limits,
            bulk: settings.tuning.bulk,
        })
    }
}

#[async_trait]
impl Client for H1Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (stream, timing, closer) = self.connector.connect().await?;
        let wire = Arc::new(std::sync::Mutex::new(Wire {
            current: Some(stream.counters()),
            retired: WireBytes::default(),
        }));
        Ok(Connected {
            conn: Arc::new(H1Connection {
                io: Mutex::new(Io {
                    live: Some(Live {
                        stream,
                        closer,
                        in_flight: false,
                    }),
                    closed: false,
                    buf: BytesMut::with_capacity(READ_CHUNK),
                    request: Vec::with_capacity(128),
                    rendered: RenderedRequest::default(),
                    parser: ResponseParser::new(self.limits),
                    closing: Vec::new(),
                }),
                wire,
                connector: self.connector.clone(),
                payload: self.payload,
                calls: self.calls.clone(),
                bulk: self.bulk,
            }),
            timing,
        })
    }
}

struct H1Connection {
    io: Mutex<Io>,
    wire: Arc<std::sync::Mutex<Wire>>,
    connector: Arc<TcpConnector>,
    payload: PayloadProfile,
    calls: Calls,
    /// The bulk workload's object, moved by every request instead of the item.
    bulk: Option<BulkObject>,
}

/// Bytes at the socket over every socket this connection has had.
struct Wire {
    /// The open socket's counters.
    current: Option<Arc<WireCounters>>,
    /// Everything the sockets before it moved.
    retired: WireBytes,
}

impl Wire {
    fn add(&mut self, bytes: WireBytes) {
        self.retired.sent += bytes.sent;
        self.retired.received += bytes.received;
    }
}

/// An open socket.
struct Live {
    stream: Stream,
    closer: Closer,
    /// Set while a request is out: still set at the next request means the last one was
    /// abandoned (timed out) half-way, and its answer may still arrive on this stream.
    in_flight: bool,
}

struct Io {
    /// `None` between a socket the server ended (or that went out of step) and the next
    /// request, which opens another.
    live: Option<Live>,
    /// Set by [`Connection::close`]: no more requests.
    closed: bool,
    /// Bytes read and not yet consumed.
    buf: BytesMut,
    /// The request being written, reused.
    request: Vec<u8>,
    /// A target's request rendered for the call, reused.
    rendered: RenderedRequest,
    parser: ResponseParser,
    /// Sockets finishing their close in the background.
    closing: Vec<JoinHandle<()>>,
}

/// How a socket is let go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retire {
    /// The server ended the connection: our FIN, then its FIN, off the request's path.
    Graceful,
    /// The byte stream is out of step: drop it now (an RST if bytes are unread).
    Abort,
}

/// A response read to its end: where its body is in the buffer.
struct Read {
    status: u16,
    ttfb: Duration,
    /// Bytes of the buffer the response took.
    len: usize,
    body: std::ops::Range<usize>,
    /// Body bytes counted and dropped (a bulk object's), not in `body`.
    sunk: u64,
    keep_alive: bool,
}

impl Io {
    async fn exchange(
        &mut self,
        conn: &H1Connection,
        call: Call,
        started: Instant,
    ) -> Result<Reply, Failure> {
        if self.closed {
            return Err(Failure::new(
                FailureClass::ConnReset,
                "connection already closed",
            ));
        }
        self.check_idle(conn);
        let mut reopened = None;
        if self.live.is_none() {
            let (stream, timing, closer) = conn.connector.connect().await?;
            reopened = Some(timing);
            conn.wire.lock().expect("wire lock").current = Some(stream.counters());
            self.live = Some(Live {
                stream,
                closer,
                in_flight: false,
            });
        }
        let read = match self
            .send_and_read(&conn.calls, conn.bulk, call, started)
            .await
        {
            Ok(read) => read,
            Err(failure) => {
                self.retire(conn, Retire::Abort);
                if self.buf.capacity() > 4 * READ_CHUNK {
                    // A failed answer may have grown the buffer to a limit; do not keep that.
                    self.buf = BytesMut::with_capacity(READ_CHUNK);
                }
                return Err(failure);
            }
        };
        let total = started.elapsed();
        if let Some(live) = self.live.as_mut() {
            live.in_flight = false;
        }
        let body = &self.buf[read.body];
        let reply = match (&conn.calls, conn.bulk) {
            (Calls::Rest(calls), _) => calls.judge(&call, read.status, body, read.ttfb, total),
            (_, Some(object)) => {
                bulk::reply(object, read.status, body, read.sunk, read.ttfb, total)
            }
            _ => rest_reply(read.status, body, call.id, conn.payload, read.ttfb, total),
        }
        .map(|reply| Reply { reopened, ..reply });
        self.buf.advance(read.len);
        if !self.buf.is_empty() {
            // Bytes after the response that no request asked for: the answer itself was
            // complete and is judged, the stream after it is not trusted.
            self.retire(conn, Retire::Abort);
        } else if !read.keep_alive {
            self.retire(conn, Retire::Graceful);
        }
        reply
    }

    /// Before a request: drops a socket left out of step by an abandoned request, or one the
    /// server has closed or written to while no request was out. The check is one poll of
    /// the socket and costs no system call while it has nothing to read.
    fn check_idle(&mut self, conn: &H1Connection) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        if live.in_flight || !self.buf.is_empty() {
            self.retire(conn, Retire::Abort);
            return;
        }
        make_room(&mut self.buf, READ_CHUNK / 4);
        match live.stream.read_buf(&mut self.buf).now_or_never() {
            None => {}
            Some(Ok(0)) => self.retire(conn, Retire::Graceful),
            Some(_) => self.retire(conn, Retire::Abort),
        }
    }

    async fn send_and_read(
        &mut self,
        calls: &Calls,
        bulk: Option<BulkObject>,
        call: Call,
        started: Instant,
    ) -> Result<Read, Failure> {
        let live = self.live.as_mut().expect("a socket is open");
        live.in_flight = true;
        self.request.clear();
        let head_request = match calls {
            Calls::Rest(calls) => {
                calls.render(&call, &mut self.rendered);
                write_target_request(&mut self.request, calls, &self.rendered);
                calls.method(&self.rendered) == "HEAD"
            }
            _ if bulk.is_some() => {
                let object = bulk.expect("checked");
                write!(
                    self.request,
                    "{} {} HTTP/1.1\r\nhost: {}\r\n",
                    object.rest_method(),
                    object.rest_path(),
                    bench_core::tls::SERVER_NAME
                )
                .expect("writing to a Vec");
                if object.direction == Direction::Upload {
                    write!(self.request, "content-length: {}\r\n", object.bytes)
                        .expect("writing to a Vec");
                }
                self.request.extend_from_slice(b"\r\n");
                false
            }
            _ => {
                write!(
                    self.request,
                    "GET {ITEMS_PATH}{} HTTP/1.1\r\nhost: {}\r\n\r\n",
                    call.id,
                    bench_core::tls::SERVER_NAME
                )
                .expect("writing to a Vec");
                false
            }
        };
        let io_err = |e: std::io::Error| classify_error(Phase::Request, &e);
        live.stream.write_all(&self.request).await.map_err(io_err)?;
        if let Some(object) = bulk.filter(|o| o.direction == Direction::Upload) {
            // The object goes as slices of the shared chunk: nothing of its size is held.
            for piece in Pieces::new(object.bytes, bulk::CHUNK_BYTES) {
                live.stream.write_all(&piece).await.map_err(io_err)?;
            }
        }
        live.stream.flush().await.map_err(io_err)?;
        // A download is counted and dropped as it arrives; an upload's answer is its count.
        let sink = bulk.is_some_and(|o| o.direction == Direction::Download);
        let mut sunk = 0u64;

        let bad = |e: FramingError| match e {
            FramingError::Incomplete => Failure::new(FailureClass::ConnReset, e.to_string()),
            _ => Failure::new(FailureClass::BadBody, e.to_string()),
        };
        self.parser.begin(head_request);
        // Consumed bytes at the front of the buffer: the head, then the body so far at
        // `body`, then chunk framing not yet squeezed out.
        let mut pos = 0;
        let mut head = None;
        let mut body = 0..0;
        loop {
            let step = self.parser.advance(&self.buf[pos..]).map_err(bad)?;
            match step.event {
                Event::Data(range) if sink => {
                    sunk += range.len() as u64;
                    pos += step.consumed;
                }
                Event::Data(range) => {
                    let (from, to) = (pos + range.start, pos + range.end);
                    if from != body.end {
                        self.buf.copy_within(from..to, body.end);
                    }
                    body.end += to - from;
                    pos += step.consumed;
                }
                Event::Head(h) => {
                    pos += step.consumed;
                    body = pos..pos;
                    head = Some((h, started.elapsed()));
                }
                Event::Interim(_) => self.buf.advance(step.consumed),
                Event::Done => {
                    pos += step.consumed;
                    break;
                }
                Event::NeedMore => {
                    pos += step.consumed;
                    if pos - body.end > COMPACT_ABOVE {
                        let len = self.buf.len();
                        self.buf.copy_within(pos..len, body.end);
                        self.buf.truncate(body.end + (len - pos));
                        pos = body.end;
                    }
                    let want = self
                        .parser
                        .body_remaining()
                        .map_or(0, |r| usize::try_from(r).unwrap_or(usize::MAX));
                    let want = if sink { want.min(SINK_READ) } else { want };
                    make_room(&mut self.buf, want.max(READ_CHUNK / 4));
                    let live = self.live.as_mut().expect("a socket is open");
                    match live.stream.read_buf(&mut self.buf).await {
                        Ok(0) => {
                            self.parser.eof(&self.buf[pos..]).map_err(bad)?;
                            // Read to the close: this socket is done whatever the head said.
                            if let Some((h, _)) = head.as_mut() {
                                h.keep_alive = false;
                            }
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => return Err(io_err(e)),
                    }
                }
            }
        }
        let (head, ttfb) = head.expect("a complete response has a head");
        Ok(Read {
            status: head.status,
            ttfb,
            len: pos,
            body,
            sunk,
            keep_alive: head.keep_alive,
        })
    }

    /// Lets the socket go; the next request opens another.
    fn retire(&mut self, conn: &H1Connection, how: Retire) {
        let Some(live) = self.live.take() else {
            return;
        };
        self.buf.clear();
        let counters = live.stream.counters();
        let at_retire = counters.snapshot();
        {
            let mut wire = conn.wire.lock().expect("wire lock");
            wire.add(at_retire);
            wire.current = None;
        }
        if how == Retire::Abort {
            return;
        }
        self.closing.retain(|task| !task.is_finished());
        if self.closing.len() >= MAX_CLOSING {
            self.closing.remove(0).abort();
        }
        let wire = conn.wire.clone();
        self.closing.push(tokio::spawn(async move {
            let Live {
                mut stream, closer, ..
            } = live;
            let _ = tokio::time::timeout(CLOSE_BOUND, stream.shutdown()).await;
            let after = counters.snapshot();
            wire.lock().expect("wire lock").add(WireBytes {
                sent: after.sent - at_retire.sent,
                received: after.received - at_retire.received,
            });
            drop(stream);
            closer.finish(CLOSE_BOUND).await;
        }));
    }
}

/// Writes a target's rendered request: request line, `host`, the target's headers, then
/// `content-length` and the body when the target sends one.
fn write_target_request(out: &mut Vec<u8>, calls: &RestCalls, rendered: &RenderedRequest) {
    out.extend_from_slice(calls.method(rendered).as_bytes());
    out.push(b' ');
    out.extend_from_slice(rendered.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(calls.endpoint.authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in calls.headers(rendered) {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if calls.has_body(rendered) {
        let body = rendered.body();
        write!(out, "content-length: {}\r\n\r\n", body.len()).expect("writing to a Vec");
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(b"\r\n");
    }
}

/// Makes room for at least `want` more bytes. Once the last answer's bytes are consumed,
/// `reserve` reuses the same allocation; a body of known length is read into one buffer of
/// its size.
fn make_room(buf: &mut BytesMut, want: usize) {
    if buf.capacity() - buf.len() < want {
        buf.reserve(want.max(READ_CHUNK));
    }
}

#[async_trait]
impl Connection for H1Connection {
    async fn request(&self, call: Call) -> Result<Reply, Failure> {
        let mut io = self.io.lock().await;
        let started = Instant::now();
        io.exchange(self, call, started).await
    }

    fn wire_bytes(&self) -> WireBytes {
        let wire = self.wire.lock().expect("wire lock");
        let current = wire
            .current
            .as_ref()
            .map(|c| c.snapshot())
            .unwrap_or_default();
        WireBytes {
            sent: wire.retired.sent + current.sent,
            received: wire.retired.received + current.received,
        }
    }

    async fn close(&self) {
        let (live, closing) = {
            let mut io = self.io.lock().await;
            io.closed = true;
            (io.live.take(), std::mem::take(&mut io.closing))
        };
        // TLS close_notify and FIN from our side, then the server's FIN.
        if let Some(Live {
            mut stream, closer, ..
        }) = live
        {
            let _ = tokio::time::timeout(CLOSE_BOUND, stream.shutdown()).await;
            let bytes = stream.counters().snapshot();
            {
                let mut wire = self.wire.lock().expect("wire lock");
                wire.add(bytes);
                wire.current = None;
            }
            drop(stream);
            closer.finish(CLOSE_BOUND).await;
        }
        for task in closing {
            let _ = task.await;
        }
    }
}
