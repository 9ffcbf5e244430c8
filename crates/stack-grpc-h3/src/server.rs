//! gRPC-over-HTTP/3 server: the workload's item service and the health check in gRPC's HTTP
//! mapping, answered by our own handler on the suite's HTTP/3 server transport
//! (`h3-transport`: the same endpoints, QUIC tuning and task per request as the `h3` stack).
//! The messages, their limit and the item are `grpc-wire`'s, as on the `grpc` stack's tonic
//! server; fault injection and service time are the workload's.

use std::sync::Arc;

use bench_core::workload::{padding, FaultInjector, FaultKind};
use bench_core::{BoundServer, ServerSettings, ServiceTimeSpec};
use bytes::{Buf, Bytes};
use grpc_wire::bulk::{framed_chunks, valid_message_bytes, DOWNLOAD_PATH, UPLOAD_PATH};
use grpc_wire::health::{health_check_response::ServingStatus, HealthCheckResponse};
use grpc_wire::pb::{
    Chunk, DownloadRequest, GetItemRequest, Item, ListItemsRequest, PutItemsReply, UploadReply,
};
use grpc_wire::{
    frame, MessageReader, Refusal, CHAT_ITEMS_PATH, GET_ITEM_PATH, HEALTH_CHECK_PATH,
    LIST_ITEMS_PATH, MAX_MESSAGE_BYTES, PUT_ITEMS_PATH, STATUS_INTERNAL, STATUS_UNIMPLEMENTED,
    UNDECODABLE_MESSAGE,
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
    /// A streaming answer: the items of these ids, one message each (a ListItems range is not
    /// collected: its count is the client's).
    Items(Box<dyn Iterator<Item = u64> + Send>),
    /// A bulk download: its framed chunks, generated as they are sent.
    Chunks(bench_core::bulk::Generated),
}

