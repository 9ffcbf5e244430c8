//! A lean HTTP/2 client (RFC 9113, HPACK RFC 7541), below the stacks: the HTTP/2 stack sends
//! REST requests with it and the gRPC stack unary calls.
#![forbid(unsafe_code)]

mod conn;
mod hpack;

pub use conn::{Answer, H2Conn, RequestHead};
