#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_conformance() {
    bench_core::testkit::conformance(&stack_h1::Http1).await;
}
