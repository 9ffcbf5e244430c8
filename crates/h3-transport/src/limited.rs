//! h3-quinn's connection for the client, with each request stream's HTTP/3 frames watched as
//! they arrive: a HEADERS frame whose announced length passes the head limit fails the stream
//! at its frame header. h3 holds a whole HEADERS frame before it decodes it, so without this a
//! server's 1 MiB header (or one announcing a gigabyte) would cost that much memory per worker
//! before any size could be checked.

use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};

/// HTTP/3's HEADERS frame type (RFC 9114 §7.2.2).
const HEADERS: u64 = 0x01;

/// The error a watched stream returns when a HEADERS frame announces more than the limit; h3
/// hands it back as `StreamError::Undefined`, and the client maps it to the head limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadersFrameTooLarge {
    pub announced: u64,
}

impl std::fmt::Display for HeadersFrameTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HEADERS frame of {} B announced", self.announced)
    }
}

impl std::error::Error for HeadersFrameTooLarge {}

/// Where the watcher is in the stream's frames: in a frame header (its bytes so far), or
/// inside a payload (bytes left).
#[derive(Debug, Clone, Copy)]
struct FrameWatch {
    max_headers_frame: u64,
    header: [u8; 16],
    header_len: usize,
    payload_left: u64,
}

impl FrameWatch {
    fn new(max_headers_frame: u64) -> Self {
        FrameWatch {
            max_headers_frame,
            header: [0; 16],
            header_len: 0,
            payload_left: 0,
        }
    }

    /// Follows `chunk`'s frames; an error at the header of a HEADERS frame above the limit.
    fn feed(&mut self, mut chunk: &[u8]) -> Result<(), HeadersFrameTooLarge> {
        while !chunk.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(chunk.len() as u64);
                self.payload_left -= n;
                chunk = &chunk[n as usize..];
                continue;
            }
            self.header[self.header_len] = chunk[0];
            self.header_len += 1;
            chunk = &chunk[1..];
            let Some((kind, used)) = varint(&self.header[..self.header_len]) else {
                continue;
            };
            let Some((len, _)) = varint(&self.header[used..self.header_len]) else {
                continue;
            };
            self.header_len = 0;
            if kind == HEADERS && len > self.max_headers_frame {
                return Err(HeadersFrameTooLarge { announced: len });
            }
            self.payload_left = len;
        }
        Ok(())
    }
}

/// A QUIC variable-length integer at the start of `bytes` and its length, once whole.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1usize << (first >> 6);
    if bytes.len() < len {
        return None;
    }
    let mut value = u64::from(first & 0x3f);
    for b in &bytes[1..len] {
        value = (value << 8) | u64::from(*b);
    }
    Some((value, len))
}

/// The client's QUIC connection for h3: h3-quinn's, with request streams watched.
pub struct Connection {
    inner: h3_quinn::Connection,
    max_headers_frame: u64,
}

impl Connection {
    /// `max_headers_frame`: the largest HEADERS frame a response may announce.
    pub fn new(conn: quinn::Connection, max_headers_frame: u64) -> Self {
        Connection {
            inner: h3_quinn::Connection::new(conn),
            max_headers_frame,
        }
    }
}

impl<B: Buf> quic::Connection<B> for Connection {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = OpenStreams;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        quic::Connection::<B>::poll_accept_recv(&mut self.inner, cx)
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let max = self.max_headers_frame;
        quic::Connection::<B>::poll_accept_bidi(&mut self.inner, cx)
            .map_ok(|inner| BidiStream::new(inner, max))
    }

    fn opener(&self) -> Self::OpenStreams {
        OpenStreams {
            inner: quic::Connection::<B>::opener(&self.inner),
            max_headers_frame: self.max_headers_frame,
        }
    }
}

impl<B: Buf> quic::OpenStreams<B> for Connection {
    type BidiStream = BidiStream<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        let max = self.max_headers_frame;
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.inner, cx)
            .map_ok(|inner| BidiStream::new(inner, max))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_send(&mut self.inner, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.inner, code, reason)
    }
}

