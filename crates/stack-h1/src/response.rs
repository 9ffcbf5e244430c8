//! HTTP/1.1 response framing (RFC 9112 §6) as a state machine with no I/O: it is handed the
//! connection's unread bytes and says where the head ends, which bytes are body and when the
//! response is over. Keeping it apart from the socket lets the client leave a Content-Length
//! body where it was read (no copy), and lets every framing rule be tested byte by byte and
//! fuzzed without a server.

use std::mem::MaybeUninit;
use std::ops::Range;

pub use bench_core::limits::{
    ResponseLimits, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADERS, DEFAULT_MAX_HEAD_BYTES,
};
/// Chunk extensions are skipped, not stored; this bounds the time spent skipping them
/// (hyper's limit).
const MAX_CHUNK_EXT_BYTES: usize = 16 * 1024;
/// Header slots kept on the stack; a larger `max_headers` takes them from the heap.
const STACK_HEADER_SLOTS: usize = 128;

/// How the body of a final response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body: 204, 304 or the answer to HEAD.
    None,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends when the server closes the connection.
    UntilClose,
}

/// The parts of a final response head the client acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub framing: BodyFraming,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
}

/// What one [`ResponseParser::advance`] call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Call again with the unconsumed bytes and more after them.
    NeedMore,
    /// An interim (1xx) response was skipped.
    Interim(u16),
    /// The final response's head.
    Head(Head),
    /// Body bytes, as a range of the input passed in.
    Data(Range<usize>),
    /// The response is complete.
    Done,
}

/// An event and how many input bytes it consumed; the next call starts after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub consumed: usize,
    pub event: Event,
}

/// Why a response cannot be read. Any of them leaves the connection unsynchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// The head is not HTTP/1.x.
    #[error("malformed HTTP/1.1 response head: {0}")]
    Malformed(httparse::Error),
    #[error(
        "too many response headers (above {})",
        bench_core::limits::HEADERS_KNOB
    )]
    TooManyHeaders,
    #[error("response head too long (above {})", bench_core::limits::HEAD_KNOB)]
    HeadTooLarge,
    /// A status outside 100–999, or 101 (no upgrade was asked for).
    #[error("unexpected status {0}")]
    UnexpectedStatus(u16),
    #[error("invalid Content-Length")]
    InvalidContentLength,
    #[error("conflicting Content-Lengths")]
    ConflictingContentLength,
    /// Both `Transfer-Encoding` and `Content-Length` (RFC 9112 §6.3 ¶3: ought to be an error).
    #[error("both Transfer-Encoding and Content-Length")]
    LengthWithTransferEncoding,
    /// `Transfer-Encoding` in an HTTP/1.0 response, empty, or with chunked not last.
    #[error("invalid Transfer-Encoding")]
    InvalidTransferEncoding,
    #[error("invalid chunk size")]
    InvalidChunkSize,
    #[error("chunk size overflows")]
    ChunkSizeOverflow,
    #[error("invalid chunk extension")]
    InvalidChunkExtension,
    #[error("chunk extensions too long")]
    ChunkExtensionsTooLong,
    /// A chunk line or chunk data not ended by CRLF.
    #[error("chunk not ended by CRLF")]
    MissingChunkCrlf,
    #[error("invalid trailer section")]
    InvalidTrailers,
    #[error("response body over the limit ({})", bench_core::limits::BODY_KNOB)]
    BodyTooLarge,
    /// The connection closed before the response was complete.
    #[error("connection closed before the response was complete")]
    Incomplete,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Head,
    Length {
        remaining: u64,
    },
    ChunkSize {
        size: u64,
        digits: bool,
    },
    /// After the size: optional whitespace, then `;` starts the extensions.
    ChunkExt {
        size: u64,
        started: bool,
    },
    ChunkLf {
        size: u64,
    },
    ChunkData {
        remaining: u64,
    },
    ChunkDataCr,
    ChunkDataLf,
    Trailers,
    UntilClose,
    Done,
    Failed(FramingError),
}

/// Reads one response after another from a connection's bytes.
///
/// Call [`begin`](Self::begin) before each response, then [`advance`](Self::advance) with the
/// bytes not yet consumed until it returns [`Event::Done`]; on [`Event::NeedMore`] read more
/// and pass the unconsumed bytes again with the new ones after them. When the connection
/// ends, [`eof`](Self::eof) says whether that completed the response.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    limits: ResponseLimits,
    state: State,
    head_request: bool,
    /// Bytes of interim heads skipped for this response.
    interim_bytes: usize,
    /// How much of the pending head (or trailer section) was already searched for a line end.
    scanned: usize,
    body_len: u64,
    ext_bytes: usize,
}

