//! An HTTP/2 client connection on the `h2` crate, shared by the HTTP/2 and gRPC stacks. A
//! request goes straight into the connection's stream state from the worker's task; hyper's
//! client wrapper adds a channel hand-off to its connection task and a reply channel per
//! request, which made the load generator measure itself (scripts/compare-anchors).

use std::time::{Duration, Instant};

use bench_core::failure::{classify_error, error_chain_text};
use bench_core::net::{Closer, ConnDriver, Stream};
use bench_core::{Failure, FailureClass, Phase};
use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;

/// One open HTTP/2 connection; concurrent requests become concurrent streams.
pub struct H2Conn {
    send: std::sync::Mutex<Option<SendRequest<Bytes>>>,
    driver: ConnDriver,
}

/// A response read to its end.
pub struct Answer {
    pub head: http::response::Parts,
    pub body: Bytes,
    pub trailers: Option<http::HeaderMap>,
    /// From `started` to the response head.
    pub ttfb: Duration,
    /// From `started` to the end of the stream (trailers included).
    pub total: Duration,
}

impl H2Conn {
    /// The HTTP/2 preface and SETTINGS exchange on a connected stream, with the given
    /// flow-control windows, and the task that drives the connection (whose end completes
    /// the TCP close).
    pub async fn open(
        stream: Stream,
        closer: Closer,
        stream_window: u32,
        connection_window: u32,
    ) -> Result<Self, Failure> {
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(stream_window)
            .initial_connection_window_size(connection_window)
            .handshake::<_, Bytes>(stream)
            .await
            .map_err(|e| classify_h2(Phase::Handshake, &e))?;
        Ok(H2Conn {
            send: std::sync::Mutex::new(Some(send)),
            driver: ConnDriver::spawn_tcp(connection, closer),
        })
    }

    /// Sends `req` (with `body` as its one DATA frame, if any) and reads the answer to its
    /// end, returning flow-control credit as data arrives.
    pub async fn exchange(
        &self,
        req: http::Request<()>,
        body: Option<Bytes>,
        started: Instant,
    ) -> Result<Answer, Failure> {
        let send = self
            .send
            .lock()
            .expect("sender lock")
            .clone()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        let mut send = send
            .ready()
            .await
            .map_err(|e| classify_h2(Phase::Request, &e))?;
        let (response, mut request_body) = send
            .send_request(req, body.is_none())
            .map_err(|e| classify_h2(Phase::Request, &e))?;
        // A server may answer before it has read the request and reset the rest of it with
        // NO_ERROR (RFC 9113 §8.1), so a failed send is an error only if no answer comes.
        let sent = match body {
            Some(body) => request_body.send_data(body, true),
            None => Ok(()),
        };
        let response = match (response.await, sent) {
            (Ok(response), _) => response,
            (Err(e), Ok(())) => return Err(classify_h2(Phase::Request, &e)),
            (Err(_), Err(e)) => return Err(classify_h2(Phase::Request, &e)),
        };

        let ttfb = started.elapsed();
        let (head, mut recv) = response.into_parts();
        // A body in one DATA frame is used as it is; only a longer one is copied together.
        let mut body = Bytes::new();
        let mut joined: Option<BytesMut> = None;
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.map_err(|e| classify_h2(Phase::Request, &e))?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            match joined.as_mut() {
                None if body.is_empty() => body = chunk,
                None => {
                    let mut all = BytesMut::from(&body[..]);
                    all.extend_from_slice(&chunk);
                    joined = Some(all);
                }
                Some(all) => all.extend_from_slice(&chunk),
            }
        }
        let trailers = recv
            .trailers()
            .await
            .map_err(|e| classify_h2(Phase::Request, &e))?;
        let total = started.elapsed();
        let body = joined.map_or(body, BytesMut::freeze);

        Ok(Answer {
            head,
            body,
            trailers,
            ttfb,
            total,
        })
    }

    /// Drops the last sender, so that h2 sends GOAWAY and closes, then completes the TCP close.
    pub async fn close(&self) {
        self.send.lock().expect("sender lock").take();
        self.driver.finish(Duration::from_secs(1)).await;
    }
}

/// Maps an h2 error: socket errors by their cause, protocol errors (RST_STREAM, GOAWAY, a
/// broken connection) as a reset.
pub fn classify_h2(phase: Phase, err: &h2::Error) -> Failure {
    match err.get_io() {
        Some(io) => classify_error(phase, io),
        None => Failure::new(FailureClass::ConnReset, error_chain_text(err)),
    }
}
