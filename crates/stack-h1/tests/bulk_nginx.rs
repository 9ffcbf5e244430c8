//! The bulk workload's download against nginx (a static file at `/bulk/<bytes>`): the lean
//! HTTP/1.1 client counts the object exactly without holding it, and a file shorter than its
//! object fails as a short object (`test_servers::nginx::check_bulk_downloads`). Skipped
//! without nginx unless `TBENCH_REQUIRE_NGINX=1`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_from_nginx_are_counted_exactly() {
    test_servers::nginx::check_bulk_downloads(&stack_h1::Http1).await;
}
