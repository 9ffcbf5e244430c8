//! `[targets.grpc]` over HTTP/3 against a server no one here wrote: tonic's generated service
//! on tonic-h3's server (h3-util over h3-quinn), with tonic-reflection's service beside it
//! (reflection answered over HTTP/3), or without it. Descriptors from `proto/bench.proto` or
//! from reflection; the calls are validated as the `grpc` stack validates them (`grpc-targets`).
//! Traffic stays on 127.0.0.1.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_core::tls::{ensure_certs, load_ca, ServerIdentity};
use bench_core::user_service::{Api, Calls, GrpcCalls, Targets};
use bench_core::{
    Call, Client, ClientImplementation, ClientSettings, ClientTls, FailureClass, HandshakeVariant,
    PayloadProfile, Stack,
};
use grpc_wire::pb::item_service_server::{ItemService, ItemServiceServer};
use grpc_wire::pb::{GetItemRequest, Item};
use prost::Message;
use quinn::crypto::rustls::QuicServerConfig;
use stack_grpc_h3::GrpcH3;

/// Any one test's bound: a server start, setup and a few hundred calls take seconds.
const TEST_BOUND: Duration = Duration::from_secs(90);

/// What the server received: each call's id and its `x-tenant` metadata.
type Seen = Arc<Mutex<Vec<(u64, String)>>>;

/// The item service as a user's service might answer: id [`NOT_FOUND_ID`] is NOT_FOUND, id
/// [`NAMELESS_ID`] an item without a name; every call is recorded.
struct Items(Seen);

/// Outside the ids the successful calls ask for (1 to 1,000).
const NOT_FOUND_ID: u64 = 100_404;
const NAMELESS_ID: u64 = 100_007;

/// ListItems paces its items 10 ms apart, a feed that outlasts a call's `duration_ms`.
fn paced() -> bench_core::service_time::ServiceTimeSpec {
    bench_core::service_time::ServiceTimeSpec {
        time: Some("fixed:10ms".parse().expect("service time")),
        ..Default::default()
    }
}

common::item_service!(Items, |_this| "x", paced(), {
    async fn get_item(
        &self,
        req: tonic::Request<GetItemRequest>,
    ) -> Result<tonic::Response<Item>, tonic::Status> {
        let tenant = req
            .metadata()
            .get("x-tenant")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let id = req.into_inner().id;
        self.0.lock().unwrap().push((id, tenant));
        match id {
            NOT_FOUND_ID => Err(tonic::Status::not_found("no item 100404")),
            NAMELESS_ID => Ok(tonic::Response::new(Item {
                name: String::new(),
                ..grpc_wire::item(id, "x")
            })),
            _ => Ok(tonic::Response::new(grpc_wire::item(id, "x"))),
        }
    }
});

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto")
}

