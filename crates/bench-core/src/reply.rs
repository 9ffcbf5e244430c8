//! What one request yields: a validated answer ([`Reply`]) and the setup of a connection opened
//! for it ([`ConnectTiming`]). Below the `Stack` trait, so that the workload, the bulk object
//! and the user's service can make answers without importing the trait's file.

use std::time::Duration;

/// Time spent opening a connection, by phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectTiming {
    /// TCP three-way handshake (zero for QUIC).
    pub tcp_connect: Duration,
    /// TLS handshake over TCP, or the QUIC handshake (zero in plaintext).
    pub handshake: Duration,
    /// Whether the TLS/QUIC session was resumed rather than fully negotiated.
    pub resumed: bool,
}

/// A validated successful answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reply {
    /// From issuing the request to receiving the response head.
    pub ttfb: Duration,
    /// From issuing the request to the last body byte, validated.
    pub total: Duration,
    /// Decoded body bytes (application payload, not wire bytes); for the bulk workload the
    /// object's size, whichever way it went (each counted exactly before the reply is made).
    pub body_bytes: u64,
    /// A socket the client opened inside this request because the server had ended the
    /// previous one (`Connection: close`, a close-delimited body, an idle close): its setup,
    /// so that it is counted with the connections the runner opened.
    pub reopened: Option<ConnectTiming>,
    /// A streaming call's messages: received (server streaming, bidi) or sent (client
    /// streaming); 0 for a call that streams nothing. For a streaming answer `ttfb` is the
    /// first message's arrival.
    pub messages: u32,
    /// The call was a streaming one (client-streaming, server-streaming or bidi), whatever
    /// its `messages`: the calls `messages_per_call_mean` averages over.
    pub streamed: bool,
}
