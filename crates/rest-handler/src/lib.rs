//! The workload's REST handler for hyper, shared by the two hyper-based REST servers (HTTP/1.1
//! and HTTP/2): a layer below the stacks, so that neither stack crate depends on the other.

use std::sync::Arc;

use bench_core::bulk::{self, BulkRoute, Pieces};
use bench_core::workload::ServerWorkload;
use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};

type DataFrame = Result<Frame<Bytes>, std::convert::Infallible>;

/// An object's pieces as body frames, generated as hyper takes them.
type BulkFrames = futures::stream::Iter<std::iter::Map<Pieces, fn(Bytes) -> DataFrame>>;

fn data_frame(piece: Bytes) -> DataFrame {
    Ok(Frame::data(piece))
}

/// The answer's body: the item (or a short text), or a bulk object streamed piece by piece.
pub type Body = Either<Full<Bytes>, StreamBody<BulkFrames>>;

fn text(status: u16, body: &'static str) -> Response<Body> {
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from_static(body.as_bytes()))));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).expect("valid status");
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    resp
}

/// Answers one REST request of the workload.
pub async fn respond(
    workload: Arc<ServerWorkload>,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::convert::Infallible> {
    if let Some(route) = bulk::route(req.method().as_str(), req.uri().path()) {
        return Ok(match route {
            Err((status, why)) => text(status, why),
            Ok(BulkRoute::Send(n)) => {
                let frames: BulkFrames = futures::stream::iter(
                    Pieces::new(n, bulk::CHUNK_BYTES).map(data_frame as fn(Bytes) -> DataFrame),
                );
                let mut resp = Response::new(Either::Right(StreamBody::new(frames)));
                let headers = resp.headers_mut();
                headers.insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/octet-stream"),
                );
                headers.insert(hyper::header::CONTENT_LENGTH, n.into());
                resp
            }
            Ok(BulkRoute::Count) => {
                // Counted frame by frame as it arrives; nothing of it is kept.
                let mut body = req.into_body();
                let mut count = 0u64;
                loop {
                    match body.frame().await {
                        Some(Ok(frame)) => {
                            count += frame.data_ref().map_or(0, |d| d.len() as u64);
                        }
                        Some(Err(_)) => return Ok(text(400, "upload broke off\n")),
                        None => break,
                    }
                }
                let mut resp =
                    Response::new(Either::Left(Full::new(Bytes::from(format!("{count}\n")))));
                resp.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain"),
                );
                resp
            }
        });
    }
    let reply = workload.rest(req.method().as_str(), req.uri().path());
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    let mut resp = Response::new(Either::Left(Full::new(reply.body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(reply.status).expect("valid status");
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    Ok(resp)
}
