#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_conformance() {
    bench_core::testkit::conformance(&stack_grpc::Grpc).await;
}
