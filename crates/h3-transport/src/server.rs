//! HTTP/3 server transport: one quinn endpoint (or several on one port,
//! `quic_server_endpoints`); each connection and each request in its own task, the request
//! answered by the stack's handler.

use std::future::Future;
use std::sync::Arc;

use anyhow::{bail, Context};
use bench_core::{BoundServer, ServerSettings};
use bytes::Bytes;
use futures::FutureExt;
use quinn::crypto::rustls::QuicServerConfig;

/// A request as the server receives it: the stack's handler resolves it and answers.
pub type Request = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;
/// A request's stream, on which the handler reads the body and answers.
pub type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Streams one connection may carry at once, the same on every multiplexed stack. quinn
/// allocates state for every stream it permits up front, so the limit sets the server's
/// memory per connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 128;
/// The server socket's SO_RCVBUF/SO_SNDBUF unless tuned (the kernel caps it at rmem_max).
pub const SERVER_UDP_BUFFER_BYTES: usize = bench_core::stack::DEFAULT_SERVER_UDP_BUFFER_BYTES;

/// Binds the server's endpoints for `settings` (its QUIC tuning, UDP buffers, endpoints),
/// offering `alpn`; the returned future serves every request with `handler`.
pub fn bind<H, F>(settings: ServerSettings, alpn: &[u8], handler: H) -> anyhow::Result<BoundServer>
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let Some(identity) = settings.tls.as_ref() else {
        bail!("HTTP/3 has no plaintext form: QUIC always runs TLS 1.3");
    };
    let tls = bench_core::tls::server_config(identity, alpn, !settings.tuning.no_session_tickets)?;
    let crypto =
        QuicServerConfig::try_from((*tls).clone()).context("TLS config is not usable for QUIC")?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(crate::tuning::transport_config(
        &settings.tuning,
        MAX_CONCURRENT_STREAMS,
    ));
    // One socket takes every client's datagrams: the kernel's 208 KiB default overflows under
    // hundreds of connections and the losses surface as PTO stalls, so size it as quic-go and
    // quinn's docs advise (4 MiB, the usual rmem_max) unless the experiment sets a size.
    let mut tuning = settings.tuning.clone();
    tuning
        .udp_buffer_bytes
        .get_or_insert(SERVER_UDP_BUFFER_BYTES);
    // One endpoint is one driver task, so one core, while the TCP stacks accept on every
    // server thread: an operator would run several endpoints on one port (SO_REUSEPORT; the
    // kernel keeps each client's 4-tuple on one socket, so each connection stays with its
    // endpoint).
    let count = tuning.quic_server_endpoints.unwrap_or(1).max(1);
    let mut endpoints = Vec::new();
    let mut listen = settings.listen;
    for _ in 0..count {
        let socket = server_socket(listen, count > 1, &tuning)?;
        listen = socket.local_addr()?;
        let handle = socket.try_clone()?;
        endpoints.push(quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(config.clone()),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?);
        // quinn turns GRO on as it takes the socket: turn it off afterwards, through a second
        // handle on the same socket.
        if tuning.quic_offload == Some(false) {
            set_gro(&handle, false)?;
        }
    }
    let local_addr = listen;
    let handler = Arc::new(handler);
    let serving = async move {
        futures::future::join_all(
            endpoints
                .into_iter()
                .map(|endpoint| accept_loop(endpoint, handler.clone())),
        )
        .await;
        Ok(())
    }
    .boxed();
    Ok(BoundServer {
        local_addr,
        serving,
    })
}

/// A UDP socket for one server endpoint, bound to `listen` (with SO_REUSEPORT when several
/// endpoints share the port), its buffers sized.
fn server_socket(
    listen: std::net::SocketAddr,
    reuse_port: bool,
    tuning: &bench_core::Tuning,
) -> anyhow::Result<std::net::UdpSocket> {
    use nix::sys::socket::{setsockopt, sockopt};
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(listen),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if reuse_port {
        setsockopt(&socket, sockopt::ReusePort, &true)?;
    }
    socket
        .bind(&listen.into())
        .with_context(|| format!("cannot bind UDP {listen}"))?;
    let socket: std::net::UdpSocket = socket.into();
    crate::tuning::size_buffers(&socket, tuning)?;
    Ok(socket)
}

/// UDP_GRO on or off (the kernel coalescing datagrams of one flow into one receive).
fn set_gro(socket: &std::net::UdpSocket, on: bool) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::UdpGroSegment, &on)
        .map_err(std::io::Error::from)
}

/// Accepts one endpoint's connections, each in its own task.
async fn accept_loop<H, F>(endpoint: quinn::Endpoint, handler: Arc<H>)
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    while let Some(incoming) = endpoint.accept().await {
        let handler = handler.clone();
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
            serve_connection(conn, handler).await;
        });
    }
}

async fn serve_connection<H, F>(conn: quinn::Connection, handler: Arc<H>)
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let Ok(mut h3) = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
    else {
        return;
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        tokio::spawn(handler(resolver));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn offload_off_leaves_the_server_socket_without_gro_after_quinn_takes_it() {
        use nix::sys::socket::{getsockopt, sockopt::UdpGroSegment};
        for (offload, gro) in [(None, true), (Some(false), false)] {
            let tuning = bench_core::Tuning {
                quic_offload: offload,
                ..Default::default()
            };
            let socket = server_socket("127.0.0.1:0".parse().unwrap(), false, &tuning).unwrap();
            let handle = socket.try_clone().unwrap();
            let _endpoint = quinn::Endpoint::new(
                quinn::EndpointConfig::default(),
                None,
                socket,
                Arc::new(quinn::TokioRuntime),
            )
            .unwrap();
            if offload == Some(false) {
                set_gro(&handle, false).unwrap();
            }
            assert_eq!(
                getsockopt(&handle, UdpGroSegment).unwrap(),
                gro,
                "{offload:?}"
            );
        }
    }
}
