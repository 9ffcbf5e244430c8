//! The library clients' shared hyper glue: the `client = "library"` implementations of the
//! HTTP/1.1, HTTP/2 and gRPC stacks run what an application would (hyper's client
//! connections, tonic's generated client on them), on the same timed, byte-counting streams as
//! the lean clients, so that the two implementations differ in the client alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::failure::{classify_error, error_chain_text, timeout_class};
use bench_core::net::{ConnDriver, TcpConnector, WireCounters};
use bench_core::user_service::{RenderedRequest, RestCalls};
use bench_core::workload::validate_json_item;
use bench_core::{ConnectTiming, Failure, FailureClass, PayloadProfile, Phase, Reply};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// How long closing waits for hyper's connection task and the server's FIN.
const CLOSE_WITHIN: Duration = Duration::from_secs(1);

/// A hyper client connection the suite opened: the sender, the task driving the connection,
/// the socket's byte counters and how long the setup took.
pub struct Opened<S> {
    pub send: S,
    pub driver: ConnDriver,
    pub counters: Arc<WireCounters>,
    pub timing: ConnectTiming,
}

/// Opens a TCP (+TLS) connection and an HTTP/1.1 client connection on it; its task ends with
/// the suite's close (FIN first, then the server's FIN), as the lean client's does.
pub async fn http1<B>(
    connector: &TcpConnector,
) -> Result<Opened<hyper::client::conn::http1::SendRequest<B>>, Failure>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stream, timing, closer) = connector.connect().await?;
    let counters = stream.counters();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| classify_hyper(Phase::Handshake, &e))?;
    let driver = ConnDriver::spawn(async move {
        let _ = conn.await;
        closer.finish(CLOSE_WITHIN).await;
    });
    Ok(Opened {
        send,
        driver,
        counters,
        timing,
    })
}

/// Opens a TCP (+TLS) connection and an HTTP/2 client connection on it with the given initial
/// windows (the servers' windows, so both directions match as with the lean client).
pub async fn http2<B>(
    connector: &TcpConnector,
    stream_window: u32,
    connection_window: u32,
) -> Result<Opened<hyper::client::conn::http2::SendRequest<B>>, Failure>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stream, timing, closer) = connector.connect().await?;
    let counters = stream.counters();
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(stream_window)
        .initial_connection_window_size(connection_window)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| classify_hyper(Phase::Handshake, &e))?;
    let driver = ConnDriver::spawn(async move {
        let _ = conn.await;
        closer.finish(CLOSE_WITHIN).await;
    });
    Ok(Opened {
        send,
        driver,
        counters,
        timing,
    })
}

/// Maps a hyper error: its own notion of timeouts and early closes first, the rest by cause.
pub fn classify_hyper(phase: Phase, err: &hyper::Error) -> Failure {
    let class = if err.is_timeout() {
        Some(timeout_class(phase))
    } else if err.is_incomplete_message() || err.is_canceled() || err.is_closed() {
        Some(FailureClass::ConnReset)
    } else {
        None
    };
    match class {
        Some(class) => Failure::new(class, error_chain_text(err)),
        None => classify_error(phase, err),
    }
}

/// A REST answer read to its end: status, body, and times from the request's start (time to
/// first byte = the response head).
pub struct RestAnswer {
    pub status: u16,
    pub body: hyper::body::Bytes,
    pub ttfb: Duration,
    pub total: Duration,
}

/// Reads a REST answer to its end, timed from `started`.
pub async fn read_rest_answer(
    resp: hyper::Response<Incoming>,
    started: Instant,
) -> Result<RestAnswer, Failure> {
    let ttfb = started.elapsed();
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| classify_hyper(Phase::Request, &e))?
        .to_bytes();
    Ok(RestAnswer {
        status,
        body,
        ttfb,
        total: started.elapsed(),
    })
}

/// Reads a REST answer to its end and validates it as the item `id`, timed from `started`
/// (time to first byte = the response head).
pub async fn read_rest_item(
    resp: hyper::Response<Incoming>,
    started: Instant,
    id: u64,
    payload: PayloadProfile,
) -> Result<Reply, Failure> {
    let RestAnswer {
        status,
        body,
        ttfb,
        total,
    } = read_rest_answer(resp, started).await?;
    if status != 200 {
        return Err(
            Failure::new(FailureClass::BadStatus, format!("HTTP status {status}"))
                .with_code(status.to_string()),
        );
    }
    validate_json_item(&body, id, payload)?;
    Ok(Reply {
        messages: 0,
        reopened: None,
        streamed: false,
        ttfb,
        total,
        body_bytes: body.len() as u64,
    })
}

/// A target's rendered request as a hyper request to `uri` (origin-form on HTTP/1.1, absolute
/// on HTTP/2), with `host` set when given; a request hyper cannot express (a rendered path or
/// header value that is not valid HTTP) fails as `other`.
pub fn target_request(
    calls: &RestCalls,
    rendered: &RenderedRequest,
    uri: &str,
    host: Option<&str>,
) -> Result<hyper::Request<Full<hyper::body::Bytes>>, Failure> {
    let mut builder = hyper::Request::builder()
        .method(calls.method(rendered))
        .uri(uri);
    if let Some(host) = host {
        builder = builder.header(hyper::header::HOST, host);
    }
    for (name, value) in calls.headers(rendered) {
        builder = builder.header(name, value);
    }
    let body = if calls.has_body(rendered) {
        let body = rendered.body();
        builder = builder.header(hyper::header::CONTENT_LENGTH, body.len());
        hyper::body::Bytes::copy_from_slice(body)
    } else {
        hyper::body::Bytes::new()
    };
    builder.body(Full::new(body)).map_err(|e| {
        Failure::new(
            FailureClass::Other,
            format!("the rendered request is not valid HTTP: {e}"),
        )
    })
}
