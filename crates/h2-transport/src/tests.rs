//! The protocol core driven by scripted frame sequences, as a server would send them: no
//! sockets, no runtime. Each test names the RFC 9113 behaviour it checks.

use std::time::{Duration, Instant};

use bench_core::FailureClass;
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::ErrorCode;
use crate::frame::{flag, kind, setting, Header, HEADER_LEN, PREFACE};
use crate::hpack;
use crate::proto::{
    Answer, Config, Connection, Opened, RequestHead, MAX_FRAME_LEN, MAX_HEADER_LIST_SIZE,
    SETTINGS_TIMEOUT,
};

const GET: RequestHead<'static> = RequestHead {
    method: "GET",
    path: "/items/1",
    fields: &[],
    keep: &[],
    answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
};

const CALL: RequestHead<'static> = RequestHead {
    method: "POST",
    path: "/bench.v1.ItemService/GetItem",
    fields: &[("content-type", "application/grpc"), ("te", "trailers")],
    keep: &["content-type", "grpc-status"],
    answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
};

/// A frame as the server sends it.
fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    crate::frame::put_header(&mut out, payload.len(), kind, flags, stream_id);
    out.put_slice(payload);
    out.to_vec()
}

fn settings(entries: &[(u16, u32)]) -> Vec<u8> {
    let mut out = BytesMut::new();
    crate::frame::put_settings(&mut out, entries);
    out.to_vec()
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// A connection after the exchange of SETTINGS, with the tx buffer emptied.
struct Test {
    conn: Connection,
    /// The server's encoder (its responses) and decoder (our requests).
    enc: hpack::Encoder,
    dec: hpack::Decoder,
    now: Instant,
    started: Instant,
}

impl Test {
    fn new() -> Test {
        Self::with_settings(&[])
    }

    fn with_settings(server_settings: &[(u16, u32)]) -> Test {
        Self::build(server_settings, 1 << 20, 4 << 20)
    }

    fn with_config(stream_window: u32, connection_window: u32) -> Test {
        Self::build(&[], stream_window, connection_window)
    }

    fn build(server_settings: &[(u16, u32)], stream_window: u32, connection_window: u32) -> Test {
        let now = Instant::now();
        let conn = Connection::new(
            Config {
                authority: "localhost:8443".into(),
                https: true,
                stream_window,
                connection_window,
            },
            now,
        );
        let mut enc = hpack::Encoder::new(4096);
        enc.set_peer_table_size(4096);
        let mut t = Test {
            conn,
            enc,
            dec: hpack::Decoder::new(4096),
            now,
            started: now,
        };
        let sent = t.sent_raw();
        assert!(sent.starts_with(PREFACE));
        t.feed(&settings(server_settings));
        t.feed(&frame(kind::SETTINGS, flag::ACK, 0, &[]));
        let acks = t.sent();
        assert_eq!(acks.len(), 1, "one SETTINGS ACK");
        assert_eq!(
            (acks[0].0.kind, acks[0].0.flags),
            (kind::SETTINGS, flag::ACK)
        );
        t
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.conn.recv_buf().extend_from_slice(bytes);
        self.conn.received(self.now);
    }

    fn sent_raw(&mut self) -> Vec<u8> {
        self.conn.take_transmit().to_vec()
    }

    /// The frames the client queued since the last call.
    fn sent(&mut self) -> Vec<(Header, Vec<u8>)> {
        let raw = self.sent_raw();
        let mut buf = &raw[..];
        if buf.starts_with(PREFACE) {
            buf = &buf[PREFACE.len()..];
        }
        let mut frames = Vec::new();
        while !buf.is_empty() {
            let h = Header::parse(buf);
            frames.push((h, buf[HEADER_LEN..HEADER_LEN + h.len].to_vec()));
            buf = &buf[HEADER_LEN + h.len..];
        }
        frames
    }

    fn open(&mut self, head: &RequestHead<'_>, body: Option<&[u8]>) -> u32 {
        let mut body = body.map(Bytes::copy_from_slice);
        match self
            .conn
            .open_stream(head, &mut body)
            .expect("stream opens")
        {
            Opened::Stream(id) => id,
            Opened::Wait => panic!("no stream available"),
        }
    }

    /// A response header block from the server's encoder.
    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        self.enc.begin_block(&mut block);
        for (n, v) in fields {
            self.enc.any_field(
                &mut block,
                n.as_bytes(),
                v.as_bytes(),
                hpack::Indexing::Incremental,
            );
        }
        block
    }

    fn headers(&mut self, id: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let block = self.block(fields);
        let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
        frame(kind::HEADERS, flags, id, &block)
    }

    fn answer(&mut self, id: u32) -> Option<Result<Answer, bench_core::Failure>> {
        self.conn.poll_answer(id, self.started)
    }

    fn ok(&mut self, id: u32) -> Answer {
        self.answer(id)
            .expect("answer complete")
            .unwrap_or_else(|f| panic!("stream {id} failed: {f}"))
    }

    fn failed(&mut self, id: u32) -> bench_core::Failure {
        match self.answer(id).expect("answer complete") {
            Ok(a) => panic!("stream {id} answered {}", a.status),
            Err(f) => f,
        }
    }

    fn completed(&mut self) -> Vec<u32> {
        let mut ids = Vec::new();
        self.conn.drain_completed(|id| ids.push(id));
        ids
    }

    /// The code of the GOAWAY the client queued (and that there is one).
    fn goaway_code(&mut self) -> u32 {
        let frames = self.sent();
        let (_, payload) = frames
            .iter()
            .find(|(h, _)| h.kind == kind::GOAWAY)
            .unwrap_or_else(|| panic!("no GOAWAY in {frames:?}"));
        u32::from_be_bytes(payload[4..8].try_into().unwrap())
    }

    fn rst_codes(&mut self) -> Vec<(u32, u32)> {
        self.sent()
            .iter()
            .filter(|(h, _)| h.kind == kind::RST_STREAM)
            .map(|(h, p)| (h.stream_id, u32::from_be_bytes(p[..4].try_into().unwrap())))
            .collect()
    }

    /// Decodes a HEADERS (+ CONTINUATION) request block as the server would.
    fn decode_request(&mut self, frames: &[(Header, Vec<u8>)]) -> Vec<(String, String)> {
        let mut block = Vec::new();
        for (h, p) in frames {
            if h.kind == kind::HEADERS || h.kind == kind::CONTINUATION {
                block.extend_from_slice(p);
            }
        }
        let mut fields = Vec::new();
        self.dec
            .decode(&block, |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .expect("our request block decodes");
        fields
    }
}

fn code(c: ErrorCode) -> u32 {
    c as u32
}

#[test]
fn settings_announce_push_off_our_window_and_header_list_limit() {
    let mut conn = Connection::new(
        Config {
            authority: "a".into(),
            https: false,
            stream_window: 1 << 20,
            connection_window: 4 << 20,
        },
        Instant::now(),
    );
    let raw = conn.take_transmit();
    let settings = &raw[PREFACE.len()..];
    let h = Header::parse(settings);
    assert_eq!((h.kind, h.flags, h.stream_id), (kind::SETTINGS, 0, 0));
    let entries: Vec<(u16, u32)> = settings[HEADER_LEN..HEADER_LEN + h.len]
        .chunks(6)
        .map(|e| {
            (
                u16::from_be_bytes([e[0], e[1]]),
                u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            (setting::ENABLE_PUSH, 0),
            (setting::INITIAL_WINDOW_SIZE, 1 << 20),
            (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_SIZE as u32),
        ]
    );
    let wu = Header::parse(&settings[HEADER_LEN + h.len..]);
    assert_eq!((wu.kind, wu.stream_id), (kind::WINDOW_UPDATE, 0));
}

#[test]
fn a_get_is_answered_and_its_timings_come_from_the_clock_given() {
    let mut t = Test::new();
    let id = t.open(&GET, None);
    let sent = t.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.flags, flag::END_HEADERS | flag::END_STREAM);
    let fields = t.decode_request(&sent);
    assert_eq!(
        fields,
        [
            (":method".into(), "GET".into()),
            (":scheme".into(), "https".into()),
            (":path".into(), "/items/1".into()),
            (":authority".into(), "localhost:8443".into()),
        ]
    );
    t.now += Duration::from_millis(3);
    let head = t.headers(id, &[(":status", "200"), ("content-length", "5")], false);
    t.feed(&head);
    assert!(t.answer(id).is_none(), "body still to come");
    t.now += Duration::from_millis(2);
    t.feed(&frame(kind::DATA, flag::END_STREAM, id, b"hello"));
    assert_eq!(t.completed(), [id]);
    let a = t.ok(id);
    assert_eq!((a.status, &a.body[..]), (200, &b"hello"[..]));
    assert_eq!(a.ttfb, Duration::from_millis(3));
    assert_eq!(a.total, Duration::from_millis(5));
}

#[test]
fn an_answer_without_content_may_carry_a_content_length() {
    let mut t = Test::new();
    let head_request = RequestHead {
        method: "HEAD",
        ..GET
    };
    let id = t.open(&head_request, None);
    let head = t.headers(id, &[(":status", "200"), ("content-length", "256")], true);
    t.feed(&head);
    assert_eq!(t.ok(id).body.len(), 0);
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "304"), ("content-length", "256")], true);
    t.feed(&head);
    assert_eq!(t.ok(id).status, 304);
    // Any other answer must bring the content its length announces.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200"), ("content-length", "256")], true);
    t.feed(&head);
    assert_eq!(t.failed(id).class, FailureClass::BadBody);
}

