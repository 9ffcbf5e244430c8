//! Interop with an implementation no one here wrote: the lean client's calls against
//! tonic-h3's server (tonic's generated service on axum-h3 / h3-util over h3-quinn), on
//! reused and new connections, all validated. (The library client, tonic-h3's channel,
//! against our server is the conformance kit's library pass.)

mod common;

use std::sync::Arc;

use bench_core::call::Call;
use bench_core::testkit::client_settings;
use bench_core::tls::{ensure_certs, ServerIdentity};
use bench_core::workload::padding;
use bench_core::{ClientImplementation, PayloadProfile, Stack};
use grpc_wire::pb::item_service_server::{ItemService, ItemServiceServer};
use grpc_wire::pb::{GetItemRequest, Item};
use quinn::crypto::rustls::QuicServerConfig;
use stack_grpc_h3::GrpcH3;

struct Items(String);

common::item_service!(Items, |this| this.0.as_str(), {
    async fn get_item(
        &self,
        req: tonic::Request<GetItemRequest>,
    ) -> Result<tonic::Response<Item>, tonic::Status> {
        Ok(tonic::Response::new(grpc_wire::item(
            req.into_inner().id,
            &self.0,
        )))
    }
});

/// tonic-h3's server on loopback with the suite's certificate, serving the item service.
fn tonic_h3_server(certs: &std::path::Path, payload: PayloadProfile) -> std::net::SocketAddr {
    let identity = ServerIdentity::load(&ensure_certs(certs).unwrap()).unwrap();
    let tls = bench_core::tls::server_config(&identity, stack_grpc_h3::ALPN, true).unwrap();
    let crypto = QuicServerConfig::try_from((*tls).clone()).unwrap();
    let endpoint = quinn::Endpoint::server(
        quinn::ServerConfig::with_crypto(Arc::new(crypto)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let addr = endpoint.local_addr().unwrap();
    let mut routes = tonic::service::Routes::builder();
    routes.add_service(ItemServiceServer::new(Items(padding(payload))));
    let routes = routes.routes();
    let acceptor = tonic_h3::quinn::H3QuinnAcceptor::new(endpoint);
    tokio::spawn(async move {
        let _ = tonic_h3::server::H3Router::new(routes)
            .serve(acceptor)
            .await;
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_client_calls_tonic_h3s_server() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().expect("temp dir");
    for payload in [PayloadProfile::Small, PayloadProfile::K64] {
        let addr = tonic_h3_server(certs.path(), payload);
        let mut settings = client_settings(addr, certs.path(), false, payload);
        settings.tuning.client = ClientImplementation::Lean;
        assert_eq!(
            GrpcH3.client_implementation(settings.tuning.client),
            ClientImplementation::Lean
        );
        let client = GrpcH3.client(&settings).expect("client");
        let reused = client.connect().await.expect("connect");
        for id in 0..20 {
            let reply = reused
                .conn
                .request(Call::item(id))
                .await
                .unwrap_or_else(|f| panic!("{payload:?} reused call {id}: {f}"));
            assert!(reply.body_bytes as usize >= payload.padding_bytes());
        }
        reused.conn.close().await;
        for id in 0..5 {
            let fresh = client.connect().await.expect("connect");
            fresh
                .conn
                .request(Call::item(id))
                .await
                .unwrap_or_else(|f| panic!("{payload:?} new-conn call {id}: {f}"));
            fresh.conn.close().await;
        }
    }
}

/// The lean client's streaming calls (`grpc_call`) against tonic-h3's server: every message
/// validated (ids in order, the payload's padding), one gap between each two answers, the
/// upload's count checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_client_streams_with_tonic_h3s_server() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().expect("temp dir");
    for payload in [PayloadProfile::Small, PayloadProfile::K64] {
        let addr = tonic_h3_server(certs.path(), payload);
        for grpc_call in [
            bench_core::GrpcCall::ServerStream,
            bench_core::GrpcCall::ClientStream,
            bench_core::GrpcCall::Bidi,
        ] {
            let mut settings = client_settings(addr, certs.path(), false, payload);
            settings.tuning.grpc_call = grpc_call;
            settings.tuning.stream_messages = 10;
            let client = GrpcH3.client(&settings).expect("client");
            let conn = client.connect().await.expect("connect").conn;
            for id in [0, 1_000] {
                let mut gaps = 0;
                let reply = conn
                    .request_observed(Call::item(id), &mut |_| gaps += 1)
                    .await
                    .unwrap_or_else(|f| panic!("{payload:?} {grpc_call} call {id}: {f}"));
                assert_eq!(reply.messages, 10, "{grpc_call}");
                let streamed_answer = grpc_call != bench_core::GrpcCall::ClientStream;
                assert_eq!(gaps, if streamed_answer { 9 } else { 0 }, "{grpc_call}");
                if streamed_answer {
                    assert!(reply.body_bytes as usize >= 10 * payload.padding_bytes());
                }
            }
            conn.close().await;
        }
    }
}
