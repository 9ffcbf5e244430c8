//! gRPC-over-HTTP/3 library client (`client = "library"`): tonic's generated
//! `ItemServiceClient` on tonic-h3's channel (h3-util over h3-quinn), as an application runs
//! it, except that the QUIC connection is opened here, one quinn endpoint per connection, and
//! handed to the channel once, so that "a new connection" is exactly one new socket and
//! handshake (tonic-h3 would otherwise reconnect on its own).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bench_core::workload::{validate_item, ItemView};
use bench_core::{
    Client, ClientSettings, Connected, Connection, Failure, FailureClass, PayloadProfile, Phase,
    Reply, WireBytes,
};
use grpc_wire::pb::item_service_client::ItemServiceClient;
use grpc_wire::pb::GetItemRequest;
use h3_transport::H3Transport;
use prost::Message;

pub struct TonicH3Client {
    /// Opens each QUIC connection as the lean client does (its socket, handshake variants
    /// and refusal detection); tonic-h3 runs HTTP/3 on it.
    transport: H3Transport,
    payload: PayloadProfile,
    origin: http::Uri,
    closing: Arc<(AtomicUsize, tokio::sync::Notify)>,
    tuning: bench_core::Tuning,
}

impl TonicH3Client {
    pub fn new(settings: &ClientSettings) -> anyhow::Result<Self> {
        Ok(TonicH3Client {
            transport: H3Transport::new(settings, crate::ALPN)?,
            payload: settings.payload,
            origin: format!(
                "https://{}:{}",
                settings.server_name,
                settings.target.port()
            )
            .parse()?,
            closing: Arc::default(),
            tuning: settings.tuning.clone(),
        })
    }
}

#[async_trait]
impl Client for TonicH3Client {
    async fn connect(&self) -> Result<Connected, Failure> {
        let (endpoint, conn, timing) = self.transport.open_quic().await?;
        let connector = OpenedConnector(Arc::new(Mutex::new(Some(conn.clone()))));
        let channel = tonic_h3::H3Channel::new(connector, self.origin.clone(), None);
        Ok(Connected {
            conn: Arc::new(TonicH3Connection {
                client: ItemServiceClient::new(channel).max_decoding_message_size(
                    usize::try_from(bench_core::limits::grpc_max_receive_message_bytes(
                        &self.tuning,
                    ))
                    .unwrap_or(usize::MAX),
                ),
                endpoint: Mutex::new(Some(endpoint)),
                conn,
                payload: self.payload,
                closing: self.closing.clone(),
                shared_endpoint: self.transport.shares_endpoint(),
            }),
            timing,
        })
    }

    async fn settle(&self, bound: Duration) {
        let started = Instant::now();
        let _ = tokio::time::timeout(bound, async {
            loop {
                let ended = self.closing.1.notified();
                if self.closing.0.load(Ordering::SeqCst) == 0 {
                    return;
                }
                ended.await;
            }
        })
        .await;
        // A shared endpoint's closing connections drain in quinn's driver.
        self.transport
            .settle(bound.saturating_sub(started.elapsed()))
            .await;
    }
}

/// tonic-h3's connector for one QUIC connection opened beforehand: handed out once, after
/// which a reconnect fails (a new connection is the runner's to open).
#[derive(Clone)]
struct OpenedConnector(Arc<Mutex<Option<quinn::Connection>>>);

impl h3_util::client::H3Connector for OpenedConnector {
    type CONN = h3_quinn::Connection;
    type OS = h3_quinn::OpenStreams;
    type SS = h3_quinn::SendStream<bytes::Bytes>;
    type RS = h3_quinn::RecvStream;
    type BS = h3_quinn::BidiStream<bytes::Bytes>;

    async fn connect(&self) -> Result<Self::CONN, tonic_h3::Error> {
        let conn = self.0.lock().expect("connector lock").take();
        conn.map(h3_quinn::Connection::new)
            .ok_or_else(|| "the connection has ended; the client opens no other".into())
    }
}

struct TonicH3Connection {
    client: ItemServiceClient<tonic_h3::H3Channel<OpenedConnector>>,
    endpoint: Mutex<Option<quinn::Endpoint>>,
    conn: quinn::Connection,
    payload: PayloadProfile,
    closing: Arc<(AtomicUsize, tokio::sync::Notify)>,
    /// The endpoint is the client's shared one ([`bench_core::QuicEndpoint::Shared`]).
    shared_endpoint: bool,
}

#[async_trait]
impl Connection for TonicH3Connection {
    async fn request(&self, call: bench_core::Call) -> Result<Reply, Failure> {
        let id = call.id;
        let mut client = self.client.clone();
        let started = Instant::now();
        let result = client.get_item(GetItemRequest { id }).await;
        let total = started.elapsed();
        let item = result
            .map_err(|s| classify_status(&s, &self.conn))?
            .into_inner();
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
            // tonic hands over the answer once its message is read: the head's arrival is
            // not seen, so time to first byte is the whole call.
            ttfb: total,
            total,
            body_bytes: item.encoded_len() as u64,
        })
    }

    fn wire_bytes(&self) -> WireBytes {
        let stats = self.conn.stats();
        WireBytes {
            sent: stats.udp_tx.bytes,
            received: stats.udp_rx.bytes,
        }
    }

    async fn close(&self) {
        let Some(endpoint) = self.endpoint.lock().expect("endpoint lock").take() else {
            return;
        };
        self.conn.close(0u32.into(), b"done");
        if self.shared_endpoint {
            // The client's one endpoint holds this connection's closing period.
            return;
        }
        // The closing period is quinn's, in the background, counted so `settle` can wait.
        self.closing.0.fetch_add(1, Ordering::SeqCst);
        let closing = self.closing.clone();
        tokio::spawn(async move {
            endpoint.wait_idle().await;
            closing.0.fetch_sub(1, Ordering::SeqCst);
            closing.1.notify_waiters();
        });
    }
}

/// A status the server sent is `bad_status`, except tonic's own INTERNAL for a message that
/// does not decode, which is `bad_body` (as on the `grpc` stack's library client); a status
/// tonic made from a transport failure is classified by the connection's close reason.
fn classify_status(status: &tonic::Status, conn: &quinn::Connection) -> Failure {
    if let Some(f) = grpc_wire::tonic_limit_failure(status.code() as u32, status.message()) {
        return f;
    }
    if let Some(reason) = conn.close_reason() {
        return h3_transport::client::classify_quinn(Phase::Request, &reason);
    }
    let undecodable = status.code() == tonic::Code::Internal
        && status
            .message()
            .starts_with("failed to decode Protobuf message");
    let class = if undecodable {
        FailureClass::BadBody
    } else if std::error::Error::source(status).is_some() {
        FailureClass::ConnReset
    } else {
        FailureClass::BadStatus
    };
    let failure = Failure::new(
        class,
        format!("gRPC status {:?}: {}", status.code(), status.message()),
    );
    if class == FailureClass::BadStatus {
        failure.with_code(bench_core::user_service::grpc::status_code_name(
            status.code() as u32,
        ))
    } else {
        failure
    }
}
