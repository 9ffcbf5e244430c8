//! The QUIC client's endpoint knob: with `per-connection` N open connections hold N UDP
//! sockets, with `shared` they hold one, as QUIC client libraries run. Counted in the kernel's
//! table of UDP sockets connected to the server's port, while all N are open.

mod common;

use bench_core::call::Call;
use bench_core::{QuicEndpoint, Tuning};

/// UDP sockets in this process's network namespace whose remote end is 127.0.0.1:`port`.
fn udp_sockets_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let remote = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(2) == Some(remote.as_str()))
        .count()
}

/// Opens `n` connections with `endpoint`, each answering one request, and counts the client
/// sockets while all are open; then closes them and lets the client settle.
async fn sockets_for(endpoint: QuicEndpoint, n: u64) -> usize {
    let tuning = Tuning {
        quic_endpoint: endpoint,
        ..Default::default()
    };
    let server = common::serve(&Tuning::default()).await;
    let port = server.addr.port();
    let client = server.client(&tuning);
    let mut open = Vec::new();
    for id in 0..n {
        let connected = client.connect().await.expect("connect");
        connected
            .conn
            .request(Call::item(id))
            .await
            .unwrap_or_else(|f| panic!("request {id}: {f}"));
        open.push(connected.conn);
    }
    let sockets = udp_sockets_to(port);
    for conn in &open {
        conn.close().await;
    }
    drop(open);
    client.settle(std::time::Duration::from_secs(10)).await;
    server.stop();
    sockets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_endpoint_is_one_socket_and_per_connection_is_one_each() {
    const N: u64 = 12;
    assert_eq!(
        sockets_for(QuicEndpoint::PerConnection, N).await,
        N as usize,
        "one socket per connection"
    );
    assert_eq!(
        sockets_for(QuicEndpoint::Shared, N).await,
        1,
        "one socket for all connections"
    );
}
