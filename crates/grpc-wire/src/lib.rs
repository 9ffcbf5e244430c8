//! gRPC's wire format, shared by the gRPC stacks (over HTTP/2 and over HTTP/3): the
//! workload's messages (generated from `proto/`), length-prefixed messages and their limit,
//! the status an answer carries, and the allocation-free item decoder validation reads.
//! Stacks never depend on each other; what two of them speak alike lives here.

use bench_core::user_service::grpc::status_code_name;
use bench_core::workload::validate_item;
use bench_core::workload::{
    ItemView, ITEM_CURRENCY, ITEM_IN_STOCK, ITEM_NAME, ITEM_PRICE_CENTS, ITEM_TAGS,
};
use bench_core::{Failure, FailureClass, GrpcCall, PayloadProfile};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;
use std::time::{Duration, Instant};

/// Code generated from `proto/bench.proto`.
pub mod pb {
    tonic::include_proto!("bench.v1");
}

/// Code generated from `proto/health.proto`.
pub mod health {
    tonic::include_proto!("grpc.health.v1");
}

pub mod item_calls;
pub mod streams;

pub use item_calls::ItemCalls;
pub mod bulk;

/// Full method path of the workload's RPC.
pub const GET_ITEM_PATH: &str = "/bench.v1.ItemService/GetItem";
/// Full method paths of the workload's streaming RPCs ([`bench_core::GrpcCall`]).
pub const LIST_ITEMS_PATH: &str = "/bench.v1.ItemService/ListItems";
pub const PUT_ITEMS_PATH: &str = "/bench.v1.ItemService/PutItems";
pub const CHAT_ITEMS_PATH: &str = "/bench.v1.ItemService/ChatItems";
/// Full method path of the health check.
pub const HEALTH_CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// The largest message a server of the suite decodes or encodes (gRPC's usual default, 4 MiB,
/// is more than the largest payload profile needs; tonic's server is set to the same).
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The length-prefixed message header: a compressed flag and a 4-byte big-endian length.
pub const PREFIX_BYTES: usize = 5;

/// The two fields every gRPC request carries besides the pseudo-headers.
pub const GRPC_FIELDS: [(&str, &str); 2] =
    [("content-type", "application/grpc"), ("te", "trailers")];

/// Response fields a unary call reads.
pub const KEEP: &[&str] = &["content-type", "grpc-status", "grpc-message"];

/// gRPC status codes a server of the suite sends.
pub const STATUS_OK: u32 = 0;
pub const STATUS_INTERNAL: u32 = 13;
pub const STATUS_UNIMPLEMENTED: u32 = 12;
pub const STATUS_RESOURCE_EXHAUSTED: u32 = 8;

/// A well-framed message with status OK whose content is not valid protobuf (the bad-body
/// fault, which a generated service could never encode).
pub const UNDECODABLE_MESSAGE: &[u8] = &[0, 0, 0, 0, 3, 0xff, 0xff, 0xff];

/// The workload's item as the servers answer it.
pub fn item(id: u64, description: &str) -> pb::Item {
    pb::Item {
        id,
        name: ITEM_NAME.to_string(),
        price_cents: ITEM_PRICE_CENTS,
        currency: ITEM_CURRENCY.to_string(),
        in_stock: ITEM_IN_STOCK,
        tags: ITEM_TAGS.iter().map(|t| t.to_string()).collect(),
        description: description.to_string(),
    }
}

/// A protobuf message as one gRPC length-prefixed message (uncompressed), in one allocation.
pub fn frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX_BYTES + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    message.encode(&mut buf).expect("capacity reserved");
    buf.freeze()
}