#[test]
fn padding_on_headers_and_data_is_removed_and_counted_against_the_windows() {
    let mut t = Test::new();
    let id = t.open(&GET, None);
    let block = t.block(&[(":status", "200")]);
    // PADDED + PRIORITY: pad length, 5 priority bytes, block, padding.
    let mut payload = vec![3];
    payload.extend_from_slice(&[0, 0, 0, 0, 16]);
    payload.extend_from_slice(&block);
    payload.extend_from_slice(&[0, 0, 0]);
    t.feed(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::PADDED | flag::PRIORITY,
        id,
        &payload,
    ));
    let mut data = vec![10];
    data.extend_from_slice(b"body");
    data.extend_from_slice(&[0; 10]);
    t.feed(&frame(
        kind::DATA,
        flag::PADDED | flag::END_STREAM,
        id,
        &data,
    ));
    let a = t.ok(id);
    assert_eq!(&a.body[..], b"body");

    // Padding as long as the frame is a connection error PROTOCOL_ERROR.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200")], false);
    t.feed(&head);
    t.sent();
    t.feed(&frame(kind::DATA, flag::PADDED, id, &[4, 1, 2, 3]));
    assert_eq!(t.goaway_code(), code(ErrorCode::ProtocolError));
    assert_eq!(t.failed(id).class, FailureClass::ConnReset);
}

