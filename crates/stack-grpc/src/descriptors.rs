//! A target's message descriptors for the gRPC stack: `.proto` files, or the server's
//! reflection service asked over our HTTP/2 client (`grpc-targets` does the asking).

use std::time::Instant;

use anyhow::anyhow;
use async_trait::async_trait;
use bench_core::net::TcpConnector;
use bench_core::user_service::GrpcCalls;
use bench_core::{ClientSettings, Failure};
use bytes::Bytes;
use h2_transport::{H2Conn, RequestHead};
use prost_reflect::DescriptorPool;

use crate::wire;

pub use grpc_targets::compile;

/// The descriptor pool `calls` names ([`grpc_targets::resolve`]), reflection over HTTP/2.
pub fn resolve(calls: &GrpcCalls, settings: &ClientSettings) -> anyhow::Result<DescriptorPool> {
    let connector = TcpConnector::new(settings, crate::ALPN)
        .map_err(|e| anyhow!("reflection: cannot prepare the connection: {e:#}"))?;
    let authority = calls.endpoint.authority.clone();
    let https = calls.endpoint.https;
    grpc_targets::resolve(calls, settings, move || async move {
        let (conn, _, _) = wire::open(&connector, &authority, https)
            .await
            .map_err(|f| anyhow!("reflection: cannot connect to {authority}: {f}"))?;
        Ok(Reflection { conn })
    })
}

/// An HTTP/2 connection as reflection uses it.
struct Reflection {
    conn: H2Conn,
}

#[async_trait]
impl grpc_targets::Unary for Reflection {
    async fn call(&self, path: &str, body: Bytes) -> Result<Result<Bytes, Failure>, Failure> {
        let head = RequestHead {
            method: "POST",
            path,
            fields: &wire::GRPC_FIELDS,
            keep: wire::KEEP,
            // The answer to one request: a file's descriptors, in one message.
            answer_limit: bench_core::limits::BodyLimit::GrpcUnary {
                max_message_bytes: bench_core::limits::DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
            },
        };
        let answer = self
            .conn
            .exchange(&head, Some(body), Instant::now())
            .await?;
        Ok(wire::check_status(&answer).map(|()| answer.body))
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}
