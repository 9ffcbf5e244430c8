//! gRPC over HTTP/3 beyond the conformance kit: resumed and 0-RTT connections carry calls
//! that validate, and the server answers the health check, an unknown method and a request
//! that is not gRPC as gRPC's HTTP mapping says.

use std::time::Instant;

use bench_core::call::Call;
use bench_core::testkit::{client_settings, start_server};
use bench_core::tls::{ensure_certs, load_ca, ClientTls, HandshakeVariant};
use bench_core::{PayloadProfile, Stack};
use bytes::Bytes;
use grpc_wire::health::HealthCheckRequest;
use stack_grpc_h3::GrpcH3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_and_zero_rtt_connections_carry_validated_calls() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().expect("temp dir");
    let server = start_server(&GrpcH3, certs.path(), false, PayloadProfile::Small, None).await;
    let cases = [HandshakeVariant::Resumed, HandshakeVariant::ZeroRtt]
        .into_iter()
        .flat_map(|v| GrpcH3.client_implementations().iter().map(move |&i| (v, i)));
    for (variant, implementation) in cases {
        let mut settings = client_settings(server.addr, certs.path(), false, PayloadProfile::Small);
        settings.tuning.client = implementation;
        let ca = load_ca(&ensure_certs(certs.path()).unwrap().ca_cert()).unwrap();
        settings.tls = Some(ClientTls::suite(ca, variant));
        let client = GrpcH3.client(&settings).expect("client");
        let mut resumed = 0;
        for id in 0..4 {
            let connected = client.connect().await.expect("connect");
            resumed += u32::from(connected.timing.resumed);
            connected
                .conn
                .request(Call::item(id))
                .await
                .unwrap_or_else(|f| panic!("{variant:?} {implementation} call {id}: {f}"));
            connected.conn.close().await;
        }
        // The first connection fetches the ticket; later ones resume with it. QUIC sends the
        // ticket after the handshake, so a connection opened before it has landed makes a full
        // handshake: at least one, not every one, of the three later connections resumes (and
        // every call above validated, resumed or not).
        assert!(
            (1..=3).contains(&resumed),
            "{variant:?} {implementation}: {resumed} resumed connections of 3"
        );
    }
}

/// One raw request on the transport, as a client of another implementation could send it.
async fn send(
    addr: std::net::SocketAddr,
    certs: &std::path::Path,
    request: http::Request<()>,
    body: Option<Bytes>,
) -> h3_transport::Answer {
    let settings = client_settings(addr, certs, false, PayloadProfile::Small);
    let transport = h3_transport::H3Transport::new(&settings, stack_grpc_h3::ALPN).unwrap();
    let (conn, _) = transport.open().await.expect("connect");
    let answer = conn
        .exchange((request, body), Instant::now())
        .await
        .expect("answer");
    conn.close().await;
    answer
}

fn grpc_request(addr: std::net::SocketAddr, path: &str) -> http::Request<()> {
    http::Request::post(format!("https://localhost:{}{path}", addr.port()))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

fn field<'a>(map: Option<&'a http::HeaderMap>, name: &str) -> Option<&'a str> {
    map.and_then(|m| m.get(name)).and_then(|v| v.to_str().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_follows_grpcs_http_mapping() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().expect("temp dir");
    let server = start_server(&GrpcH3, certs.path(), false, PayloadProfile::Small, None).await;
    let addr = server.addr;

    let health = send(
        addr,
        certs.path(),
        grpc_request(addr, grpc_wire::HEALTH_CHECK_PATH),
        Some(grpc_wire::frame(&HealthCheckRequest::default())),
    )
    .await;
    assert_eq!(health.status, 200);
    assert_eq!(
        field(Some(&health.headers), "content-type"),
        Some("application/grpc")
    );
    assert_eq!(field(health.trailers.as_ref(), "grpc-status"), Some("0"));
    let message = grpc_wire::unframe(&health.body).expect("one message");
    let reply: grpc_wire::health::HealthCheckResponse =
        prost::Message::decode(message).expect("a HealthCheckResponse");
    assert_eq!(reply.status, 1, "SERVING");

    let unknown = send(
        addr,
        certs.path(),
        grpc_request(addr, "/bench.v1.ItemService/Nope"),
        Some(grpc_wire::frame(&HealthCheckRequest::default())),
    )
    .await;
    assert_eq!(unknown.status, 200);
    assert!(
        unknown.body.is_empty() && unknown.trailers.is_none(),
        "trailers-only"
    );
    assert_eq!(field(Some(&unknown.headers), "grpc-status"), Some("12"));

    let garbled = send(
        addr,
        certs.path(),
        grpc_request(addr, grpc_wire::GET_ITEM_PATH),
        Some(Bytes::from_static(&[0, 0, 0, 0, 9, 1])),
    )
    .await;
    assert_eq!(field(Some(&garbled.headers), "grpc-status"), Some("13"));

    let plain = http::Request::post(format!(
        "https://localhost:{}{}",
        addr.port(),
        grpc_wire::GET_ITEM_PATH
    ))
    .header("content-type", "application/json")
    .body(())
    .unwrap();
    assert_eq!(send(addr, certs.path(), plain, None).await.status, 415);
    let get = http::Request::get(format!(
        "https://localhost:{}{}",
        addr.port(),
        grpc_wire::GET_ITEM_PATH
    ))
    .body(())
    .unwrap();
    assert_eq!(send(addr, certs.path(), get, None).await.status, 405);
}