/// tonic-h3's server on loopback with the suite's certificate: the item service and, with
/// `reflection`, tonic-reflection's v1 service describing `proto/bench.proto`.
fn tonic_h3_server(certs: &Path, reflection: bool) -> (u16, Seen) {
    let identity = ServerIdentity::load(&ensure_certs(certs).unwrap()).unwrap();
    let tls = bench_core::tls::server_config(&identity, stack_grpc_h3::ALPN, true).unwrap();
    let crypto = QuicServerConfig::try_from((*tls).clone()).unwrap();
    let endpoint = quinn::Endpoint::server(
        quinn::ServerConfig::with_crypto(Arc::new(crypto)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let port = endpoint.local_addr().unwrap().port();
    let seen = Seen::default();
    let mut routes = tonic::service::Routes::builder();
    routes.add_service(ItemServiceServer::new(Items(seen.clone())));
    if reflection {
        let descriptors = protox::compile(["bench.proto"], [proto_dir()]).expect("proto/");
        let service = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(&descriptors.encode_to_vec())
            .build_v1()
            .expect("reflection service");
        routes.add_service(service);
    }
    let routes = routes.routes();
    let acceptor = tonic_h3::quinn::H3QuinnAcceptor::new(endpoint);
    tokio::spawn(async move {
        let _ = tonic_h3::server::H3Router::new(routes)
            .serve(acceptor)
            .await;
    });
    (port, seen)
}

/// The calls of a `[grpc]` table's extra lines to `bench.v1.ItemService/GetItem` at `port`.
fn grpc_calls(scheme: &str, port: u16, method: &str, target: &str) -> Arc<GrpcCalls> {
    let text = format!(
        "[grpc]\naddress = \"{scheme}://localhost:{port}\"\nmethod = \"{method}\"\n{target}\n[ids]\nfrom = 1\nto = 1000\n"
    );
    let targets: Targets = toml::from_str(&text).expect("targets parse");
    match targets
        .calls(Api::Grpc, &|_| None)
        .expect("targets compile")
    {
        Some(Calls::Grpc(calls)) => calls,
        other => panic!("no gRPC calls: {other:?}"),
    }
}

fn settings(certs: &Path, port: u16, calls: Arc<GrpcCalls>) -> ClientSettings {
    let paths = ensure_certs(certs).expect("certificates");
    ClientSettings {
        target: ([127, 0, 0, 1], port).into(),
        server_name: bench_core::tls::SERVER_NAME.to_string(),
        tls: Some(ClientTls::suite(
            load_ca(&paths.ca_cert()).expect("CA"),
            HandshakeVariant::Full,
        )),
        connect_timeout: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(5),
        payload: PayloadProfile::Small,
        tuning: Default::default(),
        calls: Calls::Grpc(calls),
    }
}

/// grpc-h3's client for `target` on the server at `port`, made on a blocking thread as the
/// runner does before measuring.
async fn client_for(
    certs: &Path,
    port: u16,
    method: &str,
    target: &str,
) -> anyhow::Result<Arc<dyn Client>> {
    let settings = settings(certs, port, grpc_calls("https", port, method, target));
    tokio::task::spawn_blocking(move || GrpcH3.client(&settings))
        .await
        .expect("client thread")
}

const GET_ITEM: &str = "bench.v1.ItemService/GetItem";

fn proto_target(extra: &str) -> String {
    format!(
        "proto = [\"{}\"]\n{extra}",
        proto_dir().join("bench.proto").display()
    )
}

/// Runs a test's body within [`TEST_BOUND`].
async fn bounded(test: impl std::future::Future<Output = ()>) {
    bench_core::tls::install_crypto_provider();
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("the test finished within its bound");
}

/// Sends `calls` on `conn`, each of which must succeed.
async fn all_succeed(conn: &Arc<dyn bench_core::Connection>, calls: Vec<Call>) {
    for call in calls {
        let reply = conn
            .request(call)
            .await
            .unwrap_or_else(|f| panic!("call {call:?}: {f}"));
        assert!(reply.body_bytes > 0 && reply.total >= reply.ttfb);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proto_file_calls_over_http3_succeed_and_reach_the_server() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let (port, seen) = tonic_h3_server(certs.path(), false);
        let target = proto_target(
            "request = '{\"id\": \"{{id}}\"}'\nmetadata = { \"x-tenant\" = \"w{{worker}}\" }\nexpect_fields = [\"name\", \"tags\", \"id\"]",
        );
        let client = client_for(certs.path(), port, GET_ITEM, &target)
            .await
            .expect("client");
        let ids = bench_core::user_service::IdRange {
            from: 1,
            to: 1000,
            ..Default::default()
        };
        // 3 workers × 20 calls multiplexed on one connection, then 5 calls on new ones.
        let connected = client.connect().await.expect("connect");
        let conn = connected.conn.clone();
        let mut sent = Vec::new();
        let mut tasks = Vec::new();
        for worker in 0..3u32 {
            let calls: Vec<Call> = (0..20u64)
                .map(|i| {
                    let seq = u64::from(worker) * 100 + i;
                    Call {
                        id: ids.id(seq),
                        seq,
                        worker,
                    }
                })
                .collect();
            sent.extend(calls.iter().map(|c| (c.id, format!("w{}", c.worker))));
            let conn = conn.clone();
            tasks.push(tokio::spawn(async move { all_succeed(&conn, calls).await }));
        }
        for task in tasks {
            task.await.expect("worker");
        }
        let wire = conn.wire_bytes();
        assert!(wire.sent > 0 && wire.received > 0, "{wire:?}");
        conn.close().await;
        for id in 900..905u64 {
            let fresh = client.connect().await.expect("connect");
            let call = Call {
                id,
                seq: id,
                worker: 9,
            };
            all_succeed(&fresh.conn, vec![call]).await;
            sent.push((id, "w9".into()));
            fresh.conn.close().await;
        }
        let mut logged = seen.lock().unwrap().clone();
        logged.sort();
        sent.sort();
        assert_eq!(logged, sent, "the ids (and metadata) the server received");
    })
    .await;
}

/// `duration_ms` over HTTP/3: the client ends a ListItems feed of 100,000 items 10 ms apart
/// at 300 ms (dropping its stream stops it), the call succeeds with the items whole by then,
/// and the connection takes the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_over_http3_ends_at_the_call_duration() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let (port, _seen) = tonic_h3_server(certs.path(), false);
        let target = proto_target(
            "request = '{\"first_id\": \"{{id}}\", \"count\": 100000}'\nexpect_fields = [\"name\"]\nduration_ms = 300",
        );
        let client = client_for(certs.path(), port, "bench.v1.ItemService/ListItems", &target)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        for id in [1, 2] {
            let reply = connected
                .conn
                .request(Call::item(id))
                .await
                .unwrap_or_else(|f| panic!("call {id}: {f}"));
            // 10 ms apart for 300 ms: about 30, not the whole feed.
            bench_core::testkit::assert_ended_at_duration(
                &reply,
                Duration::from_millis(300),
                Duration::from_millis(10),
            );
        }
        connected.conn.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_over_http3_describes_the_method() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let (port, seen) = tonic_h3_server(certs.path(), true);
        let client = client_for(
            certs.path(),
            port,
            GET_ITEM,
            "reflection = true\nrequest = '{\"id\": {{id}}}'\nexpect_fields = [\"name\", \"currency\"]",
        )
        .await
        .expect("client through reflection over HTTP/3");
        let connected = client.connect().await.expect("QUIC connect");
        assert!(connected.timing.handshake > Duration::ZERO);
        all_succeed(&connected.conn, (1..=20).map(Call::item).collect()).await;
        connected.conn.close().await;
        let ids: Vec<u64> = seen.lock().unwrap().iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (1..=20).collect::<Vec<_>>());
        // A field the reflected schema does not have is refused before any call.
        let e = client_for(
            certs.path(),
            port,
            GET_ITEM,
            "reflection = true\nexpect_fields = [\"nonexistent\"]",
        )
        .await
        .err()
        .expect("an unknown field is refused")
        .to_string();
        assert!(
            e.contains("targets.grpc.expect_fields") && e.contains("bench.v1.Item has no field 'nonexistent'"),
            "{e}"
        );
        // A service the server does not have is named, with the ones it offers.
        let e = client_for(certs.path(), port, "bench.v9.Nope/GetItem", "reflection = true")
            .await
            .err()
            .expect("an unknown service is refused")
            .to_string();
        assert!(
            e.contains("bench.v9.Nope") && e.contains("the server offers bench.v1.ItemService"),
            "{e}"
        );
        assert_eq!(seen.lock().unwrap().len(), 20, "setup sent no call");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_judged_as_the_grpc_stack_judges_them() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let (port, seen) = tonic_h3_server(certs.path(), false);
        // `name` is a proto3 string: its presence does not show on the wire, its value does.
        let target =
            proto_target("request = '{\"id\": {{id}}}'\nexpect_values = { name = \"!= ''\" }");
        let client = client_for(certs.path(), port, GET_ITEM, &target)
            .await
            .expect("client");
        assert!(client.notes().is_empty(), "{:?}", client.notes());
        let connected = client.connect().await.expect("connect");
        let f = connected
            .conn
            .request(Call::item(NOT_FOUND_ID))
            .await
            .expect_err("NOT_FOUND");
        assert_eq!(f.class, FailureClass::BadStatus, "{f}");
        assert_eq!(f.code.as_deref(), Some("NOT_FOUND"));
        assert!(
            f.detail.contains("grpc-status 5 NOT_FOUND") && f.detail.contains("no item 100404"),
            "{}",
            f.detail
        );
        assert!(!f.breaks_connection());
        let f = connected
            .conn
            .request(Call::item(NAMELESS_ID))
            .await
            .expect_err("the item has no name");
        assert_eq!(f.class, FailureClass::MissingData, "{f}");
        assert_eq!(f.code.as_deref(), Some("name"));
        // The connection is still good.
        all_succeed(&connected.conn, vec![Call::item(5)]).await;
        connected.conn.close().await;
        let ids: Vec<u64> = seen.lock().unwrap().iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [NOT_FOUND_ID, NAMELESS_ID, 5]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_on_a_server_without_it_is_a_setup_error() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let (port, seen) = tonic_h3_server(certs.path(), false);
        let e = client_for(certs.path(), port, GET_ITEM, "reflection = true")
            .await
            .err()
            .expect("no reflection service")
            .to_string();
        assert!(
            e.contains("offers no reflection service")
                && e.contains("UNIMPLEMENTED")
                && e.contains("v1alpha"),
            "{e}"
        );
        assert!(seen.lock().unwrap().is_empty());
    })
    .await;
}

/// Setup refusals that need no server: an h2c address, the library client.
#[test]
fn targets_grpc_h3_cannot_send_are_refused() {
    let certs = tempfile::tempdir().expect("temp dir");
    let calls = grpc_calls("http", 1, GET_ITEM, &proto_target(""));
    let mut plaintext = settings(certs.path(), 1, calls.clone());
    plaintext.tls = None;
    let e = GrpcH3
        .client(&plaintext)
        .err()
        .expect("h2c refused")
        .to_string();
    assert!(e.contains("needs https://"), "{e}");
    let calls = grpc_calls("https", 1, GET_ITEM, &proto_target(""));
    let mut library = settings(certs.path(), 1, calls);
    library.tuning.client = ClientImplementation::Library;
    let e = GrpcH3
        .client(&library)
        .err()
        .expect("library refused")
        .to_string();
    assert!(e.contains("client = \"lean\""), "{e}");
}
