//! The client connection as a protocol state machine without I/O (RFC 9113), in the manner
//! of `quinn-proto`: the driver reads socket bytes into [`Connection::recv_buf`] and calls
//! [`Connection::received`], writes [`Connection::transmit`] to the socket, and learns from
//! [`Connection::drain_completed`] which streams' answers are ready. Frame decoding, stream
//! states, both flow-control windows, SETTINGS (and the ACK of ours), PING, GOAWAY, HPACK and
//! the checks of each response (pseudo-headers, Content-Length, header-list size) live here,
//! and so do the error codes: a connection error queues GOAWAY with its code and fails every
//! stream, a stream error queues RST_STREAM with its code and fails that stream.
//!
//! Only fixed request heads are sent and answers are read whole: the client of a benchmark,
//! not a general-purpose one.

use std::time::{Duration, Instant};

use bench_core::limits::{BodyLimit, BodyMeter};
use bench_core::{Failure, FailureClass};
use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{code_name, ConnError, ErrorCode, StreamError};
use crate::frame::{self, be_u32, flag, kind, setting, Header, HEADER_LEN, MAX_STREAM_ID};
use crate::hpack;

/// SETTINGS_MAX_FRAME_SIZE we announce (the default): larger frames are an error.
pub const MAX_FRAME_LEN: usize = 16_384;
/// SETTINGS_HEADER_TABLE_SIZE we keep (the default), bounding the server's dynamic table; it
/// also caps how much of the server's table our encoder uses.
const HEADER_TABLE_SIZE: usize = 4096;
/// SETTINGS_MAX_HEADER_LIST_SIZE we announce and enforce: a response head or trailer block
/// whose decoded fields add up to more (RFC 9113 §6.5.2 sizes) fails its stream; a header
/// block whose encoded bytes (HEADERS plus CONTINUATION) exceed it is a connection error,
/// since it cannot be decoded without holding it all, so the memory a block takes is bounded.
pub const MAX_HEADER_LIST_SIZE: usize = 64 * 1024;
/// CONTINUATION frames one header block may take: 64 KiB fit in 4 frames of the default size,
/// so more than this is a flood (empty CONTINUATION frames cost CPU and no bytes).
const MAX_CONTINUATIONS: usize = 64;
/// How long the server may take to acknowledge our SETTINGS (RFC 9113 §6.5.3).
pub const SETTINGS_TIMEOUT: Duration = Duration::from_secs(10);
/// The read buffer's size while no frame needs more; every open connection holds one, so it
/// is small and grows to a frame's size only while a larger frame is arriving. Frame payloads
/// are handed out as slices of it, so a smaller buffer also pins less memory behind an answer
/// not yet taken.
const READ_CHUNK: usize = 4 * 1024;
/// The write buffer's initial size: the preface and SETTINGS, then HEADERS frames of well
/// under a kilobyte; a request body grows it.
const WRITE_CHUNK: usize = 1024;
/// Arrival batches a streaming answer keeps apart (each with its time) while its reader is
/// behind; past this, data joins the newest batch (its messages then carry a later time).
const MAX_INBOX_BATCHES: usize = 64;
/// Largest flow-control window (RFC 9113 §6.9.1).
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// HTTP/2's initial window and the default SETTINGS values (RFC 9113 §6.5.2).
const DEFAULT_WINDOW: i64 = 65_535;
const DEFAULT_MAX_FRAME_LEN: usize = 16_384;
/// Streams opened before the server's SETTINGS say its limit: the least a server should
/// allow (RFC 9113 §6.5.2), as the `h2` crate assumes, so early requests are not refused.
const STREAMS_BEFORE_SETTINGS: u32 = 100;
/// The last server-initiated stream our GOAWAY names: none, as push is off.
const NO_PEER_STREAMS: u32 = 0;

/// A request apart from the connection's scheme and authority.
pub struct RequestHead<'a> {
    /// Upper-case method (GET and POST are encoded from HPACK's static table).
    pub method: &'a str,
    pub path: &'a str,
    /// Further fields, lower-case names.
    pub fields: &'a [(&'a str, &'a str)],
    /// Response fields the caller reads (head or trailers); others are only decoded.
    pub keep: &'static [&'static str],
    /// What the answer's body is held to as it arrives: past it the stream is cancelled and
    /// the request fails as `bad_body`, the connection untouched.
    pub answer_limit: BodyLimit,
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

/// What the connection is opened with.
#[derive(Debug, Clone)]
pub struct Config {
    /// `:authority` of every request.
    pub authority: String,
    /// `:scheme` https (else http).
    pub https: bool,
    /// Our SETTINGS_INITIAL_WINDOW_SIZE (the server's send window per stream).
    pub stream_window: u32,
    /// Our connection window (raised from 65,535 by a WINDOW_UPDATE after the SETTINGS).
    pub connection_window: u32,
}

/// What a streaming answer has for its reader ([`Connection::poll_stream`]).
#[derive(Debug)]
pub enum StreamEvent {
    /// Body bytes, with the time they arrived and the answer's status.
    Data {
        data: Bytes,
        at: Instant,
        status: u16,
    },
    /// The answer ended: its head, trailers and timings (its body was handed out as `Data`).
    End(Answer),
}

/// Whether a request got a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    Stream(u32),
    /// The server's stream limit is reached: try again when [`Connection::take_opener_wakes`]
    /// says a stream left.
    Wait,
}

/// Settings the server announced.
struct PeerSettings {
    max_concurrent_streams: u32,
    initial_window: i64,
    max_frame_len: usize,
    /// SETTINGS_MAX_HEADER_LIST_SIZE; none announced means no limit.
    max_header_list_size: Option<usize>,
}

