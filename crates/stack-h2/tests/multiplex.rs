//! One HTTP/2 connection shared by many concurrent requests, as the runner's `connections`
//! knob shares it: more requests than the server's stream limit (they wait for a stream),
//! more body bytes than the connection window (only WINDOW_UPDATEs let them finish), and
//! abandoned requests (RST_STREAM) that leave the connection usable.

use std::time::Duration;

use bench_core::testkit::{client_settings, start_server};
use bench_core::{PayloadProfile, Stack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_carries_more_streams_than_the_server_allows_at_once() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().unwrap();
    let stack = stack_h2::Http2;
    let concurrent = 2 * stack_h2::server::MAX_CONCURRENT_STREAMS as u64 + 10;
    for payload in [PayloadProfile::Small, PayloadProfile::K64] {
        let server = start_server(&stack, certs.path(), false, payload, None).await;
        let client = stack
            .client(&client_settings(server.addr, certs.path(), false, payload))
            .unwrap();
        let conn = client.connect().await.expect("connect").conn;
        let requests: Vec<_> = (0..concurrent)
            .map(|id| {
                let conn = conn.clone();
                tokio::spawn(async move { conn.request(bench_core::Call::item(id)).await })
            })
            .collect();
        for (id, request) in requests.into_iter().enumerate() {
            let reply = request
                .await
                .unwrap()
                .unwrap_or_else(|f| panic!("{payload} request {id}: {f}"));
            assert!(reply.body_bytes as usize >= payload.padding_bytes());
        }
        let received = conn.wire_bytes().received;
        assert!(
            received >= concurrent * payload.padding_bytes() as u64,
            "{payload}: {received} bytes"
        );
        conn.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_request_leaves_the_connection_usable() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().unwrap();
    let stack = stack_h2::Http2;
    let payload = PayloadProfile::Small;
    let server = start_server(&stack, certs.path(), false, payload, Some("delay-100ms")).await;
    let client = stack
        .client(&client_settings(server.addr, certs.path(), false, payload))
        .unwrap();
    let conn = client.connect().await.expect("connect").conn;
    for id in 0..3 {
        let abandoned = tokio::time::timeout(
            Duration::from_millis(10),
            conn.request(bench_core::Call::item(id)),
        )
        .await;
        assert!(abandoned.is_err(), "the delayed answer cannot be in time");
    }
    // The cancelled streams no longer count against the server's limit, and their late
    // answers (if the server still sends them) do not disturb the next one.
    let reply = conn
        .request(bench_core::Call::item(42))
        .await
        .expect("request after abandoned ones");
    assert!(reply.ttfb >= Duration::from_millis(100));
    let again = conn
        .request(bench_core::Call::item(43))
        .await
        .expect("second request");
    assert!(again.total >= again.ttfb);
    conn.close().await;
}
