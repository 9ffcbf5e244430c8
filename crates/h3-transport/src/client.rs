//! HTTP/3 client transport: by default every connection gets its own UDP socket and quinn
//! endpoint, so "a new connection" is a new socket and a full QUIC handshake, as on the TCP
//! stacks. With [`QuicEndpoint::Shared`] all of a client's connections share one socket and
//! endpoint, as QUIC client libraries run, and quinn's endpoint holds their closing periods.
//! The stacks over HTTP/3 (REST and gRPC) build their requests and read their answers on it.
//!
//! Every answer is read to the end of its stream: all DATA frames, then the trailers if any.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::limits::{BodyLimit, ResponseLimits, HEAD_KNOB};
use bench_core::source::SourceAddresses;
use bench_core::{
    classify_error, ClientSettings, ConnectTiming, Failure, FailureClass, HandshakeVariant, Phase,
    QuicEndpoint, WireBytes,
};
use bytes::{Buf, Bytes, BytesMut};
use quinn::crypto::rustls::QuicClientConfig;

use crate::closing::{CloseWatch, WatchedRuntime};
use crate::udp::RefusalAwareSocket;

type SendRequest = h3::client::SendRequest<crate::limited::OpenStreams, Bytes>;

/// Opens HTTP/3 connections to one server, each on its own endpoint.
pub struct H3Transport {
    target: SocketAddr,
    server_name: String,
    config: quinn::ClientConfig,
    /// One endpoint configuration for every connection's endpoint: `EndpointConfig::default()`
    /// draws a fresh stateless-reset key from the system RNG and sets up an HMAC key for it,
    /// per call; the key only needs to be secret, not per endpoint (a server's endpoints
    /// share one), so the client draws it once instead of once per connection.
    endpoint_config: quinn::EndpointConfig,
    variant: HandshakeVariant,
    handshake_timeout: Duration,
    tuning: bench_core::Tuning,
    /// What every answer's head is held to (the `response_*` knobs, as on HTTP/1.1).
    limits: ResponseLimits,
    /// Each connection's UDP socket binds the next of these, so that many connections do not
    /// all draw on one address's ephemeral ports.
    sources: SourceAddresses,
    closing: Arc<Closing>,
    /// quinn-udp's knowledge of the kernel for the target's address family, probed once.
    platform: Arc<quinn::udp::UdpSocketState>,
    /// With [`QuicEndpoint::Shared`]: the one endpoint and its socket, made on first use
    /// (quinn spawns the endpoint's driver on the runtime).
    shared: Option<std::sync::Mutex<Option<SharedEndpoint>>>,
}

/// The endpoint all of a client's connections share, its socket, and a close watch that is
/// never started (nothing of the closing period is recorded: quinn holds it).
#[derive(Clone)]
struct SharedEndpoint {
    endpoint: quinn::Endpoint,
    socket: Arc<RefusalAwareSocket>,
    watch: Arc<CloseWatch>,
}

/// Endpoints whose connection is in QUIC's closing period (RFC 9000 §10.2): each holds its
/// socket until it ends, and quinn's endpoint and connection too where the closing is left to
/// quinn ([`crate::closing`]).
struct Closing {
    endpoints: std::sync::atomic::AtomicUsize,
    /// Closings that released quinn's state once the CONNECTION_CLOSE was out.
    released: std::sync::atomic::AtomicU64,
    /// Closings left to quinn (the server closed first, or the close was not seen going out).
    by_quinn: std::sync::atomic::AtomicU64,
    /// The shortest and longest closing period (µs) quinn set on a released closing.
    shortest_period_us: std::sync::atomic::AtomicU64,
    longest_period_us: std::sync::atomic::AtomicU64,
    ended: tokio::sync::Notify,
}

impl Default for Closing {
    fn default() -> Self {
        Closing {
            endpoints: Default::default(),
            released: Default::default(),
            by_quinn: Default::default(),
            shortest_period_us: u64::MAX.into(),
            longest_period_us: Default::default(),
            ended: Default::default(),
        }
    }
}

impl Closing {
    fn period(&self, period: Duration) {
        let us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
        self.shortest_period_us.fetch_min(us, Ordering::Relaxed);
        self.longest_period_us.fetch_max(us, Ordering::Relaxed);
    }
}

/// A snapshot of [`H3Transport`]'s closing periods (counts since the transport was made,
/// except `holding`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClosingCounts {
    /// Endpoints whose closing period has not ended yet (on the socket alone or in quinn).
    pub holding: u64,
    /// Closings that released quinn's state once the CONNECTION_CLOSE was out.
    pub released: u64,
    /// Closings left to quinn (the server closed first, or the close was not seen going out).
    pub by_quinn: u64,
}

/// Longest wait for quinn to send a closing connection's CONNECTION_CLOSE before the closing
/// period is left to quinn; normally the next turn of its driver, well under a millisecond.
const CLOSE_SENT_BOUND: Duration = Duration::from_secs(2);

/// One connection's endpoint and what its closing needs.
struct Opened {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    socket: Arc<RefusalAwareSocket>,
    watch: Arc<CloseWatch>,
    timing: ConnectTiming,
}

