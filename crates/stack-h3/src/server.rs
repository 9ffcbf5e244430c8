//! HTTP/3 REST server: the workload's REST routes on the suite's HTTP/3 server transport
//! (`h3-transport`: its endpoints, QUIC tuning and a task per connection and request).

use std::sync::Arc;

use bench_core::workload::ServerWorkload;
use bench_core::{BoundServer, ServerSettings};
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
