//! Shared core of the transport benchmark: the [`stack::Stack`] trait, the workload and its
//! validation, failure classes, TLS/certificate helpers and TCP plumbing.
#![forbid(unsafe_code)]

pub mod call;
pub mod failure;
pub mod net;
pub mod service;
pub mod source;
pub mod stack;
pub mod target;
pub mod testkit;
pub mod tls;
pub mod workload;

pub use call::Call;
pub use failure::{classify_error, Failure, FailureClass, Phase};
pub use service::{ServiceSpec, ServiceTime};
pub use stack::{
    BoundServer, Client, ClientImplementation, ClientSettings, ConnectTiming, Connected,
    Connection, QuicEndpoint, Reply, ServerSettings, Stack, Tuning, WireBytes,
};
pub use target::{Api, Calls};
pub use tls::{ClientTls, HandshakeVariant};
pub use workload::{FaultKind, FaultSpec, PayloadProfile};
