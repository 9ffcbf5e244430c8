//! A lean HTTP/2 client connection (RFC 9113), shared by the HTTP/2 and gRPC stacks. The
//! worker tasks write and read the frames themselves, under one lock, with no connection task:
//! the `h2` crate's client hands every request to its connection task and keeps
//! general-purpose stream state, which cost a fifth of the load generator's CPU and left it
//! slower than h2load on the same server (scripts/compare-anchors). This client sends only
//! fixed request heads and reads whole answers, but checks everything a server sends: frame
//! sizes, stream states, flow control, HPACK, pseudo-headers and Content-Length.
//!
//! Several workers may share a connection. Whoever polls reads the socket for everyone and
//! wakes the streams whose answers completed; the socket keeps only the last poller's waker,
//! so a stream that leaves while it was that poller wakes another waiting stream to take over.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bench_core::failure::classify_error;
use bench_core::net::{Closer, Stream};
use bench_core::{Failure, FailureClass, Phase};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::hpack;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE we announce (the default): larger frames are an error.
const MAX_FRAME_LEN: usize = 16_384;
/// SETTINGS_HEADER_TABLE_SIZE we keep (the default), bounding the server's dynamic table.
const HEADER_TABLE_SIZE: usize = 4096;
/// The read buffer's size while no frame needs more; every open connection holds one, so it
/// is small and grows to a frame's size only while a larger frame is arriving.
/// Frame payloads are handed out as slices of it, so a smaller buffer also pins less memory
/// behind an answer not yet taken.
const READ_CHUNK: usize = 4 * 1024;
/// The write buffer's initial size: the preface and SETTINGS, then HEADERS frames of well
/// under a kilobyte; a request body grows it.
const WRITE_CHUNK: usize = 1024;
/// Largest flow-control window (RFC 9113 §6.9.1).
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// Streams opened before the server's SETTINGS say its limit: the least a server should
/// allow (RFC 9113 §6.5.2), as the `h2` crate assumes, so early requests are not refused.
const STREAMS_BEFORE_SETTINGS: u32 = 100;
/// Largest stream id; a connection that used them all is done.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;

mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;

    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes we send (RFC 9113 §7).
const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const CANCEL: u32 = 0x8;
/// The last server-initiated stream our GOAWAY names: none, as push is off.
const NO_PEER_STREAMS: u32 = 0;

/// A request apart from the connection's scheme and authority.
pub struct RequestHead<'a> {
    /// POST (with a body) or GET.
    pub post: bool,
    pub path: &'a str,
    /// Further fields, lower-case names.
    pub fields: &'a [(&'static str, &'static str)],
    /// Response fields the caller reads (head or trailers); others are only decoded.
    pub keep: &'static [&'static str],
}

/// A response read to its end.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Kept fields: name, value, whether it came in the trailers.
    pub fields: Vec<(&'static str, Bytes, bool)>,
    pub body: Bytes,
    /// From `started` to the response head.
    pub ttfb: Duration,
    /// From `started` to the end of the stream (trailers included).
    pub total: Duration,
}

impl Answer {
    /// A kept field of the response head.
    pub fn head_field(&self, name: &str) -> Option<&[u8]> {
        self.field(name, false)
    }

    /// A kept field of the trailers.
    pub fn trailer_field(&self, name: &str) -> Option<&[u8]> {
        self.field(name, true)
    }

    fn field(&self, name: &str, in_trailers: bool) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _, t)| *n == name && *t == in_trailers)
            .map(|(_, v, _)| &v[..])
    }
}

/// One open HTTP/2 connection; concurrent requests become concurrent streams.
pub struct H2Conn {
    shared: Mutex<Shared>,
    closer: Mutex<Option<Closer>>,
}

impl H2Conn {
    /// Queues the connection preface, our SETTINGS (push off, `stream_window`) and the
    /// connection window increase to `connection_window`; they leave with the first request,
    /// in one write. Like h2load it does not wait for the server's SETTINGS.
    pub fn open(
        stream: Stream,
        closer: Closer,
        authority: &str,
        https: bool,
        stream_window: u32,
        connection_window: u32,
    ) -> Self {
        let mut shared = Shared::new(stream, authority, https, stream_window, connection_window);
        shared.tx.put_slice(PREFACE);
        let settings = [(0x2u16, 0u32), (0x4, stream_window)];
        put_frame_header(&mut shared.tx, settings.len() * 6, frame::SETTINGS, 0, 0);
        for (id, value) in settings {
            shared.tx.put_u16(id);
            shared.tx.put_u32(value);
        }
        if connection_window > 65_535 {
            put_window_update(&mut shared.tx, 0, connection_window - 65_535);
        }
        H2Conn {
            shared: Mutex::new(shared),
            closer: Mutex::new(Some(closer)),
        }
    }

