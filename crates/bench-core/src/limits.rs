//! The bounds every client holds an answer to, defined once: the response head, its header
//! count and its body (the `response_*` knobs) and gRPC's largest received message (the
//! `grpc_max_receive_message_bytes` knob). A server that passes one fails its answer at once
//! as `bad_body`, naming the limit, instead of holding the load generator until the request
//! timeout; each worker holds at most one answer that large, so the limits bound its memory.

use crate::failure::{Failure, FailureClass};
use crate::stack::Tuning;

/// Default bound on a response head: status line, header lines and the blank line, together
/// with any interim (1xx) heads before it (HTTP/1.1); the decoded field section (HTTP/3).
pub const DEFAULT_MAX_HEAD_BYTES: usize = 64 * 1024;
/// Default bound on header lines per head. hyper's default; responses that pass through a
/// framework, a CDN or a proxy carry 20–40 headers (security, caching, CORS, several
/// `Set-Cookie`), so the 32 the client used to allow was too close.
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Default bound on a decoded body, so an endless or lying server costs bounded memory.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;
/// Default bound on one received gRPC message: gRPC's implementations refuse a larger one
/// (grpc-go, grpc-java and tonic all default to 4 MiB).
pub const DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES: u64 = 4 * 1024 * 1024;

/// The knobs' names, as the failure messages name the limit that was passed.
pub const HEAD_KNOB: &str = "response_head_max_bytes";
pub const HEADERS_KNOB: &str = "response_headers_max";
pub const BODY_KNOB: &str = "response_body_max_bytes";
pub const GRPC_MESSAGE_KNOB: &str = "grpc_max_receive_message_bytes";

/// gRPC's length prefix: a compressed flag and a 4-byte big-endian length.
const GRPC_PREFIX_BYTES: usize = 5;

/// Bounds on what one response may take; past one the response is a framing error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Bytes of the head including interim heads; also the bound on a trailer section.
    pub max_head_bytes: usize,
    /// Header lines in one head (and in a trailer section).
    pub max_headers: usize,
    /// Decoded body bytes.
    pub max_body_bytes: u64,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

impl ResponseLimits {
    /// The defaults, with what `tuning` sets in their place.
    pub fn from_tuning(tuning: &Tuning) -> Self {
        let defaults = ResponseLimits::default();
        ResponseLimits {
            max_head_bytes: tuning
                .response_head_max_bytes
                .unwrap_or(defaults.max_head_bytes),
            max_headers: tuning.response_headers_max.unwrap_or(defaults.max_headers),
            max_body_bytes: tuning
                .response_body_max_bytes
                .unwrap_or(defaults.max_body_bytes),
        }
    }

    /// The failure of a head whose fields add up to `size` bytes, above `max_head_bytes`.
    pub fn head_failure(&self, size: u64) -> Failure {
        Failure::new(
            FailureClass::BadBody,
            format!(
                "response head of {size} B above {HEAD_KNOB} ({} B)",
                self.max_head_bytes
            ),
        )
        .with_code(HEAD_KNOB)
    }

    /// The failure of a head with `count` fields, above `max_headers`; `None` within it.
    pub fn check_header_count(&self, count: usize) -> Result<(), Failure> {
        if count <= self.max_headers {
            return Ok(());
        }
        Err(Failure::new(
            FailureClass::BadBody,
            format!(
                "response head with {count} header fields, above {HEADERS_KNOB} ({})",
                self.max_headers
            ),
        )
        .with_code(HEADERS_KNOB))
    }
}

/// The gRPC limit from `tuning`, or its default.
pub fn grpc_max_receive_message_bytes(tuning: &Tuning) -> u64 {
    tuning
        .grpc_max_receive_message_bytes
        .unwrap_or(DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES)
}

/// How an answer's body is held to its limit while it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimit {
    /// At most this many body bytes (a REST answer).
    Bytes(u64),
    /// A unary gRPC answer: one length-prefixed message of at most this many bytes, refused
    /// as soon as its prefix announces more, and nothing after it.
    GrpcUnary { max_message_bytes: u64 },
    /// A streaming gRPC answer: any number of length-prefixed messages, each of at most this
    /// many bytes, refused as soon as a prefix announces more.
    GrpcStream { max_message_bytes: u64 },
}

impl Default for BodyLimit {
    fn default() -> Self {
        BodyLimit::Bytes(DEFAULT_MAX_BODY_BYTES)
    }
}

impl BodyLimit {
    /// A meter that holds one answer's body to this limit.
    pub fn meter(self) -> BodyMeter {
        BodyMeter {
            limit: self,
            received: 0,
            prefix: [0; GRPC_PREFIX_BYTES],
            prefix_len: 0,
            message_left: 0,
            messages: 0,
        }
    }
}

/// One answer's body as it arrives, held to a [`BodyLimit`] without keeping any of it: the
/// transport feeds every chunk before it stores the chunk, so a chunk that passes the limit
/// fails the answer before it costs memory. No allocation; `Copy`, so a transport keeps one per
/// stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyMeter {
    limit: BodyLimit,
    received: u64,
    /// A gRPC prefix not yet whole.
    prefix: [u8; GRPC_PREFIX_BYTES],
    prefix_len: u8,
    /// Bytes of the current gRPC message still to come.
    message_left: u64,
    /// gRPC messages whose prefix has arrived.
    messages: u32,
}

impl Default for BodyMeter {
    fn default() -> Self {
        BodyLimit::default().meter()
    }
}