impl Opened {
    /// A connection whose handshake began at `started` and has just finished (QUIC has no
    /// separate TCP connect).
    fn new(
        endpoint: quinn::Endpoint,
        conn: quinn::Connection,
        socket: Arc<RefusalAwareSocket>,
        watch: Arc<CloseWatch>,
        started: Instant,
        resumed: bool,
    ) -> Self {
        Opened {
            endpoint,
            conn,
            socket,
            watch,
            timing: ConnectTiming {
                tcp_connect: Duration::ZERO,
                handshake: started.elapsed(),
                resumed,
            },
        }
    }
}

impl H3Transport {
    /// A transport for `settings`' server, offering `alpn` in its TLS handshakes.
    pub fn new(settings: &ClientSettings, alpn: &[u8]) -> anyhow::Result<Self> {
        let Some(tls) = settings.tls.as_ref() else {
            anyhow::bail!("HTTP/3 has no plaintext form: QUIC always runs TLS 1.3");
        };
        let rustls = bench_core::tls::client_config(tls, alpn)?;
        let crypto = QuicClientConfig::try_from((*rustls).clone())?;
        Ok(H3Transport {
            target: settings.target,
            server_name: settings.server_name.clone(),
            config: {
                let mut config = quinn::ClientConfig::new(Arc::new(crypto));
                // An HTTP/3 server opens no bidirectional streams; quinn would preallocate
                // state for every one it is allowed.
                config.transport_config(crate::tuning::transport_config(&settings.tuning, 0));
                config
            },
            endpoint_config: quinn::EndpointConfig::default(),
            tuning: settings.tuning.clone(),
            limits: ResponseLimits::from_tuning(&settings.tuning),
            sources: SourceAddresses::new(settings.target, settings.tuning.source_addresses),
            variant: tls.variant,
            handshake_timeout: settings.handshake_timeout,
            closing: Arc::default(),
            platform: crate::udp::platform_state(settings.target)?,
            shared: (settings.tuning.quic_endpoint == QuicEndpoint::Shared)
                .then(|| std::sync::Mutex::new(None)),
        })
    }

    /// A new UDP socket (bound to the next source address) and a quinn endpoint on it; the
    /// per-connection endpoint's runtime records what its closing needs.
    fn new_endpoint(
        &self,
        watch: &Arc<CloseWatch>,
        runtime: Arc<dyn quinn::Runtime>,
        tuning: &bench_core::Tuning,
        receive_offload: bool,
    ) -> Result<(quinn::Endpoint, Arc<RefusalAwareSocket>), Failure> {
        let socket = RefusalAwareSocket::connect(
            self.target,
            self.sources.next(),
            tuning,
            &self.platform,
            watch.clone(),
            receive_offload,
        )
        .map_err(|e| classify_error(Phase::Connect, &e))?;
        let mut endpoint = quinn::Endpoint::new_with_abstract_socket(
            self.endpoint_config.clone(),
            None,
            socket.clone(),
            runtime,
        )
        .map_err(|e| classify_error(Phase::Connect, &e))?;
        endpoint.set_default_client_config(self.config.clone());
        Ok((endpoint, socket))
    }

    /// The endpoint a new connection uses: the shared one (made on first use), or a new one.
    fn endpoint(&self) -> Result<SharedEndpoint, Failure> {
        let Some(shared) = &self.shared else {
            let watch = Arc::new(CloseWatch::default());
            let (endpoint, socket) = self.new_endpoint(
                &watch,
                Arc::new(WatchedRuntime(watch.clone())),
                &self.tuning,
                false,
            )?;
            return Ok(SharedEndpoint {
                endpoint,
                socket,
                watch,
            });
        };
        let mut shared = shared.lock().expect("shared endpoint");
        if let Some(made) = &*shared {
            return Ok(made.clone());
        }
        let watch = Arc::new(CloseWatch::default());
        // One socket takes every connection's datagrams, as the server's does: the kernel's
        // 208 KiB default overflowed at 500 new-connection workers (12,000 datagrams dropped a
        // cell, handshakes' p99 5 s), so it gets the server's size unless the run sets one.
        let mut tuning = self.tuning.clone();
        tuning
            .udp_buffer_bytes
            .get_or_insert(bench_core::stack::DEFAULT_SERVER_UDP_BUFFER_BYTES);
        // GRO too, as on the server's socket, unless the run turns QUIC's offloads off: made
        // once, it costs none of the per-socket probing that rules it out per connection.
        let receive_offload = tuning.quic_offload != Some(false);
        let (endpoint, socket) = self.new_endpoint(
            &watch,
            Arc::new(quinn::TokioRuntime),
            &tuning,
            receive_offload,
        )?;
        let made = SharedEndpoint {
            endpoint,
            socket,
            watch,
        };
        *shared = Some(made.clone());
        Ok(made)
    }

