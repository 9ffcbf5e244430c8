//! gRPC client: tonic's unary call machinery on a hyper http2 connection we open ourselves, so
//! a "new connection" is exactly one new socket and handshake (no channel pool, no reconnects).

use std::error::Error as StdError;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use async_trait::async_trait;
use bench_core::net::{ConnDriver, TcpConnector, WireCounters};
use bench_core::workload::{validate_item, ItemView};
use bench_core::{
    classify_error, Client, ClientSettings, Connected, Connection, Failure, FailureClass,
    PayloadProfile, Phase, Reply, WireBytes,
};
use bytes::{Buf, BufMut, Bytes};
use futures::future::BoxFuture;
use futures::FutureExt;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use stack_h1::hyper_rest::classify_hyper;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use crate::pb::{GetItemRequest, Item};

pub struct GrpcClient {
    connector: TcpConnector,
    payload: PayloadProfile,
    origin: http::Uri,
}

impl GrpcClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let scheme = if settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(GrpcClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            origin: format!(
                "{scheme}://{}:{}",
                settings.server_name,
                settings.target.port()
            )
            .parse()?,
        })
    }
}

#[async_trait]
impl Client for GrpcClient {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (stream, timing, closer) = self.connector.connect().await?;
        let counters = stream.counters();
        let (send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| classify_hyper(Phase::Handshake, &e))?;
        let driver = ConnDriver::spawn_tcp(conn, closer);
        Ok(Connected {
            conn: Arc::new(GrpcConnection {
                send: std::sync::Mutex::new(Some(send)),
                driver,
                counters,
                payload: self.payload,
                origin: self.origin.clone(),
            }),
            timing,
        })
    }
}

struct GrpcConnection {
    send: std::sync::Mutex<Option<SendRequest<tonic::body::Body>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    origin: http::Uri,
}

#[async_trait]
impl Connection for GrpcConnection {
    async fn request(&self, id: u64) -> Result<Reply, Failure> {
        let send = self
            .send
            .lock()
            .expect("sender lock")
            .clone()
            .ok_or_else(|| Failure::new(FailureClass::ConnReset, "connection already closed"))?;
        let first_byte = Arc::new(OnceLock::new());
        let service = Http2Service {
            send,
            first_byte: first_byte.clone(),
        };
        let mut grpc = tonic::client::Grpc::with_origin(service, self.origin.clone());
        grpc.ready()
            .await
            .map_err(|e| classify_hyper(Phase::Request, &e))?;
        let request = Bytes::from(GetItemRequest { id }.encode_to_vec());
        let started = Instant::now();
        let result = grpc
            .unary(
                tonic::Request::new(request),
                http::uri::PathAndQuery::from_static(crate::GET_ITEM_PATH),
                RawCodec,
            )
            .await;
        let total = started.elapsed();
        let body = result.map_err(|s| classify_status(&s))?.into_inner();
        let ttfb = first_byte
            .get()
            .map_or(total, |t: &Instant| t.duration_since(started));
        let item = Item::decode(body.clone()).map_err(|e| {
            Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
        })?;
        let view = ItemView {
            id: Some(item.id),
            name: Some(item.name.as_str().into()),
            currency: Some(item.currency.as_str().into()),
            description_len: Some(item.description.len()),
        };
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            ttfb,
            total,
            body_bytes: body.len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        self.counters.snapshot()
    }

    async fn close(&self) {
        self.send.lock().expect("sender lock").take();
        self.driver.finish(std::time::Duration::from_secs(1)).await;
    }
}

/// A status the server sent is `bad_status`; one tonic made from a transport error carries
/// that error as its source and is classified by it.
fn classify_status(status: &tonic::Status) -> Failure {
    let Some(source) = status.source() else {
        return Failure::new(
            FailureClass::BadStatus,
            format!("gRPC status {:?}: {}", status.code(), status.message()),
        );
    };
    if let Some(h) = source.downcast_ref::<hyper::Error>() {
        return classify_hyper(Phase::Request, h);
    }
    let failure = classify_error(Phase::Request, source);
    if failure.class == FailureClass::Other
        && matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown
        )
    {
        return Failure::new(FailureClass::ConnReset, failure.detail);
    }
    failure
}

/// The hyper http2 sender as the tower service tonic's client expects; notes when the
/// response head arrives so time to first byte can be reported.
#[derive(Clone)]
struct Http2Service {
    send: SendRequest<tonic::body::Body>,
    first_byte: Arc<OnceLock<Instant>>,
}

impl tower_service::Service<http::Request<tonic::body::Body>> for Http2Service {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = BoxFuture<'static, Result<Self::Response, hyper::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.send.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let response = self.send.send_request(req);
        let first_byte = self.first_byte.clone();
        async move {
            let resp = response.await;
            let _ = first_byte.set(Instant::now());
            resp
        }
        .boxed()
    }
}

/// Passes message bytes through untouched, so decoding (and its failure class) happens in
/// our validation rather than inside tonic, where it would look like a server status.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