    /// Sends the request (with `body` as its DATA, if any) and reads the answer to its end.
    pub async fn exchange(
        &self,
        head: &RequestHead<'_>,
        body: Option<Bytes>,
        started: Instant,
    ) -> Result<Answer, Failure> {
        let mut body = body;
        let mut guard: Option<StreamGuard<'_>> = None;
        poll_fn(|cx| {
            let mut shared = self.shared.lock().expect("connection lock");
            let id = match guard.as_ref() {
                Some(g) => g.id,
                None => match shared.open_stream(cx, head, &mut body)? {
                    Some(id) => {
                        guard = Some(StreamGuard { conn: self, id });
                        id
                    }
                    None => return Poll::Pending,
                },
            };
            shared.drive(cx, id);
            let result = shared.take_answer(cx, id, started);
            if result.is_ready() {
                // The slot is gone, so there is nothing to cancel; dropping the guard here
                // would take the lock this poll holds.
                if let Some(g) = guard.take() {
                    std::mem::forget(g);
                }
            }
            result
        })
        .await
    }

    /// Sends GOAWAY, closes TLS and the socket (client first), and waits (bounded) for the
    /// server's FIN.
    pub async fn close(&self) {
        let io = {
            let mut shared = self.shared.lock().expect("connection lock");
            shared.closed = true;
            shared.fail_all(&Failure::new(
                FailureClass::ConnReset,
                "connection closed by the client",
            ));
            put_goaway(&mut shared.tx, NO_PEER_STREAMS, NO_ERROR);
            let tx = std::mem::take(&mut shared.tx);
            shared.io.take().map(|io| (io, tx))
        };
        if let Some((mut io, tx)) = io {
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                io.write_all(&tx).await?;
                io.shutdown().await
            })
            .await;
        }
        let closer = self.closer.lock().expect("closer lock").take();
        if let Some(closer) = closer {
            closer.finish(Duration::from_secs(1)).await;
        }
    }
}

/// Cancels a stream whose request was abandoned (a timeout dropped it): RST_STREAM(CANCEL),
/// and its slot freed for the other workers.
struct StreamGuard<'a> {
    conn: &'a H2Conn,
    id: u32,
}

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        let mut shared = self.conn.shared.lock().expect("connection lock");
        if let Some(index) = shared.slot_index(self.id) {
            let slot = shared.slots.swap_remove(index);
            if slot.done_at.is_none() && slot.error.is_none() && shared.broken.is_none() {
                put_rst_stream(&mut shared.tx, self.id, CANCEL);
            }
            shared.stream_closed(self.id);
        }
    }
}

/// Settings the server announced.
struct PeerSettings {
    max_concurrent_streams: u32,
    initial_window: i64,
    max_frame_len: usize,
}

/// A header block split over HEADERS and CONTINUATION frames.
struct PartialBlock {
    stream_id: u32,
    end_stream: bool,
    block: Vec<u8>,
}

/// One stream's request and answer.
struct Slot {
    id: u32,
    waker: Option<Waker>,
    keep: &'static [&'static str],
    /// Request body not yet sent (flow control or frame size held it back).
    to_send: Bytes,
    send_window: i64,
    /// DATA bytes received since our last WINDOW_UPDATE for this stream.
    recv_unacked: u32,
    status: Option<u16>,
    head_at: Option<Instant>,
    content_length: Option<u64>,
    fields: Vec<(&'static str, Bytes, bool)>,
    body: Bytes,
    joined: Option<BytesMut>,
    done_at: Option<Instant>,
    error: Option<Failure>,
}

struct Shared {
    io: Option<Stream>,
    rx: BytesMut,
    tx: BytesMut,
    /// Bytes handed to TLS that may still sit in its buffer.
    needs_flush: bool,
    encoder: Encoder,
    decoder: hpack::Decoder,
    slots: Vec<Slot>,
    next_id: u32,
    peer: PeerSettings,
    settings_seen: bool,
    send_window: i64,
    stream_window: u32,
    connection_window: u32,
    conn_recv_unacked: u32,
    continuation: Option<PartialBlock>,
    /// The stream whose task the socket wakes next.
    io_waiter: Option<u32>,
    /// Requests waiting for the server's stream limit.
    openers: VecDeque<Waker>,
    goaway: Option<u32>,
    broken: Option<Failure>,
    closed: bool,
}

