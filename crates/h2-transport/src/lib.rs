//! A lean HTTP/2 client (RFC 9113, HPACK RFC 7541), below the stacks: the HTTP/2 stack sends
//! REST requests with it and the gRPC stack unary calls.
//!
//! As `quinn` is split from `quinn-proto`, the client is a protocol state machine without I/O
//! (`proto`: frames, stream states, flow control, SETTINGS, GOAWAY, HPACK; tested alone from
//! scripted frame sequences) and a thin async driver ([`H2Conn`]: socket reads and writes,
//! wakers).

mod driver;
mod error;
mod frame;
mod hpack;
mod proto;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

pub use driver::{H2Conn, StreamedCall};
pub use proto::{Answer, RequestHead, StreamEvent, MAX_HEADER_LIST_SIZE};
