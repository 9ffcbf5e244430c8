#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_conformance() {
    bench_core::testkit::conformance(&stack_h2::Http2).await;
}