    async fn handshake(&self) -> Result<Opened, Failure> {
        let SharedEndpoint {
            endpoint,
            socket,
            watch,
        } = self.endpoint()?;
        let started = Instant::now();
        let connecting = endpoint
            .connect(self.target, &self.server_name)
            .map_err(|e| Failure::new(FailureClass::Other, e.to_string()))?;
        if self.variant == HandshakeVariant::Full {
            return self
                .finish_handshake(endpoint, connecting, socket, watch, started)
                .await;
        }
        // A cached session exists exactly when quinn can offer 0-RTT; without one this is a
        // full handshake (the first connection, which fetches the ticket).
        let (conn, accepted) = match connecting.into_0rtt() {
            Ok(pair) => pair,
            Err(connecting) => {
                return self
                    .finish_handshake(endpoint, connecting, socket, watch, started)
                    .await
            }
        };
        if self.variant == HandshakeVariant::Resumed {
            // Resumption without early data: wait for the (abbreviated) handshake to finish
            // before the request goes out.
            tokio::select! {
                done = tokio::time::timeout(self.handshake_timeout, accepted) => {
                    if done.is_err() {
                        return Err(Failure::new(FailureClass::HandshakeTimeout, "QUIC handshake timed out"));
                    }
                }
                _ = socket.refused() => {
                    return Err(Failure::new(FailureClass::ConnectRefused, "ICMP port unreachable: no QUIC server on that port"));
                }
            }
        }
        Ok(Opened::new(endpoint, conn, socket, watch, started, true))
    }

    async fn finish_handshake(
        &self,
        endpoint: quinn::Endpoint,
        connecting: quinn::Connecting,
        socket: Arc<RefusalAwareSocket>,
        watch: Arc<CloseWatch>,
        started: Instant,
    ) -> Result<Opened, Failure> {
        let conn = tokio::select! {
            res = tokio::time::timeout(self.handshake_timeout, connecting) => match res {
                Err(_) => return Err(Failure::new(FailureClass::HandshakeTimeout, "QUIC handshake timed out")),
                Ok(Err(e)) => return Err(classify_quinn(Phase::Handshake, &e)),
                Ok(Ok(conn)) => conn,
            },
            _ = socket.refused() => {
                return Err(Failure::new(FailureClass::ConnectRefused, "ICMP port unreachable: no QUIC server on that port"));
            }
        };
        // No cached session was offered on this path, so this was a full handshake.
        Ok(Opened::new(endpoint, conn, socket, watch, started, false))
    }

    /// Whether all connections share one endpoint ([`QuicEndpoint::Shared`]), whose closing
    /// periods quinn's driver holds, rather than one endpoint each.
    pub fn shares_endpoint(&self) -> bool {
        self.shared.is_some()
    }

    /// A new QUIC connection alone (socket, endpoint, handshake as the settings' variant
    /// asks), for a client that runs its own HTTP/3 on it; its closing period is quinn's
    /// (the endpoint's `wait_idle`).
    pub async fn open_quic(
        &self,
    ) -> Result<(quinn::Endpoint, quinn::Connection, ConnectTiming), Failure> {
        let opened = self.handshake().await?;
        Ok((opened.endpoint, opened.conn, opened.timing))
    }

    /// A new connection (socket, endpoint, handshake as the settings' variant asks) with an
    /// HTTP/3 session on it.
    pub async fn open(&self) -> Result<(H3Connection, ConnectTiming), Failure> {
        let Opened {
            endpoint,
            conn,
            socket,
            watch,
            timing,
        } = self.handshake().await?;
        // h3's own field-section limit is not set: h3 answers it with STOP_SENDING, which
        // h3-quinn 0.0.10 panics on while a read is in flight (`stop_sending` unwraps a stream
        // its read future holds), and only once it holds the whole frame. The watched
        // connection refuses a HEADERS frame at its header instead (its encoded length is at
        // most its decoded size), and `exchange_limited` checks the decoded size. Announcing
        // the limit (SETTINGS_MAX_FIELD_SECTION_SIZE) is no substitute: aioquic 1.7 does not
        // read it, and h3's server, which does, refuses to send the answer and leaves what
        // the client sees (a reset, a timeout) to its application.
        let quic = crate::limited::Connection::new(conn.clone(), self.limits.max_head_bytes as u64);
        let (mut driver, send) = h3::client::new(quic)
            .await
            .map_err(|e| classify_h3(&e.to_string(), Phase::Handshake))?;
        let driver = H3Driver(std::sync::Mutex::new(Some(tokio::spawn(async move {
            let _ = driver.wait_idle().await;
        }))));
        let conn = H3Connection {
            endpoint: std::sync::Mutex::new(Some(endpoint)),
            shared: self.shared.is_some(),
            conn,
            socket,
            watch,
            send,
            driver,
            closing: self.closing.clone(),
            limits: self.limits,
        };
        Ok((conn, timing))
    }

    /// Where the closed connections' closing periods are (per-connection endpoints only; a
    /// shared endpoint's closings are inside quinn and not counted here).
    pub fn closing_counts(&self) -> ClosingCounts {
        let c = &self.closing;
        ClosingCounts {
            holding: c.endpoints.load(Ordering::SeqCst) as u64,
            released: c.released.load(Ordering::SeqCst),
            by_quinn: c.by_quinn.load(Ordering::SeqCst),
        }
    }