impl BodyMeter {
    /// Body bytes fed so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Takes the next `chunk` of the body; an error once the body passes the limit (the answer
    /// fails as `bad_body`; the caller stops reading it).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Failure> {
        self.received += chunk.len() as u64;
        match self.limit {
            BodyLimit::Bytes(max) if self.received > max => Err(Failure::new(
                FailureClass::BadBody,
                format!("response body passed {BODY_KNOB} ({max} B)"),
            )
            .with_code(BODY_KNOB)),
            BodyLimit::Bytes(_) => Ok(()),
            BodyLimit::GrpcUnary { max_message_bytes } => {
                self.feed_grpc(chunk, max_message_bytes, true)
            }
            BodyLimit::GrpcStream { max_message_bytes } => {
                self.feed_grpc(chunk, max_message_bytes, false)
            }
        }
    }

    fn feed_grpc(&mut self, mut chunk: &[u8], max: u64, unary: bool) -> Result<(), Failure> {
        while !chunk.is_empty() {
            if self.message_left > 0 {
                let n = self.message_left.min(chunk.len() as u64);
                self.message_left -= n;
                chunk = &chunk[n as usize..];
                continue;
            }
            // The start (or more) of a prefix.
            if unary && self.prefix_len == 0 && self.messages >= 1 {
                return Err(Failure::new(
                    FailureClass::BadBody,
                    "a second message in a unary gRPC answer (one is allowed)",
                )
                .with_code("second message"));
            }
            let take = (GRPC_PREFIX_BYTES - usize::from(self.prefix_len)).min(chunk.len());
            let at = usize::from(self.prefix_len);
            self.prefix[at..at + take].copy_from_slice(&chunk[..take]);
            self.prefix_len += take as u8;
            chunk = &chunk[take..];
            if usize::from(self.prefix_len) < GRPC_PREFIX_BYTES {
                return Ok(());
            }
            let p = self.prefix;
            let len = u64::from(u32::from_be_bytes([p[1], p[2], p[3], p[4]]));
            if len > max {
                return Err(Failure::new(
                    FailureClass::BadBody,
                    format!(
                        "gRPC message of {len} B announced, above {GRPC_MESSAGE_KNOB} ({max} B)"
                    ),
                )
                .with_code(GRPC_MESSAGE_KNOB));
            }
            self.messages = self.messages.saturating_add(1);
            self.prefix_len = 0;
            self.message_left = len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(len: u32) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&len.to_be_bytes());
        p
    }

    #[test]
    fn a_byte_limit_fails_the_chunk_that_passes_it() {
        let mut m = BodyLimit::Bytes(10).meter();
        m.feed(&[0; 6]).unwrap();
        m.feed(&[0; 4]).unwrap();
        let f = m.feed(&[0]).unwrap_err();
        assert_eq!(f.class, FailureClass::BadBody);
        assert!(f.detail.contains(BODY_KNOB), "{}", f.detail);
    }

    #[test]
    fn a_grpc_prefix_above_the_limit_fails_at_the_prefix_even_split() {
        let mut whole = prefix(u32::MAX);
        whole.extend_from_slice(&[7; 100]);
        for split in 0..=whole.len() {
            let mut m = BodyLimit::GrpcUnary {
                max_message_bytes: 4 << 20,
            }
            .meter();
            let (a, b) = whole.split_at(split);
            let result = m.feed(a).and_then(|()| m.feed(b));
            let f = result.unwrap_err();
            assert!(f.detail.contains("4294967295 B announced"), "{}", f.detail);
            assert!(f.detail.contains(GRPC_MESSAGE_KNOB));
        }
    }

    #[test]
    fn one_grpc_message_passes_and_a_second_fails_at_its_first_byte() {
        let mut one = prefix(3);
        one.extend_from_slice(b"abc");
        for split in 0..=one.len() {
            let mut m = BodyLimit::GrpcUnary {
                max_message_bytes: 3,
            }
            .meter();
            m.feed(&one[..split]).unwrap();
            m.feed(&one[split..]).unwrap();
            let f = m.feed(&[0]).unwrap_err();
            assert!(f.detail.contains("second message"), "{}", f.detail);
        }
        // A message of exactly the limit passes; one byte more does not.
        let mut m = BodyLimit::GrpcUnary {
            max_message_bytes: 2,
        }
        .meter();
        assert!(m.feed(&prefix(3)).is_err());
    }

    #[test]
    fn a_streaming_grpc_answer_takes_many_messages_each_held_to_the_limit() {
        let mut m = BodyLimit::GrpcStream {
            max_message_bytes: 3,
        }
        .meter();
        for _ in 0..5 {
            m.feed(&prefix(3)).unwrap();
            m.feed(b"abc").unwrap();
        }
        let f = m.feed(&prefix(4)).unwrap_err();
        assert!(f.detail.contains("4 B announced"), "{}", f.detail);
    }

    #[test]
    fn limits_come_from_the_tuning_or_the_defaults() {
        let tuning = Tuning {
            response_body_max_bytes: Some(2048),
            ..Default::default()
        };
        let limits = ResponseLimits::from_tuning(&tuning);
        assert_eq!(limits.max_body_bytes, 2048);
        assert_eq!(limits.max_head_bytes, DEFAULT_MAX_HEAD_BYTES);
        assert!(limits.check_header_count(DEFAULT_MAX_HEADERS).is_ok());
        let f = limits
            .check_header_count(DEFAULT_MAX_HEADERS + 1)
            .unwrap_err();
        assert!(f.detail.contains(HEADERS_KNOB));
        assert_eq!(
            grpc_max_receive_message_bytes(&tuning),
            DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES
        );
    }
}
