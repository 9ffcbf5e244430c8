//! gRPC's wire format on our HTTP/2 client, shared by the item client, the target client and
//! the reflection exchange: opening a connection, length-prefixed messages and the status.

use std::sync::Arc;

use bench_core::net::{TcpConnector, WireCounters};
use bench_core::user_service::grpc::status_code_name;
use bench_core::{ConnectTiming, Failure, FailureClass};
use bytes::{BufMut, Bytes, BytesMut};
use http2_client::{Answer, H2Conn};
use prost::Message;

/// Response fields a unary call reads.
pub(crate) const KEEP: &[&str] = &["content-type", "grpc-status", "grpc-message"];

/// The two fields every gRPC request carries besides the pseudo-headers.
pub(crate) const GRPC_FIELDS: [(&str, &str); 2] =
    [("content-type", "application/grpc"), ("te", "trailers")];

/// A new socket (and handshake) with an HTTP/2 connection on it, as our server's windows.
pub(crate) async fn open(
    connector: &TcpConnector,
    authority: &str,
    https: bool,
) -> Result<(H2Conn, Arc<WireCounters>, ConnectTiming), Failure> {
    let (stream, timing, closer) = connector.connect().await?;
    let counters = stream.counters();
    let conn = H2Conn::open(
        stream,
        closer,
        authority,
        https,
        crate::server::STREAM_WINDOW,
        crate::server::CONNECTION_WINDOW,
    );
    Ok((conn, counters, timing))
}

/// A protobuf message as one gRPC length-prefixed message (uncompressed), in one allocation.
pub(crate) fn frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    message.encode(&mut buf).expect("capacity reserved");
    buf.freeze()
}

/// [`frame`] into `buf`, whose allocation is taken back once the previous message it gave
/// out has been dropped (so a reused buffer does not allocate per request).
pub(crate) fn frame_into(message: &impl Message, buf: &mut BytesMut) -> Bytes {
    let len = message.encoded_len();
    buf.clear();
    buf.reserve(5 + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    message.encode(buf).expect("capacity reserved");
    buf.split().freeze()
}

/// The single message of a unary answer; bad framing is an undecodable body.
pub(crate) fn unframe(data: &Bytes) -> Result<Bytes, Failure> {
    let bad = |what: &str| Failure::new(FailureClass::BadBody, format!("gRPC framing: {what}"));
    if data.len() < 5 {
        return Err(bad("fewer than 5 bytes"));
    }
    if data[0] != 0 {
        return Err(bad("compressed message, none was negotiated"));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    if data.len() != 5 + len {
        return Err(bad(&format!(
            "length prefix {len} for {} bytes",
            data.len() - 5
        )));
    }
    Ok(data.slice(5..))
}

/// HTTP 200, a gRPC content type and grpc-status 0 (in the trailers, or in the head of a
/// trailers-only answer); anything else is a non-success status, with the status code's name
/// as the failure's code.
pub(crate) fn check_status(answer: &Answer) -> Result<(), Failure> {
    if answer.status != 200 {
        return Err(Failure::new(
            FailureClass::BadStatus,
            format!("HTTP status {} on a gRPC call", answer.status),
        )
        .with_code(format!("HTTP {}", answer.status)));
    }
    let is_grpc = answer
        .head_field("content-type")
        .is_some_and(|v| v.starts_with(b"application/grpc"));
    if !is_grpc {
        return Err(Failure::new(
            FailureClass::BadBody,
            "answer is not application/grpc",
        ));
    }
    // In the trailers, or in the head of a trailers-only answer.
    let field = |name| {
        answer
            .trailer_field(name)
            .or_else(|| answer.head_field(name))
    };
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
        None => Err(Failure::new(
            FailureClass::ConnReset,
            "gRPC answer ended without grpc-status",
        )),
    }
}

/// grpc-message is percent-encoded (gRPC over HTTP/2, "Responses"); decoded for the report.
fn percent_decode(raw: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
