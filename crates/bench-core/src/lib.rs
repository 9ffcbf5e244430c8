//! Shared core of the transport benchmark: the [`stack::Stack`] trait, the workload and its
//! validation, failure classes, TLS/certificate helpers and TCP plumbing.

pub mod bulk;
pub mod call;
pub mod failure;
pub mod limits;
pub mod net;
pub mod reply;
pub mod service_time;
pub mod source;
pub mod stack;
pub mod testkit;
pub mod tls;
pub mod user_service;
pub mod workload;

pub use bulk::BulkObject;
pub use call::Call;
pub use failure::{classify_error, Failure, FailureClass, Phase};
pub use reply::{ConnectTiming, Reply};
pub use service_time::{ServiceTime, ServiceTimeSpec};
pub use stack::{
    BoundServer, Client, ClientImplementation, ClientSettings, Connected, Connection, GrpcCall,
    HttpVersion, QuicEndpoint, ServerSettings, Stack, Tuning, WireBytes,
};
pub use tls::{ClientTls, HandshakeVariant};
pub use user_service::{Api, Calls};
pub use workload::{FaultKind, FaultSpec, PayloadProfile};