#[test]
fn continuation_frames_complete_a_header_block() {
    let mut t = Test::new();
    let id = t.open(&GET, None);
    let block = t.block(&[
        (":status", "200"),
        ("x-long", &"v".repeat(300)),
        ("content-length", "0"),
    ]);
    let (a, rest) = block.split_at(10);
    let (b, c) = rest.split_at(100);
    t.feed(&frame(kind::HEADERS, flag::END_STREAM, id, a));
    t.feed(&frame(kind::CONTINUATION, 0, id, b));
    assert!(t.answer(id).is_none());
    t.feed(&frame(kind::CONTINUATION, flag::END_HEADERS, id, c));
    assert_eq!(t.ok(id).status, 200);
}

#[test]
fn continuation_beyond_the_cap_is_a_connection_error() {
    // Bytes: a block larger than our header-list limit never accumulates.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.feed(&frame(kind::HEADERS, 0, id, &[0x88]));
    let chunk = vec![0u8; MAX_FRAME_LEN];
    for _ in 0..(MAX_HEADER_LIST_SIZE / MAX_FRAME_LEN - 1) {
        t.feed(&frame(kind::CONTINUATION, 0, id, &chunk));
        assert!(!t.conn.is_broken());
    }
    t.feed(&frame(kind::CONTINUATION, 0, id, &chunk));
    assert!(t.conn.is_broken());
    assert_eq!(t.goaway_code(), code(ErrorCode::EnhanceYourCalm));
    assert_eq!(t.failed(id).class, FailureClass::ConnReset);

    // Frames: a flood of empty CONTINUATION frames.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.feed(&frame(kind::HEADERS, 0, id, &[0x88]));
    let flood: Vec<u8> = (0..1000)
        .flat_map(|_| frame(kind::CONTINUATION, 0, id, &[]))
        .collect();
    t.feed(&flood);
    assert_eq!(t.goaway_code(), code(ErrorCode::EnhanceYourCalm));

    // Another frame inside a header block, even of an unknown type, is PROTOCOL_ERROR.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.feed(&frame(kind::HEADERS, 0, id, &[0x88]));
    t.feed(&frame(0xfa, 0, 0, b"x"));
    assert_eq!(t.goaway_code(), code(ErrorCode::ProtocolError));
    // And CONTINUATION without a header block.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.feed(&frame(kind::CONTINUATION, flag::END_HEADERS, id, &[0x88]));
    assert_eq!(t.goaway_code(), code(ErrorCode::ProtocolError));
}

#[test]
fn interleaved_streams_complete_independently() {
    let mut t = Test::new();
    let ids: Vec<u32> = (0..3).map(|_| t.open(&GET, None)).collect();
    assert_eq!(ids, [1, 3, 5]);
    for &id in ids.iter().rev() {
        let head = t.headers(id, &[(":status", "200")], false);
        t.feed(&head);
    }
    t.feed(&frame(kind::DATA, 0, 3, b"three-a "));
    t.feed(&frame(kind::DATA, 0, 1, b"one"));
    t.feed(&frame(kind::DATA, flag::END_STREAM, 3, b"three-b"));
    assert_eq!(t.completed(), [3]);
    assert!(t.answer(1).is_none() && t.answer(5).is_none());
    assert_eq!(&t.ok(3).body[..], b"three-a three-b");
    t.feed(&frame(kind::DATA, flag::END_STREAM, 5, b"five"));
    t.feed(&frame(kind::DATA, flag::END_STREAM, 1, b""));
    assert_eq!(&t.ok(1).body[..], b"one");
    assert_eq!(&t.ok(5).body[..], b"five");
}