/// [`frame`] into `buf`, whose allocation is taken back once the previous message it gave
/// out has been dropped (so a reused buffer does not allocate per request).
pub fn frame_into(message: &impl Message, buf: &mut BytesMut) -> Bytes {
    let len = message.encoded_len();
    buf.clear();
    buf.reserve(PREFIX_BYTES + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    message.encode(buf).expect("capacity reserved");
    buf.split().freeze()
}

/// The single message of a unary answer; bad framing is an undecodable body.
pub fn unframe(data: &Bytes) -> Result<Bytes, Failure> {
    let bad = |what: &str| Failure::new(FailureClass::BadBody, format!("gRPC framing: {what}"));
    if data.len() < PREFIX_BYTES {
        return Err(bad("fewer than 5 bytes"));
    }
    if data[0] != 0 {
        return Err(bad("compressed message, none was negotiated"));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    if data.len() != PREFIX_BYTES + len {
        return Err(bad(&format!(
            "length prefix {len} for {} bytes",
            data.len() - PREFIX_BYTES
        )));
    }
    Ok(data.slice(PREFIX_BYTES..))
}

/// The method path a request of the workload calls.
pub fn item_call_path(call: GrpcCall) -> &'static str {
    match call {
        GrpcCall::Unary => GET_ITEM_PATH,
        GrpcCall::ServerStream => LIST_ITEMS_PATH,
        GrpcCall::ClientStream => PUT_ITEMS_PATH,
        GrpcCall::Bidi => CHAT_ITEMS_PATH,
    }
}

/// The request body of one call of the workload about items `id`, `id + 1`, …: one
/// `GetItemRequest` (unary), one `ListItemsRequest` for `messages` items (server streaming),
/// `messages` items (client streaming: an upload whose padding is `description`) or
/// `messages` `GetItemRequest`s (bidi), each length-prefixed, in one buffer.
pub fn item_call_body(call: GrpcCall, id: u64, messages: u32, description: &str) -> Bytes {
    let messages = messages.max(1);
    match call {
        GrpcCall::Unary => frame(&pb::GetItemRequest { id }),
        GrpcCall::ServerStream => frame(&pb::ListItemsRequest {
            first_id: id,
            count: messages,
        }),
        GrpcCall::ClientStream => {
            let mut buf = BytesMut::new();
            for k in 0..u64::from(messages) {
                let message = item(id + k, description);
                buf.put_u8(0);
                buf.put_u32(message.encoded_len() as u32);
                message.encode(&mut buf).expect("BytesMut grows");
            }
            buf.freeze()
        }
        GrpcCall::Bidi => {
            let mut buf = BytesMut::new();
            for k in 0..u64::from(messages) {
                let message = pb::GetItemRequest { id: id + k };
                buf.put_u8(0);
                buf.put_u32(message.encoded_len() as u32);
                message.encode(&mut buf).expect("BytesMut grows");
            }
            buf.freeze()
        }
    }
}

/// Splits a streaming answer's bytes, as they arrive, into its length-prefixed messages,
/// each held to `max_message_bytes` at its prefix. Keeps only the message being received.
#[derive(Debug)]
pub struct MessageReader {
    buf: BytesMut,
    max_message_bytes: u64,
}

impl MessageReader {
    pub fn new(max_message_bytes: u64) -> Self {
        MessageReader {
            buf: BytesMut::new(),
            max_message_bytes,
        }
    }

    /// Takes the next bytes of the answer.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole message, if one has arrived; an error for a compressed message or one
    /// announced above the limit.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, Failure> {
        if self.buf.len() < PREFIX_BYTES {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err(Failure::new(
                FailureClass::BadBody,
                "gRPC framing: compressed message, none was negotiated",
            ));
        }
        let b = &self.buf;
        let len = u64::from(u32::from_be_bytes([b[1], b[2], b[3], b[4]]));
        if len > self.max_message_bytes {
            let knob = bench_core::limits::GRPC_MESSAGE_KNOB;
            return Err(Failure::new(
                FailureClass::BadBody,
                format!(
                    "gRPC message of {len} B announced, above {knob} ({} B)",
                    self.max_message_bytes
                ),
            )
            .with_code(knob));
        }
        let whole = PREFIX_BYTES + len as usize;
        if self.buf.len() < whole {
            self.buf.reserve(whole - self.buf.len());
            return Ok(None);
        }
        let mut message = self.buf.split_to(whole);
        message.advance(PREFIX_BYTES);
        Ok(Some(message.freeze()))
    }

    /// The answer ended: an error if it ended inside a message.
    pub fn finish(&self) -> Result<(), Failure> {
        if self.buf.is_empty() {
            return Ok(());
        }
        Err(Failure::new(
            FailureClass::BadBody,
            format!(
                "gRPC framing: the answer ended {} bytes into a message",
                self.buf.len()
            ),
        ))
    }
}