/// A header block split over HEADERS and CONTINUATION frames.
struct PartialBlock {
    stream_id: u32,
    end_stream: bool,
    block: Vec<u8>,
    continuations: usize,
}

/// One stream's request and answer.
struct Slot {
    id: u32,
    keep: &'static [&'static str],
    /// Request body not yet sent (flow control or frame size held it back).
    to_send: Bytes,
    /// A generated request body (a bulk upload) still to come after `to_send`: taken a piece
    /// at a time as the windows open, so the object is never held.
    generated: Option<std::iter::Peekable<bench_core::bulk::Generated>>,
    send_window: i64,
    /// DATA bytes received since our last WINDOW_UPDATE for this stream.
    recv_unacked: u32,
    status: Option<u16>,
    head_at: Option<Instant>,
    /// The answer has no content whatever its content-length says (a HEAD request, RFC 9113
    /// §8.1.1).
    head_request: bool,
    content_length: Option<u64>,
    received: u64,
    /// The answer's body held to the request's [`RequestHead::answer_limit`].
    meter: BodyMeter,
    fields: Vec<(&'static str, Bytes, bool)>,
    body: Bytes,
    joined: Option<BytesMut>,
    done_at: Option<Instant>,
    error: Option<Failure>,
    /// The answer is handed to its reader as it arrives ([`Connection::poll_stream`]), and
    /// the stream's window reopens only as the reader takes it: a slow reader holds the
    /// server to one window of data.
    streaming: bool,
    /// Streaming: data not yet taken, in arrival batches with their times.
    inbox: std::collections::VecDeque<(BytesMut, Instant)>,
    /// Streaming: bytes taken (or padding) not yet given back in a WINDOW_UPDATE.
    consumed_ungranted: u32,
}

impl Slot {
    fn open(&self) -> bool {
        self.done_at.is_none() && self.error.is_none()
    }

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
}

/// One HTTP/2 client connection's protocol state.
pub struct Connection {
    rx: BytesMut,
    tx: BytesMut,
    authority: String,
    https: bool,
    encoder: hpack::Encoder,
    decoder: hpack::Decoder,
    /// The request head being encoded (reused).
    block: Vec<u8>,
    slots: Vec<Slot>,
    next_id: u32,
    peer: PeerSettings,
    settings_seen: bool,
    /// Our SETTINGS frames the server has not acknowledged, and when the oldest times out.
    settings_unacked: u32,
    settings_deadline: Option<Instant>,
    send_window: i64,
    stream_window: u32,
    connection_window: u32,
    conn_recv_unacked: u32,
    continuation: Option<PartialBlock>,
    goaway: Option<u32>,
    goaway_sent: bool,
    broken: Option<Failure>,
    closed: bool,
    /// The time of the bytes being handled.
    now: Instant,
    /// Streams whose answer completed or failed since the driver last looked.
    completed: Vec<u32>,
    /// How many requests waiting for a stream to wake (`usize::MAX`: all).
    opener_wakes: usize,
}

