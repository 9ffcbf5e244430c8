//! The server settings an operator would use: several endpoints on one port (SO_REUSEPORT)
//! and segmentation offload off. Connections from many client sockets all complete, and the
//! kernel shows the endpoints' sockets sharing the port.

mod common;

use bench_core::call::Call;
use bench_core::Tuning;

/// UDP sockets bound to `port` on 127.0.0.1 in this process's network namespace.
fn udp_sockets_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
        .count()
}

async fn serve_and_connect(tuning: Tuning, clients: u64) -> (std::net::SocketAddr, usize) {
    let server = common::serve(&tuning).await;
    let addr = server.addr;
    let sockets = udp_sockets_on(addr.port());
    let client = server.client(&tuning);
    // Each connection is a new client socket: a new 4-tuple, hashed to one of the endpoints.
    for id in 0..clients {
        let connected = client.connect().await.expect("connect");
        connected
            .conn
            .request(Call::item(id))
            .await
            .unwrap_or_else(|f| panic!("request {id}: {f}"));
        connected.conn.close().await;
    }
    server.stop();
    (addr, sockets)
}

/// One test, so the scenarios run one after another: counting the sockets on a port reads the
/// whole namespace's table, which a concurrent test's servers and clients would also fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_endpoints_share_the_port_offload_can_be_turned_off_and_one_is_the_default() {
    let tuning = Tuning {
        quic_server_endpoints: Some(4),
        ..Default::default()
    };
    let (_, sockets) = serve_and_connect(tuning, 24).await;
    assert_eq!(sockets, 4, "four endpoint sockets on one port");
    let (_, sockets) = serve_and_connect(Tuning::default(), 4).await;
    assert_eq!(sockets, 1);
    let tuning = Tuning {
        quic_offload: Some(false),
        ..Default::default()
    };
    let (_, sockets) = serve_and_connect(tuning, 4).await;
    assert_eq!(sockets, 1);
}
