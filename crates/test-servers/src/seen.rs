//! What a third-party server saw: the requests it logged, in order, whatever the server.

use std::net::SocketAddr;

/// One request as the server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// "1.1", "2" or "3".
    pub http_version: String,
    /// The `x-seq` request header, where the server records it.
    pub x_seq: Option<String>,
    /// The request body, where the server records it.
    pub body: Option<String>,
}

/// A server that records the requests it gets.
pub trait Recorder {
    fn name(&self) -> &'static str;
    /// Where it serves TLS (and QUIC, if it does).
    fn addr(&self) -> SocketAddr;
    /// Every request so far, in order.
    fn seen(&self) -> Vec<Seen>;
}