impl Connection {
    /// A connection whose preface, SETTINGS (push off, our stream window and header-list
    /// limit) and connection-window increase are queued to leave with the first request. Like
    /// h2load it does not wait for the server's SETTINGS.
    pub fn new(config: Config, now: Instant) -> Self {
        let mut tx = BytesMut::with_capacity(WRITE_CHUNK);
        tx.put_slice(frame::PREFACE);
        frame::put_settings(
            &mut tx,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, config.stream_window),
                (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_SIZE as u32),
            ],
        );
        if i64::from(config.connection_window) > DEFAULT_WINDOW {
            frame::put_window_update(&mut tx, 0, config.connection_window - DEFAULT_WINDOW as u32);
        }
        Connection {
            rx: BytesMut::with_capacity(READ_CHUNK),
            tx,
            authority: config.authority,
            https: config.https,
            encoder: hpack::Encoder::new(HEADER_TABLE_SIZE),
            decoder: hpack::Decoder::new(HEADER_TABLE_SIZE),
            block: Vec::with_capacity(128),
            slots: Vec::new(),
            next_id: 1,
            peer: PeerSettings {
                max_concurrent_streams: STREAMS_BEFORE_SETTINGS,
                initial_window: DEFAULT_WINDOW,
                max_frame_len: DEFAULT_MAX_FRAME_LEN,
                max_header_list_size: None,
            },
            settings_seen: false,
            settings_unacked: 1,
            settings_deadline: Some(now + SETTINGS_TIMEOUT),
            send_window: DEFAULT_WINDOW,
            stream_window: config.stream_window,
            connection_window: config.connection_window.max(DEFAULT_WINDOW as u32),
            conn_recv_unacked: 0,
            continuation: None,
            goaway: None,
            goaway_sent: false,
            broken: None,
            closed: false,
            now,
            completed: Vec::new(),
            opener_wakes: 0,
        }
    }

    // ---- what the driver calls ----

    /// Bytes to write to the socket.
    pub fn transmit(&self) -> &[u8] {
        &self.tx
    }

    /// `n` bytes of [`Connection::transmit`] were written.
    pub fn advance_transmit(&mut self, n: usize) {
        self.tx.advance(n);
    }

    /// Everything still to write, for the last write before the socket closes.
    pub fn take_transmit(&mut self) -> BytesMut {
        std::mem::take(&mut self.tx)
    }

    /// The buffer socket reads append to, with room for at least the rest of the frame being
    /// read (or a quarter chunk).
    pub fn recv_buf(&mut self) -> &mut BytesMut {
        let want = self.rx_needed().max(READ_CHUNK / 4);
        if self.rx.capacity() - self.rx.len() < want {
            self.rx.reserve(want.max(READ_CHUNK));
        }
        &mut self.rx
    }

    /// Handles every complete frame in the read buffer; `now` is when the bytes arrived.
    pub fn received(&mut self, now: Instant) {
        self.now = now;
        if self.broken.is_some() {
            self.rx.clear();
            return;
        }
        if let Err(e) = self.read_frames() {
            self.connection_error(e);
        }
    }

    /// The socket reached its end or failed: every stream fails with `failure`.
    pub fn transport_failed(&mut self, failure: Failure) {
        self.break_with(failure);
    }

    /// When [`Connection::handle_timeout`] should be called, if ever.
    pub fn timeout(&self) -> Option<Instant> {
        self.settings_deadline
    }

    /// Our SETTINGS not acknowledged in time is a connection error (RFC 9113 §6.5.3).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.settings_deadline.is_some_and(|d| now >= d) {
            self.settings_deadline = None;
            self.connection_error(ConnError::new(
                ErrorCode::SettingsTimeout,
                "the server did not acknowledge our SETTINGS",
            ));
        }
    }

    /// Streams whose answer is ready (or failed) since the last call.
    pub fn drain_completed(&mut self, mut f: impl FnMut(u32)) {
        for id in self.completed.drain(..) {
            f(id);
        }
    }

    /// How many requests waiting for a stream may try again (`usize::MAX`: all).
    pub fn take_opener_wakes(&mut self) -> usize {
        std::mem::take(&mut self.opener_wakes)
    }

    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Whether our SETTINGS were acknowledged.
    #[cfg(test)]
    pub fn settings_acked(&self) -> bool {
        self.settings_unacked == 0
    }

    /// Opens a stream for the request and queues its HEADERS (and as much body as the windows
    /// allow), unless the server's limit is reached (`Wait`) or the connection takes no new
    /// streams (an error; after the server's GOAWAY an [unprocessed](Failure::unprocessed)
    /// one, so the request can move to a new connection).
    pub fn open_stream(
        &mut self,
        head: &RequestHead<'_>,
        body: &mut Option<Bytes>,
    ) -> Result<Opened, Failure> {
        self.open_stream_with(head, body, &mut None)
    }

    /// [`Connection::open_stream`] with a generated body (`generated`, taken when the stream
    /// opens) after `body`.
    pub fn open_stream_with(
        &mut self,
        head: &RequestHead<'_>,
        body: &mut Option<Bytes>,
        generated: &mut Option<bench_core::bulk::Generated>,
    ) -> Result<Opened, Failure> {
        if let Some(f) = &self.broken {
            return Err(f.clone());
        }
        let refuse = |why: &str| Err(Failure::new(FailureClass::ConnReset, why.to_string()));
        if self.closed {
            return refuse("connection already closed");
        }
        if self.goaway.is_some() {
            return Err(Failure::unprocessed(
                "the server sent GOAWAY; no new streams on this connection",
            ));
        }
        if self.next_id > MAX_STREAM_ID {
            return Err(Failure::unprocessed(
                "stream ids exhausted on this connection",
            ));
        }
        if self.slots.len() as u64 >= u64::from(self.peer.max_concurrent_streams) {
            if self.peer.max_concurrent_streams == 0 && self.slots.is_empty() {
                return refuse("the server allows no streams");
            }
            return Ok(Opened::Wait);
        }
        // The peer's limit is checked before anything enters the HPACK table: a head that is
        // not sent must leave the encoder as it was.
        if let Some(limit) = self.peer.max_header_list_size {
            let list_size = self.head_list_size(head);
            if list_size > limit {
                return Err(Failure::new(
                    FailureClass::Other,
                    format!(
                        "request head of {list_size} B above the server's \
                         SETTINGS_MAX_HEADER_LIST_SIZE ({limit} B)"
                    ),
                ));
            }
        }
        let id = self.next_id;
        self.next_id += 2;
        let body = body.take().unwrap_or_default();
        let mut generated = generated.take().map(Iterator::peekable);
        if generated.as_mut().is_some_and(|g| g.peek().is_none()) {
            generated = None;
        }
        self.encode_head(head);
        frame::put_header_block(
            &mut self.tx,
            id,
            &self.block,
            body.is_empty() && generated.is_none(),
            self.peer.max_frame_len,
        );
        self.slots.push(Slot {
            id,
            keep: head.keep,
            to_send: body,
            generated,
            send_window: self.peer.initial_window,
            recv_unacked: 0,
            status: None,
            head_at: None,
            head_request: head.method == "HEAD",
            content_length: None,
            received: 0,
            meter: head.answer_limit.meter(),
            fields: Vec::new(),
            body: Bytes::new(),
            joined: None,
            done_at: None,
            error: None,
            streaming: false,
            inbox: std::collections::VecDeque::new(),
            consumed_ungranted: 0,
        });
        self.send_bodies();
        Ok(Opened::Stream(id))
    }

    /// [`Connection::open_stream`] for an answer read as it arrives, with
    /// [`Connection::poll_stream`].
    pub fn open_streaming(
        &mut self,
        head: &RequestHead<'_>,
        body: &mut Option<Bytes>,
        generated: &mut Option<bench_core::bulk::Generated>,
    ) -> Result<Opened, Failure> {
        let opened = self.open_stream_with(head, body, generated)?;
        if let Opened::Stream(id) = opened {
            if let Some(index) = self.slot_index(id) {
                self.slots[index].streaming = true;
            }
        }
        Ok(opened)
    }

    /// The next of a streaming answer's data, in order, then its end (the stream then
    /// leaves); `None` while nothing new has arrived. Taking data reopens the stream's window
    /// by as much (a WINDOW_UPDATE once half the window was taken).
    pub fn poll_stream(
        &mut self,
        id: u32,
        started: Instant,
    ) -> Option<Result<StreamEvent, Failure>> {
        let index = self.slot_index(id)?;
        let half_window = self.stream_window / 2;
        let slot = &mut self.slots[index];
        if slot.error.is_none() {
            if let Some((data, at)) = slot.inbox.pop_front() {
                slot.consumed_ungranted += data.len() as u32;
                if slot.open() && slot.consumed_ungranted >= half_window {
                    frame::put_window_update(&mut self.tx, id, slot.consumed_ungranted);
                    slot.recv_unacked -= slot.consumed_ungranted;
                    slot.consumed_ungranted = 0;
                }
                let status = slot.status.unwrap_or(0);
                let data = data.freeze();
                return Some(Ok(StreamEvent::Data { data, at, status }));
            }
        }
        self.poll_answer(id, started)
            .map(|answer| answer.map(StreamEvent::End))
    }

    /// The answer of stream `id` once complete or failed (the stream then leaves); `None`
    /// while it is in progress. `started` is when the request was issued.
    pub fn poll_answer(&mut self, id: u32, started: Instant) -> Option<Result<Answer, Failure>> {
        let index = self.slot_index(id)?;
        if self.slots[index].open() {
            return None;
        }
        let slot = self.slots.swap_remove(index);
        let unsent = !slot.to_send.is_empty() || slot.generated.is_some();
        if unsent && slot.error.is_none() && self.broken.is_none() {
            // Answered before our body was all sent (RFC 9113 §8.1): stop sending it.
            frame::put_rst_stream(&mut self.tx, id, ErrorCode::NoError);
        }
        self.stream_left();
        if let Some(f) = slot.error {
            return Some(Err(f));
        }
        let body = slot.joined.map_or(slot.body, BytesMut::freeze);
        if let Some(expected) = slot.content_length.filter(|_| !slot.streaming) {
            if expected != body.len() as u64 {
                return Some(Err(Failure::new(
                    FailureClass::BadBody,
                    format!("content-length {expected} but {} body bytes", body.len()),
                )));
            }
        }
        let at = |t: Option<Instant>| {
            t.expect("set before done")
                .saturating_duration_since(started)
        };
        Some(Ok(Answer {
            status: slot.status.expect("a done stream has a status"),
            fields: slot.fields,
            body,
            ttfb: at(slot.head_at),
            total: at(slot.done_at),
        }))
    }

    /// The request of stream `id` was abandoned: RST_STREAM(CANCEL) if it is still open, and
    /// its slot freed.
    pub fn cancel(&mut self, id: u32) {
        if let Some(index) = self.slot_index(id) {
            let slot = self.slots.swap_remove(index);
            if slot.open() && self.broken.is_none() {
                frame::put_rst_stream(&mut self.tx, id, ErrorCode::Cancel);
            }
            self.stream_left();
        }
    }

    /// Closes the connection: GOAWAY(NO_ERROR) unless a GOAWAY already went out, and every
    /// stream fails.
    pub fn close(&mut self) {
        self.closed = true;
        if !self.goaway_sent {
            self.goaway_sent = true;
            frame::put_goaway(&mut self.tx, NO_PEER_STREAMS, ErrorCode::NoError);
        }
        self.fail_all(&Failure::new(
            FailureClass::ConnReset,
            "connection closed by the client",
        ));
    }

    // ---- requests ----

    /// The request head's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
    fn head_list_size(&self, head: &RequestHead<'_>) -> usize {
        let method = head.method.as_bytes();
        let scheme: &[u8] = if self.https { b"https" } else { b"http" };
        hpack::field_size(b":method", method)
            + hpack::field_size(b":scheme", scheme)
            + hpack::field_size(b":path", head.path.as_bytes())
            + hpack::field_size(b":authority", self.authority.as_bytes())
            + head
                .fields
                .iter()
                .map(|(n, v)| hpack::field_size(n.as_bytes(), v.as_bytes()))
                .sum::<usize>()
    }

    /// HPACK-encodes the head into `self.block`. Fields that repeat on every request
    /// (authority, content-type, te) enter the server's dynamic table once, as h2load does,
    /// once the server's SETTINGS gave its table size; `:path` never does.
    fn encode_head(&mut self, head: &RequestHead<'_>) {
        let block = &mut self.block;
        block.clear();
        self.encoder.begin_block(block);
        match head.method {
            "GET" => block.push(0x82),
            "POST" => block.push(0x83),
            other => self.encoder.field(
                block,
                b":method",
                other.as_bytes(),
                Some(2),
                hpack::Indexing::Incremental,
            ),
        }
        block.push(if self.https { 0x87 } else { 0x86 });
        if head.path == "/" {
            block.push(0x84);
        } else {
            self.encoder.field(
                block,
                b":path",
                head.path.as_bytes(),
                Some(4),
                hpack::Indexing::Without,
            );
        }
        self.encoder.field(
            block,
            b":authority",
            self.authority.as_bytes(),
            Some(1),
            hpack::Indexing::Incremental,
        );
        for (name, value) in head.fields {
            let static_name = hpack::STATIC_TABLE.iter().position(|(n, _)| n == name);
            self.encoder.field(
                block,
                name.as_bytes(),
                value.as_bytes(),
                static_name.map(|i| i + 1),
                hpack::Indexing::Incremental,
            );
        }
    }

    /// Queues request DATA as far as the windows and the frame size allow.
    fn send_bodies(&mut self) {
        for slot in self.slots.iter_mut() {
            loop {
                if slot.to_send.is_empty() {
                    match slot.generated.as_mut().and_then(Iterator::next) {
                        Some(piece) => slot.to_send = piece,
                        None => {
                            slot.generated = None;
                            break;
                        }
                    }
                }
                if self.send_window <= 0 || slot.send_window <= 0 {
                    break;
                }
                let len = (slot.to_send.len() as i64)
                    .min(self.send_window)
                    .min(slot.send_window)
                    .min(self.peer.max_frame_len as i64) as usize;
                let chunk = slot.to_send.split_to(len);
                let more = slot.generated.as_mut().is_some_and(|g| g.peek().is_some());
                let flags = if slot.to_send.is_empty() && !more {
                    flag::END_STREAM
                } else {
                    0
                };
                frame::put_header(&mut self.tx, len, kind::DATA, flags, slot.id);
                self.tx.put_slice(&chunk);
                self.send_window -= len as i64;
                slot.send_window -= len as i64;
            }
        }
    }

    // ---- stream and connection ends ----

    fn slot_index(&self, id: u32) -> Option<usize> {
        self.slots.iter().position(|s| s.id == id)
    }

    /// A stream left: a waiting request may open one.
    fn stream_left(&mut self) {
        self.opener_wakes = self.opener_wakes.saturating_add(1);
    }

    fn finish(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        slot.done_at = Some(self.now);
        self.completed.push(slot.id);
    }

    fn fail(&mut self, index: usize, failure: Failure) {
        let slot = &mut self.slots[index];
        slot.error = Some(failure);
        slot.to_send = Bytes::new();
        self.completed.push(slot.id);
    }

    /// A stream error: RST_STREAM with its code unless the stream is closed both ways
    /// already (`remote_ended` with our side sent), and the request fails as `class`.
    fn stream_error(
        &mut self,
        index: usize,
        error: StreamError,
        class: FailureClass,
        remote_ended: bool,
    ) {
        let slot = &self.slots[index];
        if !(remote_ended && slot.to_send.is_empty()) {
            frame::put_rst_stream(&mut self.tx, slot.id, error.code);
        }
        self.fail(index, Failure::stream(class, error.to_string()));
    }

    /// A connection error: GOAWAY with its code, and every stream fails.
    fn connection_error(&mut self, error: ConnError) {
        if self.broken.is_none() && !self.goaway_sent {
            self.goaway_sent = true;
            frame::put_goaway(&mut self.tx, NO_PEER_STREAMS, error.code);
        }
        self.break_with(Failure::new(FailureClass::ConnReset, error.to_string()));
    }

    fn break_with(&mut self, failure: Failure) {
        self.fail_all(&failure);
        self.settings_deadline = None;
        self.continuation = None;
        self.broken.get_or_insert(failure);
    }

    fn fail_all(&mut self, failure: &Failure) {
        for index in 0..self.slots.len() {
            if self.slots[index].open() {
                self.fail(index, failure.clone());
            }
        }
        self.opener_wakes = usize::MAX;
    }

    // ---- frames ----

    /// Bytes still missing from the frame at the start of the read buffer (0 without its
    /// header).
    fn rx_needed(&self) -> usize {
        if self.rx.len() < HEADER_LEN {
            return 0;
        }
        let len = Header::parse(&self.rx).len;
        (HEADER_LEN + len.min(MAX_FRAME_LEN)).saturating_sub(self.rx.len())
    }

    fn read_frames(&mut self) -> Result<(), ConnError> {
        while self.rx.len() >= HEADER_LEN {
            let header = Header::parse(&self.rx);
            if header.len > MAX_FRAME_LEN {
                return Err(ConnError::frame_size(format!(
                    "{}-byte frame above SETTINGS_MAX_FRAME_SIZE",
                    header.len
                )));
            }
            if self.rx.len() < HEADER_LEN + header.len {
                break;
            }
            self.rx.advance(HEADER_LEN);
            let payload = self.rx.split_to(header.len).freeze();
            self.on_frame(header, payload)?;
            if self.broken.is_some() {
                break;
            }
        }
        Ok(())
    }

    fn on_frame(&mut self, h: Header, payload: Bytes) -> Result<(), ConnError> {
        if let Some(partial) = &self.continuation {
            if h.kind != kind::CONTINUATION || h.stream_id != partial.stream_id {
                return Err(ConnError::protocol(
                    "header block interrupted before END_HEADERS",
                ));
            }
        }
        match h.kind {
            kind::DATA => self.on_data(h, payload),
            kind::HEADERS => self.on_headers(h, payload),
            kind::CONTINUATION => self.on_continuation(h, payload),
            kind::PRIORITY => {
                // PRIORITY may name any stream, idle ones too (RFC 9113 §5.1), but not 0.
                if h.stream_id == 0 {
                    return Err(ConnError::protocol("PRIORITY on stream 0"));
                }
                if payload.len() != 5 {
                    if let Some(index) = self.open_slot(h.stream_id) {
                        self.stream_error(
                            index,
                            StreamError::new(ErrorCode::FrameSizeError, "PRIORITY not 5 bytes"),
                            FailureClass::ConnReset,
                            false,
                        );
                    }
                }
                Ok(())
            }
            kind::RST_STREAM => self.on_rst_stream(h, &payload),
            kind::SETTINGS => self.on_settings(h, &payload),
            kind::PUSH_PROMISE => Err(ConnError::protocol("PUSH_PROMISE although push is off")),
            kind::PING => {
                if h.stream_id != 0 {
                    return Err(ConnError::protocol("PING on a stream"));
                }
                if payload.len() != 8 {
                    return Err(ConnError::frame_size("PING not 8 bytes"));
                }
                if h.flags & flag::ACK == 0 {
                    frame::put_header(&mut self.tx, 8, kind::PING, flag::ACK, 0);
                    self.tx.put_slice(&payload);
                }
                Ok(())
            }
            kind::GOAWAY => self.on_goaway(h, &payload),
            kind::WINDOW_UPDATE => self.on_window_update(h, &payload),
            // Unknown frame types are ignored (RFC 9113 §5.5).
            _ => Ok(()),
        }
    }

    /// Frames on stream 0, on streams we never opened, or on server-initiated streams (push
    /// is off) are connection errors (RFC 9113 §5.1: idle streams).
    fn check_stream(&self, stream_id: u32, what: &str) -> Result<(), ConnError> {
        if stream_id == 0 || stream_id.is_multiple_of(2) || stream_id >= self.next_id {
            return Err(ConnError::protocol(format!(
                "{what} on stream {stream_id}, which we did not open"
            )));
        }
        Ok(())
    }

    /// The slot of a stream still waiting for its answer.
    fn open_slot(&self, id: u32) -> Option<usize> {
        self.slot_index(id).filter(|&i| self.slots[i].open())
    }

    fn on_data(&mut self, h: Header, payload: Bytes) -> Result<(), ConnError> {
        self.check_stream(h.stream_id, "DATA")?;
        // The whole payload, padding included, counts against the windows (§6.9.1).
        let flow_len = payload.len() as u32;
        self.conn_recv_unacked += flow_len;
        if self.conn_recv_unacked > self.connection_window {
            return Err(ConnError::new(
                ErrorCode::FlowControlError,
                "server overran the connection window",
            ));
        }
        if self.conn_recv_unacked >= self.connection_window / 2 {
            frame::put_window_update(&mut self.tx, 0, self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
        let data = frame::unpad(h.flags, payload)?;
        let end_stream = h.flags & flag::END_STREAM != 0;
        // A stream we cancelled or finished: its data only counted against the connection.
        let Some(index) = self.open_slot(h.stream_id) else {
            return Ok(());
        };
        let stream_window = self.stream_window;
        let slot = &mut self.slots[index];
        if slot.status.is_none() {
            let e = StreamError::new(ErrorCode::ProtocolError, "DATA before the response head");
            self.stream_error(index, e, FailureClass::ConnReset, end_stream);
            return Ok(());
        }
        slot.recv_unacked += flow_len;
        if slot.recv_unacked > stream_window {
            let e = StreamError::new(
                ErrorCode::FlowControlError,
                "server overran the stream window",
            );
            self.stream_error(index, e, FailureClass::ConnReset, end_stream);
            return Ok(());
        }
        slot.received += data.len() as u64;
        if slot.content_length.is_some_and(|n| slot.received > n) {
            let e = StreamError::new(
                ErrorCode::ProtocolError,
                "malformed response: more DATA than its content-length",
            );
            self.stream_error(index, e, FailureClass::BadBody, end_stream);
            return Ok(());
        }
        if let Err(over) = slot.meter.feed(&data) {
            // Not wanted any more: cancel the stream (only that request fails).
            let (id, remote_ended) = (slot.id, end_stream);
            if !(remote_ended && slot.to_send.is_empty()) {
                frame::put_rst_stream(&mut self.tx, id, ErrorCode::Cancel);
            }
            let mut failure = Failure::stream(over.class, over.detail);
            failure.code = over.code;
            self.fail(index, failure);
            return Ok(());
        }
        if slot.streaming {
            // Padding is never taken by the reader: given back with the next update.
            slot.consumed_ungranted += flow_len - data.len() as u32;
            if !data.is_empty() {
                let batches = slot.inbox.len();
                match slot.inbox.back_mut() {
                    Some((last, at)) if *at == self.now || batches >= MAX_INBOX_BATCHES => {
                        last.extend_from_slice(&data);
                        *at = self.now;
                    }
                    _ => slot.inbox.push_back((BytesMut::from(&data[..]), self.now)),
                }
            }
            if end_stream {
                self.finish(index);
            } else if data.is_empty() && slot.consumed_ungranted >= stream_window / 2 {
                // Padding alone the reader never takes: given back here, or a server padding
                // its frames would close the window for good.
                frame::put_window_update(&mut self.tx, h.stream_id, slot.consumed_ungranted);
                slot.recv_unacked -= slot.consumed_ungranted;
                slot.consumed_ungranted = 0;
            } else {
                self.completed.push(h.stream_id);
            }
            return Ok(());
        }
        slot.push_body(data);
        if end_stream {
            self.finish(index);
        } else if slot.recv_unacked >= stream_window / 2 {
            frame::put_window_update(&mut self.tx, h.stream_id, slot.recv_unacked);
            slot.recv_unacked = 0;
        }
        Ok(())
    }

    fn on_headers(&mut self, h: Header, payload: Bytes) -> Result<(), ConnError> {
        self.check_stream(h.stream_id, "HEADERS")?;
        let mut block = frame::unpad(h.flags, payload)?;
        if h.flags & flag::PRIORITY != 0 {
            if block.len() < 5 {
                return Err(ConnError::frame_size("HEADERS too short for its priority"));
            }
            block.advance(5);
        }
        let end_stream = h.flags & flag::END_STREAM != 0;
        if h.flags & flag::END_HEADERS != 0 {
            return self.on_header_block(h.stream_id, end_stream, &block);
        }
        if block.len() > MAX_HEADER_LIST_SIZE {
            return Err(header_block_too_large());
        }
        self.continuation = Some(PartialBlock {
            stream_id: h.stream_id,
            end_stream,
            block: block.to_vec(),
            continuations: 0,
        });
        Ok(())
    }

    fn on_continuation(&mut self, h: Header, payload: Bytes) -> Result<(), ConnError> {
        let Some(mut partial) = self.continuation.take() else {
            return Err(ConnError::protocol("CONTINUATION without a header block"));
        };
        partial.continuations += 1;
        if partial.block.len() + payload.len() > MAX_HEADER_LIST_SIZE
            || partial.continuations > MAX_CONTINUATIONS
        {
            return Err(header_block_too_large());
        }
        partial.block.extend_from_slice(&payload);
        if h.flags & flag::END_HEADERS != 0 {
            self.on_header_block(h.stream_id, partial.end_stream, &partial.block)
        } else {
            self.continuation = Some(partial);
            Ok(())
        }
    }

    fn on_header_block(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let compression =
            |e: hpack::HpackError| ConnError::new(ErrorCode::CompressionError, e.to_string());
        let Some(index) = self.open_slot(stream_id) else {
            // Still decoded: the dynamic table must follow every block.
            return self.decoder.decode(block, |_, _| {}).map_err(compression);
        };
        let slot = &mut self.slots[index];
        let trailers = slot.status.is_some();
        let mut status = None;
        let mut problem: Option<String> = None;
        let mut content_length = None;
        let mut list_size = 0usize;
        let mut regular_seen = false;
        let keep = slot.keep;
        let fields = &mut slot.fields;
        self.decoder
            .decode(block, |name, value| {
                list_size += hpack::field_size(name, value);
                if list_size > MAX_HEADER_LIST_SIZE || problem.is_some() {
                    return;
                }
                if name.first() == Some(&b':') {
                    if name == b":status" && !trailers && status.is_none() && !regular_seen {
                        status = std::str::from_utf8(value)
                            .ok()
                            .filter(|v| v.len() == 3)
                            .and_then(|v| v.parse::<u16>().ok())
                            .filter(|s| (100..600).contains(s));
                        if status.is_none() {
                            problem = Some("unreadable :status".into());
                        }
                    } else {
                        problem = Some(format!(
                            "pseudo-header {} misplaced or not of a response",
                            String::from_utf8_lossy(name)
                        ));
                    }
                    return;
                }
                regular_seen = true;
                if name.iter().any(|b| b.is_ascii_uppercase()) {
                    problem = Some("upper-case field name".into());
                }
                if name == b"content-length" && !trailers {
                    content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                    if content_length.is_none() {
                        problem = Some("unreadable content-length".into());
                    }
                }
                if let Some(kept) = keep.iter().find(|k| k.as_bytes() == name) {
                    fields.push((kept, Bytes::copy_from_slice(value), trailers));
                }
            })
            .map_err(compression)?;
        if list_size > MAX_HEADER_LIST_SIZE {
            // We no longer want the stream (the `h2` crate refuses it); the connection and its
            // HPACK state are intact.
            let e = StreamError::new(
                ErrorCode::Cancel,
                format!(
                    "response header list of {list_size} B above our SETTINGS_MAX_HEADER_LIST_SIZE"
                ),
            );
            self.stream_error(index, e, FailureClass::BadBody, end_stream);
            return Ok(());
        }
        let malformed = |why: &str| {
            StreamError::new(
                ErrorCode::ProtocolError,
                format!("malformed response: {why}"),
            )
        };
        if let Some(problem) = problem {
            self.stream_error(
                index,
                malformed(&problem),
                FailureClass::BadBody,
                end_stream,
            );
            return Ok(());
        }
        let slot = &mut self.slots[index];
        if trailers {
            if !end_stream {
                let e = malformed("trailers without END_STREAM");
                self.stream_error(index, e, FailureClass::BadBody, end_stream);
            } else {
                self.finish(index);
            }
            return Ok(());
        }
        let Some(status) = status else {
            self.stream_error(
                index,
                malformed("no :status"),
                FailureClass::BadBody,
                end_stream,
            );
            return Ok(());
        };
        if (100..200).contains(&status) {
            // An informational head; the final one follows, so it cannot end the stream
            // (RFC 9113 §8.1), and 101 does not exist in HTTP/2 (§8.6).
            if end_stream || status == 101 {
                let e = malformed(&format!(
                    "{status} response that ends the stream or switches protocols"
                ));
                self.stream_error(index, e, FailureClass::BadBody, end_stream);
                return Ok(());
            }
            slot.fields.retain(|f| f.2);
            return Ok(());
        }
        slot.status = Some(status);
        slot.head_at = Some(self.now);
        // The content-length of an answer without content (HEAD, 304) describes the
        // representation, not DATA to come.
        let no_content = slot.head_request || status == 304;
        slot.content_length = content_length.filter(|_| !no_content);
        if end_stream {
            self.finish(index);
        }
        Ok(())
    }

    fn on_rst_stream(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        self.check_stream(h.stream_id, "RST_STREAM")?;
        if payload.len() != 4 {
            return Err(ConnError::frame_size("RST_STREAM not 4 bytes"));
        }
        let code = be_u32(payload);
        if let Some(index) = self.open_slot(h.stream_id) {
            let failure = if code == ErrorCode::RefusedStream as u32 {
                Failure::unprocessed("stream refused by the server (REFUSED_STREAM)")
            } else {
                Failure::stream(
                    FailureClass::ConnReset,
                    format!("stream reset by the server ({})", code_name(code)),
                )
            };
            // Never answered with another RST_STREAM (§5.4.2).
            self.fail(index, failure);
        }
        Ok(())
    }

    fn on_goaway(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError::protocol("GOAWAY on a stream"));
        }
        if payload.len() < 8 {
            return Err(ConnError::frame_size("GOAWAY shorter than 8 bytes"));
        }
        let last = be_u32(payload) & MAX_STREAM_ID;
        let code = be_u32(&payload[4..]);
        let last = self.goaway.map_or(last, |before| before.min(last));
        self.goaway = Some(last);
        // Streams above the last id were not processed and may go elsewhere (§6.8); those at
        // or below it still finish here.
        for index in 0..self.slots.len() {
            if self.slots[index].id > last && self.slots[index].open() {
                self.fail(
                    index,
                    Failure::unprocessed(format!(
                        "server sent GOAWAY ({}, last stream {last}) before this stream",
                        code_name(code)
                    )),
                );
            }
        }
        self.opener_wakes = usize::MAX;
        Ok(())
    }

    fn on_window_update(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() != 4 {
            return Err(ConnError::frame_size("WINDOW_UPDATE not 4 bytes"));
        }
        let increment = i64::from(be_u32(payload) & MAX_STREAM_ID);
        if h.stream_id == 0 {
            if increment == 0 {
                return Err(ConnError::protocol("connection WINDOW_UPDATE of 0"));
            }
            if self.send_window + increment > MAX_WINDOW {
                return Err(ConnError::new(
                    ErrorCode::FlowControlError,
                    "connection window above 2^31-1",
                ));
            }
            self.send_window += increment;
        } else {
            self.check_stream(h.stream_id, "WINDOW_UPDATE")?;
            if let Some(index) = self.open_slot(h.stream_id) {
                let window = self.slots[index].send_window;
                if increment == 0 {
                    let e = StreamError::new(ErrorCode::ProtocolError, "stream WINDOW_UPDATE of 0");
                    self.stream_error(index, e, FailureClass::ConnReset, false);
                } else if window + increment > MAX_WINDOW {
                    let e =
                        StreamError::new(ErrorCode::FlowControlError, "stream window above 2^31-1");
                    self.stream_error(index, e, FailureClass::ConnReset, false);
                } else {
                    self.slots[index].send_window += increment;
                }
            }
        }
        self.send_bodies();
        Ok(())
    }

    fn on_settings(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError::protocol("SETTINGS on a stream"));
        }
        if h.flags & flag::ACK != 0 {
            if !payload.is_empty() {
                return Err(ConnError::frame_size("SETTINGS ACK with a payload"));
            }
            if self.settings_unacked == 0 {
                return Err(ConnError::protocol("SETTINGS ACK for no SETTINGS of ours"));
            }
            self.settings_unacked -= 1;
            if self.settings_unacked == 0 {
                self.settings_deadline = None;
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError::frame_size("SETTINGS not a multiple of 6 bytes"));
        }
        let first = !self.settings_seen;
        let mut table_size = first.then_some(HEADER_TABLE_SIZE);
        if first {
            // No limit announced means none (RFC 9113 §6.5.2).
            self.peer.max_concurrent_streams = u32::MAX;
        }
        for entry in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            let value = be_u32(&entry[2..]);
            match id {
                setting::HEADER_TABLE_SIZE => table_size = Some(value as usize),
                setting::ENABLE_PUSH if value != 0 => {
                    return Err(ConnError::protocol("server set SETTINGS_ENABLE_PUSH"));
                }
                setting::MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = value,
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > MAX_WINDOW {
                        return Err(ConnError::new(
                            ErrorCode::FlowControlError,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(value) - self.peer.initial_window;
                    self.peer.initial_window = i64::from(value);
                    for slot in self.slots.iter_mut() {
                        slot.send_window += delta;
                        if slot.send_window > MAX_WINDOW {
                            return Err(ConnError::new(
                                ErrorCode::FlowControlError,
                                "a stream window above 2^31-1 after SETTINGS_INITIAL_WINDOW_SIZE",
                            ));
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return Err(ConnError::protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer.max_frame_len = value as usize;
                }
                setting::MAX_HEADER_LIST_SIZE => {
                    self.peer.max_header_list_size = Some(value as usize)
                }
                // ENABLE_PUSH 0 changes nothing; unknown settings are ignored (§6.5.2).
                _ => {}
            }
        }
        if let Some(size) = table_size {
            self.encoder.set_peer_table_size(size);
        }
        self.settings_seen = true;
        frame::put_header(&mut self.tx, 0, kind::SETTINGS, flag::ACK, 0);
        self.send_bodies();
        // A raised stream limit lets waiting requests open.
        self.opener_wakes = usize::MAX;
        Ok(())
    }
}

fn header_block_too_large() -> ConnError {
    ConnError::new(
        ErrorCode::EnhanceYourCalm,
        format!("header block above {MAX_HEADER_LIST_SIZE} B or {MAX_CONTINUATIONS} CONTINUATION frames"),
    )
}
