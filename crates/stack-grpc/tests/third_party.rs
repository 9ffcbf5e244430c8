//! gRPC target calls against a server nobody here wrote: grpcio (Python) serving
//! tests/fixtures/catalog.proto, in plaintext h2c or TLS with the suite's CA, with or without
//! reflection. Skipped with a note when python3 or grpcio is missing, unless
//! TBENCH_REQUIRE_GRPCIO=1 (CI) makes that a failure. Traffic stays on 127.0.0.1.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bench_core::tls::{ensure_certs, load_ca, CertPaths};
use bench_core::user_service::{Api, Calls, Targets};
use bench_core::{
    Call, Client, ClientImplementation, ClientSettings, ClientTls, FailureClass, HandshakeVariant,
    PayloadProfile, Stack,
};
use stack_grpc::Grpc;
use test_servers::grpcio::Grpcio;

/// Any one test's bound: a Python server start, setup and a few hundred calls take seconds.
const TEST_BOUND: Duration = Duration::from_secs(90);

fn fixtures() -> PathBuf {
    test_servers::grpcio::fixtures()
}

/// The `[targets]` of an experiment file, with the server's address filled in.
fn grpc_calls(toml_text: &str) -> Arc<bench_core::user_service::GrpcCalls> {
    let targets: Targets = toml::from_str(toml_text).expect("targets parse");
    match targets
        .calls(Api::Grpc, &|_| None)
        .expect("targets compile")
    {
        Some(Calls::Grpc(calls)) => calls,
        other => panic!("no gRPC calls: {other:?}"),
    }
}

fn settings(port: u16, tls: Option<&CertPaths>, calls: Calls) -> ClientSettings {
    ClientSettings {
        target: ([127, 0, 0, 1], port).into(),
        server_name: bench_core::tls::SERVER_NAME.to_string(),
        tls: tls.map(|paths| {
            ClientTls::suite(
                load_ca(&paths.ca_cert()).expect("CA"),
                HandshakeVariant::Full,
            )
        }),
        connect_timeout: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(5),
        payload: PayloadProfile::Small,
        tuning: Default::default(),
        calls,
    }
}

fn proto() -> String {
    fixtures().join("catalog.proto").display().to_string()
}

/// A client for `target` (a `[grpc]` table's lines) on the server at `port`, made on a
/// blocking thread as the runner does before measuring.
async fn client_for(
    port: u16,
    tls: Option<&CertPaths>,
    target: &str,
) -> anyhow::Result<Arc<dyn Client>> {
    client_with(port, tls, "shop.v1.Catalog/GetItem", target).await
}

/// [`client_for`] a `method` of the catalog.
async fn client_with(
    port: u16,
    tls: Option<&CertPaths>,
    method: &str,
    target: &str,
) -> anyhow::Result<Arc<dyn Client>> {
    let scheme = if tls.is_some() {
        "https://localhost"
    } else {
        "http://127.0.0.1"
    };
    let text = format!(
        "[grpc]\naddress = \"{scheme}:{port}\"\nmethod = \"{method}\"\n{target}\n[ids]\nfrom = 1\nto = 1000\n"
    );
    let calls = Calls::Grpc(grpc_calls(&text));
    let settings = settings(port, tls, calls);
    tokio::task::spawn_blocking(move || Grpc.client(&settings))
        .await
        .expect("client thread")
}

