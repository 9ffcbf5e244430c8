//! HTTP/2 frame layout (RFC 9113 §4, §6): types, flags, error codes, the 9-byte header, and
//! the encoders of the frames the client sends. Pure functions on buffers, no state.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{ConnError, ErrorCode};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;
/// Largest stream id (31 bits).
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// A frame's 9-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream_id: u32,
}

impl Header {
    /// Reads the header at the start of `buf` (at least [`HEADER_LEN`] bytes); the reserved
    /// bit of the stream id is ignored (RFC 9113 §4.1).
    pub fn parse(buf: &[u8]) -> Header {
        Header {
            len: (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize,
            kind: buf[3],
            flags: buf[4],
            stream_id: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & MAX_STREAM_ID,
        }
    }
}

pub fn put_header(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream_id: u32) {
    out.put_uint(len as u64, 3);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream_id);
}

pub fn put_settings(out: &mut BytesMut, settings: &[(u16, u32)]) {
    put_header(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.put_u16(id);
        out.put_u32(value);
    }
}

pub fn put_window_update(out: &mut BytesMut, stream_id: u32, increment: u32) {
    put_header(out, 4, kind::WINDOW_UPDATE, 0, stream_id);
    out.put_u32(increment);
}

pub fn put_rst_stream(out: &mut BytesMut, stream_id: u32, code: ErrorCode) {
    put_header(out, 4, kind::RST_STREAM, 0, stream_id);
    out.put_u32(code as u32);
}

pub fn put_goaway(out: &mut BytesMut, last_stream_id: u32, code: ErrorCode) {
    put_header(out, 8, kind::GOAWAY, 0, 0);
    out.put_u32(last_stream_id);
    out.put_u32(code as u32);
}

/// A header block as HEADERS plus as many CONTINUATION frames as `max_frame_len` requires.
pub fn put_header_block(
    out: &mut BytesMut,
    stream_id: u32,
    block: &[u8],
    end_stream: bool,
    max_frame_len: usize,
) {
    let mut chunks = block.chunks(max_frame_len.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let mut rest = chunks.peekable();
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if rest.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    put_header(out, first.len(), kind::HEADERS, flags, stream_id);
    out.put_slice(first);
    while let Some(chunk) = rest.next() {
        let flags = if rest.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        put_header(out, chunk.len(), kind::CONTINUATION, flags, stream_id);
        out.put_slice(chunk);
    }
}

/// The payload of a DATA or HEADERS frame without its padding (RFC 9113 §6.1, §6.2).
pub fn unpad(flags: u8, mut payload: Bytes) -> Result<Bytes, ConnError> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let Some(&pad) = payload.first() else {
        return Err(ConnError::protocol("padded frame without a pad length"));
    };
    let pad = pad as usize;
    if pad >= payload.len() {
        return Err(ConnError::protocol(
            "padding as long as the frame or longer",
        ));
    }
    payload.advance(1);
    payload.truncate(payload.len() - pad);
    Ok(payload)
}

pub fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