#[test]
fn request_bodies_wait_for_window_updates() {
    let mut t = Test::new();
    let body = vec![7u8; 100_000];
    let id = t.open(&CALL, Some(&body));
    let data_len = |frames: &[(Header, Vec<u8>)]| -> usize {
        frames
            .iter()
            .filter(|(h, _)| h.kind == kind::DATA)
            .map(|(h, _)| h.len)
            .sum()
    };
    // The default windows (65,535) hold the body back, in frames of at most 16 KiB.
    let sent = t.sent();
    assert_eq!(data_len(&sent), 65_535);
    assert!(sent.iter().all(|(h, _)| h.len <= 16_384));
    assert!(sent.iter().all(|(h, _)| h.flags & flag::END_STREAM == 0));
    // A stream window alone does not release it; the connection's too does.
    t.feed(&frame(kind::WINDOW_UPDATE, 0, id, &u32s(&[50_000])));
    assert_eq!(data_len(&t.sent()), 0);
    t.feed(&frame(kind::WINDOW_UPDATE, 0, 0, &u32s(&[50_000])));
    let sent = t.sent();
    assert_eq!(data_len(&sent), 100_000 - 65_535);
    assert_eq!(sent.last().unwrap().0.flags, flag::END_STREAM);
    // Overflowing a window: stream → RST_STREAM FLOW_CONTROL_ERROR, connection → GOAWAY.
    t.feed(&frame(kind::WINDOW_UPDATE, 0, id, &u32s(&[(1 << 31) - 1])));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::FlowControlError))]);
    assert!(!t.conn.is_broken());
    let id = t.open(&GET, None);
    t.feed(&frame(kind::WINDOW_UPDATE, 0, id, &u32s(&[0])));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
    t.feed(&frame(kind::WINDOW_UPDATE, 0, 0, &u32s(&[(1 << 31) - 1])));
    assert_eq!(t.goaway_code(), code(ErrorCode::FlowControlError));
}

#[test]
fn server_overrunning_our_stream_window_is_a_stream_error() {
    // We grant WINDOW_UPDATEs once half a window is consumed, so only a frame larger than what
    // is left can overrun: a small window shows it.
    let mut t = Test::with_config(1000, 1 << 20);
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200")], false);
    t.feed(&head);
    t.feed(&frame(kind::DATA, 0, id, &[0; 600]));
    let sent = t.sent();
    assert!(
        sent.iter()
            .any(|(h, _)| h.kind == kind::WINDOW_UPDATE && h.stream_id == id),
        "half the stream window received: WINDOW_UPDATE"
    );
    t.feed(&frame(kind::DATA, 0, id, &[0; 1000]));
    assert!(t.answer(id).is_none(), "exactly the window is allowed");
    t.sent();
    t.feed(&frame(kind::DATA, 0, id, &[0; 1001]));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::FlowControlError))]);
    assert!(!t.conn.is_broken());
    assert_eq!(t.failed(id).class, FailureClass::ConnReset);
}

#[test]
fn settings_change_windows_frame_size_and_header_table_mid_connection() {
    let mut t = Test::new();
    // Two requests index authority and the gRPC fields; the second uses only indices.
    t.open(&CALL, Some(b"x"));
    let first = t.sent();
    assert_eq!(t.decode_request(&first)[3].1, "localhost:8443");
    t.open(&CALL, Some(b"x"));
    let second = t.sent();
    let block = &second[0].1;
    assert!(block.len() < first[0].1.len());
    assert_eq!(t.decode_request(&second).len(), 6);

    // The table shrinks to 0: the next block starts with a size update to 0 and indexes
    // nothing; the server's decoder (limit 0 now) agrees.
    t.feed(&settings(&[(setting::HEADER_TABLE_SIZE, 0)]));
    assert_eq!(t.sent()[0].0.flags, flag::ACK);
    t.open(&CALL, Some(b"x"));
    let third = t.sent();
    assert_eq!(third[0].1[0], 0x20, "size update to 0 leads the block");
    assert_eq!(
        t.decode_request(&third)[5],
        ("te".into(), "trailers".into())
    );
    // Back to 4,096: one size update up, and indexing again.
    t.feed(&settings(&[(setting::HEADER_TABLE_SIZE, 4096)]));
    t.sent();
    t.open(&CALL, Some(b"x"));
    let fourth = t.sent();
    assert_eq!(&fourth[0].1[..3], &[0x3f, 0xe1, 0x1f]);
    assert_eq!(t.decode_request(&fourth).len(), 6);
    t.open(&CALL, Some(b"x"));
    let fifth = t.sent();
    assert_eq!(t.decode_request(&fifth).len(), 6);

    // A lower initial window applies to open streams (it may go negative), a larger frame
    // size lets bigger DATA frames out.
    let mut t = Test::new();
    let body = vec![1u8; 100_000];
    let id = t.open(&CALL, Some(&body));
    t.sent();
    t.feed(&settings(&[(setting::INITIAL_WINDOW_SIZE, 1000)]));
    t.feed(&frame(kind::WINDOW_UPDATE, 0, 0, &u32s(&[100_000])));
    assert_eq!(
        t.sent().len(),
        1,
        "only the ACK: the stream window is negative"
    );
    t.feed(&settings(&[
        (setting::INITIAL_WINDOW_SIZE, 200_000),
        (setting::MAX_FRAME_SIZE, 65_536),
    ]));
    let data: Vec<(usize, u8)> = t
        .sent()
        .iter()
        .filter(|(h, _)| h.kind == kind::DATA && h.stream_id == id)
        .map(|(h, _)| (h.len, h.flags))
        .collect();
    assert_eq!(data, [(100_000 - 65_535, flag::END_STREAM)]);
}