impl Shared {
    fn new(
        io: Stream,
        authority: &str,
        https: bool,
        stream_window: u32,
        connection_window: u32,
    ) -> Self {
        Shared {
            io: Some(io),
            rx: BytesMut::with_capacity(READ_CHUNK),
            tx: BytesMut::with_capacity(WRITE_CHUNK),
            needs_flush: false,
            encoder: Encoder::new(authority, https),
            decoder: hpack::Decoder::new(HEADER_TABLE_SIZE),
            slots: Vec::new(),
            next_id: 1,
            peer: PeerSettings {
                max_concurrent_streams: STREAMS_BEFORE_SETTINGS,
                initial_window: 65_535,
                max_frame_len: 16_384,
            },
            settings_seen: false,
            send_window: 65_535,
            stream_window,
            connection_window,
            conn_recv_unacked: 0,
            continuation: None,
            io_waiter: None,
            openers: VecDeque::new(),
            goaway: None,
            broken: None,
            closed: false,
        }
    }

    fn slot_index(&self, id: u32) -> Option<usize> {
        self.slots.iter().position(|s| s.id == id)
    }

    /// Opens a stream for the request if the server's limit allows (`None`: wait).
    fn open_stream(
        &mut self,
        cx: &mut Context<'_>,
        head: &RequestHead<'_>,
        body: &mut Option<Bytes>,
    ) -> Result<Option<u32>, Failure> {
        if let Some(f) = &self.broken {
            return Err(f.clone());
        }
        let refuse = |why: &str| Err(Failure::new(FailureClass::ConnReset, why.to_string()));
        if self.closed {
            return refuse("connection already closed");
        }
        if self.goaway.is_some() {
            return refuse("the server sent GOAWAY; no new streams on this connection");
        }
        if self.next_id > MAX_STREAM_ID {
            return refuse("stream ids exhausted on this connection");
        }
        if self.slots.len() as u64 >= self.peer.max_concurrent_streams as u64 {
            if self.peer.max_concurrent_streams == 0 {
                return refuse("the server allows no streams");
            }
            self.openers.push_back(cx.waker().clone());
            return Ok(None);
        }
        let id = self.next_id;
        self.next_id += 2;
        let body = body.take().unwrap_or_default();
        let mut flags = frame::END_HEADERS;
        if body.is_empty() {
            flags |= frame::END_STREAM;
        }
        let block = self.encoder.encode(head);
        if block.len() > self.peer.max_frame_len {
            return Err(Failure::new(
                FailureClass::Other,
                "request head larger than one frame",
            ));
        }
        put_frame_header(&mut self.tx, block.len(), frame::HEADERS, flags, id);
        self.tx.put_slice(block);
        self.slots.push(Slot {
            id,
            waker: None,
            keep: head.keep,
            to_send: body,
            send_window: self.peer.initial_window,
            recv_unacked: 0,
            status: None,
            head_at: None,
            content_length: None,
            fields: Vec::new(),
            body: Bytes::new(),
            joined: None,
            done_at: None,
            error: None,
        });
        self.send_bodies();
        Ok(Some(id))
    }

    /// Queues request DATA as far as the windows and the frame size allow.
    fn send_bodies(&mut self) {
        for slot in self.slots.iter_mut() {
            while !slot.to_send.is_empty() && self.send_window > 0 && slot.send_window > 0 {
                let len = (slot.to_send.len() as i64)
                    .min(self.send_window)
                    .min(slot.send_window)
                    .min(self.peer.max_frame_len as i64) as usize;
                let chunk = slot.to_send.split_to(len);
                let flags = if slot.to_send.is_empty() {
                    frame::END_STREAM
                } else {
                    0
                };
                put_frame_header(&mut self.tx, len, frame::DATA, flags, slot.id);
                self.tx.put_slice(&chunk);
                self.send_window -= len as i64;
                slot.send_window -= len as i64;
            }
        }
    }

