//! Our gRPC-over-HTTP/3 server's streaming methods answered to a client no one here wrote:
//! tonic's generated `ItemServiceClient` on tonic-h3's channel (h3-util over h3-quinn), on a
//! QUIC connection opened with the suite's transport (the CA verified). ListItems' items come
//! in order and whole, PutItems counts an upload, ChatItems answers each request; a request
//! that is not the method's message is refused with a status.

use std::sync::{Arc, Mutex};

use bench_core::testkit::{client_settings, start_server};
use bench_core::workload::padding;
use bench_core::PayloadProfile;
use grpc_wire::pb::item_service_client::ItemServiceClient;
use grpc_wire::pb::{GetItemRequest, ListItemsRequest};
use h3_transport::H3Transport;
use stack_grpc_h3::GrpcH3;

/// tonic-h3's connector for one connection opened beforehand.
#[derive(Clone)]
struct Opened(Arc<Mutex<Option<quinn::Connection>>>);

impl h3_util::client::H3Connector for Opened {
    type CONN = h3_quinn::Connection;
    type OS = h3_quinn::OpenStreams;
    type SS = h3_quinn::SendStream<bytes::Bytes>;
    type RS = h3_quinn::RecvStream;
    type BS = h3_quinn::BidiStream<bytes::Bytes>;

    async fn connect(&self) -> Result<Self::CONN, tonic_h3::Error> {
        let conn = self.0.lock().unwrap().take();
        conn.map(h3_quinn::Connection::new)
            .ok_or_else(|| "one connection only".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tonic_h3s_client_streams_with_our_server() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        bench_core::tls::install_crypto_provider();
        let certs = tempfile::tempdir().unwrap();
        let payload = PayloadProfile::K4;
        let server = start_server(&GrpcH3, certs.path(), false, payload, None).await;
        let settings = client_settings(server.addr, certs.path(), false, payload);
        let transport = H3Transport::new(&settings, stack_grpc_h3::ALPN).unwrap();
        let (_endpoint, conn, _) = transport.open_quic().await.unwrap();
        let origin: http::Uri = format!("https://localhost:{}", server.addr.port())
            .parse()
            .unwrap();
        let channel =
            tonic_h3::H3Channel::new(Opened(Arc::new(Mutex::new(Some(conn)))), origin, None);
        let mut client = ItemServiceClient::new(channel);
        let description = padding(payload);

        let mut items = client
            .list_items(ListItemsRequest {
                first_id: 500,
                count: 50,
            })
            .await
            .expect("ListItems")
            .into_inner();
        let mut ids = Vec::new();
        while let Some(item) = items.message().await.expect("an item") {
            assert_eq!(item.description, description, "the payload's padding");
            ids.push(item.id);
        }
        assert_eq!(ids, (500..550).collect::<Vec<_>>());

        let uploads: Vec<_> = (10..30)
            .map(|id| grpc_wire::item(id, &description))
            .collect();
        let reply = client
            .put_items(futures::stream::iter(uploads))
            .await
            .expect("PutItems")
            .into_inner();
        assert_eq!((reply.count, reply.last_id), (20, 29));

        let requests: Vec<_> = (7..17).map(|id| GetItemRequest { id }).collect();
        let mut answers = client
            .chat_items(futures::stream::iter(requests))
            .await
            .expect("ChatItems")
            .into_inner();
        let mut ids = Vec::new();
        while let Some(item) = answers.message().await.expect("an answer") {
            ids.push(item.id);
        }
        assert_eq!(ids, (7..17).collect::<Vec<_>>());

        // An empty list is an answer without messages, status OK.
        let mut none = client
            .list_items(ListItemsRequest {
                first_id: 1,
                count: 0,
            })
            .await
            .expect("ListItems of 0")
            .into_inner();
        assert!(none.message().await.expect("status OK").is_none());
    })
    .await
    .expect("within the test's bound");
}