#[test]
fn ping_is_answered_with_its_payload_and_checked() {
    let mut t = Test::new();
    t.feed(&frame(kind::PING, 0, 0, b"12345678"));
    let sent = t.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].0.kind, sent[0].0.flags), (kind::PING, flag::ACK));
    assert_eq!(sent[0].1, b"12345678");
    // An ACK is not answered.
    t.feed(&frame(kind::PING, flag::ACK, 0, b"12345678"));
    assert!(t.sent().is_empty());
    t.feed(&frame(kind::PING, 0, 0, b"1234567"));
    assert_eq!(t.goaway_code(), code(ErrorCode::FrameSizeError));
    let mut t = Test::new();
    t.feed(&frame(kind::PING, 0, 1, b"12345678"));
    assert_eq!(t.goaway_code(), code(ErrorCode::ProtocolError));
}

#[test]
fn goaway_lets_streams_up_to_the_last_id_finish_and_the_rest_move() {
    let mut t = Test::new();
    let ids: Vec<u32> = (0..3).map(|_| t.open(&GET, None)).collect();
    t.completed();
    t.feed(&frame(kind::GOAWAY, 0, 0, &u32s(&[3, 0])));
    assert_eq!(t.completed(), [5]);
    let moved = t.failed(5);
    assert!(moved.is_unprocessed(), "{moved}");
    assert_eq!(moved.class, FailureClass::ConnReset);
    // New requests move too: not a failure of this connection's streams.
    let refused = t.conn.open_stream(&GET, &mut None).unwrap_err();
    assert!(refused.is_unprocessed());
    // Streams 1 and 3 still complete.
    for &id in &ids[..2] {
        let head = t.headers(id, &[(":status", "200")], true);
        t.feed(&head);
        assert_eq!(t.ok(id).status, 200);
    }
    assert!(!t.conn.is_broken());
    // A later GOAWAY cannot raise the last id again.
    let mut t = Test::new();
    for _ in 0..3 {
        t.open(&GET, None);
    }
    t.feed(&frame(kind::GOAWAY, 0, 0, &u32s(&[1, 2])));
    t.feed(&frame(kind::GOAWAY, 0, 0, &u32s(&[5, 0])));
    assert!(t.failed(3).is_unprocessed() && t.failed(5).is_unprocessed());
    assert!(t.answer(1).is_none());
    // Malformed GOAWAY frames.
    t.feed(&frame(kind::GOAWAY, 0, 0, &[0; 7]));
    assert_eq!(t.goaway_code(), code(ErrorCode::FrameSizeError));
}

#[test]
fn rst_stream_from_the_server_fails_only_that_stream_and_is_not_answered() {
    let mut t = Test::new();
    let a = t.open(&GET, None);
    let b = t.open(&GET, None);
    t.sent();
    t.feed(&frame(
        kind::RST_STREAM,
        0,
        a,
        &u32s(&[code(ErrorCode::InternalError)]),
    ));
    let f = t.failed(a);
    assert_eq!(f.class, FailureClass::ConnReset);
    assert!(
        f.detail.contains("INTERNAL_ERROR") && !f.is_unprocessed(),
        "{f}"
    );
    // REFUSED_STREAM: not processed, may be retried.
    t.feed(&frame(
        kind::RST_STREAM,
        0,
        b,
        &u32s(&[code(ErrorCode::RefusedStream)]),
    ));
    assert!(t.failed(b).is_unprocessed());
    assert!(t.rst_codes().is_empty(), "no RST_STREAM in answer to one");
    assert!(!t.conn.is_broken());
    // RST_STREAM on an idle stream, or of the wrong size.
    t.feed(&frame(kind::RST_STREAM, 0, 99, &u32s(&[0])));
    assert_eq!(t.goaway_code(), code(ErrorCode::ProtocolError));
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.feed(&frame(kind::RST_STREAM, 0, id, &[0, 0, 0]));
    assert_eq!(t.goaway_code(), code(ErrorCode::FrameSizeError));
}