    /// Writes what is queued and reads what has arrived, until the socket would block.
    fn drive(&mut self, cx: &mut Context<'_>, me: u32) {
        if self.broken.is_some() {
            return;
        }
        if let Err(f) = self.flush(cx, me) {
            return self.break_with(f);
        }
        loop {
            let want = self.rx_needed().max(READ_CHUNK / 4);
            if self.rx.capacity() - self.rx.len() < want {
                self.rx.reserve(want.max(READ_CHUNK));
            }
            let Some(io) = self.io.as_mut() else {
                return;
            };
            match tokio_util::io::poll_read_buf(Pin::new(io), cx, &mut self.rx) {
                Poll::Pending => {
                    self.io_waiter = Some(me);
                    break;
                }
                Poll::Ready(Ok(0)) => {
                    return self.break_with(Failure::new(
                        FailureClass::ConnReset,
                        "connection closed by the server",
                    ))
                }
                Poll::Ready(Ok(_)) => {
                    if let Err(f) = self.read_frames() {
                        return self.break_with(f);
                    }
                }
                Poll::Ready(Err(e)) => return self.break_with(classify_error(Phase::Request, &e)),
            }
        }
        // Acknowledgements and window updates the frames asked for.
        if !self.tx.is_empty() {
            if let Err(f) = self.flush(cx, me) {
                self.break_with(f);
            }
        }
    }