/// Opens watched request streams ([`h3::client::SendRequest`] holds one).
pub struct OpenStreams {
    inner: h3_quinn::OpenStreams,
    max_headers_frame: u64,
}

impl Clone for OpenStreams {
    fn clone(&self) -> Self {
        OpenStreams {
            inner: self.inner.clone(),
            max_headers_frame: self.max_headers_frame,
        }
    }
}

impl<B: Buf> quic::OpenStreams<B> for OpenStreams {
    type BidiStream = BidiStream<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        let max = self.max_headers_frame;
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.inner, cx)
            .map_ok(|inner| BidiStream::new(inner, max))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_send(&mut self.inner, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.inner, code, reason)
    }
}

/// A request stream whose received frames are watched.
pub struct BidiStream<B: Buf> {
    inner: h3_quinn::BidiStream<B>,
    watch: FrameWatch,
}

impl<B: Buf> BidiStream<B> {
    fn new(inner: h3_quinn::BidiStream<B>, max_headers_frame: u64) -> Self {
        BidiStream {
            inner,
            watch: FrameWatch::new(max_headers_frame),
        }
    }
}

/// One received chunk through the watch.
fn watched(
    watch: &mut FrameWatch,
    polled: Poll<Result<Option<Bytes>, StreamErrorIncoming>>,
) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
    match polled {
        Poll::Ready(Ok(Some(chunk))) => match watch.feed(&chunk) {
            Ok(()) => Poll::Ready(Ok(Some(chunk))),
            Err(e) => Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(e)))),
        },
        other => other,
    }
}

impl<B: Buf> quic::RecvStream for BidiStream<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Self::Buf>, StreamErrorIncoming>> {
        watched(&mut self.watch, self.inner.poll_data(cx))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for BidiStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.inner.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}

impl<B: Buf> quic::BidiStream<B> for BidiStream<B> {
    type SendStream = h3_quinn::SendStream<B>;
    type RecvStream = RecvStream;

    fn split(self) -> (Self::SendStream, Self::RecvStream) {
        let (send, recv) = self.inner.split();
        (
            send,
            RecvStream {
                inner: recv,
                watch: self.watch,
            },
        )
    }
}

/// The receiving half of a split request stream, still watched.
pub struct RecvStream {
    inner: h3_quinn::RecvStream,
    watch: FrameWatch,
}

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Self::Buf>, StreamErrorIncoming>> {
        watched(&mut self.watch, self.inner.poll_data(cx))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_header(kind: u8, len: u64) -> Vec<u8> {
        let mut h = vec![kind];
        match len {
            0..=63 => h.push(len as u8),
            64..=16_383 => h.extend_from_slice(&(len as u16 | 0x4000).to_be_bytes()),
            _ => h.extend_from_slice(&(len as u32 | 0x8000_0000).to_be_bytes()),
        }
        h
    }

    /// A HEADERS frame within the limit and DATA frames of any size pass, split anywhere; a
    /// HEADERS frame above it fails at its header, before its payload, split anywhere.
    #[test]
    fn a_headers_frame_above_the_limit_fails_at_its_header() {
        let mut ok = frame_header(0x01, 100);
        ok.extend(vec![0; 100]);
        ok.extend(frame_header(0x00, 100_000));
        ok.extend(vec![0; 100_000]);
        ok.extend(frame_header(0x01, 1000));
        ok.extend(vec![0; 1000]);
        for split in [0, 1, 2, 3, 50, 103, 104, 105, 100_000] {
            let mut w = FrameWatch::new(1000);
            let (a, b) = ok.split_at(split);
            w.feed(a).unwrap();
            w.feed(b).unwrap();
        }
        let big = frame_header(0x01, 1 << 20);
        for split in 0..=big.len() {
            let mut w = FrameWatch::new(1000);
            let (a, b) = big.split_at(split);
            let result = w.feed(a).and_then(|()| w.feed(b));
            assert_eq!(result, Err(HeadersFrameTooLarge { announced: 1 << 20 }));
        }
    }
}
