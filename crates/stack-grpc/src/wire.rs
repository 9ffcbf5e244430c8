//! gRPC on our HTTP/2 client, shared by the item client, the target client and the reflection
//! exchange: opening a connection and reading an answer's status. The wire format itself
//! (length-prefixed messages, status codes) is the `grpc-wire` crate's.

use std::sync::Arc;

use bench_core::net::{TcpConnector, WireCounters};
use bench_core::{ConnectTiming, Failure};
use std::time::Instant;

use bytes::Bytes;
use h2_transport::{Answer, H2Conn, RequestHead, StreamEvent};

pub(crate) use grpc_wire::{unframe, GRPC_FIELDS, KEEP};

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

/// HTTP 200, a gRPC content type and grpc-status 0, read as [`grpc_wire::check_status`] does
/// (in the trailers, or in the head of a trailers-only answer).
pub(crate) fn check_status(answer: &Answer) -> Result<(), Failure> {
    grpc_wire::check_status(answer.status, answer.head_field("content-type"), |name| {
        answer
            .trailer_field(name)
            .or_else(|| answer.head_field(name))
    })
}

/// What reads a streamed answer's body: each chunk with its arrival time; an error stops the
/// answer (its stream is cancelled).
pub(crate) type OnData<'a> = dyn FnMut(&[u8], Instant) -> Result<(), Failure> + Send + 'a;

/// Sends a call whose answer is a stream and hands the answer's body to `on_data` as it
/// arrives (with its arrival time), under HTTP 200 only (another status fails as that
/// status, before its body is read as messages); the answer's head and trailers returned.
pub(crate) async fn read_stream(
    conn: &H2Conn,
    head: &RequestHead<'_>,
    body: Bytes,
    started: Instant,
    on_data: &mut OnData<'_>,
) -> Result<Answer, Failure> {
    let mut call = conn.open_streamed(head, Some(body), started).await?;
    loop {
        match call.next().await? {
            StreamEvent::Data { data, at, status } => {
                if status != 200 {
                    grpc_wire::check_status(status, None, |_| None)?;
                }
                on_data(&data, at)?;
            }
            StreamEvent::End(answer) => return Ok(answer),
        }
    }
}
