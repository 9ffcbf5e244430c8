//! gRPC library client (`client = "library"`): tonic's generated `ItemServiceClient` (prost
//! codec) on one hyper http2 client connection per [`bench_core::Connection`], as an
//! application runs it, except that we open the connection ourselves so that "a new
//! connection" is exactly one new socket and handshake (no channel pool, no reconnects).

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
use futures::future::BoxFuture;
use futures::FutureExt;
use hyper::client::conn::http2::SendRequest;
use library_client::classify_hyper;
use prost::Message;

use crate::pb::item_service_client::ItemServiceClient;
use crate::pb::GetItemRequest;

pub struct TonicClient {
    connector: TcpConnector,
    payload: PayloadProfile,
    origin: http::Uri,
    /// tonic's decoding limit, set from `grpc_max_receive_message_bytes`.
    max_message_bytes: usize,
}

impl TonicClient {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        let scheme = if settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(TonicClient {
            connector: TcpConnector::new(settings, crate::ALPN)?,
            payload: settings.payload,
            origin: format!(
                "{scheme}://{}:{}",
                settings.server_name,
                settings.target.port()
            )
            .parse()?,
            max_message_bytes: max_message_bytes(settings),
        })
    }
}

/// `grpc_max_receive_message_bytes` as tonic takes it.
fn max_message_bytes(settings: &ClientSettings) -> usize {
    usize::try_from(bench_core::limits::grpc_max_receive_message_bytes(
        &settings.tuning,
    ))
    .unwrap_or(usize::MAX)
}

#[async_trait]
impl Client for TonicClient {
    async fn connect(&self) -> Result<Connected, Failure> {
        let library_client::Opened {
            send,
            driver,
            counters,
            timing,
        } = library_client::http2(
            &self.connector,
            crate::server::STREAM_WINDOW,
            crate::server::CONNECTION_WINDOW,
        )
        .await?;
        Ok(Connected {
            conn: Arc::new(TonicConnection {
                send: std::sync::Mutex::new(Some(send)),
                driver,
                counters,
                payload: self.payload,
                origin: self.origin.clone(),
                max_message_bytes: self.max_message_bytes,
            }),
            timing,
        })
    }
}

struct TonicConnection {
    send: std::sync::Mutex<Option<SendRequest<tonic::body::Body>>>,
    driver: ConnDriver,
    counters: Arc<WireCounters>,
    payload: PayloadProfile,
    origin: http::Uri,
    max_message_bytes: usize,
}

#[async_trait]
impl Connection for TonicConnection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
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
        let mut client = ItemServiceClient::with_origin(service, self.origin.clone())
            .max_decoding_message_size(self.max_message_bytes);
        let started = Instant::now();
        let result = client.get_item(GetItemRequest { id }).await;
        let total = started.elapsed();
        let item = result.map_err(|s| classify_status(&s))?.into_inner();
        let ttfb = first_byte
            .get()
            .map_or(total, |t: &Instant| t.duration_since(started));
        let view = ItemView {
            id: Some(item.id),
            name: Some(item.name.as_str().into()),
            currency: Some(item.currency.as_str().into()),
            description_len: Some(item.description.len()),
        };
        validate_item(&view, id, self.payload)?;
        Ok(Reply {
            messages: 0,
            reopened: None,
            streamed: false,
            ttfb,
            total,
            body_bytes: item.encoded_len() as u64,
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

/// A status the server sent is `bad_status`. tonic turns a message that does not decode into
/// an INTERNAL status of its own, with prost's error as the message and no source: that one is
/// `bad_body`, as on the lean client. A status tonic made from a transport error carries
/// that error as its source and is classified by it.
fn classify_status(status: &tonic::Status) -> Failure {
    if let Some(f) = grpc_wire::tonic_limit_failure(status.code() as u32, status.message()) {
        return f;
    }
    let Some(source) = status.source() else {
        let undecodable = status.code() == tonic::Code::Internal
            && status
                .message()
                .starts_with("failed to decode Protobuf message");
        let class = if undecodable {
            FailureClass::BadBody
        } else {
            FailureClass::BadStatus
        };
        return Failure::new(
            class,
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

/// hyper's http2 sender as the tower service tonic's client expects; notes when the response
/// head arrives, so that time to first byte can be reported.
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
