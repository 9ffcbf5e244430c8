//! The workload's calls as both gRPC stacks' lean clients make them: which method
//! (`grpc_call`), the request body, the limit the answer is held to, and how the answer is
//! checked (one item, an upload's count, or a stream of items). Each stack adds its transport.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::limits::{grpc_max_receive_message_bytes, BodyLimit};
use bench_core::workload::{padding, validate_item};
use bench_core::{ClientSettings, Failure, FailureClass, GrpcCall, PayloadProfile, Reply};
use bytes::Bytes;

use crate::{check_put_items_reply, decode_item_view, item_call_body, item_call_path, ItemStream};

/// The settings every call of a client shares (cheap to clone).
#[derive(Clone)]
pub struct ItemCalls {
    pub grpc_call: GrpcCall,
    /// Messages a streaming call streams.
    pub stream_messages: u32,
    pub payload: PayloadProfile,
    /// The largest message received (`grpc_max_receive_message_bytes`).
    pub max_message_bytes: u64,
    /// What an upload's items carry (the payload profile's padding).
    description: Arc<str>,
}

impl ItemCalls {
    pub fn new(settings: &ClientSettings) -> Self {
        ItemCalls {
            grpc_call: settings.tuning.grpc_call,
            stream_messages: settings.tuning.stream_messages.max(1),
            payload: settings.payload,
            max_message_bytes: grpc_max_receive_message_bytes(&settings.tuning),
            description: padding(settings.payload).into(),
        }
    }

    /// The method's path.
    pub fn path(&self) -> &'static str {
        item_call_path(self.grpc_call)
    }

    /// Whether the answer is a stream of items (server streaming, bidi), read as it arrives.
    pub fn streamed_answer(&self) -> bool {
        matches!(self.grpc_call, GrpcCall::ServerStream | GrpcCall::Bidi)
    }

    /// What the answer's body is held to: each message's size, and one message unless the
    /// answer is a stream.
    pub fn answer_limit(&self) -> BodyLimit {
        let max_message_bytes = self.max_message_bytes;
        if self.streamed_answer() {
            BodyLimit::GrpcStream { max_message_bytes }
        } else {
            BodyLimit::GrpcUnary { max_message_bytes }
        }
    }

    /// The request body of the call about item `id` (and the ones after it).
    pub fn body(&self, id: u64) -> Bytes {
        item_call_body(self.grpc_call, id, self.stream_messages, &self.description)
    }

    /// A streamed answer's reader for the call about `id`, started at `started`.
    pub fn stream(&self, id: u64, started: Instant) -> ItemStream {
        ItemStream::new(
            id,
            self.stream_messages,
            self.payload,
            self.max_message_bytes,
            started,
        )
    }

    /// A unary answer's one message, checked: the item `id` (GetItem) or the upload's count
    /// (PutItems); the reply with the transport's timings.
    pub fn unary_reply(
        &self,
        id: u64,
        message: &[u8],
        ttfb: Duration,
        total: Duration,
    ) -> Result<Reply, Failure> {
        let messages = if self.grpc_call == GrpcCall::ClientStream {
            check_put_items_reply(message, id, self.stream_messages)?;
            self.stream_messages
        } else {
            let view = decode_item_view(message).map_err(|e| {
                Failure::new(FailureClass::BadBody, format!("invalid protobuf item: {e}"))
            })?;
            validate_item(&view, id, self.payload)?;
            0
        };
        Ok(Reply {
            messages,
            reopened: None,
            streamed: self.grpc_call == GrpcCall::ClientStream,
            ttfb,
            total,
            body_bytes: message.len() as u64,
        })
    }
}
