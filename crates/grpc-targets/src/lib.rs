//! Calls to a user's own gRPC service (`[targets.grpc]`), shared by the gRPC stacks (over
//! HTTP/2 and over HTTP/3), so both resolve descriptors and validate answers alike: the
//! method's descriptors (`.proto` files compiled at run time, or the server's reflection
//! service asked over the stack's own transport), each call's request message (rendered from
//! the JSON template, encoded with the descriptors) and the checks on its answer. Each stack
//! adds only its transport. Stacks never depend on each other; what two of them do alike
//! lives in a shared layer.

pub mod descriptors;
pub mod method;

pub use descriptors::{compile, resolve, Unary};
pub use method::{AnswerStream, Method, Methods, Scratch};
