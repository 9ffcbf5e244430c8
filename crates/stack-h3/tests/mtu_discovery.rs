//! `quic_mtu_discovery = false` stops path MTU probing on both sides: on loopback quinn's
//! probes (each a datagram padded to the size it tries, up to 1,452 bytes) find a larger MTU
//! within a connection's first moments; with the knob off neither side sends one.

mod common;

use std::time::Duration;

use bench_core::call::Call;
use bench_core::Tuning;

/// Bytes the client received and sent on one connection that made one request and then
/// stayed open for `idle`.
async fn one_connection(tuning: Tuning, idle: Duration) -> (u64, u64) {
    let server = common::serve(&tuning).await;
    let client = server.client(&tuning);
    let connected = client.connect().await.expect("connect");
    connected
        .conn
        .request(Call::item(1))
        .await
        .expect("request");
    tokio::time::sleep(idle).await;
    let wire = connected.conn.wire_bytes();
    connected.conn.close().await;
    server.stop();
    (wire.received, wire.sent)
}

#[tokio::test]
async fn mtu_discovery_off_sends_no_probes_on_either_side() {
    let idle = Duration::from_millis(300);
    let (on_received, on_sent) = one_connection(Tuning::default(), idle).await;
    let off = Tuning {
        quic_mtu_discovery: Some(false),
        ..Default::default()
    };
    let (off_received, off_sent) = one_connection(off, idle).await;
    // A probe is at least 1,201 bytes (larger than the 1,200 the path starts with).
    assert!(
        on_sent >= off_sent + 1_201,
        "client sent {on_sent} bytes with discovery, {off_sent} without: no client probe"
    );
    assert!(
        on_received >= off_received + 1_201,
        "client received {on_received} bytes with discovery, {off_received} without: no server probe"
    );
}
