//! HTTP/3 REST server: the workload's REST routes on the suite's HTTP/3 server transport
//! (`h3-transport`: its endpoints, QUIC tuning and a task per connection and request).

use std::sync::Arc;

use bench_core::bulk::{self, BulkRoute, Pieces};
use bench_core::workload::ServerWorkload;
use bench_core::{BoundServer, ServerSettings};
use bytes::Bytes;
use h3_transport::server::Request;

pub use h3_transport::server::{MAX_CONCURRENT_STREAMS, SERVER_UDP_BUFFER_BYTES};

pub fn bind(settings: ServerSettings) -> anyhow::Result<BoundServer> {
    let workload = Arc::new(ServerWorkload::new(
        settings.payload,
        settings.fault,
        settings.service_time,
    ));
    h3_transport::server::bind(settings, crate::ALPN, move |request| {
        let workload = workload.clone();
        async move {
            let _ = serve_request(request, workload).await;
        }
    })
}

async fn serve_request(resolver: Request, workload: Arc<ServerWorkload>) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    // Read the request stream to its end first: answering and dropping it early makes quinn send
    // STOP_SENDING, and the client's finish() then fails. An upload is counted as it arrives.
    let mut received = 0u64;
    while let Some(data) = stream.recv_data().await? {
        received += bytes::Buf::remaining(&data) as u64;
    }
    if let Some(route) = bulk::route(req.method().as_str(), req.uri().path()) {
        let (status, body) = match route {
            Err((status, why)) => (status, Bytes::from_static(why.as_bytes())),
            Ok(BulkRoute::Count) => (200, Bytes::from(format!("{received}\n"))),
            Ok(BulkRoute::Send(n)) => {
                let resp = http::Response::builder()
                    .status(200)
                    .header(http::header::CONTENT_TYPE, "application/octet-stream")
                    .header(http::header::CONTENT_LENGTH, n)
                    .body(())?;
                stream.send_response(resp).await?;
                // Each piece goes as QUIC's flow control takes it; none is a copy.
                for piece in Pieces::new(n, bulk::CHUNK_BYTES) {
                    stream.send_data(piece).await?;
                }
                stream.finish().await?;
                return Ok(());
            }
        };
        let resp = http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(())?;
        stream.send_response(resp).await?;
        stream.send_data(body).await?;
        stream.finish().await?;
        return Ok(());
    }
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