#[test]
fn trailers_end_the_stream_and_are_kept() {
    let mut t = Test::new();
    let id = t.open(&CALL, Some(b"\0\0\0\0\0"));
    let head = t.headers(
        id,
        &[(":status", "200"), ("content-type", "application/grpc")],
        false,
    );
    t.feed(&head);
    t.feed(&frame(kind::DATA, 0, id, b"\0\0\0\0\x01x"));
    let trailers = t.headers(id, &[("grpc-status", "0")], true);
    t.feed(&trailers);
    let a = t.ok(id);
    assert_eq!(a.head_field("content-type"), Some(&b"application/grpc"[..]));
    assert_eq!(a.trailer_field("grpc-status"), Some(&b"0"[..]));
    assert_eq!(a.head_field("grpc-status"), None);

    // Trailers that do not end the stream are malformed: RST_STREAM(PROTOCOL_ERROR).
    let id = t.open(&CALL, Some(b"x"));
    let head = t.headers(id, &[(":status", "200")], false);
    t.feed(&head);
    t.sent();
    let trailers = t.headers(id, &[("grpc-status", "0")], false);
    t.feed(&trailers);
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
    assert_eq!(t.failed(id).class, FailureClass::BadBody);
    // Pseudo-headers in trailers too.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200")], false);
    t.feed(&head);
    t.sent();
    let trailers = t.headers(id, &[(":status", "200")], true);
    t.feed(&trailers);
    assert_eq!(t.failed(id).class, FailureClass::BadBody);
}

#[test]
fn informational_responses_precede_the_final_one() {
    let mut t = Test::new();
    let id = t.open(&GET, None);
    let info = t.headers(id, &[(":status", "103"), ("link", "</a>")], false);
    t.feed(&info);
    assert!(t.answer(id).is_none());
    let head = t.headers(id, &[(":status", "204")], true);
    t.feed(&head);
    assert_eq!(t.ok(id).status, 204);
}

#[test]
fn an_informational_response_that_ends_the_stream_fails_at_once() {
    // It used to wait for a final head that cannot come, until the request timeout.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.sent();
    let info = t.headers(id, &[(":status", "100")], true);
    t.feed(&info);
    assert_eq!(t.completed(), [id]);
    let f = t.failed(id);
    assert_eq!(f.class, FailureClass::BadBody);
    // Both sides ended the stream: nothing to reset.
    assert!(t.rst_codes().is_empty());
    // With our body still unsent the stream is open on our side: RST_STREAM.
    let body = vec![0u8; 70_000];
    let id = t.open(&CALL, Some(&body));
    t.sent();
    let info = t.headers(id, &[(":status", "100")], true);
    t.feed(&info);
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
    assert!(t.answer(id).unwrap().is_err());
}

#[test]
fn unknown_frame_types_and_settings_are_ignored() {
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.sent();
    t.feed(&frame(0x20, 0xff, 0, b"whatever"));
    t.feed(&frame(0xbb, 0, id, b""));
    t.feed(&settings(&[(0x99, 7), (0xffff, 1)]));
    assert_eq!(t.sent().len(), 1, "just the ACK");
    t.feed(&frame(kind::PRIORITY, 0, id, &[0, 0, 0, 0, 1]));
    // PRIORITY may name idle streams too.
    t.feed(&frame(kind::PRIORITY, 0, 99, &[0, 0, 0, 0, 1]));
    t.feed(&frame(kind::PRIORITY, 0, 98, &[0, 0, 0, 0, 1]));
    let head = t.headers(id, &[(":status", "200")], true);
    t.feed(&head);
    assert_eq!(t.ok(id).status, 200);
    assert!(!t.conn.is_broken());
}

#[test]
fn frame_size_violations_are_frame_size_errors() {
    let cases: [(&str, Vec<u8>); 7] = [
        (
            "frame above our SETTINGS_MAX_FRAME_SIZE",
            frame(kind::DATA, 0, 1, &vec![0; MAX_FRAME_LEN + 1]),
        ),
        (
            "SETTINGS not a multiple of 6",
            frame(kind::SETTINGS, 0, 0, &[0; 7]),
        ),
        (
            "SETTINGS ACK with payload",
            frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
        ),
        (
            "WINDOW_UPDATE of 5",
            frame(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0, 1]),
        ),
        ("PING of 9", frame(kind::PING, 0, 0, &[0; 9])),
        ("GOAWAY of 4", frame(kind::GOAWAY, 0, 0, &[0; 4])),
        (
            "HEADERS without its priority",
            frame(
                kind::HEADERS,
                flag::PRIORITY | flag::END_HEADERS,
                1,
                &[0; 4],
            ),
        ),
    ];
    for (what, bytes) in cases {
        let mut t = Test::new();
        let id = t.open(&GET, None);
        t.sent();
        t.feed(&bytes);
        assert!(t.conn.is_broken(), "{what}");
        assert_eq!(t.goaway_code(), code(ErrorCode::FrameSizeError), "{what}");
        assert_eq!(t.failed(id).class, FailureClass::ConnReset, "{what}");
        // Nothing more is read, and a second error sends no second GOAWAY.
        t.feed(&frame(kind::PUSH_PROMISE, 0, 0, &[]));
        assert!(t.sent().is_empty(), "{what}");
    }
    // PRIORITY of the wrong size is a stream error.
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.sent();
    t.feed(&frame(kind::PRIORITY, 0, id, &[0; 4]));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::FrameSizeError))]);
    assert!(!t.conn.is_broken());
}