    /// Waits (at most `bound`) until every closed connection's closing period has ended.
    pub async fn settle(&self, bound: Duration) {
        let shared = self.shared.as_ref().and_then(|s| {
            s.lock()
                .expect("shared endpoint")
                .as_ref()
                .map(|s| s.endpoint.clone())
        });
        let _ = tokio::time::timeout(bound, async {
            loop {
                let ended = self.closing.ended.notified();
                if self.closing.endpoints.load(Ordering::SeqCst) == 0 {
                    break;
                }
                ended.await;
            }
            // The shared endpoint's closing connections drain in quinn's driver.
            if let Some(endpoint) = shared {
                endpoint.wait_idle().await;
            }
        })
        .await;
    }
}

/// One HTTP/3 connection of an [`H3Transport`].
pub struct H3Connection {
    /// Kept so the endpoint's socket lives as long as the connection; closing takes it.
    endpoint: std::sync::Mutex<Option<quinn::Endpoint>>,
    /// The endpoint is the client's shared one: its closing periods are quinn's.
    shared: bool,
    conn: quinn::Connection,
    /// The endpoint's socket, which holds the closing period once quinn is done.
    socket: Arc<RefusalAwareSocket>,
    watch: Arc<CloseWatch>,
    send: SendRequest,
    driver: H3Driver,
    closing: Arc<Closing>,
    limits: ResponseLimits,
}

/// The h3 connection's driver task: closing stops it, dropping the connection aborts it.
struct H3Driver(std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>);

impl H3Driver {
    /// Gives the task no time to finish (a zero timeout, which still waits for the runtime's
    /// timer to fire), then aborts it; the handle returned, if any, resolves once the aborted
    /// task's state is dropped.
    async fn finish(&self) -> Option<tokio::task::JoinHandle<()>> {
        let mut task = self.0.lock().ok().and_then(|mut task| task.take())?;
        if tokio::time::timeout(Duration::ZERO, &mut task)
            .await
            .is_ok()
        {
            return None;
        }
        task.abort();
        Some(task)
    }
}

impl Drop for H3Driver {
    fn drop(&mut self) {
        if let Some(task) = self.0.lock().ok().and_then(|mut task| task.take()) {
            task.abort();
        }
    }
}

/// `:status` and its three digits, as a field section's size counts them.
const STATUS_FIELD_BYTES: u64 = (":status".len() + 3 + 32) as u64;

/// What reads a streamed answer's body: each chunk with the time it was read and the answer's
/// status; an error stops the answer.
pub type OnData<'a> = dyn FnMut(&[u8], Instant, u16) -> Result<(), Failure> + Send + 'a;

/// What a request sends: its head, and its body if it has one.
pub type Outgoing = (http::Request<()>, Option<Bytes>);

/// A whole answer: its head, its body and its trailers.
pub struct Answer {
    /// From `started` to the response head.
    pub ttfb: Duration,
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub trailers: Option<http::HeaderMap>,
}

impl H3Connection {
    /// Sends one request and reads its answer to the end of the stream, its head held to the
    /// `response_*` limits and its body to the transport's `response_body_max_bytes`.
    pub async fn exchange(&self, outgoing: Outgoing, started: Instant) -> Result<Answer, Failure> {
        let limit = BodyLimit::Bytes(self.limits.max_body_bytes);
        self.exchange_limited(outgoing, started, limit).await
    }

    /// [`H3Connection::exchange`] with the body held to `answer_limit` instead: past it, or
    /// past a head limit, the answer fails as `bad_body` at once, naming the limit, and the
    /// stream is dropped (quinn stops it with STOP_SENDING); the connection goes on.
    pub async fn exchange_limited(
        &self,
        outgoing: Outgoing,
        started: Instant,
        answer_limit: BodyLimit,
    ) -> Result<Answer, Failure> {
        let mut body = BytesMut::new();
        let mut answer = self
            .exchange_streamed(outgoing, started, answer_limit, &mut |chunk, _, _| {
                body.extend_from_slice(chunk);
                Ok(())
            })
            .await?;
        answer.body = body.freeze();
        Ok(answer)
    }

    /// [`H3Connection::exchange_limited`], the body handed to `on_data` as it arrives (with
    /// the time it was read) instead of kept: the answer's `body` is empty. QUIC's stream
    /// window reopens as the body is read, so a slow `on_data` holds the server back; an
    /// error from it fails the request and drops (stops) the stream.
    pub async fn exchange_streamed(
        &self,
        outgoing: Outgoing,
        started: Instant,
        answer_limit: BodyLimit,
        on_data: &mut OnData<'_>,
    ) -> Result<Answer, Failure> {
        self.exchange_generated(outgoing, None, started, answer_limit, on_data)
            .await
    }