async fn serve_request(resolver: Request, service: &Service) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    let path = req.uri().path().to_string();
    // Read the request stream to its end first (as the h3 stack does: dropping it early makes
    // quinn send STOP_SENDING), message by message: an upload (PutItems) is counted as it
    // arrives, other calls keep their messages, at most the largest message's size in all.
    let mut reader = MessageReader::new(MAX_MESSAGE_BYTES as u64);
    let mut messages: Vec<Bytes> = Vec::new();
    let mut kept = 0usize;
    let mut upload = PutItemsReply::default();
    let mut uploaded = UploadReply::default();
    let mut refused: Option<Refusal> = None;
    while let Some(mut chunk) = stream.recv_data().await? {
        if refused.is_none() {
            while chunk.has_remaining() {
                let part = chunk.chunk();
                reader.feed(part);
                let n = part.len();
                chunk.advance(n);
            }
            loop {
                match reader.next_message() {
                    Ok(Some(message)) if path == UPLOAD_PATH => match Chunk::decode(message) {
                        Ok(chunk) => uploaded.bytes += chunk.data.len() as u64,
                        Err(_) => refused = Some(not_a("Chunk")),
                    },
                    Ok(Some(message)) if path == PUT_ITEMS_PATH => match Item::decode(message) {
                        Ok(item) => {
                            upload.count += 1;
                            upload.last_id = item.id;
                        }
                        Err(_) => refused = Some(not_a("Item")),
                    },
                    Ok(Some(message)) => {
                        kept += message.len();
                        if kept > MAX_MESSAGE_BYTES {
                            refused = Some(too_large());
                        }
                        messages.push(message);
                    }
                    Ok(None) => break,
                    Err(f) if f.code.is_some() => refused = Some(too_large()),
                    Err(_) => refused = Some(not_framed()),
                }
                if refused.is_some() {
                    messages.clear();
                    break;
                }
            }
        } else {
            chunk.advance(chunk.remaining());
        }
    }
    if refused.is_none() && reader.finish().is_err() {
        refused = Some(not_framed());
    }
    let is_grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let unary = |messages: &[Bytes]| match messages {
        [one] => Ok(one.clone()),
        _ => Err(Refusal {
            status: STATUS_INTERNAL,
            message: "a unary call takes one message",
        }),
    };
    let answer = if req.method() != http::Method::POST {
        Answer::Http(405)
    } else if !is_grpc {
        Answer::Http(415)
    } else if let Some(refusal) = refused {
        Answer::Status(refusal)
    } else {
        match path.as_str() {
            GET_ITEM_PATH => match unary(&messages) {
                Ok(message) => get_item(message, service).await,
                Err(refusal) => Answer::Status(refusal),
            },
            LIST_ITEMS_PATH => match unary(&messages).map(ListItemsRequest::decode) {
                Ok(Ok(r)) => {
                    let end = r.first_id.saturating_add(u64::from(r.count));
                    Answer::Items(Box::new(r.first_id..end))
                }
                Ok(Err(_)) => Answer::Status(not_a("ListItemsRequest")),
                Err(refusal) => Answer::Status(refusal),
            },
            CHAT_ITEMS_PATH => {
                let ids: Result<Vec<u64>, _> = messages
                    .iter()
                    .map(|m| GetItemRequest::decode(m.clone()).map(|r| r.id))
                    .collect();
                match ids {
                    Ok(ids) => Answer::Items(Box::new(ids.into_iter())),
                    Err(_) => Answer::Status(not_a("GetItemRequest")),
                }
            }
            PUT_ITEMS_PATH => Answer::Message(frame(&upload)),
            UPLOAD_PATH => Answer::Message(frame(&uploaded)),
            DOWNLOAD_PATH => match unary(&messages).map(DownloadRequest::decode) {
                Ok(Ok(r)) if valid_message_bytes(r.message_bytes) => {
                    Answer::Chunks(framed_chunks(r.total_bytes, r.message_bytes))
                }
                Ok(_) => Answer::Status(not_a("DownloadRequest")),
                Err(refusal) => Answer::Status(refusal),
            },
            HEALTH_CHECK_PATH => match unary(&messages) {
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
    if let Answer::Items(ids) = answer {
        return stream_items(&mut stream, ids, service).await;
    }
    if let Answer::Chunks(pieces) = answer {
        return stream_chunks(&mut stream, pieces).await;
    }
    send(&mut stream, answer).await
}

fn too_large() -> Refusal {
    Refusal {
        status: grpc_wire::STATUS_RESOURCE_EXHAUSTED,
        message: "message larger than the server's limit",
    }
}

fn not_framed() -> Refusal {
    Refusal {
        status: STATUS_INTERNAL,
        message: "request is not uncompressed length-prefixed messages",
    }
}

fn not_a(what: &'static str) -> Refusal {
    Refusal {
        status: STATUS_INTERNAL,
        message: match what {
            "Item" => "request is not an Item",
            "ListItemsRequest" => "request is not a ListItemsRequest",
            "Chunk" => "request is not a Chunk",
            "DownloadRequest" => "request is not a valid DownloadRequest",
            _ => "request is not a GetItemRequest",
        },
    }
}

/// A streaming answer: the items of `ids` in order, each after its service time, each sent
/// as QUIC's flow control lets it go (a slow client holds the server back); an injected
/// fault acts on the whole call or on its first item, as on the tonic server.
async fn stream_items(
    stream: &mut Stream,
    ids: Box<dyn Iterator<Item = u64> + Send>,
    service: &Service,
) -> anyhow::Result<()> {
    let fault = service.faults.next();
    if let Some(FaultKind::Delay(d) | FaultKind::Stall(d)) = fault {
        tokio::time::sleep(d).await;
    }
    if let Some(FaultKind::Status) = fault {
        return send(
            stream,
            Answer::Status(Refusal {
                status: STATUS_INTERNAL,
                message: "injected fault",
            }),
        )
        .await;
    }
    let head = http::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .body(())?;
    stream.send_response(head).await?;
    for (k, id) in ids.enumerate() {
        let wait = service.service_time.begin(id);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let message = match fault {
            Some(FaultKind::BadBody) if k == 0 => Bytes::from_static(UNDECODABLE_MESSAGE),
            Some(FaultKind::MissingField) if k == 0 => {
                let mut item = grpc_wire::item(id, &service.description);
                item.name.clear();
                frame(&item)
            }
            _ => frame(&grpc_wire::item(id, &service.description)),
        };
        stream.send_data(message).await?;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    stream.send_trailers(trailers).await?;
    stream.finish().await?;
    Ok(())
}

/// A bulk download: each piece of its framed chunks sent as QUIC's flow control takes it.
async fn stream_chunks(
    stream: &mut Stream,
    pieces: bench_core::bulk::Generated,
) -> anyhow::Result<()> {
    let head = http::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .body(())?;
    stream.send_response(head).await?;
    for piece in pieces {
        stream.send_data(piece).await?;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    stream.send_trailers(trailers).await?;
    stream.finish().await?;
    Ok(())
}

/// The workload's item for a GetItem call, with the fault the injector picks.
async fn get_item(message: Bytes, service: &Service) -> Answer {
    let request = match GetItemRequest::decode(message) {
        Ok(request) => request,
        Err(_) => return Answer::Status(not_a("GetItemRequest")),
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
        Answer::Items(_) => unreachable!("streamed by stream_items"),
        Answer::Chunks(_) => unreachable!("streamed by stream_chunks"),
        Answer::Http(status) => {
            stream
                .send_response(http::Response::builder().status(status).body(())?)
                .await?;
        }
    }
    stream.finish().await?;
    Ok(())
}