#[test]
fn connection_errors_carry_the_code_of_their_cause() {
    let cases: [(&str, Vec<u8>, ErrorCode); 7] = [
        (
            "PUSH_PROMISE",
            frame(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS on stream 0",
            frame(kind::HEADERS, flag::END_HEADERS, 0, &[0x88]),
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS on a server stream",
            frame(kind::HEADERS, flag::END_HEADERS, 2, &[0x88]),
            ErrorCode::ProtocolError,
        ),
        (
            "DATA on an idle stream",
            frame(kind::DATA, 0, 7, b"x"),
            ErrorCode::ProtocolError,
        ),
        (
            "undecodable HPACK",
            frame(kind::HEADERS, flag::END_HEADERS, 1, &[0x80]),
            ErrorCode::CompressionError,
        ),
        (
            "ENABLE_PUSH from a server",
            settings(&[(setting::ENABLE_PUSH, 1)]),
            ErrorCode::ProtocolError,
        ),
        (
            "window setting above 2^31-1",
            settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
            ErrorCode::FlowControlError,
        ),
    ];
    for (what, bytes, expected) in cases {
        let mut t = Test::new();
        let id = t.open(&GET, None);
        t.sent();
        t.feed(&bytes);
        assert_eq!(t.goaway_code(), code(expected), "{what}");
        let f = t.failed(id);
        assert!(f.detail.contains(expected.name()), "{what}: {f}");
        // The connection takes no more requests, with the same failure.
        assert!(t.conn.open_stream(&GET, &mut None).is_err());
    }
}

#[test]
fn our_settings_must_be_acknowledged_in_time() {
    let now = Instant::now();
    let config = Config {
        authority: "a".into(),
        https: true,
        stream_window: 65_535,
        connection_window: 65_535,
    };
    let mut conn = Connection::new(config.clone(), now);
    assert_eq!(conn.timeout(), Some(now + SETTINGS_TIMEOUT));
    assert!(!conn.settings_acked());
    conn.recv_buf()
        .extend_from_slice(&frame(kind::SETTINGS, flag::ACK, 0, &[]));
    conn.received(now);
    assert!(conn.settings_acked());
    assert_eq!(conn.timeout(), None);
    // A second ACK acknowledges nothing.
    conn.recv_buf()
        .extend_from_slice(&frame(kind::SETTINGS, flag::ACK, 0, &[]));
    conn.received(now);
    assert!(conn.is_broken());

    let mut conn = Connection::new(config, now);
    conn.take_transmit();
    conn.handle_timeout(now + SETTINGS_TIMEOUT - Duration::from_millis(1));
    assert!(!conn.is_broken());
    conn.handle_timeout(now + SETTINGS_TIMEOUT);
    assert!(conn.is_broken());
    let tx = conn.take_transmit();
    let h = Header::parse(&tx);
    assert_eq!(h.kind, kind::GOAWAY);
    assert_eq!(
        &tx[HEADER_LEN + 4..HEADER_LEN + 8],
        &u32s(&[code(ErrorCode::SettingsTimeout)])[..]
    );
}

#[test]
fn a_header_list_above_our_limit_resets_the_stream_and_keeps_the_connection() {
    // An HPACK bomb: one 4 KB entry, then a block that names it 20 times (80 KB decoded).
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.sent();
    let big = "b".repeat(4000);
    let head = t.headers(id, &[(":status", "200"), ("x-big", &big)], false);
    t.feed(&head);
    let fields: Vec<(&str, &str)> = (0..20).map(|_| ("x-big", big.as_str())).collect();
    let trailers = t.block(&fields);
    assert!(trailers.len() < 100, "indexed: {} bytes", trailers.len());
    t.feed(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &trailers,
    ));
    let f = t.failed(id);
    assert_eq!(f.class, FailureClass::BadBody);
    assert!(f.detail.contains("MAX_HEADER_LIST_SIZE"), "{f}");
    assert!(!t.conn.is_broken());
    // The next stream decodes against the same table.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200"), ("x-big", &big)], true);
    t.feed(&head);
    assert_eq!(t.ok(id).status, 200);
}