impl Default for ResponseParser {
    fn default() -> Self {
        ResponseParser::new(ResponseLimits::default())
    }
}

impl ResponseParser {
    pub fn new(limits: ResponseLimits) -> Self {
        ResponseParser {
            limits,
            state: State::Head,
            head_request: false,
            interim_bytes: 0,
            scanned: 0,
            body_len: 0,
            ext_bytes: 0,
        }
    }

    /// Starts the next response; `head_request` when it answers a HEAD (so it has no body).
    pub fn begin(&mut self, head_request: bool) {
        self.state = State::Head;
        self.head_request = head_request;
        self.interim_bytes = 0;
        self.scanned = 0;
        self.body_len = 0;
        self.ext_bytes = 0;
    }

    /// Body bytes still announced and not yet seen (Content-Length or the current chunk),
    /// so a reader can size its next read.
    pub fn body_remaining(&self) -> Option<u64> {
        match self.state {
            State::Length { remaining } | State::ChunkData { remaining } => Some(remaining),
            _ => None,
        }
    }

    /// Consumes a prefix of `input`, the bytes after those consumed so far. Each call either
    /// consumes bytes or returns `NeedMore`, `Done` or an error; after an error every call
    /// returns it again.
    pub fn advance(&mut self, input: &[u8]) -> Result<Step, FramingError> {
        let result = self.advance_inner(input);
        if let Err(e) = result {
            self.state = State::Failed(e);
        }
        result
    }

    /// The connection ended; `unconsumed` are the bytes passed last and not consumed. Complete
    /// only for a close-delimited body (or an already complete response); a head or trailer
    /// section cut short is still judged, so a malformed one is reported as malformed however
    /// its bytes were split.
    pub fn eof(&mut self, unconsumed: &[u8]) -> Result<(), FramingError> {
        let result = match self.state {
            State::UntilClose | State::Done => Ok(()),
            State::Failed(e) => Err(e),
            State::Head if !unconsumed.is_empty() => self
                .head(unconsumed, true)
                .and(Err(FramingError::Incomplete)),
            State::Trailers if !unconsumed.is_empty() => self
                .trailers(unconsumed, 0, true)
                .and(Err(FramingError::Incomplete)),
            _ => Err(FramingError::Incomplete),
        };
        self.state = match result {
            Ok(()) => State::Done,
            Err(e) => State::Failed(e),
        };
        result
    }

