#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_conformance() {
    bench_core::testkit::conformance(&stack_h3::Http3).await;
}