    /// [`H3Connection::exchange_streamed`] with a generated body after the request's own (a
    /// bulk upload): each piece is sent as QUIC's flow control takes it, none held longer.
    pub async fn exchange_generated(
        &self,
        (req, body): Outgoing,
        generated: Option<bench_core::bulk::Generated>,
        started: Instant,
        answer_limit: BodyLimit,
        on_data: &mut OnData<'_>,
    ) -> Result<Answer, Failure> {
        let mut send = self.send.clone();
        let mut stream = send
            .send_request(req)
            .await
            .map_err(|e| self.classify(&e))?;
        let mut sent = Ok(());
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            sent = stream.send_data(body).await;
        }
        for piece in generated.into_iter().flatten() {
            if sent.is_err() {
                break;
            }
            sent = stream.send_data(piece).await;
        }
        if sent.is_ok() {
            sent = stream.finish().await;
        }
        // RFC 9114 §4.1: a server whose answer does not need the rest of the request may stop
        // reading it (STOP_SENDING with H3_NO_ERROR) and answer in full: stop sending, read on.
        match sent {
            Err(e) if !is_no_error(&e) => return Err(self.classify(&e)),
            _ => {}
        }
        let resp = stream
            .recv_response()
            .await
            .map_err(|e| self.classify_limited(&e))?;
        let ttfb = started.elapsed();
        let status = resp.status().as_u16();
        // Past a limit the answer fails and its stream is dropped, which stops it (quinn sends
        // STOP_SENDING); h3's `stop_sending` is not called, as h3-quinn 0.0.10 panics on it while
        // a read is in flight.
        self.check_fields(resp.headers(), STATUS_FIELD_BYTES)?;
        let mut meter = answer_limit.meter();
        let length: Option<usize> = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        let mut received = 0usize;
        // An abort with H3_NO_ERROR after the whole answer, as long as its content-length
        // says, ends the answer (RFC 9114 §4.1); before that, the answer is cut short.
        let complete = |e: &h3::error::StreamError, received: usize| {
            is_no_error(e) && length == Some(received)
        };
        let mut ended_by_abort = false;
        loop {
            match stream.recv_data().await {
                Ok(Some(mut chunk)) => {
                    let at = Instant::now();
                    while chunk.has_remaining() {
                        let part = chunk.chunk();
                        meter.feed(part)?;
                        on_data(part, at, status)?;
                        let n = part.len();
                        received += n;
                        chunk.advance(n);
                    }
                }
                Ok(None) => break,
                Err(e) if complete(&e, received) => {
                    ended_by_abort = true;
                    break;
                }
                Err(e) => return Err(self.cut_short(&e, received, length)),
            }
        }
        // Trailers end the stream where a server sends them; read them so the stream ends
        // cleanly (not with STOP_SENDING).
        let mut trailers = None;
        if !ended_by_abort {
            match stream.recv_trailers().await {
                Ok(Some(read)) => {
                    self.check_fields(&read, 0)?;
                    trailers = Some(read);
                }
                Ok(None) => {}
                Err(e) if complete(&e, received) => {}
                Err(e) if too_large(&e).is_some() => return Err(self.classify_limited(&e)),
                Err(e) => return Err(self.cut_short(&e, received, length)),
            }
        }
        Ok(Answer {
            ttfb,
            status,
            headers: resp.into_parts().0.headers,
            body: Bytes::new(),
            trailers,
        })
    }

    /// [`H3Connection::classify`], and a HEADERS frame the watched stream refused as the head
    /// limit: the message gives the frame's announced length (not a decoded size) and says
    /// the frame was refused at its frame header, before its payload.
    fn classify_limited(&self, err: &h3::error::StreamError) -> Failure {
        match too_large(err) {
            Some(refused) => Failure::new(
                FailureClass::BadBody,
                format!(
                    "HEADERS frame of {} B announced, above {HEAD_KNOB} ({} B): refused at its frame header",
                    refused.announced, self.limits.max_head_bytes
                ),
            )
            .with_code(HEAD_KNOB),
            None => self.classify(err),
        }
    }

    /// A head or trailer section held to the `response_*` limits: its field count, and its
    /// size as HTTP/3 counts it (RFC 9114 §4.2.2: each field's name and value and 32 bytes),
    /// `extra` added for the pseudo-header h3 has taken out of the map.
    fn check_fields(&self, fields: &http::HeaderMap, extra: u64) -> Result<(), Failure> {
        self.limits.check_header_count(fields.len())?;
        let size = fields
            .iter()
            .map(|(name, value)| (name.as_str().len() + value.len() + 32) as u64)
            .sum::<u64>()
            + extra;
        if size > self.limits.max_head_bytes as u64 {
            return Err(self.limits.head_failure(size));
        }
        Ok(())
    }

    /// A failure while the answer's body was read: an abort with H3_NO_ERROR says how much
    /// of the answer came (a clean abort, but of an incomplete answer).
    fn cut_short(
        &self,
        err: &h3::error::StreamError,
        received: usize,
        length: Option<usize>,
    ) -> Failure {
        if !is_no_error(err) {
            return self.classify(err);
        }
        let expected = length.map_or("no content-length".to_string(), |n| {
            format!("content-length {n}")
        });
        Failure::new(
            FailureClass::ConnReset,
            format!(
                "the server aborted the answer with H3_NO_ERROR after {received} bytes of its body ({expected}): the answer is incomplete"
            ),
        )
    }

    /// h3 flattens quinn's errors into its own; the connection's close reason says more. A
    /// request the server did not take (its GOAWAY came first, or it rejected the stream
    /// with H3_REQUEST_REJECTED, RFC 9114 §4.1.1 and §5.2) is unprocessed.
    fn classify(&self, err: &h3::error::StreamError) -> Failure {
        if let Some(f) = unprocessed(err) {
            return f;
        }
        match self.conn.close_reason() {
            Some(reason) => classify_quinn(Phase::Request, &reason),
            None => classify_h3(&err.to_string(), Phase::Request),
        }
    }
}