/// The times of a streamed answer's messages: the first one's from the call's start (its
/// `ttfb`), and each gap between two consecutive ones told as it is seen; with their count and
/// bytes. No memory per message.
pub struct MessageTimes {
    started: Instant,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
    pub messages: u32,
    /// Decoded message bytes (without prefixes).
    pub body_bytes: u64,
}

impl MessageTimes {
    pub fn new(started: Instant) -> Self {
        MessageTimes {
            started,
            first_at: None,
            last_at: None,
            messages: 0,
            body_bytes: 0,
        }
    }

    /// A valid message of `len` bytes, which arrived at `at`.
    pub fn message(&mut self, len: usize, at: Instant, on_gap: &mut (dyn FnMut(Duration) + Send)) {
        self.messages = self.messages.saturating_add(1);
        self.body_bytes += len as u64;
        match self.last_at {
            Some(last) => on_gap(at.saturating_duration_since(last)),
            None => self.first_at = Some(at),
        }
        self.last_at = Some(at);
    }

    /// From the call's start to its first message (zero without messages).
    pub fn first_message(&self) -> Duration {
        self.first_at.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(self.started)
        })
    }
}

/// A streaming answer of the workload checked message by message: item `id + k` as the k-th
/// message, `expected` of them, each valid for the payload profile, timed as they arrive.
pub struct ItemStream {
    reader: MessageReader,
    next_id: u64,
    last_id: u64,
    expected: u32,
    payload: PayloadProfile,
    pub times: MessageTimes,
}

impl ItemStream {
    pub fn new(
        id: u64,
        expected: u32,
        payload: PayloadProfile,
        max_message_bytes: u64,
        started: Instant,
    ) -> Self {
        ItemStream {
            reader: MessageReader::new(max_message_bytes),
            next_id: id,
            last_id: id + u64::from(expected.max(1)) - 1,
            expected: expected.max(1),
            payload,
            times: MessageTimes::new(started),
        }
    }

    /// The answer's next bytes, which arrived at `at`: each message they complete is checked
    /// and timed.
    pub fn data(
        &mut self,
        chunk: &[u8],
        at: Instant,
        on_gap: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<(), Failure> {
        self.reader.feed(chunk);
        while let Some(message) = self.reader.next_message()? {
            if self.next_id > self.last_id {
                return Err(Failure::new(
                    FailureClass::BadBody,
                    format!("more items than the {} asked for", self.expected),
                )
                .with_code("extra message"));
            }
            let view = decode_item_view(&message).map_err(|e| {
                Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
            })?;
            validate_item(&view, self.next_id, self.payload)?;
            self.next_id += 1;
            self.times.message(message.len(), at, on_gap);
        }
        Ok(())
    }

    /// The answer ended (its status checked by the caller): the reply, its `ttfb` the first
    /// message, `total` as the transport measured it.
    pub fn reply(&self, total: Duration) -> Result<bench_core::Reply, Failure> {
        Ok(bench_core::Reply {
            ttfb: self.finish()?,
            total,
            body_bytes: self.times.body_bytes,
            messages: self.times.messages,
            reopened: None,
            streamed: true,
        })
    }

    /// The answer ended: every item asked for must have come. Returns the time to the first
    /// message.
    pub fn finish(&self) -> Result<Duration, Failure> {
        self.reader.finish()?;
        if self.next_id <= self.last_id {
            return Err(Failure::new(
                FailureClass::MissingData,
                format!(
                    "the stream ended after {} of {} items",
                    self.times.messages, self.expected
                ),
            )
            .with_code("stream ended early"));
        }
        Ok(self.times.first_message())
    }
}

/// A client-streaming call's answer: the count of items uploaded and the last id.
pub fn check_put_items_reply(message: &[u8], id: u64, messages: u32) -> Result<(), Failure> {
    let reply = pb::PutItemsReply::decode(message).map_err(|e| {
        Failure::new(
            FailureClass::BadBody,
            format!("invalid protobuf PutItemsReply: {e}"),
        )
    })?;
    let messages = messages.max(1);
    let last = id + u64::from(messages) - 1;
    if reply.count != messages || reply.last_id != last {
        return Err(Failure::new(
            FailureClass::BadBody,
            format!(
                "the server counted {} items up to id {}, {messages} up to {last} were sent",
                reply.count, reply.last_id
            ),
        ));
    }
    Ok(())
}

/// Why a server refuses a request's body: the gRPC status and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u32,
    pub message: &'static str,
}