    fn flush(&mut self, cx: &mut Context<'_>, me: u32) -> Result<(), Failure> {
        let Some(io) = self.io.as_mut() else {
            return Ok(());
        };
        let io_err = |e: std::io::Error| classify_error(Phase::Request, &e);
        while !self.tx.is_empty() {
            match Pin::new(&mut *io).poll_write(cx, &self.tx) {
                Poll::Ready(Ok(0)) => {
                    return Err(Failure::new(
                        FailureClass::ConnReset,
                        "socket wrote nothing",
                    ))
                }
                Poll::Ready(Ok(n)) => {
                    self.tx.advance(n);
                    self.needs_flush = true;
                }
                Poll::Ready(Err(e)) => return Err(io_err(e)),
                Poll::Pending => {
                    self.io_waiter = Some(me);
                    return Ok(());
                }
            }
        }
        if self.needs_flush {
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.needs_flush = false,
                Poll::Ready(Err(e)) => return Err(io_err(e)),
                Poll::Pending => self.io_waiter = Some(me),
            }
        }
        Ok(())
    }

    /// Bytes still missing from the frame at the start of the read buffer (0 without its header).
    fn rx_needed(&self) -> usize {
        if self.rx.len() < FRAME_HEADER_LEN {
            return 0;
        }
        let len = (self.rx[0] as usize) << 16 | (self.rx[1] as usize) << 8 | self.rx[2] as usize;
        (FRAME_HEADER_LEN + len.min(MAX_FRAME_LEN)).saturating_sub(self.rx.len())
    }

    /// Handles every complete frame in the read buffer.
    fn read_frames(&mut self) -> Result<(), Failure> {
        while self.rx.len() >= FRAME_HEADER_LEN {
            let len =
                (self.rx[0] as usize) << 16 | (self.rx[1] as usize) << 8 | self.rx[2] as usize;
            if len > MAX_FRAME_LEN {
                return Err(protocol_error(&format!(
                    "{len}-byte frame above SETTINGS_MAX_FRAME_SIZE"
                )));
            }
            if self.rx.len() < FRAME_HEADER_LEN + len {
                break;
            }
            let kind = self.rx[3];
            let flags = self.rx[4];
            let stream_id = u32::from_be_bytes([self.rx[5], self.rx[6], self.rx[7], self.rx[8]])
                & MAX_STREAM_ID;
            self.rx.advance(FRAME_HEADER_LEN);
            let payload = self.rx.split_to(len).freeze();
            self.on_frame(kind, flags, stream_id, payload)?;
        }
        Ok(())
    }

    fn on_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream_id: u32,
        payload: Bytes,
    ) -> Result<(), Failure> {
        if let Some(partial) = &self.continuation {
            if kind != frame::CONTINUATION || stream_id != partial.stream_id {
                return Err(protocol_error(
                    "header block interrupted before END_HEADERS",
                ));
            }
        }
        match kind {
            frame::DATA => self.on_data(flags, stream_id, payload),
            frame::HEADERS => {
                self.check_stream(stream_id, "HEADERS")?;
                let mut block = unpad(flags, payload, "HEADERS")?;
                if flags & frame::PRIORITY != 0 {
                    if block.len() < 5 {
                        return Err(protocol_error("HEADERS priority fields missing"));
                    }
                    block.advance(5);
                }
                let end_stream = flags & frame::END_STREAM != 0;
                if flags & frame::END_HEADERS != 0 {
                    self.on_header_block(stream_id, end_stream, &block)
                } else {
                    self.continuation = Some(PartialBlock {
                        stream_id,
                        end_stream,
                        block: block.to_vec(),
                    });
                    Ok(())
                }
            }
            frame::CONTINUATION => {
                let Some(mut partial) = self.continuation.take() else {
                    return Err(protocol_error("CONTINUATION without a header block"));
                };
                partial.block.extend_from_slice(&payload);
                if flags & frame::END_HEADERS != 0 {
                    self.on_header_block(stream_id, partial.end_stream, &partial.block)
                } else {
                    self.continuation = Some(partial);
                    Ok(())
                }
            }
            frame::RST_STREAM => {
                self.check_stream(stream_id, "RST_STREAM")?;
                if payload.len() != 4 {
                    return Err(frame_size_error("RST_STREAM"));
                }
                let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if let Some(slot) = self.slots.iter_mut().find(|s| s.id == stream_id) {
                    if slot.done_at.is_none() && slot.error.is_none() {
                        slot.fail(Failure::new(
                            FailureClass::ConnReset,
                            format!("stream reset by the server ({})", error_code_name(code)),
                        ));
                    }
                }
                Ok(())
            }
            frame::SETTINGS => self.on_settings(flags, stream_id, &payload),
            frame::PUSH_PROMISE => Err(protocol_error("PUSH_PROMISE although push is off")),
            frame::PING => {
                if stream_id != 0 || payload.len() != 8 {
                    return Err(protocol_error("malformed PING"));
                }
                if flags & frame::ACK == 0 {
                    put_frame_header(&mut self.tx, 8, frame::PING, frame::ACK, 0);
                    self.tx.put_slice(&payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if stream_id != 0 || payload.len() < 8 {
                    return Err(protocol_error("malformed GOAWAY"));
                }
                let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    & MAX_STREAM_ID;
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                self.goaway = Some(last);
                for slot in self.slots.iter_mut().filter(|s| s.id > last) {
                    slot.fail(Failure::new(
                        FailureClass::ConnReset,
                        format!(
                            "server sent GOAWAY ({}) before this stream",
                            error_code_name(code)
                        ),
                    ));
                }
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(frame_size_error("WINDOW_UPDATE"));
                }
                let increment =
                    (u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & MAX_STREAM_ID) as i64;
                if stream_id == 0 {
                    if increment == 0 || self.send_window + increment > MAX_WINDOW {
                        return Err(protocol_error("bad connection WINDOW_UPDATE"));
                    }
                    self.send_window += increment;
                } else if let Some(slot) = self.slots.iter_mut().find(|s| s.id == stream_id) {
                    if increment == 0 || slot.send_window + increment > MAX_WINDOW {
                        slot.fail(protocol_error("bad stream WINDOW_UPDATE"));
                    } else {
                        slot.send_window += increment;
                    }
                }
                self.send_bodies();
                Ok(())
            }
            // PRIORITY and unknown frame types are ignored (RFC 9113 §5.5).
            _ => Ok(()),
        }
    }

    /// Frames on stream 0, on streams we never opened, or on server-initiated streams (push
    /// is off) are connection errors.
    fn check_stream(&self, stream_id: u32, what: &str) -> Result<(), Failure> {
        if stream_id == 0 || stream_id.is_multiple_of(2) || stream_id >= self.next_id {
            return Err(protocol_error(&format!(
                "{what} on stream {stream_id}, which we did not open"
            )));
        }
        Ok(())
    }

    fn on_data(&mut self, flags: u8, stream_id: u32, payload: Bytes) -> Result<(), Failure> {
        self.check_stream(stream_id, "DATA")?;
        let flow_len = payload.len() as u32;
        self.conn_recv_unacked += flow_len;
        if self.conn_recv_unacked > self.connection_window {
            return Err(Failure::new(
                FailureClass::ConnReset,
                "server overran the connection window",
            ));
        }
        if self.conn_recv_unacked >= self.connection_window / 2 {
            put_window_update(&mut self.tx, 0, self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
        let data = unpad(flags, payload, "DATA")?;
        let end_stream = flags & frame::END_STREAM != 0;
        let stream_window = self.stream_window;
        // A stream we cancelled or finished: its data only counted against the connection.
        let Some(slot) = self.slots.iter_mut().find(|s| s.id == stream_id) else {
            return Ok(());
        };
        if slot.done_at.is_some() || slot.error.is_some() {
            return Ok(());
        }
        if slot.status.is_none() {
            slot.fail(protocol_error("DATA before the response head"));
            return Ok(());
        }
        slot.recv_unacked += flow_len;
        if slot.recv_unacked > stream_window {
            slot.fail(Failure::new(
                FailureClass::ConnReset,
                "server overran the stream window",
            ));
            return Ok(());
        }
        slot.push_body(data);
        if end_stream {
            slot.finish();
        } else if slot.recv_unacked >= stream_window / 2 {
            put_window_update(&mut self.tx, stream_id, slot.recv_unacked);
            slot.recv_unacked = 0;
        }
        Ok(())
    }

    fn on_header_block(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), Failure> {
        let slot = self.slots.iter_mut().find(|s| s.id == stream_id);
        let Some(slot) = slot.filter(|s| s.done_at.is_none() && s.error.is_none()) else {
            // Still decoded: the dynamic table must follow every block.
            return self
                .decoder
                .decode(block, |_, _| {})
                .map_err(|e| protocol_error(&e.to_string()));
        };
        let trailers = slot.status.is_some();
        let mut status = None;
        let mut problem: Option<String> = None;
        let mut content_length = None;
        let keep = slot.keep;
        let fields = &mut slot.fields;
        self.decoder
            .decode(block, |name, value| {
                if name.first() == Some(&b':') {
                    if name == b":status" && !trailers && status.is_none() {
                        status = std::str::from_utf8(value)
                            .ok()
                            .filter(|v| v.len() == 3)
                            .and_then(|v| v.parse::<u16>().ok());
                        if status.is_none() {
                            problem.get_or_insert_with(|| "unreadable :status".into());
                        }
                    } else {
                        problem.get_or_insert_with(|| {
                            format!(
                                "pseudo-header {} in a response",
                                String::from_utf8_lossy(name)
                            )
                        });
                    }
                    return;
                }
                if name.iter().any(|b| b.is_ascii_uppercase()) {
                    problem.get_or_insert_with(|| "upper-case field name".into());
                }
                if name == b"content-length" && !trailers {
                    content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                    if content_length.is_none() {
                        problem.get_or_insert_with(|| "unreadable content-length".into());
                    }
                }
                if let Some(kept) = keep.iter().find(|k| k.as_bytes() == name) {
                    fields.push((kept, Bytes::copy_from_slice(value), trailers));
                }
            })
            .map_err(|e| protocol_error(&e.to_string()))?;
        if let Some(problem) = problem {
            slot.fail(Failure::new(
                FailureClass::BadBody,
                format!("malformed response: {problem}"),
            ));
            return Ok(());
        }
        if trailers {
            if !end_stream {
                slot.fail(protocol_error("trailers without END_STREAM"));
                return Ok(());
            }
            slot.finish();
            return Ok(());
        }
        let Some(status) = status else {
            slot.fail(Failure::new(
                FailureClass::BadBody,
                "response without :status",
            ));
            return Ok(());
        };
        if (100..200).contains(&status) {
            // An informational head; the final one follows.
            slot.fields.retain(|f| f.2);
            return Ok(());
        }
        slot.status = Some(status);
        slot.head_at = Some(Instant::now());
        slot.content_length = content_length;
        if end_stream {
            slot.finish();
        }
        Ok(())
    }

    fn on_settings(&mut self, flags: u8, stream_id: u32, payload: &[u8]) -> Result<(), Failure> {
        if stream_id != 0 {
            return Err(protocol_error("SETTINGS on a stream"));
        }
        if flags & frame::ACK != 0 {
            return if payload.is_empty() {
                Ok(())
            } else {
                Err(frame_size_error("SETTINGS ACK"))
            };
        }
        if !payload.len().is_multiple_of(6) {
            return Err(frame_size_error("SETTINGS"));
        }
        let first = !self.settings_seen;
        let mut table_size = first.then_some(HEADER_TABLE_SIZE);
        if first {
            // No limit announced means none (RFC 9113 §6.5.2).
            self.peer.max_concurrent_streams = u32::MAX;
        }
        for entry in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
            match id {
                0x1 => table_size = Some(value as usize),
                0x3 => self.peer.max_concurrent_streams = value,
                0x4 => {
                    if value as i64 > MAX_WINDOW {
                        return Err(protocol_error("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"));
                    }
                    let delta = value as i64 - self.peer.initial_window;
                    self.peer.initial_window = value as i64;
                    for slot in self.slots.iter_mut() {
                        slot.send_window += delta;
                    }
                }
                0x5 => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return Err(protocol_error("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer.max_frame_len = value as usize;
                }
                // ENABLE_PUSH, MAX_HEADER_LIST_SIZE and unknown settings change nothing here.
                _ => {}
            }
        }
        if let Some(size) = table_size {
            self.encoder.peer_table_size(size);
        }
        self.settings_seen = true;
        put_frame_header(&mut self.tx, 0, frame::SETTINGS, frame::ACK, 0);
        self.send_bodies();
        // A raised stream limit lets waiting requests open.
        for waker in self.openers.drain(..) {
            waker.wake();
        }
        Ok(())
    }

    /// The answer of stream `id` once complete (or failed); until then its waker is kept.
    fn take_answer(
        &mut self,
        cx: &mut Context<'_>,
        id: u32,
        started: Instant,
    ) -> Poll<Result<Answer, Failure>> {
        let index = self.slot_index(id).expect("an open stream has a slot");
        let slot = &mut self.slots[index];
        if slot.done_at.is_none() && slot.error.is_none() {
            match &slot.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => slot.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let slot = self.slots.swap_remove(index);
        if !slot.to_send.is_empty() && slot.error.is_none() {
            // Answered before our body was all sent (RFC 9113 §8.1): stop sending it.
            put_rst_stream(&mut self.tx, id, NO_ERROR);
        }
        self.stream_closed(id);
        if let Some(f) = slot.error {
            return Poll::Ready(Err(f));
        }
        let body = slot.joined.map_or(slot.body, BytesMut::freeze);
        if let Some(expected) = slot.content_length {
            if expected != body.len() as u64 {
                return Poll::Ready(Err(Failure::new(
                    FailureClass::BadBody,
                    format!("content-length {expected} but {} body bytes", body.len()),
                )));
            }
        }
        let at = |t: Option<Instant>| {
            t.expect("set before done")
                .saturating_duration_since(started)
        };
        Poll::Ready(Ok(Answer {
            status: slot.status.expect("a done stream has a status"),
            fields: slot.fields,
            body,
            ttfb: at(slot.head_at),
            total: at(slot.done_at),
        }))
    }

    /// A stream left: a waiting request may open one, and if the socket would have woken the
    /// stream that left, another waiting stream takes over reading and writing.
    fn stream_closed(&mut self, id: u32) {
        if let Some(waker) = self.openers.pop_front() {
            waker.wake();
        }
        if self.io_waiter == Some(id) {
            self.io_waiter = None;
            if let Some(waker) = self.slots.iter().find_map(|s| s.waker.as_ref()) {
                waker.wake_by_ref();
            }
        }
    }

    fn break_with(&mut self, failure: Failure) {
        if self.broken.is_none() && failure.detail.starts_with("HTTP/2 protocol error") {
            put_goaway(&mut self.tx, NO_PEER_STREAMS, PROTOCOL_ERROR);
        }
        self.fail_all(&failure);
        self.broken.get_or_insert(failure);
    }

    fn fail_all(&mut self, failure: &Failure) {
        for slot in self.slots.iter_mut() {
            if slot.done_at.is_none() && slot.error.is_none() {
                slot.fail(failure.clone());
            }
        }
        for waker in self.openers.drain(..) {
            waker.wake();
        }
    }
}

impl Slot {
    fn push_body(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        match self.joined.as_mut() {
            None if self.body.is_empty() => self.body = data,
            None => {
                let mut all = BytesMut::with_capacity(self.body.len() + data.len());
                all.extend_from_slice(&self.body);
                all.extend_from_slice(&data);
                self.joined = Some(all);
            }
            Some(all) => all.extend_from_slice(&data),
        }
    }

    fn finish(&mut self) {
        self.done_at = Some(Instant::now());
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    fn fail(&mut self, failure: Failure) {
        self.error = Some(failure);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// HPACK encoding of the client's requests. Fields that repeat on every request (authority,
/// content-type, te) go into the server's dynamic table once, as h2load does, once the
/// server's SETTINGS show the table is at least the default size; `:path` never does.
struct Encoder {
    authority: String,
    https: bool,
    /// Entries we added, oldest first, and their total HPACK size.
    added: Vec<(&'static str, String)>,
    added_size: usize,
    /// The server's SETTINGS_HEADER_TABLE_SIZE once known.
    budget: Option<usize>,
    /// Set after the server shrank its table: the next block starts with a size update to 0
    /// and nothing is indexed any more.
    shrink: bool,
    indexing_off: bool,
    block: Vec<u8>,
}

impl Encoder {
    fn new(authority: &str, https: bool) -> Self {
        Encoder {
            authority: authority.to_string(),
            https,
            added: Vec::new(),
            added_size: 0,
            budget: None,
            shrink: false,
            indexing_off: false,
            block: Vec::with_capacity(128),
        }
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE. Below the default our table's maximum must
    /// shrink, which the next block signals (RFC 7541 §4.2); we then stop indexing.
    fn peer_table_size(&mut self, size: usize) {
        if size < HEADER_TABLE_SIZE && !self.indexing_off {
            self.shrink = true;
            self.indexing_off = true;
            self.added.clear();
            self.added_size = 0;
        }
        self.budget = Some(size);
    }

    fn encode(&mut self, head: &RequestHead<'_>) -> &[u8] {
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        if std::mem::take(&mut self.shrink) {
            hpack::encode_int(&mut block, 0x20, 5, 0);
        }
        block.push(if head.post { 0x83 } else { 0x82 });
        block.push(if self.https { 0x87 } else { 0x86 });
        if head.path == "/" {
            block.push(0x84);
        } else {
            hpack::encode_int(&mut block, 0x00, 4, 4);
            hpack::encode_str(&mut block, head.path.as_bytes());
        }
        let authority = std::mem::take(&mut self.authority);
        self.field(&mut block, ":authority", &authority, Some(1));
        self.authority = authority;
        for (name, value) in head.fields {
            let static_name = hpack::STATIC_TABLE.iter().position(|(n, _)| n == name);
            self.field(&mut block, name, value, static_name.map(|i| i + 1));
        }
        self.block = block;
        &self.block
    }

    /// One field: indexed if we added it before, added if there is room, literal otherwise.
    fn field(
        &mut self,
        block: &mut Vec<u8>,
        name: &'static str,
        value: &str,
        static_name: Option<usize>,
    ) {
        if let Some(pos) = self
            .added
            .iter()
            .position(|(n, v)| *n == name && v == value)
        {
            let index = 62 + (self.added.len() - 1 - pos);
            hpack::encode_int(block, 0x80, 7, index);
            return;
        }
        let size = name.len() + value.len() + hpack::ENTRY_OVERHEAD;
        let room = match self.budget {
            Some(budget) if !self.indexing_off => {
                self.added_size + size <= budget.min(HEADER_TABLE_SIZE)
            }
            _ => false,
        };
        let (first, prefix) = if room { (0x40, 6) } else { (0x00, 4) };
        match static_name {
            Some(index) => hpack::encode_int(block, first, prefix, index),
            None => {
                block.push(first);
                hpack::encode_str(block, name.as_bytes());
            }
        }
        hpack::encode_str(block, value.as_bytes());
        if room {
            self.added.push((name, value.to_string()));
            self.added_size += size;
        }
    }
}

fn put_frame_header(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream_id: u32) {
    out.put_uint(len as u64, 3);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream_id);
}

fn put_window_update(out: &mut BytesMut, stream_id: u32, increment: u32) {
    put_frame_header(out, 4, frame::WINDOW_UPDATE, 0, stream_id);
    out.put_u32(increment);
}

fn put_rst_stream(out: &mut BytesMut, stream_id: u32, code: u32) {
    put_frame_header(out, 4, frame::RST_STREAM, 0, stream_id);
    out.put_u32(code);
}

fn put_goaway(out: &mut BytesMut, last_stream_id: u32, code: u32) {
    put_frame_header(out, 8, frame::GOAWAY, 0, 0);
    out.put_u32(last_stream_id);
    out.put_u32(code);
}

/// The payload of a DATA or HEADERS frame without its padding.
fn unpad(flags: u8, mut payload: Bytes, what: &str) -> Result<Bytes, Failure> {
    if flags & frame::PADDED == 0 {
        return Ok(payload);
    }
    let Some(&pad) = payload.first() else {
        return Err(protocol_error(&format!(
            "padded {what} without a pad length"
        )));
    };
    let pad = pad as usize;
    if pad >= payload.len() {
        return Err(protocol_error(&format!(
            "{what} padding longer than the frame"
        )));
    }
    payload.advance(1);
    payload.truncate(payload.len() - pad);
    Ok(payload)
}

fn protocol_error(what: &str) -> Failure {
    Failure::new(
        FailureClass::ConnReset,
        format!("HTTP/2 protocol error: {what}"),
    )
}

fn frame_size_error(what: &str) -> Failure {
    protocol_error(&format!("{what} frame of the wrong size"))
}

fn error_code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("error code {code:#x}"), |n| n.to_string())
}
