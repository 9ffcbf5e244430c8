//! What the tests' tonic-h3 servers share: the item service's streaming methods, served as
//! the suite's own tonic server serves them (`grpc_wire::streams`).

/// `impl ItemService for $service` with the test's own `get_item` and the streaming methods:
/// `$description` (given the service as `$this`) is each streamed item's padding, and
/// `$service_time` (a `ServiceTimeSpec`, default none) what each ListItems item waits.
macro_rules! item_service {
    ($service:ty, |$this:ident| $description:expr, { $($get_item:tt)* }) => {
        common::item_service!($service, |$this| $description, Default::default(), {
            $($get_item)*
        });
    };
    ($service:ty, |$this:ident| $description:expr, $service_time:expr, { $($get_item:tt)* }) => {
        #[tonic::async_trait]
        impl ItemService for $service {
        $($get_item)*

        type ListItemsStream = grpc_wire::streams::ItemStream;

        async fn list_items(
            &self,
            req: tonic::Request<grpc_wire::pb::ListItemsRequest>,
        ) -> Result<tonic::Response<Self::ListItemsStream>, tonic::Status> {
            let $this = self;
            let ids = grpc_wire::streams::list_ids(req.get_ref());
            let items =
                grpc_wire::streams::items(ids, $description.into(), $service_time, false);
            Ok(tonic::Response::new(items))
        }

        async fn put_items(
            &self,
            req: tonic::Request<tonic::Streaming<grpc_wire::pb::Item>>,
        ) -> Result<tonic::Response<grpc_wire::pb::PutItemsReply>, tonic::Status> {
            let reply = grpc_wire::streams::count_uploads(req.into_inner()).await?;
            Ok(tonic::Response::new(reply))
        }

        type DownloadStream = grpc_wire::streams::ChunkStream;

        async fn download(
            &self,
            req: tonic::Request<grpc_wire::pb::DownloadRequest>,
        ) -> Result<tonic::Response<Self::DownloadStream>, tonic::Status> {
            grpc_wire::streams::chunks(req.get_ref()).map(tonic::Response::new)
        }

        async fn upload(
            &self,
            req: tonic::Request<tonic::Streaming<grpc_wire::pb::Chunk>>,
        ) -> Result<tonic::Response<grpc_wire::pb::UploadReply>, tonic::Status> {
            let reply = grpc_wire::streams::count_chunks(req.into_inner()).await?;
            Ok(tonic::Response::new(reply))
        }

        type ChatItemsStream = grpc_wire::streams::ItemStream;

        async fn chat_items(
            &self,
            req: tonic::Request<tonic::Streaming<grpc_wire::pb::GetItemRequest>>,
        ) -> Result<tonic::Response<Self::ChatItemsStream>, tonic::Status> {
            let $this = self;
            let ids = grpc_wire::streams::chat_ids(req.into_inner());
            let items =
                grpc_wire::streams::items(ids, $description.into(), Default::default(), false);
            Ok(tonic::Response::new(items))
        }
        }
    };
}

pub(crate) use item_service;
