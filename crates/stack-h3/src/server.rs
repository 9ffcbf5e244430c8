//! HTTP/3 server: one quinn endpoint; each connection and each request in its own task.

use std::sync::Arc;

use anyhow::{bail, Context};
use bench_core::workload::ServerWorkload;
use bench_core::{BoundServer, ServerSettings};
use bytes::Bytes;
use futures::FutureExt;
use quinn::crypto::rustls::QuicServerConfig;

/// Streams one connection may carry at once, the same on every multiplexed stack. quinn
/// allocates state for every stream it permits up front: 1,024 cost ≈ 140 KB per connection
/// (the server held 141 MB at 500 connections, 72 MB with 128).
pub const MAX_CONCURRENT_STREAMS: u32 = 128;
/// The server socket's SO_RCVBUF/SO_SNDBUF unless tuned (the kernel caps it at rmem_max).
pub const SERVER_UDP_BUFFER_BYTES: usize = bench_core::stack::DEFAULT_SERVER_UDP_BUFFER_BYTES;

pub fn bind(settings: ServerSettings) -> anyhow::Result<BoundServer> {
    let Some(identity) = settings.tls.as_ref() else {
        bail!("HTTP/3 has no plaintext form: QUIC always runs TLS 1.3");
    };
    let tls =
        bench_core::tls::server_config(identity, crate::ALPN, !settings.tuning.no_session_tickets)?;
    let crypto =
        QuicServerConfig::try_from((*tls).clone()).context("TLS config is not usable for QUIC")?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(crate::tuning::transport_config(
        &settings.tuning,
        MAX_CONCURRENT_STREAMS,
    ));
    let socket = std::net::UdpSocket::bind(settings.listen)
        .with_context(|| format!("cannot bind UDP {}", settings.listen))?;
    // One socket takes every client's datagrams: the kernel's 208 KiB default overflows under
    // hundreds of connections and the losses surface as PTO stalls, so size it as quic-go and
    // quinn's docs advise (4 MiB, the usual rmem_max) unless the experiment sets a size.
    let mut tuning = settings.tuning.clone();
    tuning
        .udp_buffer_bytes
        .get_or_insert(SERVER_UDP_BUFFER_BYTES);
    crate::tuning::size_buffers(&socket, &tuning)?;
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )?;
    let local_addr = endpoint.local_addr()?;
    let workload = Arc::new(ServerWorkload::new(
        settings.payload,
        settings.fault,
        settings.service,
    ));
    let serving = async move {
        while let Some(incoming) = endpoint.accept().await {
            let workload = workload.clone();
            tokio::spawn(async move {
                let Ok(connecting) = incoming.accept() else {
                    return;
                };
                // Take the connection before the handshake completes, so requests a client
                // sends as 0-RTT are answered at once (half-RTT data), as 0-RTT servers do.
                let conn = match connecting.into_0rtt() {
                    Ok((conn, _)) => conn,
                    Err(connecting) => match connecting.await {
                        Ok(conn) => conn,
                        Err(_) => return,
                    },
                };
                serve_connection(conn, workload).await;
            });
        }
        Ok(())
    }
    .boxed();
    Ok(BoundServer {
        local_addr,
        serving,
    })
}

async fn serve_connection(conn: quinn::Connection, workload: Arc<ServerWorkload>) {
    let Ok(mut h3) = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
    else {
        return;
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        let workload = workload.clone();
        tokio::spawn(async move {
            let _ = serve_request(resolver, workload).await;
        });
    }
}

async fn serve_request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    workload: Arc<ServerWorkload>,
) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    // Read the request stream to its end first: answering and dropping it early makes quinn send
    // STOP_SENDING, and the client's finish() then fails.
    while stream.recv_data().await?.is_some() {}
    let reply = workload.rest(req.method().as_str(), req.uri().path());
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    let resp = http::Response::builder()
        .status(reply.status)
        .header(http::header::CONTENT_TYPE, reply.content_type)
        .body(())?;
    stream.send_response(resp).await?;
    stream.send_data(reply.body).await?;
    stream.finish().await?;
    Ok(())
}
