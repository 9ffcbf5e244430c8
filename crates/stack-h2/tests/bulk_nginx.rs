//! The bulk workload's download against nginx (a static file at `/bulk/<bytes>`, sent with a
//! Content-Length): the lean HTTP/2 client (nginx speaks HTTP/2 by ALPN) counts the object exactly without holding it, and
//! a file shorter than its object fails as a short object. Skipped without nginx unless
//! `TBENCH_REQUIRE_NGINX=1`.

use bench_core::{BulkObject, FailureClass, PayloadProfile, Stack};
use test_servers::nginx::Nginx;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_from_nginx_are_counted_exactly() {
    bench_core::tls::install_crypto_provider();
    let certs = tempfile::tempdir().unwrap();
    let Some(nginx) = Nginx::start(certs.path()) else {
        return;
    };
    let object: BulkObject = "download:3MiB".parse().unwrap();
    nginx.bulk_file(object.bytes, object.bytes);
    let short: BulkObject = "download:2MiB".parse().unwrap();
    nginx.bulk_file(short.bytes, short.bytes - 1000);
    for (o, ok) in [(object, true), (short, false)] {
        let mut settings = bench_core::testkit::client_settings(
            nginx.addr,
            certs.path(),
            false,
            PayloadProfile::Small,
        );
        settings.tuning.bulk = Some(o);
        let client = stack_h2::Http2.client(&settings).unwrap();
        let conn = client.connect().await.expect("connect").conn;
        for _ in 0..3 {
            match conn.request(0.into()).await {
                Ok(reply) => {
                    assert!(ok, "{o}: a short file passed");
                    assert_eq!(reply.body_bytes, o.bytes);
                    assert!(reply.total >= reply.ttfb);
                }
                Err(f) => {
                    assert!(!ok, "{o}: {f:?}");
                    assert_eq!(f.class, FailureClass::BadBody, "{f:?}");
                    assert_eq!(f.code.as_deref(), Some("short object"), "{f:?}");
                }
            }
        }
        assert!(conn.wire_bytes().received >= 3 * (o.bytes - 1000));
        conn.close().await;
    }
}
