//! gRPC server: tonic's generated service served by hyper's http2 connection on our own TLS
//! streams (tonic's `ServerTlsConfig` cannot restrict TLS to 1.3).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use bench_core::net::tcp_server;
use bench_core::workload::{padding, FaultInjector, FaultKind};
use bench_core::{BoundServer, PayloadProfile, ServerSettings, ServiceTimeSpec};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body_util::StreamBody;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tonic::{Request, Response, Status};

use crate::health::health_server::{Health, HealthServer};
use crate::health::{
    health_check_response::ServingStatus, HealthCheckRequest, HealthCheckResponse,
};
use crate::pb::item_service_server::{ItemService, ItemServiceServer};
use crate::pb::{GetItemRequest, Item, ListItemsRequest, PutItemsReply};
use grpc_wire::streams::{self, ItemStream};

/// Streams one connection may carry at once (as on the HTTP/2 stack).
pub const MAX_CONCURRENT_STREAMS: u32 = 128;
/// Flow-control windows as on the HTTP/2 stack, set on both sides.
pub const STREAM_WINDOW: u32 = 1 << 20;
pub const CONNECTION_WINDOW: u32 = 4 << 20;

/// The workload's item service; faults decided by [`Router`] arrive in the request extensions.
struct Items {
    /// Each item's padding, shared by the items of every stream (no copy per call).
    description: Arc<str>,
    service_time: ServiceTimeSpec,
}

#[derive(Clone, Copy)]
struct InjectedFault(FaultKind);

#[tonic::async_trait]
impl ItemService for Items {
    async fn get_item(&self, req: Request<GetItemRequest>) -> Result<Response<Item>, Status> {
        let fault = req.extensions().get::<InjectedFault>().map(|f| f.0);
        let id = req.into_inner().id;
        // The service's CPU work runs here, on the handler's thread; its wait joins the delay.
        let mut wait = self.service_time.begin(id);
        if let Some(FaultKind::Delay(d) | FaultKind::Stall(d)) = fault {
            wait += d;
        }
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let mut item = grpc_wire::item(id, &self.description);
        match fault {
            Some(FaultKind::Status) => return Err(Status::internal("injected fault")),
            Some(FaultKind::MissingField) => {
                item.name.clear();
                item.description.clear();
            }
            Some(FaultKind::Delay(_) | FaultKind::Stall(_) | FaultKind::BadBody) | None => {}
        }
        Ok(Response::new(item))
    }

    type ListItemsStream = ItemStream;

    async fn list_items(
        &self,
        req: Request<ListItemsRequest>,
    ) -> Result<Response<ItemStream>, Status> {
        let fault = req.extensions().get::<InjectedFault>().map(|f| f.0);
        let ids = streams::list_ids(req.get_ref());
        self.stream_items(fault, ids).await
    }

    async fn put_items(
        &self,
        req: Request<tonic::Streaming<Item>>,
    ) -> Result<Response<PutItemsReply>, Status> {
        let fault = req.extensions().get::<InjectedFault>().map(|f| f.0);
        let reply = streams::count_uploads(req.into_inner()).await?;
        self.delay(fault, reply.last_id).await;
        if let Some(FaultKind::Status) = fault {
            return Err(Status::internal("injected fault"));
        }
        Ok(Response::new(reply))
    }

    type DownloadStream = streams::ChunkStream;

    async fn download(
        &self,
        req: Request<crate::pb::DownloadRequest>,
    ) -> Result<Response<streams::ChunkStream>, Status> {
        streams::chunks(req.get_ref()).map(Response::new)
    }

    async fn upload(
        &self,
        req: Request<tonic::Streaming<crate::pb::Chunk>>,
    ) -> Result<Response<crate::pb::UploadReply>, Status> {
        Ok(Response::new(
            streams::count_chunks(req.into_inner()).await?,
        ))
    }

    type ChatItemsStream = ItemStream;

    async fn chat_items(
        &self,
        req: Request<tonic::Streaming<GetItemRequest>>,
    ) -> Result<Response<ItemStream>, Status> {
        let fault = req.extensions().get::<InjectedFault>().map(|f| f.0);
        // Each request is answered as it arrives.
        self.stream_items(fault, streams::chat_ids(req.into_inner()))
            .await
    }
}

impl Items {
    /// The service time of request `id`, and an injected delay, waited out.
    async fn delay(&self, fault: Option<FaultKind>, id: u64) {
        let mut wait = self.service_time.begin(id);
        if let Some(FaultKind::Delay(d) | FaultKind::Stall(d)) = fault {
            wait += d;
        }
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// The items of `ids`, each after its service time; an injected fault acts on the whole
    /// call (a status instead of the answer, a delay before it) or on its first item (a
    /// missing field).
    async fn stream_items(
        &self,
        fault: Option<FaultKind>,
        ids: impl futures::Stream<Item = u64> + Send + 'static,
    ) -> Result<Response<ItemStream>, Status> {
        if let Some(FaultKind::Status) = fault {
            return Err(Status::internal("injected fault"));
        }
        if let Some(FaultKind::Delay(d) | FaultKind::Stall(d)) = fault {
            tokio::time::sleep(d).await;
        }
        let missing = matches!(fault, Some(FaultKind::MissingField));
        Ok(Response::new(streams::items(
            ids,
            self.description.clone(),
            self.service_time,
            missing,
        )))
    }
}

struct Serving;

#[tonic::async_trait]
impl Health for Serving {
    async fn check(
        &self,
        _req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }
}

/// Routes to the item or health service and applies fault injection; the bad-body fault is
/// answered here because tonic would only ever encode a valid message.
#[derive(Clone)]
struct Router {
    items: ItemServiceServer<Items>,
    health: HealthServer<Serving>,
    faults: Arc<FaultInjector>,
}

impl tower_service::Service<http::Request<Incoming>> for Router {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<Incoming>) -> Self::Future {
        if req.uri().path().starts_with("/grpc.health.v1.Health/") {
            return self.health.call(req).boxed();
        }
        match self.faults.next() {
            Some(FaultKind::BadBody) => async { Ok(undecodable_reply()) }.boxed(),
            fault => {
                if let Some(kind) = fault {
                    req.extensions_mut().insert(InjectedFault(kind));
                }
                self.items.call(req).boxed()
            }
        }
    }
}

/// A well-framed gRPC answer with status OK whose message is not valid protobuf.
fn undecodable_reply() -> http::Response<tonic::body::Body> {
    let frame = Bytes::from_static(grpc_wire::UNDECODABLE_MESSAGE);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames: Vec<Result<Frame<Bytes>, Infallible>> =
        vec![Ok(Frame::data(frame)), Ok(Frame::trailers(trailers))];
    let body = tonic::body::Body::new(StreamBody::new(futures::stream::iter(frames)));
    http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(body)
        .expect("valid response")
}

fn router(payload: PayloadProfile, faults: FaultInjector, service_time: ServiceTimeSpec) -> Router {
    Router {
        items: ItemServiceServer::new(Items {
            description: padding(payload).into(),
            service_time,
        })
        .max_decoding_message_size(grpc_wire::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(grpc_wire::MAX_MESSAGE_BYTES),
        health: HealthServer::new(Serving),
        faults: Arc::new(faults),
    }
}

pub fn bind(settings: ServerSettings) -> anyhow::Result<BoundServer> {
    let router = router(
        settings.payload,
        FaultInjector::new(settings.fault),
        settings.service_time,
    );
    tcp_server(&settings, crate::ALPN, move |stream| {
        let service = TowerToHyperService::new(router.clone());
        async move {
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}
