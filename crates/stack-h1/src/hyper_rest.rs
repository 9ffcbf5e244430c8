//! The hyper glue the two hyper-based REST stacks (HTTP/1.1 and HTTP/2) share: answering the
//! workload, reading a response and mapping hyper's errors.

use std::sync::Arc;
use std::time::Instant;

use bench_core::failure::classify_error;
use bench_core::workload::{validate_json_item, ServerWorkload};
use bench_core::{Failure, FailureClass, PayloadProfile, Phase, Reply};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

/// Answers one REST request of the workload.
pub async fn respond(
    workload: Arc<ServerWorkload>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let reply = workload.rest(req.method().as_str(), req.uri().path());
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    let mut resp = Response::new(Full::new(reply.body));
    *resp.status_mut() = hyper::StatusCode::from_u16(reply.status).expect("valid status");
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    Ok(resp)
}

/// Maps a hyper error: its own notion of timeouts and early closes first, the rest by cause.
pub fn classify_hyper(phase: Phase, err: &hyper::Error) -> Failure {
    let class = if err.is_timeout() {
        Some(bench_core::failure::timeout_class(phase))
    } else if err.is_incomplete_message() || err.is_canceled() || err.is_closed() {
        Some(FailureClass::ConnReset)
    } else {
        None
    };
    match class {
        Some(class) => Failure::new(class, bench_core::failure::error_chain_text(err)),
        None => classify_error(phase, err),
    }
}

/// Reads a response to its end and validates it as the item `id`; timed from `started`.
pub async fn read_item(
    resp: Response<Incoming>,
    started: Instant,
    id: u64,
    payload: PayloadProfile,
) -> Result<Reply, Failure> {
    let ttfb = started.elapsed();
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| classify_hyper(Phase::Request, &e))?
        .to_bytes();
    let total = started.elapsed();
    if status != hyper::StatusCode::OK {
        return Err(Failure::new(
            FailureClass::BadStatus,
            format!("HTTP status {}", status.as_u16()),
        ));
    }
    validate_json_item(&body, id, payload)?;
    Ok(Reply {
        ttfb,
        total,
        body_bytes: body.len() as u64,
    })
}