impl H3Connection {
    /// UDP payload bytes this connection has sent and received.
    pub fn wire_bytes(&self) -> WireBytes {
        let stats = self.conn.stats();
        WireBytes {
            sent: stats.udp_tx.bytes,
            received: stats.udp_rx.bytes,
        }
    }

    /// Closes the connection (the client closes first).
    pub async fn close(&self) {
        // Client closes first; the endpoint stays in the closing period in the background,
        // like a TCP TIME_WAIT, counted so that `settle` can wait for it. Once quinn has sent
        // the CONNECTION_CLOSE and set the period's end, its endpoint and connection state go
        // and the socket alone holds the period (`crate::closing`): at 500 new-conn workers
        // that cut the load generator's peak RSS from 141–147 MB to 59–62 MB (fafeca0).
        let Some(endpoint) = self.endpoint.lock().ok().and_then(|mut e| e.take()) else {
            return;
        };
        if self.shared {
            // One socket carries every connection: quinn's endpoint keeps this one's state
            // for its closing period and answers late packets, as a QUIC client library does.
            self.conn.close(0u32.into(), b"done");
            drop(endpoint);
            if let Some(h3_driver) = self.driver.finish().await {
                let _ = h3_driver.await;
            }
            return;
        }
        let closed_by_peer = self.conn.close_reason().is_some();
        let closed_at = Instant::now();
        self.watch.start();
        self.conn.close(0u32.into(), b"done");
        self.closing.endpoints.fetch_add(1, Ordering::SeqCst);
        let (h3_stopped, h3_driver) = tokio::sync::oneshot::channel();
        let (conn, socket, watch, closing) = (
            self.conn.clone(),
            self.socket.clone(),
            self.watch.clone(),
            self.closing.clone(),
        );
        tokio::spawn(async move {
            let closed = if closed_by_peer {
                None
            } else {
                watch.closed(&conn, CLOSE_SENT_BOUND).await
            };
            match closed {
                Some(closed) => {
                    // quinn's state goes once the aborted drivers are dropped and so are this
                    // task's handles: let go of the handles first, so that it goes as the
                    // runtime drops the drivers rather than a scheduler turn later, when this
                    // task has seen them end. Under load at 500 new-conn workers on one thread
                    // every turn is long, and closed connections held quinn's whole state
                    // meanwhile (results/h3-client-memory/closing-release.txt).
                    let drivers = watch.abort_drivers();
                    drop((conn, endpoint));
                    for driver in drivers {
                        let _ = driver.await;
                    }
                    drop(watch);
                    // The h3 driver's handles to the connection go too before this counts.
                    if let Ok(Some(h3_driver)) = h3_driver.await {
                        let _ = h3_driver.await;
                    }
                    closing.released.fetch_add(1, Ordering::SeqCst);
                    closing.period(closed.until.saturating_duration_since(closed_at));
                    closed.hold(&*socket).await;
                }
                None => {
                    drop(conn);
                    closing.by_quinn.fetch_add(1, Ordering::SeqCst);
                    endpoint.wait_idle().await;
                }
            }
            drop(socket);
            closing.endpoints.fetch_sub(1, Ordering::SeqCst);
            closing.ended.notify_waiters();
        });
        let _ = h3_stopped.send(self.driver.finish().await);
    }
}