#[test]
fn stream_errors_reset_the_stream_with_their_code() {
    let mut t = Test::new();
    // DATA before the response head.
    let id = t.open(&GET, None);
    t.sent();
    t.feed(&frame(kind::DATA, 0, id, b"early"));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
    assert!(t.answer(id).unwrap().is_err());
    // More DATA than content-length.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200"), ("content-length", "3")], false);
    t.feed(&head);
    t.sent();
    t.feed(&frame(kind::DATA, 0, id, b"four"));
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
    assert_eq!(t.failed(id).class, FailureClass::BadBody);
    // Less DATA than content-length, at END_STREAM: the stream is over, a bad body.
    let id = t.open(&GET, None);
    let head = t.headers(id, &[(":status", "200"), ("content-length", "3")], false);
    t.feed(&head);
    t.feed(&frame(kind::DATA, flag::END_STREAM, id, b"tw"));
    assert_eq!(t.failed(id).class, FailureClass::BadBody);
    // Upper-case names, a missing :status.
    for fields in [&[(":status", "200"), ("Bad", "x")][..], &[("x", "y")][..]] {
        let id = t.open(&GET, None);
        t.sent();
        let head = t.headers(id, fields, false);
        t.feed(&head);
        assert_eq!(t.rst_codes(), [(id, code(ErrorCode::ProtocolError))]);
        assert_eq!(t.failed(id).class, FailureClass::BadBody);
    }
    // Late frames of the reset streams do not disturb the connection.
    t.feed(&frame(kind::DATA, flag::END_STREAM, 1, b"late"));
    assert!(!t.conn.is_broken());
}

#[test]
fn an_abandoned_stream_is_cancelled_and_frees_its_slot() {
    let mut t = Test::with_settings(&[(setting::MAX_CONCURRENT_STREAMS, 1)]);
    let id = t.open(&GET, None);
    assert_eq!(t.conn.open_stream(&GET, &mut None).unwrap(), Opened::Wait);
    t.sent();
    t.conn.take_opener_wakes();
    t.conn.cancel(id);
    assert_eq!(t.rst_codes(), [(id, code(ErrorCode::Cancel))]);
    assert_eq!(t.conn.take_opener_wakes(), 1);
    let next = t.open(&GET, None);
    assert_eq!(next, 3);
    // A late answer to the cancelled stream is decoded (the table stays in step) and dropped.
    let late = t.headers(id, &[(":status", "200"), ("x-new", "entry")], true);
    t.feed(&late);
    let head = t.headers(next, &[(":status", "200"), ("x-new", "entry")], true);
    t.feed(&head);
    assert_eq!(t.ok(next).status, 200);
}

#[test]
fn long_request_heads_go_out_in_continuation_frames_and_keep_the_tables_in_step() {
    let mut t = Test::new();
    let path: &'static str = Box::leak(format!("/{}", "p".repeat(40_000)).into_boxed_str());
    let head = RequestHead {
        method: "POST",
        path,
        fields: &[("content-type", "application/grpc")],
        keep: &[],
        answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
    };
    t.open(&head, Some(b"x"));
    let sent = t.sent();
    let kinds: Vec<u8> = sent.iter().map(|(h, _)| h.kind).collect();
    assert_eq!(
        kinds[..3],
        [kind::HEADERS, kind::CONTINUATION, kind::CONTINUATION]
    );
    assert_eq!(sent[2].0.flags, flag::END_HEADERS);
    assert_eq!(sent[0].0.flags & flag::END_STREAM, 0);
    assert_eq!(t.decode_request(&sent)[2].1, path);
    // The entries that long block added are where the next block says they are.
    t.open(&CALL, Some(b"x"));
    let sent = t.sent();
    assert_eq!(
        t.decode_request(&sent)[4],
        ("content-type".into(), "application/grpc".into())
    );
}

#[test]
fn a_request_above_the_servers_header_list_limit_fails_before_touching_the_table() {
    let mut t = Test::with_settings(&[(setting::MAX_HEADER_LIST_SIZE, 400)]);
    let path: &'static str = Box::leak(format!("/{}", "p".repeat(400)).into_boxed_str());
    let head = RequestHead {
        method: "GET",
        path,
        fields: &[("content-type", "application/grpc")],
        keep: &[],
        answer_limit: bench_core::limits::BodyLimit::Bytes(u64::MAX),
    };
    let f = t.conn.open_stream(&head, &mut None).unwrap_err();
    assert_eq!(f.class, FailureClass::Other);
    assert!(t.sent().is_empty(), "nothing sent");
    // Had the refused head indexed content-type, this block would name an entry the server
    // never saw.
    t.open(&CALL, Some(b"x"));
    let sent = t.sent();
    assert_eq!(t.decode_request(&sent)[4].1, "application/grpc");
    assert_eq!(
        t.conn.open_stream(&GET, &mut None).unwrap(),
        Opened::Stream(3)
    );
}

#[test]
fn a_zero_stream_limit_refuses_and_a_closed_connection_fails_its_streams() {
    let mut t = Test::with_settings(&[(setting::MAX_CONCURRENT_STREAMS, 0)]);
    assert!(t.conn.open_stream(&GET, &mut None).is_err());
    let mut t = Test::new();
    let id = t.open(&GET, None);
    t.sent();
    t.conn.close();
    assert_eq!(t.goaway_code(), code(ErrorCode::NoError));
    assert_eq!(t.failed(id).class, FailureClass::ConnReset);
}