    fn advance_inner(&mut self, input: &[u8]) -> Result<Step, FramingError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Head => return self.head(input, false),
                State::Length { remaining } => {
                    let n = remaining.min((input.len() - pos) as u64);
                    if n == 0 {
                        return Ok(need(pos));
                    }
                    let left = remaining - n;
                    self.state = if left == 0 {
                        State::Done
                    } else {
                        State::Length { remaining: left }
                    };
                    return Ok(self.data(pos, n as usize));
                }
                State::ChunkData { remaining } => {
                    let n = remaining.min((input.len() - pos) as u64);
                    if n == 0 {
                        return Ok(need(pos));
                    }
                    let left = remaining - n;
                    self.state = if left == 0 {
                        State::ChunkDataCr
                    } else {
                        State::ChunkData { remaining: left }
                    };
                    return Ok(self.data(pos, n as usize));
                }
                State::UntilClose => {
                    let n = input.len() - pos;
                    if n == 0 {
                        return Ok(need(pos));
                    }
                    if self.body_len + n as u64 > self.limits.max_body_bytes {
                        return Err(FramingError::BodyTooLarge);
                    }
                    return Ok(self.data(pos, n));
                }
                State::Trailers => return self.trailers(input, pos, false),
                State::Done => {
                    return Ok(Step {
                        consumed: pos,
                        event: Event::Done,
                    })
                }
                State::Failed(e) => return Err(e),
                State::ChunkSize { .. }
                | State::ChunkExt { .. }
                | State::ChunkLf { .. }
                | State::ChunkDataCr
                | State::ChunkDataLf => {
                    let Some(&byte) = input.get(pos) else {
                        return Ok(need(pos));
                    };
                    pos += 1;
                    self.chunk_line_byte(byte)?;
                }
            }
        }
    }

    fn data(&mut self, pos: usize, n: usize) -> Step {
        self.body_len += n as u64;
        Step {
            consumed: pos + n,
            event: Event::Data(pos..pos + n),
        }
    }

    /// Whether `input` has a line end past what was searched before; a head or trailer
    /// section is parsed only then, so a head arriving in many small reads is parsed once
    /// per line rather than once per read.
    fn new_line_end(&mut self, input: &[u8]) -> bool {
        let from = self.scanned.min(input.len());
        let found = input[from..].contains(&b'\n');
        if !found {
            self.scanned = input.len();
        }
        found
    }

    /// An incomplete head or trailer section of `len` bytes so far.
    fn partial(
        &mut self,
        len: usize,
        consumed: usize,
        budget: usize,
    ) -> Result<Step, FramingError> {
        self.scanned = len;
        if len > budget {
            return Err(FramingError::HeadTooLarge);
        }
        Ok(need(consumed))
    }

    /// The head at the start of `input`; `force` parses even without a new line end.
    fn head(&mut self, input: &[u8], force: bool) -> Result<Step, FramingError> {
        let budget = self
            .limits
            .max_head_bytes
            .saturating_sub(self.interim_bytes);
        // The first look parses at once: most heads arrive whole in one read.
        if !force && self.scanned > 0 && !self.new_line_end(input) {
            return self.partial(input.len(), 0, budget);
        }
        let max = self.limits.max_headers;
        let mut stack =
            [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; STACK_HEADER_SLOTS];
        let mut heap;
        let slots = if max <= STACK_HEADER_SLOTS {
            &mut stack[..max]
        } else {
            heap = vec![MaybeUninit::uninit(); max];
            &mut heap[..]
        };
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            input,
            slots,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return self.partial(input.len(), 0, budget),
            Err(httparse::Error::TooManyHeaders) => return Err(FramingError::TooManyHeaders),
            Err(e) => return Err(FramingError::Malformed(e)),
        };
        if len > budget {
            return Err(FramingError::HeadTooLarge);
        }
        self.scanned = 0;
        let status = response.code.unwrap_or(0);
        if !(100..=999).contains(&status) || status == 101 {
            return Err(FramingError::UnexpectedStatus(status));
        }
        if status < 200 {
            self.interim_bytes += len;
            return Ok(Step {
                consumed: len,
                event: Event::Interim(status),
            });
        }
        let http10 = response.version == Some(0);
        let mut length: Option<u64> = None;
        let mut transfer = TransferCoding::Absent;
        let (mut close, mut keep_alive_token) = (false, false);
        for header in response.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                let value = parse_content_length(header.value)?;
                if length.is_some_and(|l| l != value) {
                    return Err(FramingError::ConflictingContentLength);
                }
                length = Some(value);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                transfer = transfer.add(header.value)?;
            } else if name.eq_ignore_ascii_case("connection") {
                for option in list_elements(header.value) {
                    close |= option.eq_ignore_ascii_case(b"close");
                    keep_alive_token |= option.eq_ignore_ascii_case(b"keep-alive");
                }
            }
        }
        let no_body = self.head_request || status == 204 || status == 304;
        let framing = if no_body {
            BodyFraming::None
        } else {
            match (transfer, length) {
                (TransferCoding::Absent, Some(n)) => BodyFraming::Length(n),
                (TransferCoding::Absent, None) => BodyFraming::UntilClose,
                (_, Some(_)) => return Err(FramingError::LengthWithTransferEncoding),
                _ if http10 => return Err(FramingError::InvalidTransferEncoding),
                (TransferCoding::ChunkedLast, None) => BodyFraming::Chunked,
                (TransferCoding::Other, None) => BodyFraming::UntilClose,
                (TransferCoding::Empty, None) => return Err(FramingError::InvalidTransferEncoding),
            }
        };
        let keep_alive =
            !close && (!http10 || keep_alive_token) && framing != BodyFraming::UntilClose;
        self.state = match framing {
            BodyFraming::None | BodyFraming::Length(0) => State::Done,
            BodyFraming::Length(n) if n > self.limits.max_body_bytes => {
                return Err(FramingError::BodyTooLarge)
            }
            BodyFraming::Length(n) => State::Length { remaining: n },
            BodyFraming::Chunked => State::ChunkSize {
                size: 0,
                digits: false,
            },
            BodyFraming::UntilClose => State::UntilClose,
        };
        Ok(Step {
            consumed: len,
            event: Event::Head(Head {
                status,
                framing,
                keep_alive,
            }),
        })
    }

    /// One byte of a chunk-size line or of the CRLF after chunk data.
    fn chunk_line_byte(&mut self, byte: u8) -> Result<(), FramingError> {
        self.state = match self.state {
            State::ChunkSize { size, digits } => match byte {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    let digit = (byte as char).to_digit(16).unwrap_or(0) as u64;
                    let size = size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(digit))
                        .ok_or(FramingError::ChunkSizeOverflow)?;
                    State::ChunkSize { size, digits: true }
                }
                b';' | b' ' | b'\t' if digits => {
                    self.count_ext()?;
                    State::ChunkExt {
                        size,
                        started: byte == b';',
                    }
                }
                b'\r' if digits => State::ChunkLf { size },
                _ => return Err(FramingError::InvalidChunkSize),
            },
            State::ChunkExt { size, started } => match byte {
                b'\r' if started => State::ChunkLf { size },
                b';' => {
                    self.count_ext()?;
                    State::ChunkExt {
                        size,
                        started: true,
                    }
                }
                b' ' | b'\t' => {
                    self.count_ext()?;
                    State::ChunkExt { size, started }
                }
                0x21..=0x7e | 0x80..=0xff if started => {
                    self.count_ext()?;
                    State::ChunkExt { size, started }
                }
                _ => return Err(FramingError::InvalidChunkExtension),
            },
            State::ChunkLf { size } => {
                if byte != b'\n' {
                    return Err(FramingError::MissingChunkCrlf);
                }
                if size == 0 {
                    self.scanned = 0;
                    State::Trailers
                } else if self.body_len.saturating_add(size) > self.limits.max_body_bytes {
                    return Err(FramingError::BodyTooLarge);
                } else {
                    State::ChunkData { remaining: size }
                }
            }
            State::ChunkDataCr if byte == b'\r' => State::ChunkDataLf,
            State::ChunkDataLf if byte == b'\n' => State::ChunkSize {
                size: 0,
                digits: false,
            },
            State::ChunkDataCr | State::ChunkDataLf => return Err(FramingError::MissingChunkCrlf),
            // Only the states above read chunk lines.
            other => other,
        };
        Ok(())
    }

    fn count_ext(&mut self) -> Result<(), FramingError> {
        self.ext_bytes += 1;
        if self.ext_bytes > MAX_CHUNK_EXT_BYTES {
            return Err(FramingError::ChunkExtensionsTooLong);
        }
        Ok(())
    }

    /// The trailer section after the last chunk, starting at `input[pos..]`: parsed whole and
    /// discarded.
    fn trailers(&mut self, input: &[u8], pos: usize, force: bool) -> Result<Step, FramingError> {
        let rest = &input[pos..];
        let done = |len: usize| Step {
            consumed: pos + len,
            event: Event::Done,
        };
        if rest.starts_with(b"\r\n") {
            self.state = State::Done;
            return Ok(done(2));
        }
        let budget = self.limits.max_head_bytes;
        if !force && !self.new_line_end(rest) {
            return self.partial(rest.len(), pos, budget);
        }
        let max = self.limits.max_headers;
        let mut stack = [httparse::EMPTY_HEADER; 16];
        let mut heap;
        let slots = if max <= stack.len() {
            &mut stack[..max]
        } else {
            heap = vec![httparse::EMPTY_HEADER; max];
            &mut heap[..]
        };
        match httparse::parse_headers(rest, slots) {
            Ok(httparse::Status::Complete((len, _))) if len <= budget => {
                self.state = State::Done;
                Ok(done(len))
            }
            Ok(httparse::Status::Complete(_)) => Err(FramingError::HeadTooLarge),
            Ok(httparse::Status::Partial) => self.partial(rest.len(), pos, budget),
            Err(httparse::Error::TooManyHeaders) => Err(FramingError::TooManyHeaders),
            Err(_) => Err(FramingError::InvalidTrailers),
        }
    }
}

