//! gRPC-over-HTTP/3 server: the workload's item service and the health check in gRPC's HTTP
//! mapping, answered by our own handler on the suite's HTTP/3 server transport
//! (`h3-transport`: the same endpoints, QUIC tuning and task per request as the `h3` stack).
//! The messages, their limit and the item are `grpc-wire`'s, as on the `grpc` stack's tonic
//! server; fault injection and service time are the workload's.

use std::sync::Arc;

use bench_core::workload::{padding, FaultInjector, FaultKind};
use bench_core::{BoundServer, ServerSettings, ServiceTimeSpec};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use grpc_wire::health::{health_check_response::ServingStatus, HealthCheckResponse};
use grpc_wire::pb::GetItemRequest;
use grpc_wire::{
    frame, request_message, Refusal, GET_ITEM_PATH, HEALTH_CHECK_PATH, MAX_MESSAGE_BYTES,
    PREFIX_BYTES, STATUS_INTERNAL, STATUS_UNIMPLEMENTED, UNDECODABLE_MESSAGE,
};
use h3_transport::server::{Request, Stream};
use prost::Message;

/// What every request of one server shares.
struct Service {
    description: String,
    faults: FaultInjector,
    service_time: ServiceTimeSpec,
}

pub fn bind(settings: ServerSettings) -> anyhow::Result<BoundServer> {
    let service = Arc::new(Service {
        description: padding(settings.payload),
        faults: FaultInjector::new(settings.fault),
        service_time: settings.service_time,
    });
    h3_transport::server::bind(settings, crate::ALPN, move |request| {
        let service = service.clone();
        async move {
            let _ = serve_request(request, &service).await;
        }
    })
}

/// The answer to one call.
enum Answer {
    /// HTTP 200 with one message and grpc-status 0 in the trailers.
    Message(Bytes),
    /// A trailers-only answer carrying a non-OK status.
    Status(Refusal),
    /// Not a gRPC request: a plain HTTP status (gRPC over HTTP/2, "Requests").
    Http(u16),
}

async fn serve_request(resolver: Request, service: &Service) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    // Read the request stream to its end first (as the h3 stack does: dropping it early makes
    // quinn send STOP_SENDING), keeping no more than one message of the largest size.
    let mut body = BytesMut::new();
    let mut oversized = false;
    while let Some(mut chunk) = stream.recv_data().await? {
        if body.len() + chunk.remaining() <= PREFIX_BYTES + MAX_MESSAGE_BYTES {
            body.put(&mut chunk);
        } else {
            oversized = true;
            chunk.advance(chunk.remaining());
        }
    }
    let body = body.freeze();
    let is_grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let answer = if req.method() != http::Method::POST {
        Answer::Http(405)
    } else if !is_grpc {
        Answer::Http(415)
    } else if oversized {
        Answer::Status(Refusal {
            status: grpc_wire::STATUS_RESOURCE_EXHAUSTED,
            message: "message larger than the server's limit",
        })
    } else {
        match req.uri().path() {
            GET_ITEM_PATH => get_item(&body, service).await,
            HEALTH_CHECK_PATH => match request_message(&body) {
                Ok(_) => Answer::Message(frame(&HealthCheckResponse {
                    status: ServingStatus::Serving as i32,
                })),
                Err(refusal) => Answer::Status(refusal),
            },
            _ => Answer::Status(Refusal {
                status: STATUS_UNIMPLEMENTED,
                message: "unknown method",
            }),
        }
    };
    send(&mut stream, answer).await
}

/// The workload's item for a GetItem call, with the fault the injector picks.
async fn get_item(body: &Bytes, service: &Service) -> Answer {
    let request = match request_message(body) {
        Ok(message) => match GetItemRequest::decode(message) {
            Ok(request) => request,
            Err(_) => {
                return Answer::Status(Refusal {
                    status: STATUS_INTERNAL,
                    message: "request is not a GetItemRequest",
                })
            }
        },
        Err(refusal) => return Answer::Status(refusal),
    };
    let fault = service.faults.next();
    let id = request.id;
    // The service's CPU work runs here, on the handler's thread; its wait joins the delay.
    let mut wait = service.service_time.begin(id);
    if let Some(FaultKind::Delay(d) | FaultKind::Stall(d)) = fault {
        wait += d;
    }
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    match fault {
        Some(FaultKind::Status) => Answer::Status(Refusal {
            status: STATUS_INTERNAL,
            message: "injected fault",
        }),
        Some(FaultKind::BadBody) => Answer::Message(Bytes::from_static(UNDECODABLE_MESSAGE)),
        Some(FaultKind::MissingField) => {
            let mut item = grpc_wire::item(id, "");
            item.name.clear();
            Answer::Message(frame(&item))
        }
        Some(FaultKind::Delay(_) | FaultKind::Stall(_)) | None => {
            Answer::Message(frame(&grpc_wire::item(id, &service.description)))
        }
    }
}

async fn send(stream: &mut Stream, answer: Answer) -> anyhow::Result<()> {
    let grpc_head = || {
        http::Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, "application/grpc")
    };
    match answer {
        Answer::Message(message) => {
            stream.send_response(grpc_head().body(())?).await?;
            stream.send_data(message).await?;
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            stream.send_trailers(trailers).await?;
        }
        Answer::Status(refusal) => {
            // Trailers-only: the status in the one header block (grpc-message needs no
            // percent-encoding, it is plain ASCII).
            let head = grpc_head()
                .header("grpc-status", refusal.status.to_string())
                .header("grpc-message", refusal.message)
                .body(())?;
            stream.send_response(head).await?;
        }
        Answer::Http(status) => {
            stream
                .send_response(http::Response::builder().status(status).body(())?)
                .await?;
        }
    }
    stream.finish().await?;
    Ok(())
}
