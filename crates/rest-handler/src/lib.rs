//! The workload's REST handler for hyper, shared by the two hyper-based REST servers (HTTP/1.1
//! and HTTP/2): a layer below the stacks, so that neither stack crate depends on the other.

use std::sync::Arc;

use bench_core::workload::ServerWorkload;
use bytes::Bytes;
use http_body_util::Full;
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