fn need(consumed: usize) -> Step {
    Step {
        consumed,
        event: Event::NeedMore,
    }
}

/// What the `Transfer-Encoding` fields seen so far say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransferCoding {
    Absent,
    /// Present with no coding in it.
    Empty,
    ChunkedLast,
    /// Present, the last coding not chunked (the body then ends at close).
    Other,
}

impl TransferCoding {
    fn add(self, value: &[u8]) -> Result<TransferCoding, FramingError> {
        let mut state = match self {
            TransferCoding::Absent => TransferCoding::Empty,
            other => other,
        };
        for coding in list_elements(value) {
            if state == TransferCoding::ChunkedLast {
                // Chunked must be applied last, and once (RFC 9112 §6.1, §7).
                return Err(FramingError::InvalidTransferEncoding);
            }
            let name = coding.split(|&b| b == b';').next().unwrap_or_default();
            state = if trim(name).eq_ignore_ascii_case(b"chunked") {
                TransferCoding::ChunkedLast
            } else {
                TransferCoding::Other
            };
        }
        Ok(state)
    }
}

/// `Content-Length = 1*DIGIT`, also as a list of identical values (RFC 9110 §8.6).
fn parse_content_length(value: &[u8]) -> Result<u64, FramingError> {
    let mut found = None;
    for element in value.split(|&b| b == b',') {
        let digits = trim(element);
        if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
            return Err(FramingError::InvalidContentLength);
        }
        let n = digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        if found.is_some_and(|f| f != n) {
            return Err(FramingError::ConflictingContentLength);
        }
        found = Some(n);
    }
    found.ok_or(FramingError::InvalidContentLength)
}