/// Runs a test's body within [`TEST_BOUND`].
async fn bounded(test: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("the test finished within its bound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proto_file_plaintext_calls_succeed_and_reach_the_server() {
    bounded(async {
        let Some(server) = Grpcio::start(None, true) else {
            return;
        };
        let target = format!(
            "proto = [\"{}\"]\nrequest = '{{\"id\": \"{{{{id}}}}\"}}'\nmetadata = {{ \"x-tenant\" = \"w{{{{worker}}}}\" }}\nexpect_fields = [\"name\", \"owner.name\", \"tags\", \"id\"]",
            proto()
        );
        let client = client_for(server.port, None, &target).await.expect("client");
        let ids = bench_core::user_service::IdRange {
            from: 1,
            to: 1000,
            ..Default::default()
        };
        // 4 workers × 25 calls multiplexed on one connection, then 5 calls on new ones.
        let connected = client.connect().await.expect("connect");
        let conn = connected.conn.clone();
        let mut sent = Vec::new();
        let mut tasks = Vec::new();
        for worker in 0..4u32 {
            let conn = conn.clone();
            let calls: Vec<Call> = (0..25u64)
                .map(|i| {
                    let seq = u64::from(worker) * 100 + i;
                    Call {
                        id: ids.id(seq),
                        seq,
                        worker,
                    }
                })
                .collect();
            sent.extend(calls.iter().map(|c| (c.id, format!("w{}", c.worker))));
            tasks.push(tokio::spawn(async move {
                for call in calls {
                    let reply = conn
                        .request(call)
                        .await
                        .unwrap_or_else(|f| panic!("call {call:?}: {f}"));
                    assert!(reply.body_bytes > 0 && reply.total >= reply.ttfb);
                }
            }));
        }
        for task in tasks {
            task.await.expect("worker");
        }
        let wire = conn.wire_bytes();
        assert!(wire.sent > 0 && wire.received > 0, "{wire:?}");
        conn.close().await;
        for id in 900..905u64 {
            let connected = client.connect().await.expect("connect");
            connected
                .conn
                .request(Call {
                    id,
                    seq: id,
                    worker: 9,
                })
                .await
                .expect("call on a new connection");
            sent.push((id, "w9".into()));
            connected.conn.close().await;
        }
        let mut logged = server.logged();
        logged.sort();
        sent.sort();
        assert_eq!(logged, sent, "the ids (and metadata) the server received");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_over_tls_with_the_suite_ca() {
    bounded(async {
        let certs = tempfile::tempdir().expect("temp dir");
        let paths = ensure_certs(certs.path()).expect("certificates");
        let Some(server) = Grpcio::start(Some(&paths), true) else {
            return;
        };
        let target =
            "reflection = true\nrequest = '{\"id\": {{id}}}'\nexpect_fields = [\"owner.name\"]";
        let client = client_for(server.port, Some(&paths), target)
            .await
            .expect("client through reflection");
        let connected = client.connect().await.expect("TLS connect");
        assert!(connected.timing.handshake > Duration::ZERO);
        for id in 1..=20 {
            connected
                .conn
                .request(Call::item(id))
                .await
                .unwrap_or_else(|f| panic!("call {id}: {f}"));
        }
        connected.conn.close().await;
        let ids: Vec<u64> = server.logged().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_expectations_are_refused_or_counted_as_missing_data() {
    bounded(async {
        let Some(server) = Grpcio::start(None, true) else {
            return;
        };
        // A field the schema does not have: refused at setup, before any call.
        let target = format!(
            "proto = [\"{}\"]\nrequest = '{{\"id\": {{{{id}}}}}}'\nexpect_fields = [\"nonexistent\"]",
            proto()
        );
        let e = client_for(server.port, None, &target)
            .await
            .err()
            .expect("an unknown field is refused")
            .to_string();
        assert!(
            e.contains("targets.grpc.expect_fields") && e.contains("nonexistent"),
            "{e}"
        );
        // The same through reflection.
        let e = client_for(
            server.port,
            None,
            "reflection = true\nexpect_fields = [\"owner.nonexistent\"]",
        )
        .await
        .err()
        .expect("an unknown nested field is refused")
        .to_string();
        assert!(e.contains("shop.v1.Owner has no field 'nonexistent'"), "{e}");
        assert!(server.logged().is_empty(), "setup sent no call");
        // In the schema, never set by this server: each answer is missing data, and the
        // connection goes on. (A proto3 string has no presence: its value is what is checked.)
        let target = format!(
            "proto = [\"{}\"]\nrequest = '{{\"id\": {{{{id}}}}}}'\nexpect_fields = [\"owner.name\"]\nexpect_values = {{ note = \"!= ''\" }}",
            proto()
        );
        let client = client_for(server.port, None, &target).await.expect("client");
        let connected = client.connect().await.expect("connect");
        for id in [3, 4] {
            let f = connected
                .conn
                .request(Call::item(id))
                .await
                .expect_err("note is empty");
            assert_eq!(f.class, FailureClass::MissingData, "{f}");
            assert_eq!(f.code.as_deref(), Some("note"));
            assert!(!f.breaks_connection());
        }
        connected.conn.close().await;
        assert_eq!(server.logged().len(), 2);
    })
    .await;
}

/// A proto3 scalar without presence whose correct value is 0 (`quantity` = id mod 3): the wire
/// leaves it out of a third of the answers, so `expect_fields` cannot ask for its presence.
/// The client says so before the run, naming the value check to write, and counts none of the
/// zeros as missing data; `expect_values` checks the value itself, zeros included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scalar_whose_value_is_zero_is_not_missing_data() {
    bounded(async {
        let Some(server) = Grpcio::start(None, true) else {
            return;
        };
        let target = |extra: &str| {
            format!(
                "proto = [\"{}\"]\nrequest = '{{\"id\": {{{{id}}}}}}'\n{extra}",
                proto()
            )
        };
        let calls = |client: Arc<dyn Client>| async move {
            let connected = client.connect().await.expect("connect");
            let mut failed = Vec::new();
            for id in 1..=30u64 {
                if let Err(f) = connected.conn.request(Call::item(id)).await {
                    failed.push((id, f));
                }
            }
            connected.conn.close().await;
            failed
        };

        let presence = client_for(
            server.port,
            None,
            &target("expect_fields = [\"quantity\", \"owner\"]"),
        )
        .await
        .expect("client");
        let notes = presence.notes();
        assert_eq!(notes.len(), 1, "one line, for quantity only: {notes:?}");
        assert!(
            notes[0].contains("'quantity'")
                && notes[0].contains("int32 without presence")
                && notes[0].contains("expect_values = { \"quantity\" = \">= 0\" }"),
            "{}",
            notes[0]
        );
        let failed = calls(presence).await;
        assert!(
            failed.is_empty(),
            "answers with quantity 0 failed: {failed:?}"
        );

        let value = client_for(
            server.port,
            None,
            &target("expect_values = { quantity = \">= 0\" }"),
        )
        .await
        .expect("client");
        assert!(value.notes().is_empty(), "{:?}", value.notes());
        let failed = calls(value).await;
        assert!(
            failed.is_empty(),
            "answers with quantity 0 failed: {failed:?}"
        );

        // A check the zeros do not pass: exactly the answers with quantity 0 fail, as
        // missing data naming the field, its value and the check.
        let strict = client_for(
            server.port,
            None,
            &target("expect_values = { quantity = \"> 0\" }"),
        )
        .await
        .expect("client");
        let failed = calls(strict).await;
        let ids: Vec<u64> = failed.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (1..=30).filter(|id| id % 3 == 0).collect::<Vec<_>>());
        for (_, f) in &failed {
            assert_eq!(f.class, FailureClass::MissingData, "{f}");
            assert_eq!(f.code.as_deref(), Some("quantity"));
            assert!(f.detail.contains("quantity is 0, expected > 0"), "{f}");
        }
        assert_eq!(server.logged().len(), 90);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_is_a_bad_status_with_its_code() {
    bounded(async {
        let Some(server) = Grpcio::start(None, false) else {
            return;
        };
        let target = format!(
            "proto = [\"{}\"]\nrequest = '{{\"id\": {{{{id}}}}}}'\nexpect_fields = [\"name\"]",
            proto()
        );
        let client = client_for(server.port, None, &target)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        let f = connected
            .conn
            .request(Call::item(404))
            .await
            .expect_err("id 404 is NOT_FOUND");
        assert_eq!(f.class, FailureClass::BadStatus, "{f}");
        assert_eq!(f.code.as_deref(), Some("NOT_FOUND"));
        assert!(
            f.detail.contains("grpc-status 5 NOT_FOUND") && f.detail.contains("no item 404"),
            "{}",
            f.detail
        );
        // The connection is still good.
        connected
            .conn
            .request(Call::item(5))
            .await
            .expect("the next call succeeds");
        connected.conn.close().await;
        let ids: Vec<u64> = server.logged().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [404, 5]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_on_a_server_without_it_is_a_setup_error() {
    bounded(async {
        let Some(server) = Grpcio::start(None, false) else {
            return;
        };
        let started = std::time::Instant::now();
        let e = client_for(server.port, None, "reflection = true")
            .await
            .err()
            .expect("no reflection service")
            .to_string();
        assert!(
            e.contains("reflection") && e.contains("UNIMPLEMENTED") && e.contains("v1alpha"),
            "{e}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        // A service the reflecting server does not have is named as such.
        let Some(other) = Grpcio::start(None, true) else {
            return;
        };
        let text = format!(
            "[grpc]\naddress = \"http://127.0.0.1:{}\"\nmethod = \"shop.v9.Nope/GetItem\"\nreflection = true\n",
            other.port
        );
        let settings = settings(other.port, None, Calls::Grpc(grpc_calls(&text)));
        let e = tokio::task::spawn_blocking(move || Grpc.client(&settings).err())
            .await
            .unwrap()
            .expect("an unknown service is refused")
            .to_string();
        assert!(e.contains("shop.v9.Nope") && e.contains("NOT_FOUND"), "{e}");
        // … with the services the server does offer, from its reflection service.
        assert!(e.contains("the server offers") && e.contains("Catalog"), "{e}");
    })
    .await;
}

/// Streaming methods of a service no one here wrote (grpcio): a server stream's every
/// message checked and timed (4 gaps for 5 items), its status read at the end (NOT_FOUND
/// after two items); a client stream of 7 uploads counted by the server; a bidi call's
/// 3 answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_methods_are_measured_per_message() {
    bounded(async {
        let Some(server) = Grpcio::start(None, false) else {
            return;
        };
        let request = "request = '{\"id\": {{id}}}'";
        let watch = format!(
            "proto = [\"{}\"]\n{request}\nexpect_fields = [\"name\", \"owner.name\"]",
            proto()
        );
        let client = client_with(server.port, None, "shop.v1.Catalog/WatchItems", &watch)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        for id in 1..=20u64 {
            let mut gaps = Vec::new();
            let reply = connected
                .conn
                .request_observed(Call::item(id), &mut |gap| gaps.push(gap))
                .await
                .unwrap_or_else(|f| panic!("watch {id}: {f}"));
            assert_eq!(reply.messages, 5, "five items streamed");
            assert_eq!(gaps.len(), 4, "a gap between each two");
            assert!(reply.ttfb <= reply.total);
            assert!(
                gaps.iter().all(|g| *g <= reply.total - reply.ttfb),
                "{gaps:?}"
            );
        }
        let f = connected
            .conn
            .request(Call::item(404))
            .await
            .expect_err("NOT_FOUND after two items");
        assert_eq!(f.code.as_deref(), Some("NOT_FOUND"), "{f}");
        connected.conn.close().await;

        let upload = format!(
            "proto = [\"{}\"]\n{request}\nmessages = 7\nexpect_values = {{ count = \"== 7\" }}",
            proto()
        );
        let client = client_with(server.port, None, "shop.v1.Catalog/UploadItems", &upload)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        let reply = connected.conn.request(Call::item(3)).await.expect("upload");
        assert_eq!(reply.messages, 7);
        connected.conn.close().await;
        assert!(
            server.logged().contains(&(7, "upload-1-distinct".to_string())),
            "the server counted 7 items, one rendering sent 7 times"
        );
        // `{{message}}` numbers them: 7 distinct items.
        let numbered = format!(
            "proto = [\"{}\"]\nrequest = '{{\"id\": {{{{id}}}}, \"name\": \"part {{{{message}}}}\"}}'\nmessages = 7",
            proto()
        );
        let client = client_with(server.port, None, "shop.v1.Catalog/UploadItems", &numbered)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        connected.conn.request(Call::item(4)).await.expect("numbered upload");
        connected.conn.close().await;
        assert!(
            server.logged().contains(&(7, "upload-7-distinct".to_string())),
            "{:?}",
            server.logged()
        );

        let chat = format!(
            "proto = [\"{}\"]\n{request}\nmessages = 3\nexpect_fields = [\"name\"]",
            proto()
        );
        let client = client_with(server.port, None, "shop.v1.Catalog/ChatItems", &chat)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        let reply = connected.conn.request(Call::item(9)).await.expect("chat");
        assert_eq!(reply.messages, 3, "each request answered");
        connected.conn.close().await;

        // An upload that the server counts otherwise fails its value check.
        let wrong = upload.replace("== 7", "== 8");
        let client = client_with(server.port, None, "shop.v1.Catalog/UploadItems", &wrong)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        let f = connected
            .conn
            .request(Call::item(3))
            .await
            .expect_err("7 is not 8");
        assert_eq!(f.class, FailureClass::MissingData, "{f}");
        connected.conn.close().await;
    })
    .await;
}

/// `duration_ms` ends a feed without end (grpcio's WatchItems for id 777: an item every
/// 10 ms): the call succeeds at its duration with the items whole by then, the server sees it
/// cancelled, and the connection goes on. `check_messages = "last"` holds the checks to the
/// last message: an answer whose earlier items lack the field passes, one whose last item
/// lacks it fails, where checking every message fails both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_ends_at_the_call_duration_and_can_check_its_last_message() {
    bounded(async {
        let Some(server) = Grpcio::start(None, false) else {
            return;
        };
        let request = "request = '{\"id\": {{id}}}'";
        let feed = format!(
            "proto = [\"{}\"]\n{request}\nexpect_fields = [\"name\"]\nduration_ms = 300",
            proto()
        );
        let client = client_with(server.port, None, "shop.v1.Catalog/WatchItems", &feed)
            .await
            .expect("client");
        let connected = client.connect().await.expect("connect");
        for _ in 0..2 {
            let reply = connected
                .conn
                .request(Call::item(777))
                .await
                .expect("ended by the client at its duration");
            // 10 ms apart for 300 ms: about 30, not the whole feed.
            bench_core::testkit::assert_ended_at_duration(
                &reply,
                Duration::from_millis(300),
                Duration::from_millis(10),
            );
        }
        // The cancels left the connection usable: a call that ends by itself follows.
        let ended = connected
            .conn
            .request(Call::item(5))
            .await
            .expect("watch 5");
        assert_eq!(ended.messages, 5);
        connected.conn.close().await;
        let cancelled = || {
            server
                .logged()
                .iter()
                .filter(|(id, what)| *id == 777 && what == "watch-cancelled")
                .count()
        };
        let waited = std::time::Instant::now();
        while cancelled() < 2 && waited.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(cancelled(), 2, "{:?}", server.logged());

        let owners = |check: &str| {
            format!(
                "proto = [\"{}\"]\n{request}\nexpect_fields = [\"owner.name\"]\n{check}",
                proto()
            )
        };
        let every = client_with(server.port, None, "shop.v1.Catalog/WatchItems", &owners(""))
            .await
            .expect("client");
        let last = client_with(
            server.port,
            None,
            "shop.v1.Catalog/WatchItems",
            &owners("check_messages = \"last\""),
        )
        .await
        .expect("client");
        let (every, last) = (
            every.connect().await.expect("connect"),
            last.connect().await.expect("connect"),
        );
        // 555: only the last item has an owner; 556: all but the last.
        for id in [555, 556] {
            let f = every.conn.request(Call::item(id)).await.expect_err("every");
            assert_eq!(f.class, FailureClass::MissingData, "{id}: {f}");
            assert_eq!(f.code.as_deref(), Some("owner.name"), "{id}: {f}");
        }
        let reply = last
            .conn
            .request(Call::item(555))
            .await
            .expect("last has it");
        assert_eq!(reply.messages, 5, "every item counted, the last checked");
        let f = last
            .conn
            .request(Call::item(556))
            .await
            .expect_err("last lacks it");
        assert_eq!(f.class, FailureClass::MissingData, "{f}");
        assert_eq!(f.code.as_deref(), Some("owner.name"), "{f}");
        every.conn.close().await;
        last.conn.close().await;
    })
    .await;
}

/// Setup refusals that need no server: `messages` on a method that takes one request, the
/// library client, REST calls, and a scheme the TLS settings contradict.
#[test]
fn targets_the_lean_client_cannot_send_are_refused() {
    let calls = |method: &str, scheme: &str| {
        grpc_calls(&format!(
            "[grpc]\naddress = \"{scheme}://127.0.0.1:1\"\nmethod = \"{method}\"\nproto = [\"{}\"]\n",
            proto()
        ))
    };
    let error = |settings: ClientSettings| Grpc.client(&settings).err().unwrap().to_string();
    let several = grpc_calls(&format!(
        "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"shop.v1.Catalog/WatchItems\"\nproto = [\"{}\"]\nmessages = 3\n",
        proto()
    ));
    let e = error(settings(1, None, Calls::Grpc(several)));
    assert!(
        e.contains("targets.grpc.messages") && e.contains("one request message"),
        "{e}"
    );
    let numbered = grpc_calls(&format!(
        "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"shop.v1.Catalog/WatchItems\"\nproto = [\"{}\"]\nrequest = '{{\"id\": {{{{message}}}}}}'\n",
        proto()
    ));
    let e = error(settings(1, None, Calls::Grpc(numbered)));
    assert!(
        e.contains("targets.grpc.request: {{message}} numbers"),
        "{e}"
    );
    // A duration ends a streamed answer; "last" chooses among its messages: neither fits a
    // method whose answer is one message.
    let with = |method: &str, line: &str| {
        grpc_calls(&format!(
            "[grpc]\naddress = \"http://127.0.0.1:1\"\nmethod = \"{method}\"\nproto = [\"{}\"]\n{line}\n",
            proto()
        ))
    };
    let e = error(settings(
        1,
        None,
        Calls::Grpc(with("shop.v1.Catalog/UploadItems", "duration_ms = 100")),
    ));
    assert!(
        e.contains("targets.grpc.duration_ms: ends a streamed answer early")
            && e.contains("messages = N"),
        "{e}"
    );
    let e = error(settings(
        1,
        None,
        Calls::Grpc(with("shop.v1.Catalog/GetItem", "check_messages = \"last\"")),
    ));
    assert!(
        e.contains("targets.grpc.check_messages: chooses among"),
        "{e}"
    );

    let mut library = settings(
        1,
        None,
        Calls::Grpc(calls("shop.v1.Catalog/GetItem", "http")),
    );
    library.tuning.client = ClientImplementation::Library;
    let e = error(library);
    assert!(e.contains("use client = \"lean\""), "{e}");

    let rest: Targets = toml::from_str("[rest]\nurl = \"http://127.0.0.1:1/x\"").unwrap();
    let rest = rest.calls(Api::Rest, &|_| None).unwrap().unwrap();
    let e = error(settings(1, None, rest));
    assert!(e.contains("[targets.rest]"), "{e}");

    let e = error(settings(
        1,
        None,
        Calls::Grpc(calls("shop.v1.Catalog/GetItem", "https")),
    ));
    assert!(e.contains("no TLS settings"), "{e}");

    // A good target needs no server to be prepared from its .proto.
    Grpc.client(&settings(
        1,
        None,
        Calls::Grpc(calls("shop.v1.Catalog/GetItem", "http")),
    ))
    .expect("prepared without connecting");
}