/// A server's reading of a unary request's body: its one message, at most
/// [`MAX_MESSAGE_BYTES`] (RESOURCE_EXHAUSTED above, as tonic answers), else INTERNAL.
pub fn request_message(data: &Bytes) -> Result<Bytes, Refusal> {
    if data.len() >= PREFIX_BYTES {
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        if len > MAX_MESSAGE_BYTES {
            return Err(Refusal {
                status: STATUS_RESOURCE_EXHAUSTED,
                message: "message larger than the server's limit",
            });
        }
    }
    unframe(data).map_err(|_| Refusal {
        status: STATUS_INTERNAL,
        message: "request is not one uncompressed length-prefixed message",
    })
}

/// What a unary answer's status says, read from its parts: HTTP 200, a gRPC content type and
/// grpc-status 0 (`field` looks in the trailers, then in the head of a trailers-only
/// answer); anything else is a non-success status, with the status code's name as the
/// failure's code.
pub fn check_status<'a>(
    http_status: u16,
    content_type: Option<&[u8]>,
    field: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<(), Failure> {
    if http_status != 200 {
        return Err(Failure::new(
            FailureClass::BadStatus,
            format!("HTTP status {http_status} on a gRPC call"),
        )
        .with_code(format!("HTTP {http_status}")));
    }
    if !content_type.is_some_and(|v| v.starts_with(b"application/grpc")) {
        return Err(Failure::new(
            FailureClass::BadBody,
            "answer is not application/grpc",
        ));
    }
    match field("grpc-status") {
        Some(b"0") => Ok(()),
        Some(code) => {
            let message = percent_decode(field("grpc-message").unwrap_or(b""));
            let text = String::from_utf8_lossy(code);
            let name = text.parse::<u32>().map_or("UNKNOWN_CODE", status_code_name);
            Err(Failure::new(
                FailureClass::BadStatus,
                format!("grpc-status {text} {name}: {message}"),
            )
            .with_code(name))
        }
        // The stream ended cleanly but the answer is not a gRPC answer: a broken answer, not a
        // broken connection.
        None => Err(Failure::new(
            FailureClass::BadBody,
            "gRPC answer ended without grpc-status (no trailers, and no trailers-only head)",
        )
        .with_code("no grpc-status")),
    }
}

/// tonic's refusal of a message above its decoding limit (OUT_OF_RANGE, "decoded message length
/// too large"), which the library clients apply from `grpc_max_receive_message_bytes`: the
/// same `bad_body` at the same limit as the lean clients', not a status the server sent.
pub fn tonic_limit_failure(code: u32, message: &str) -> Option<Failure> {
    const OUT_OF_RANGE: u32 = 11;
    (code == OUT_OF_RANGE && message.contains("decoded message length too large")).then(|| {
        Failure::new(
            FailureClass::BadBody,
            format!(
                "gRPC message above {} (tonic: {message})",
                bench_core::limits::GRPC_MESSAGE_KNOB
            ),
        )
        .with_code(bench_core::limits::GRPC_MESSAGE_KNOB)
    })
}

