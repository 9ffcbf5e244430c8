//! HTTP/3 over QUIC (h3 + quinn) as the suite runs it on both sides, shared by the stacks
//! that speak over HTTP/3 (REST and gRPC), which add only their requests and answers:
//! the server's endpoints and QUIC tuning, and the client's socket and endpoint per
//! connection with its handshake variants and closing period. Stacks never depend on each
//! other; what two of them run alike lives here. QUIC always carries TLS 1.3.

pub mod client;
mod closing;
mod limited;
pub mod server;
pub mod tuning;
mod udp;

pub use client::{Answer, ClosingCounts, H3Connection, H3Transport, Outgoing};

/// The quinn knobs for the manifest, the same for every stack over HTTP/3.
pub fn quic_settings() -> String {
    format!("quinn, max_concurrent_bidi_streams {} (clients permit the server none), max_concurrent_uni_streams {}, quinn's default windows and initial RTT unless tuned, GSO/GRO on the server socket (auto), no GRO on client sockets; server UDP buffers {} B unless tuned", server::MAX_CONCURRENT_STREAMS, tuning::MAX_CONCURRENT_UNI_STREAMS, server::SERVER_UDP_BUFFER_BYTES)
}

/// The client's UDP handling for the manifest, the same for every stack over HTTP/3.
pub const UDP_SETTINGS: &str = "one endpoint (UDP socket) per client connection, connected, so ICMP port-unreachable is seen; once the client's CONNECTION_CLOSE is sent, quinn's endpoint and connection state are released and the socket alone holds the closing period until quinn's deadline (3 PTO), answering what arrives with that packet (RFC 9000 §10.2.1)";
