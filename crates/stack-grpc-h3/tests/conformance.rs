#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_h3_conformance() {
    bench_core::testkit::conformance(&stack_grpc_h3::GrpcH3).await;
}
