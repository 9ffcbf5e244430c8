//! The item service's streaming methods as tonic serves them, shared by the `grpc` stack's
//! server and the tests that put the same methods on servers no one here wrote (tonic-h3):
//! items produced one at a time, as the connection's flow control takes them, so a slow
//! client holds the server back rather than its memory.

use std::pin::Pin;
use std::sync::Arc;

use bench_core::ServiceTimeSpec;
use futures::{Stream, StreamExt};
use tonic::Status;

use crate::pb::{GetItemRequest, Item, ListItemsRequest, PutItemsReply};

/// A streaming answer of items.
pub type ItemStream = Pin<Box<dyn Stream<Item = Result<Item, Status>> + Send>>;

/// The items of `ids`, in order, each after its service time; with `nameless_first` the first
/// one has no name (the missing-field fault).
pub fn items(
    ids: impl Stream<Item = u64> + Send + 'static,
    description: Arc<str>,
    service_time: ServiceTimeSpec,
    nameless_first: bool,
) -> ItemStream {
    let mut nameless = nameless_first;
    Box::pin(ids.then(move |id| {
        let description = description.clone();
        let wait = service_time.begin(id);
        let nameless = std::mem::take(&mut nameless);
        async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let mut item = crate::item(id, &description);
            if nameless {
                item.name.clear();
            }
            Ok(item)
        }
    }))
}

/// ListItems: ids `first_id`, `first_id + 1`, … (`count` of them).
pub fn list_ids(request: &ListItemsRequest) -> impl Stream<Item = u64> + Send + 'static {
    let end = request.first_id.saturating_add(u64::from(request.count));
    futures::stream::iter(request.first_id..end)
}

/// ChatItems: the id of each request, as it arrives; the answer ends with the requests (or
/// at one that does not decode).
pub fn chat_ids(
    requests: tonic::Streaming<GetItemRequest>,
) -> impl Stream<Item = u64> + Send + 'static {
    futures::stream::unfold(requests, |mut requests| async move {
        match requests.message().await {
            Ok(Some(r)) => Some((r.id, requests)),
            Ok(None) | Err(_) => None,
        }
    })
}

/// PutItems: the items uploaded, counted as they arrive, and the last one's id.
pub async fn count_uploads(mut items: tonic::Streaming<Item>) -> Result<PutItemsReply, Status> {
    let mut reply = PutItemsReply::default();
    while let Some(item) = items.message().await? {
        reply.count += 1;
        reply.last_id = item.id;
    }
    Ok(reply)
}

/// A bulk download's answer: `Chunk`s of the requested size adding up to the object.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<crate::pb::Chunk, Status>> + Send>>;

/// Download: the object's chunks, each made as the connection's flow control takes the one
/// before (tonic encodes one at a time), so the object is never held.
pub fn chunks(request: &crate::pb::DownloadRequest) -> Result<ChunkStream, Status> {
    if !crate::bulk::valid_message_bytes(request.message_bytes) {
        return Err(Status::invalid_argument(format!(
            "message_bytes {} is outside {}..={}",
            request.message_bytes,
            bench_core::bulk::MIN_MESSAGE_BYTES,
            bench_core::bulk::MAX_MESSAGE_BYTES
        )));
    }
    let sizes = crate::bulk::message_data_sizes(request.total_bytes, request.message_bytes);
    Ok(Box::pin(futures::stream::iter(
        sizes.map(|n| Ok(crate::bulk::chunk_message(n))),
    )))
}

/// Upload: the data of the chunks uploaded, counted as they arrive.
pub async fn count_chunks(
    mut chunks: tonic::Streaming<crate::pb::Chunk>,
) -> Result<crate::pb::UploadReply, Status> {
    let mut reply = crate::pb::UploadReply::default();
    while let Some(chunk) = chunks.message().await? {
        reply.bytes += chunk.data.len() as u64;
    }
    Ok(reply)
}