/// The non-empty elements of a comma-separated field value, trimmed.
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|e| !e.is_empty())
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What feeding a response produced.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Outcome {
        interims: Vec<u16>,
        head: Option<Head>,
        body: Vec<u8>,
        /// Bytes left over after `Done`.
        rest: Vec<u8>,
        result: Result<(), FramingError>,
    }

    /// Feeds `pieces` one after another as a client reading them would, then signals EOF
    /// when `eof`. Checks on every step that ranges stay inside the input.
    fn feed_pieces(parser: &mut ResponseParser, pieces: &[&[u8]], eof: bool) -> Outcome {
        let mut out = Outcome {
            interims: Vec::new(),
            head: None,
            body: Vec::new(),
            rest: Vec::new(),
            result: Ok(()),
        };
        let mut pending: Vec<u8> = Vec::new();
        let mut pieces = pieces.iter();
        loop {
            let step = match parser.advance(&pending) {
                Ok(step) => step,
                Err(e) => {
                    out.result = Err(e);
                    return out;
                }
            };
            assert!(step.consumed <= pending.len());
            match step.event {
                Event::NeedMore => {
                    pending.drain(..step.consumed);
                    match pieces.next() {
                        Some(piece) => pending.extend_from_slice(piece),
                        None => {
                            if eof {
                                out.result = parser.eof(&pending);
                            } else {
                                out.result = Err(FramingError::Incomplete);
                            }
                            return out;
                        }
                    }
                }
                Event::Interim(status) => {
                    assert!(out.head.is_none());
                    out.interims.push(status);
                    pending.drain(..step.consumed);
                }
                Event::Head(head) => {
                    assert!(out.head.is_none());
                    out.head = Some(head);
                    pending.drain(..step.consumed);
                }
                Event::Data(range) => {
                    assert!(range.start < range.end && range.end == step.consumed);
                    out.body.extend_from_slice(&pending[range]);
                    pending.drain(..step.consumed);
                }
                Event::Done => {
                    pending.drain(..step.consumed);
                    out.rest = pending;
                    for piece in pieces {
                        out.rest.extend_from_slice(piece);
                    }
                    return out;
                }
            }
        }
    }

    fn feed(input: &[u8], eof: bool) -> Outcome {
        feed_pieces(&mut ResponseParser::default(), &[input], eof)
    }

    /// The outcome of `input` in one piece, checked to be the same fed one byte at a time,
    /// in every two pieces, and (for short inputs) in every three pieces.
    fn every_split(input: &[u8], eof: bool) -> Outcome {
        let whole = feed(input, eof);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        let dripped = feed_pieces(&mut ResponseParser::default(), &bytes, eof);
        assert_eq!(dripped, whole, "fed one byte at a time");
        for i in 0..=input.len() {
            let (a, b) = input.split_at(i);
            let two = feed_pieces(&mut ResponseParser::default(), &[a, b], eof);
            assert_eq!(two, whole, "split at {i}");
            if input.len() <= 160 {
                for j in i..=input.len() {
                    let (b, c) = input[i..].split_at(j - i);
                    let three = feed_pieces(&mut ResponseParser::default(), &[a, b, c], eof);
                    assert_eq!(three, whole, "split at {i} and {j}");
                }
            }
        }
        whole
    }

    fn head(status: u16, framing: BodyFraming, keep_alive: bool) -> Option<Head> {
        Some(Head {
            status,
            framing,
            keep_alive,
        })
    }

    #[test]
    fn content_length_body_in_any_split() {
        let input =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello";
        let out = every_split(input, false);
        assert_eq!(out.head, head(200, BodyFraming::Length(5), true));
        assert_eq!(out.body, b"hello");
        assert_eq!(out.result, Ok(()));
        assert!(out.rest.is_empty());
        // A second response on the same connection, after `begin`.
        let mut parser = ResponseParser::default();
        let twice = [&input[..], &input[..]].concat();
        let first = feed_pieces(&mut parser, &[&twice], false);
        assert_eq!(first.rest, input);
        parser.begin(false);
        let second = feed_pieces(&mut parser, &[&first.rest], false);
        assert_eq!(second.body, b"hello");
        assert!(second.rest.is_empty());
    }

    #[test]
    fn content_length_zero_and_duplicates() {
        let out = every_split(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert_eq!(out.head, head(200, BodyFraming::Length(0), true));
        assert!(out.body.is_empty() && out.result.is_ok());
        // Identical values, repeated or as a list, are one length (RFC 9110 §8.6).
        for input in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\nabc"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 3, 3\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\ncontent-length:\t3 \r\n\r\nabc",
        ] {
            let out = feed(input, false);
            assert_eq!((out.body.as_slice(), out.result), (&b"abc"[..], Ok(())));
        }
    }

    #[test]
    fn invalid_or_conflicting_content_length_is_an_error() {
        for (value, error) in [
            ("3, 4", FramingError::ConflictingContentLength),
            ("+3", FramingError::InvalidContentLength),
            ("-1", FramingError::InvalidContentLength),
            ("3 3", FramingError::InvalidContentLength),
            ("0x10", FramingError::InvalidContentLength),
            ("", FramingError::InvalidContentLength),
            ("3,", FramingError::InvalidContentLength),
            ("99999999999999999999", FramingError::InvalidContentLength),
        ] {
            let input = format!("HTTP/1.1 200 OK\r\ncontent-length: {value}\r\n\r\nabcd");
            assert_eq!(
                feed(input.as_bytes(), false).result,
                Err(error),
                "{value:?}"
            );
        }
        let two = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd";
        assert_eq!(
            feed(two, false).result,
            Err(FramingError::ConflictingContentLength)
        );
    }

    #[test]
    fn chunked_with_extensions_and_trailers_in_any_split() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;name=value;quoted=\"a b;c\"\r\nhello\r\n\
            1 ; ext\r\n,\r\n\
            B\r\n 0123456789\r\n\
            0;last\r\nx-checksum: abc\r\nx-other: 1\r\n\r\n";
        let out = every_split(input, false);
        assert_eq!(out.head, head(200, BodyFraming::Chunked, true));
        assert_eq!(out.body, b"hello, 0123456789");
        assert_eq!(out.result, Ok(()));
        assert!(out.rest.is_empty());
        // No trailers, upper- and lower-case hex, leading zeros.
        let plain = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n\
            00b\r\nhello world\r\n1F\r\n0123456789abcdefghijklmnopqrstu\r\n000\r\n\r\nNEXT";
        let out = every_split(plain, false);
        assert_eq!(out.body.len(), 11 + 31);
        assert_eq!(out.rest, b"NEXT");
    }

    #[test]
    fn invalid_chunk_lines_are_errors() {
        let cases: [(&[u8], FramingError); 12] = [
            (b"g\r\nx\r\n0\r\n\r\n", FramingError::InvalidChunkSize),
            (b"\r\n", FramingError::InvalidChunkSize),
            (b"-1\r\n", FramingError::InvalidChunkSize),
            (b";ext\r\n", FramingError::InvalidChunkSize),
            (b"1 x\r\n", FramingError::InvalidChunkExtension),
            (b"1 \r\nx\r\n", FramingError::InvalidChunkExtension),
            (b"1;a\x01\r\n", FramingError::InvalidChunkExtension),
            (b"1\nx\r\n", FramingError::InvalidChunkSize),
            (b"1\r\nxy\r\n", FramingError::MissingChunkCrlf),
            (b"1\r\nx\n0\r\n\r\n", FramingError::MissingChunkCrlf),
            (b"10000000000000000\r\n", FramingError::ChunkSizeOverflow),
            (b"ffffffffffffffff\r\n", FramingError::BodyTooLarge),
        ];
        for (chunks, error) in cases {
            let input = [
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"[..],
                chunks,
            ]
            .concat();
            let out = every_split(&input, true);
            assert_eq!(
                out.result,
                Err(error),
                "{:?}",
                String::from_utf8_lossy(chunks)
            );
        }
        let long_ext = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;{}\r\nx\r\n0\r\n\r\n",
            "e".repeat(MAX_CHUNK_EXT_BYTES)
        );
        assert_eq!(
            feed(long_ext.as_bytes(), false).result,
            Err(FramingError::ChunkExtensionsTooLong)
        );
        let trailers =
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n";
        assert_eq!(
            feed(trailers, false).result,
            Err(FramingError::InvalidTrailers)
        );
    }

    #[test]
    fn errors_are_sticky() {
        let mut parser = ResponseParser::default();
        let bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        assert!(feed_pieces(&mut parser, &[bad], false).result.is_err());
        assert_eq!(
            parser.advance(b"0\r\n\r\n"),
            Err(FramingError::InvalidChunkSize)
        );
        assert_eq!(parser.eof(&[]), Err(FramingError::InvalidChunkSize));
        parser.begin(false);
        assert!(
            feed_pieces(&mut parser, &[b"HTTP/1.1 204 No Content\r\n\r\n"], false)
                .result
                .is_ok()
        );
    }

    #[test]
    fn transfer_encoding_rules() {
        // Both framings: RFC 9112 §6.3 says this ought to be handled as an error.
        let both = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(
            every_split(both, false).result,
            Err(FramingError::LengthWithTransferEncoding)
        );
        for te in ["chunked, gzip", "chunked, chunked", ""] {
            let input = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: {te}\r\n\r\n");
            assert_eq!(
                feed(input.as_bytes(), true).result,
                Err(FramingError::InvalidTransferEncoding),
                "{te:?}"
            );
        }
        let split =
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\n";
        assert_eq!(
            feed(split, true).result,
            Err(FramingError::InvalidTransferEncoding)
        );
        // HTTP/1.0 has no transfer codings (RFC 9112 §6.1).
        let http10 = b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(
            feed(http10, true).result,
            Err(FramingError::InvalidTransferEncoding)
        );
        // A last coding other than chunked: the body runs to the close.
        let gzip = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nzipped";
        let out = every_split(gzip, true);
        assert_eq!(out.head, head(200, BodyFraming::UntilClose, false));
        assert_eq!((out.body.as_slice(), out.result), (&b"zipped"[..], Ok(())));
    }

    #[test]
    fn interim_responses_are_skipped() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\n\
            HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
            HTTP/1.1 102 Processing\r\ncontent-length: 9\r\n\r\n\
            HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        let out = every_split(input, false);
        assert_eq!(out.interims, vec![100, 103, 102]);
        assert_eq!(out.head, head(200, BodyFraming::Length(2), true));
        assert_eq!((out.body.as_slice(), out.result), (&b"ok"[..], Ok(())));
        // Interim heads count towards the head limit.
        let limits = ResponseLimits {
            max_head_bytes: 60,
            ..ResponseLimits::default()
        };
        let many = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(3);
        let out = feed_pieces(&mut ResponseParser::new(limits), &[&many], false);
        assert_eq!(out.result, Err(FramingError::HeadTooLarge));
        // 101 was never asked for; a status below 100 does not exist.
        for input in [
            &b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n"[..],
            b"HTTP/1.1 099 Odd\r\n\r\n",
        ] {
            assert!(matches!(
                feed(input, false).result,
                Err(FramingError::UnexpectedStatus(_))
            ));
        }
    }

    #[test]
    fn no_body_for_204_304_and_head() {
        // Framing fields are ignored: whatever follows the head is the next message.
        let no_content = b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n";
        let out = every_split(no_content, false);
        assert_eq!(out.head, head(204, BodyFraming::None, true));
        assert!(out.body.is_empty() && out.result.is_ok());
        let not_modified = b"HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\nHTTP";
        let out = every_split(not_modified, false);
        assert_eq!(out.head, head(304, BodyFraming::None, true));
        assert_eq!(out.rest, b"HTTP");
        let mut parser = ResponseParser::default();
        parser.begin(true);
        let to_head = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n";
        let out = feed_pieces(&mut parser, &[to_head], false);
        assert_eq!(out.head, head(200, BodyFraming::None, true));
        assert!(out.body.is_empty() && out.result.is_ok());
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let input =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of this\r\n\r\nis body";
        let out = every_split(input, true);
        assert_eq!(out.head, head(200, BodyFraming::UntilClose, false));
        assert_eq!(out.body, b"all of this\r\n\r\nis body");
        assert_eq!(out.result, Ok(()));
        let http10 = b"HTTP/1.0 200 OK\r\n\r\n";
        let out = every_split(http10, true);
        assert!(out.body.is_empty() && out.result.is_ok());
        // EOF anywhere else leaves the response incomplete.
        for cut in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-trailer: 1\r\n",
        ] {
            assert_eq!(feed(cut, true).result, Err(FramingError::Incomplete));
        }
    }

    #[test]
    fn connection_persistence() {
        for (input, keep_alive) in [
            (
                &b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"[..],
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\ncontent-length: 0\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n",
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\nconnection: closed\r\ncontent-length: 0\r\n\r\n",
                true,
            ),
            (b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n", false),
            (
                b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n",
                true,
            ),
        ] {
            let out = feed(input, false);
            assert_eq!(
                out.head.map(|h| h.keep_alive),
                Some(keep_alive),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn head_size_limit() {
        let limits = ResponseLimits {
            max_head_bytes: 64,
            ..ResponseLimits::default()
        };
        let fits = b"HTTP/1.1 200 OK\r\nx-pad: 01234567890123456\r\ncontent-length: 1\r\n\r\nx";
        assert_eq!(fits.len() - 1, 64);
        let feed_limited = |input: &[u8], drip: bool| {
            let mut parser = ResponseParser::new(limits);
            if drip {
                let bytes: Vec<&[u8]> = input.chunks(1).collect();
                feed_pieces(&mut parser, &bytes, false)
            } else {
                feed_pieces(&mut parser, &[input], false)
            }
        };
        for drip in [false, true] {
            assert_eq!(feed_limited(fits, drip).result, Ok(()));
            let over =
                b"HTTP/1.1 200 OK\r\nx-pad: 012345678901234567\r\ncontent-length: 1\r\n\r\nx";
            assert_eq!(
                feed_limited(over, drip).result,
                Err(FramingError::HeadTooLarge)
            );
            // A head that never ends is refused once it passes the limit, not at EOF.
            let endless = [&b"HTTP/1.1 200 OK\r\nx-long: "[..], &[b'a'; 100]].concat();
            assert_eq!(
                feed_limited(&endless, drip).result,
                Err(FramingError::HeadTooLarge)
            );
        }
        // The default: a 1 MiB header is refused.
        let huge = format!(
            "HTTP/1.1 200 OK\r\nx-huge: {}\r\ncontent-length: 0\r\n\r\n",
            "h".repeat(1 << 20)
        );
        assert_eq!(
            feed(huge.as_bytes(), false).result,
            Err(FramingError::HeadTooLarge)
        );
        // Trailers have the same bound.
        let trailer = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: {}\r\n\r\n",
            "t".repeat(DEFAULT_MAX_HEAD_BYTES)
        );
        assert_eq!(
            feed(trailer.as_bytes(), false).result,
            Err(FramingError::HeadTooLarge)
        );
    }

    fn with_headers(n: usize) -> Vec<u8> {
        let mut input = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n".to_vec();
        for i in 1..n {
            input.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
        }
        input.extend_from_slice(b"\r\nok");
        input
    }

    #[test]
    fn header_count_limit() {
        assert_eq!(
            feed(&with_headers(DEFAULT_MAX_HEADERS), false).result,
            Ok(())
        );
        assert_eq!(
            feed(&with_headers(DEFAULT_MAX_HEADERS + 1), false).result,
            Err(FramingError::TooManyHeaders)
        );
        let few = ResponseLimits {
            max_headers: 3,
            ..ResponseLimits::default()
        };
        let out = feed_pieces(&mut ResponseParser::new(few), &[&with_headers(4)], false);
        assert_eq!(out.result, Err(FramingError::TooManyHeaders));
        // More slots than the stack holds come from the heap.
        let many = ResponseLimits {
            max_headers: 300,
            ..ResponseLimits::default()
        };
        let out = feed_pieces(&mut ResponseParser::new(many), &[&with_headers(300)], false);
        assert_eq!((out.body.as_slice(), out.result), (&b"ok"[..], Ok(())));
        let trailers = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n{}\r\n",
            "x-t: 1\r\n".repeat(DEFAULT_MAX_HEADERS + 1)
        );
        assert_eq!(
            feed(trailers.as_bytes(), false).result,
            Err(FramingError::TooManyHeaders)
        );
    }

    #[test]
    fn body_size_limit() {
        let limits = ResponseLimits {
            max_body_bytes: 10,
            ..ResponseLimits::default()
        };
        let run =
            |input: &[u8]| feed_pieces(&mut ResponseParser::new(limits), &[input], true).result;
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n0123456789"),
            Ok(())
        );
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n"),
            Err(FramingError::BodyTooLarge)
        );
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n"),
            Ok(())
        );
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n01234\r\n6\r\n"),
            Err(FramingError::BodyTooLarge)
        );
        assert_eq!(run(b"HTTP/1.1 200 OK\r\n\r\n0123456789"), Ok(()));
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\n\r\n0123456789A"),
            Err(FramingError::BodyTooLarge)
        );
    }

    #[test]
    fn malformed_heads_are_errors() {
        for input in [
            &b"HTTP/9 nonsense\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n folded: no\r\n\r\n",
            b"SSH-2.0-OpenSSH_9.6\r\n",
        ] {
            assert!(
                matches!(feed(input, true).result, Err(FramingError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn body_remaining_sizes_the_next_read() {
        let mut parser = ResponseParser::default();
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 70000\r\n\r\n";
        let step = parser.advance(head).unwrap();
        assert_eq!(step.consumed, head.len());
        assert_eq!(parser.body_remaining(), Some(70_000));
        let step = parser.advance(&[b'x'; 1000]).unwrap();
        assert_eq!(step.event, Event::Data(0..1000));
        assert_eq!(parser.body_remaining(), Some(69_000));
    }
}