/// grpc-message is percent-encoded (gRPC over HTTP/2, "Responses"); decoded for the report.
pub fn percent_decode(raw: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match (raw[i], raw.get(i + 1), raw.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes the fields validation needs from an `Item` without allocating: the same wire rules
/// as prost's generated decoder (tags, wire types, lengths, UTF-8 strings), but the strings
/// are borrowed from the received bytes and unknown fields skipped.
pub fn decode_item_view(mut buf: &[u8]) -> Result<ItemView<'_>, String> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let mut view = ItemView::default();
    let expect = |got: WireType, want: WireType, tag: u32| {
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "field {tag} has wire type {got:?}, expected {want:?}"
            ))
        }
    };
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|e| e.to_string())?;
        match tag {
            1 => {
                expect(wire_type, WireType::Varint, tag)?;
                view.id = Some(decode_varint(&mut buf).map_err(|e| e.to_string())?);
            }
            2 | 4 | 7 => {
                expect(wire_type, WireType::LengthDelimited, tag)?;
                let len = decode_varint(&mut buf).map_err(|e| e.to_string())? as usize;
                if len > buf.len() {
                    return Err(format!("field {tag} is {len} bytes, {} remain", buf.len()));
                }
                let (field, rest) = buf.split_at(len);
                buf = rest;
                let text = std::str::from_utf8(field).map_err(|e| format!("field {tag}: {e}"))?;
                match tag {
                    2 => view.name = Some(text.into()),
                    4 => view.currency = Some(text.into()),
                    _ => view.description_len = Some(text.len()),
                }
            }
            _ => skip_field(wire_type, tag, &mut buf, DecodeContext::default())
                .map_err(|e| e.to_string())?,
        }
    }
    // proto3 omits empty strings and zero numbers: absent means default, as prost decodes it.
    view.id.get_or_insert(0);
    view.name.get_or_insert_with(|| "".into());
    view.currency.get_or_insert_with(|| "".into());
    view.description_len.get_or_insert(0);
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Item;
    use bench_core::workload::{padding, validate_item};
    use bench_core::PayloadProfile;

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(
            percent_decode(b"no item 404%21 %E2%9C%93"),
            "no item 404! ✓"
        );
        assert_eq!(percent_decode(b"50% off %zz %4"), "50% off %zz %4");
    }

    #[test]
    fn reused_frame_buffer_keeps_its_allocation() {
        let mut buf = BytesMut::new();
        let message = crate::pb::GetItemRequest { id: 300 };
        let first = frame_into(&message, &mut buf);
        assert_eq!(&first[..], &[0, 0, 0, 0, 3, 0x08, 0xac, 0x02]);
        assert_eq!(unframe(&first).unwrap(), message.encode_to_vec());
        drop(first);
        let second = frame_into(&message, &mut buf);
        let address = second.as_ptr();
        drop(second);
        let third = frame_into(&message, &mut buf);
        assert_eq!(third.as_ptr(), address, "the buffer's allocation is reused");
    }

    /// A streamed answer split anywhere: the items come out whole, in order, timed at the
    /// chunk that completed them; one gap fewer than messages.
    #[test]
    fn an_item_stream_is_read_across_any_split() {
        let body = item_call_body(
            GrpcCall::ClientStream,
            40,
            3,
            &padding(PayloadProfile::Small),
        );
        let started = Instant::now();
        for split in 0..=body.len() {
            let mut items = ItemStream::new(40, 3, PayloadProfile::Small, 1 << 20, started);
            let mut gaps = Vec::new();
            let (a, b) = body.split_at(split);
            let later = started + Duration::from_millis(5);
            items.data(a, started, &mut |g| gaps.push(g)).unwrap();
            items.data(b, later, &mut |g| gaps.push(g)).unwrap();
            let first_len =
                PREFIX_BYTES + u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            let first_at = if split >= first_len {
                Duration::ZERO
            } else {
                Duration::from_millis(5)
            };
            assert_eq!(items.finish().unwrap(), first_at, "split {split}");
            assert_eq!(items.times.messages, 3);
            assert_eq!(gaps.len(), 2, "split {split}");
            assert!(gaps.iter().sum::<Duration>() <= Duration::from_millis(5));
        }
    }

    #[test]
    fn an_item_stream_fails_early_ends_extra_items_and_oversized_messages() {
        let description = padding(PayloadProfile::Small);
        let three = item_call_body(GrpcCall::ClientStream, 1, 3, &description);
        let now = Instant::now();
        let mut none = |_: Duration| {};
        // Asked for 4, three came.
        let mut items = ItemStream::new(1, 4, PayloadProfile::Small, 1 << 20, now);
        items.data(&three, now, &mut none).unwrap();
        let f = items.finish().unwrap_err();
        assert_eq!(f.class, FailureClass::MissingData);
        assert!(f.detail.contains("after 3 of 4 items"), "{f}");
        // Asked for 2: the third is one too many.
        let mut items = ItemStream::new(1, 2, PayloadProfile::Small, 1 << 20, now);
        let f = items.data(&three, now, &mut none).unwrap_err();
        assert_eq!(f.code.as_deref(), Some("extra message"), "{f}");
        // Ids out of order fail validation.
        let mut items = ItemStream::new(2, 3, PayloadProfile::Small, 1 << 20, now);
        assert!(items.data(&three, now, &mut none).is_err());
        // A message above the limit fails at its prefix, before its bytes.
        let mut items = ItemStream::new(1, 3, PayloadProfile::Small, 10, now);
        let f = items.data(&three[..5], now, &mut none).unwrap_err();
        assert_eq!(
            f.code.as_deref(),
            Some(bench_core::limits::GRPC_MESSAGE_KNOB),
            "{f}"
        );
        // An answer that ends inside a message.
        let mut items = ItemStream::new(1, 3, PayloadProfile::Small, 1 << 20, now);
        items
            .data(&three[..three.len() - 1], now, &mut none)
            .unwrap();
        assert!(items.finish().unwrap_err().detail.contains("ended"));
    }

    #[test]
    fn server_refuses_oversized_and_malformed_requests() {
        let mut big = vec![0u8];
        big.extend_from_slice(&((MAX_MESSAGE_BYTES + 1) as u32).to_be_bytes());
        let refusal = request_message(&Bytes::from(big)).unwrap_err();
        assert_eq!(refusal.status, STATUS_RESOURCE_EXHAUSTED);
        let compressed = Bytes::from_static(&[1, 0, 0, 0, 0]);
        assert_eq!(
            request_message(&compressed).unwrap_err().status,
            STATUS_INTERNAL
        );
        let ok = frame(&crate::pb::GetItemRequest { id: 9 });
        assert_eq!(request_message(&ok).unwrap(), ok.slice(PREFIX_BYTES..));
    }

    #[test]
    fn status_is_read_from_trailers_then_head() {
        let grpc = Some(&b"application/grpc"[..]);
        assert!(check_status(200, grpc, |n| (n == "grpc-status").then_some(&b"0"[..])).is_ok());
        let failure = check_status(200, grpc, |n| match n {
            "grpc-status" => Some(&b"13"[..]),
            "grpc-message" => Some(&b"injected%20fault"[..]),
            _ => None,
        })
        .unwrap_err();
        assert_eq!(failure.class, FailureClass::BadStatus);
        assert!(failure.to_string().contains("injected fault"), "{failure}");
        // No grpc-status anywhere: the answer is broken, not the connection.
        let broken = check_status(200, grpc, |_| None).unwrap_err();
        assert_eq!(broken.class, FailureClass::BadBody);
        assert!(broken.detail.contains("without grpc-status"), "{broken}");
        assert_eq!(
            check_status(200, Some(&b"text/plain"[..]), |_| None)
                .unwrap_err()
                .class,
            FailureClass::BadBody
        );
        assert_eq!(
            check_status(503, grpc, |_| None).unwrap_err().class,
            FailureClass::BadStatus
        );
    }

    #[test]
    fn view_decoder_agrees_with_prost() {
        for profile in PayloadProfile::ALL {
            let item = Item {
                id: 42,
                name: "widget".into(),
                price_cents: 1999,
                currency: "EUR".into(),
                in_stock: true,
                tags: vec!["bench".into(), "item".into()],
                description: bench_core::workload::padding(profile),
            };
            let bytes = item.encode_to_vec();
            let view = decode_item_view(&bytes).unwrap();
            assert_eq!(view.id, Some(42));
            assert_eq!(view.name.as_deref(), Some("widget"));
            assert_eq!(view.currency.as_deref(), Some("EUR"));
            assert_eq!(view.description_len, Some(profile.padding_bytes()));
            validate_item(&view, 42, profile).unwrap();
        }
        assert!(decode_item_view(&[0xff, 0xff, 0xff]).is_err());
        assert!(
            decode_item_view(&[0x12, 0x05, b'a']).is_err(),
            "truncated string"
        );
        assert!(
            decode_item_view(&[0x12, 0x02, 0xc3, 0x28]).is_err(),
            "invalid UTF-8"
        );
        let empty = decode_item_view(&[]).unwrap();
        assert_eq!(empty.name.as_deref(), Some(""));
        assert_eq!(empty.id, Some(0));
    }

    /// The gRPC length-prefixed message reader and the item decoder on random bytes and on
    /// mutations of valid answers (stable in-process fuzzing, seeded PRNG): ≈ 2 s by default,
    /// `TBENCH_FUZZ_SECONDS` for longer, `TBENCH_FUZZ_SEED` to replay. Nothing may panic, and
    /// what the reader accepts is exactly one message of its prefix's length.
    #[test]
    fn fuzz_grpc_message_reader() {
        let secs: f64 = std::env::var("TBENCH_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0);
        let seed: u64 = std::env::var("TBENCH_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("grpc reader: TBENCH_FUZZ_SEED={seed}");
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let valid: Vec<Vec<u8>> = PayloadProfile::ALL
            .iter()
            .map(|&profile| {
                let item = Item {
                    id: 7,
                    name: "widget".into(),
                    price_cents: 1999,
                    currency: "EUR".into(),
                    in_stock: true,
                    tags: vec!["bench".into(), "item".into()],
                    description: bench_core::workload::padding(profile),
                };
                let message = item.encode_to_vec();
                let mut framed = vec![0];
                framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                framed.extend_from_slice(&message);
                framed
            })
            .collect();
        let start = std::time::Instant::now();
        let mut executions = 0u64;
        while executions == 0 || start.elapsed().as_secs_f64() < secs {
            let mut data = if next() % 4 == 0 {
                let len = (next() % 64) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                valid[(next() % valid.len() as u64) as usize].clone()
            };
            for _ in 0..=next() % 4 {
                if data.is_empty() {
                    break;
                }
                let at = (next() % data.len() as u64) as usize;
                match next() % 4 {
                    0 => data[at] ^= 1 << (next() % 8),
                    1 => data[at] = next() as u8,
                    2 => data.truncate(at),
                    _ => data.insert(at, next() as u8),
                }
            }
            let bytes = Bytes::from(data);
            if let Ok(message) = unframe(&bytes) {
                assert_eq!(bytes.len(), 5 + message.len());
                assert_eq!(bytes[0], 0);
                if let Ok(view) = decode_item_view(&message) {
                    let _ = validate_item(&view, 7, PayloadProfile::Small);
                }
            }
            executions += 1;
        }
        eprintln!(
            "grpc reader: {executions} executions in {:.1} s (seed {seed}), no crash",
            start.elapsed().as_secs_f64()
        );
    }
}