/// Whether a QUIC transport error code carries a TLS alert (RFC 9000 §20.1: CRYPTO_ERROR is
/// 0x0100–0x01ff, the alert in the low byte).
fn is_crypto(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

/// Maps quinn's connection errors onto the shared classes.
pub fn classify_quinn(phase: Phase, err: &quinn::ConnectionError) -> Failure {
    let class = match err {
        quinn::ConnectionError::TimedOut => match phase {
            Phase::Request => FailureClass::QuicIdleTimeout,
            _ => FailureClass::HandshakeTimeout,
        },
        quinn::ConnectionError::TransportError(t) if is_crypto(t.code) => FailureClass::TlsFailed,
        quinn::ConnectionError::ConnectionClosed(c) if is_crypto(c.error_code) => {
            FailureClass::TlsFailed
        }
        quinn::ConnectionError::TransportError(_) if phase == Phase::Handshake => {
            FailureClass::TlsFailed
        }
        quinn::ConnectionError::Reset
        | quinn::ConnectionError::ConnectionClosed(_)
        | quinn::ConnectionError::ApplicationClosed(_)
        | quinn::ConnectionError::LocallyClosed => FailureClass::ConnReset,
        _ => return classify_error(phase, err),
    };
    Failure::new(class, err.to_string())
}

/// The failure of a request the server did not process, if `err` says so: the server's
/// GOAWAY arrived before the request was sent (h3 then refuses to open the stream), or the
/// server reset the stream with H3_REQUEST_REJECTED. h3 0.0.8 keeps the GOAWAY's stream id
/// to itself, so a request sent before the GOAWAY arrived and above its id shows only as the
/// server's reset or close of the connection.
fn unprocessed(err: &h3::error::StreamError) -> Option<Failure> {
    match err {
        h3::error::StreamError::RemoteClosing { .. } => Some(Failure::unprocessed(
            "the server sent GOAWAY; no new requests on this connection",
        )),
        h3::error::StreamError::RemoteTerminate { code, .. }
            if *code == h3::error::Code::H3_REQUEST_REJECTED =>
        {
            Some(Failure::unprocessed(
                "request rejected by the server (H3_REQUEST_REJECTED)",
            ))
        }
        _ => None,
    }
}

/// The watched stream's refusal of a HEADERS frame above the head limit, if `err` is one.
fn too_large(err: &h3::error::StreamError) -> Option<crate::limited::HeadersFrameTooLarge> {
    match err {
        h3::error::StreamError::Undefined { 0: e, .. } => e
            .downcast_ref::<crate::limited::HeadersFrameTooLarge>()
            .copied(),
        _ => None,
    }
}

/// The peer ended our side of the stream, or its own, with H3_NO_ERROR (STOP_SENDING or
/// RESET_STREAM): "no error", when what was needed has been exchanged (RFC 9114 §4.1).
fn is_no_error(err: &h3::error::StreamError) -> bool {
    matches!(
        err,
        h3::error::StreamError::RemoteTerminate { code, .. } if *code == h3::error::Code::H3_NO_ERROR
    )
}

/// Maps an h3 error that carries no quinn close reason (stream-level errors).
fn classify_h3(text: &str, phase: Phase) -> Failure {
    let class = if text.contains("Timeout") || text.contains("timeout") {
        match phase {
            Phase::Request => FailureClass::QuicIdleTimeout,
            _ => FailureClass::HandshakeTimeout,
        }
    } else {
        FailureClass::ConnReset
    };
    Failure::new(class, text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::testkit::client_settings;
    use bench_core::PayloadProfile;
    use quinn::AsyncUdpSocket as _;

    /// A server on this transport that answers every request with an empty 200.
    fn start_server(
        certs: &std::path::Path,
    ) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let paths = bench_core::tls::ensure_certs(certs).expect("certificates");
        let identity = bench_core::tls::ServerIdentity::load(&paths).expect("identity");
        let bound = crate::server::bind(
            bench_core::ServerSettings {
                listen: "127.0.0.1:0".parse().unwrap(),
                tls: Some(Arc::new(identity)),
                payload: PayloadProfile::Small,
                fault: None,
                backlog: 1024,
                tuning: Default::default(),
                service_time: Default::default(),
            },
            b"h3",
            |request: crate::server::Request| async move {
                let Ok((_, mut stream)) = request.resolve_request().await else {
                    return;
                };
                while let Ok(Some(_)) = stream.recv_data().await {}
                let head = http::Response::builder().status(200).body(()).unwrap();
                if stream.send_response(head).await.is_ok() {
                    let _ = stream.finish().await;
                }
            },
        )
        .expect("bind");
        let addr = bound.local_addr;
        (
            addr,
            tokio::spawn(async move {
                let _ = bound.serving.await;
            }),
        )
    }

    /// Every close hands its closing period to the socket alone: quinn's drivers are stopped
    /// and nothing of quinn holds the socket any more (its endpoint, with the 47 KB receive
    /// buffer, and its connection state are dropped), the period kept is the one quinn set
    /// (3 PTO, each at least the server's 25 ms max_ack_delay), and when it ends the socket
    /// is closed too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_period_is_held_by_the_socket_alone() {
        bench_core::tls::install_crypto_provider();
        let certs = tempfile::tempdir().expect("temp dir");
        let (addr, _server) = start_server(certs.path());
        let settings = client_settings(addr, certs.path(), false, PayloadProfile::Small);
        let client = H3Transport::new(&settings, b"h3").expect("client");
        const N: u64 = 8;
        let mut sockets = Vec::new();
        for id in 0..N {
            let (conn, _) = client.open().await.expect("connect");
            let request = http::Request::get(format!("https://localhost:{}/{id}", addr.port()))
                .body(())
                .unwrap();
            let answer = conn
                .exchange((request, None), Instant::now())
                .await
                .expect("request");
            assert_eq!(answer.status, 200);
            sockets.push(Arc::downgrade(&conn.socket));
            conn.close().await;
            drop(conn);
        }
        let closing = &client.closing;
        let handled =
            || closing.released.load(Ordering::SeqCst) + closing.by_quinn.load(Ordering::SeqCst);
        let bound = Instant::now() + Duration::from_secs(30);
        while handled() < N && Instant::now() < bound {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            closing.by_quinn.load(Ordering::SeqCst),
            0,
            "closings left to quinn"
        );
        assert_eq!(closing.released.load(Ordering::SeqCst), N);
        for socket in &sockets {
            assert!(
                socket.strong_count() <= 1,
                "quinn still holds a released endpoint's socket ({} references)",
                socket.strong_count()
            );
        }
        let shortest = Duration::from_micros(closing.shortest_period_us.load(Ordering::SeqCst));
        let longest = Duration::from_micros(closing.longest_period_us.load(Ordering::SeqCst));
        assert!(
            shortest >= 3 * Duration::from_millis(25),
            "closing period {shortest:?} is shorter than 3 PTO can be"
        );
        assert!(
            longest < Duration::from_secs(30),
            "closing period {longest:?}: not the closing timer"
        );
        client.settle(Duration::from_secs(30)).await;
        assert_eq!(closing.endpoints.load(Ordering::SeqCst), 0);
        assert!(sockets.iter().all(|s| s.strong_count() == 0));
    }

    /// A shared endpoint's one socket takes every connection's datagrams, so it gets the
    /// server's buffer size (the kernel's default overflowed at 500 workers); a per-connection
    /// socket keeps the kernel's default, and a size the run sets holds for both.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_shared_endpoint_socket_gets_the_servers_buffer_size() {
        bench_core::tls::install_crypto_provider();
        let certs = tempfile::tempdir().expect("temp dir");
        bench_core::tls::ensure_certs(certs.path()).expect("certificates");
        let sysctl = |name: &str| -> usize {
            std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
                .expect("sysctl")
                .trim()
                .parse()
                .expect("number")
        };
        // Linux grants min(asked, rmem_max) and reports twice that.
        let granted = |asked: usize| 2 * asked.min(sysctl("rmem_max"));
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut settings = client_settings(peer, certs.path(), false, PayloadProfile::Small);
        let buffer_of = |settings: &ClientSettings| {
            let client = H3Transport::new(settings, b"h3").expect("client");
            let made = client.endpoint().expect("endpoint");
            made.socket.recv_buffer_bytes().expect("SO_RCVBUF")
        };
        assert_eq!(buffer_of(&settings), sysctl("rmem_default"));
        settings.tuning.quic_endpoint = QuicEndpoint::Shared;
        assert_eq!(
            buffer_of(&settings),
            granted(bench_core::stack::DEFAULT_SERVER_UDP_BUFFER_BYTES)
        );
        settings.tuning.udp_buffer_bytes = Some(1 << 20);
        assert_eq!(buffer_of(&settings), granted(1 << 20));
        settings.tuning.quic_endpoint = QuicEndpoint::PerConnection;
        assert_eq!(buffer_of(&settings), granted(1 << 20));
    }

    /// GRO on the one socket of a shared endpoint (as on the server's), never on a
    /// per-connection socket, and not when the run turns QUIC's offloads off.
    #[tokio::test]
    async fn only_a_shared_endpoint_socket_coalesces_receives() {
        bench_core::tls::install_crypto_provider();
        let certs = tempfile::tempdir().expect("temp dir");
        bench_core::tls::ensure_certs(certs.path()).expect("certificates");
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut settings = client_settings(peer, certs.path(), false, PayloadProfile::Small);
        let segments_of = |settings: &ClientSettings| {
            let client = H3Transport::new(settings, b"h3").expect("client");
            let made = client.endpoint().expect("endpoint");
            made.socket.max_receive_segments()
        };
        assert_eq!(segments_of(&settings), 1);
        settings.tuning.quic_endpoint = QuicEndpoint::Shared;
        let platform = crate::udp::platform_state(peer).expect("platform");
        assert_eq!(segments_of(&settings), platform.gro_segments());
        settings.tuning.quic_offload = Some(false);
        assert_eq!(segments_of(&settings), 1);
    }

    /// A closing socket answers what arrives with the CONNECTION_CLOSE, at a falling rate
    /// (the 1st, 2nd, 4th and 8th datagram of 8), and stops at the deadline.
    #[tokio::test]
    async fn closing_socket_answers_with_backoff() {
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let socket = RefusalAwareSocket::connect(
            peer.local_addr().expect("addr"),
            None,
            &Default::default(),
            &crate::udp::platform_state(peer.local_addr().expect("addr")).expect("platform"),
            Arc::default(),
            false,
        )
        .expect("socket");
        let local = socket.local_addr().expect("addr");
        for _ in 0..8 {
            peer.send_to(b"late packet", local).expect("send");
        }
        let closed = crate::closing::Closed {
            datagram: b"close".to_vec(),
            until: Instant::now() + Duration::from_secs(1),
        };
        closed.hold(&*socket).await;
        peer.set_nonblocking(true).expect("nonblocking");
        let mut answers = 0;
        let mut buf = [0u8; 64];
        while let Ok((n, _)) = peer.recv_from(&mut buf) {
            assert_eq!(&buf[..n], b"close");
            answers += 1;
        }
        assert_eq!(answers, 4);
    }
}
