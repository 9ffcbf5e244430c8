//! The REST target checks every REST stack runs against a third-party server: requests
//! rendered from a `[targets]` text reach the server in the configured id order, answers
//! are judged into the right failure classes, and HEAD, 204, POST bodies and streamed
//! (chunked or many-frame) answers work.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bench_core::user_service::{Api, IdRange, Targets};

pub use crate::seen::{Recorder, Seen};
use bench_core::tls::{load_ca, HandshakeVariant};
use bench_core::{
    Call, Calls, ClientImplementation, ClientSettings, ClientTls, Failure, FailureClass,
    PayloadProfile, Reply, Stack,
};

/// The longest a request may take before it counts as timed out.
pub const REQUEST_BOUND: Duration = Duration::from_secs(5);
/// How long a server's log gets to show the requests it answered (nginx logs after the
/// answer is out).
const LOG_BOUND: Duration = Duration::from_secs(3);

/// A target's calls from `[targets]` TOML text.
pub fn calls(targets_toml: &str) -> Calls {
    let targets: Targets = toml::from_str(targets_toml)
        .unwrap_or_else(|e| panic!("targets TOML: {e}\n{targets_toml}"));
    targets
        .calls(Api::Rest, &|_| None)
        .unwrap_or_else(|e| panic!("targets: {e}"))
        .expect("a REST target")
}

/// Client settings for a REST target at `addr` (certificate name `localhost`, the suite's CA).
pub fn client_settings(
    addr: SocketAddr,
    cert_dir: &Path,
    calls: Calls,
    client: ClientImplementation,
) -> ClientSettings {
    let certs = bench_core::tls::ensure_certs(cert_dir).expect("certificates");
    ClientSettings {
        target: addr,
        server_name: "localhost".to_string(),
        tls: Some(ClientTls::suite(
            load_ca(&certs.ca_cert()).expect("CA"),
            HandshakeVariant::Full,
        )),
        connect_timeout: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(5),
        payload: PayloadProfile::Small,
        tuning: bench_core::Tuning {
            client,
            ..Default::default()
        },
        calls,
    }
}

/// The outcome of a run of calls.
#[derive(Debug, Default)]
pub struct Run {
    pub replies: Vec<Reply>,
    pub failures: Vec<Failure>,
}

impl Run {
    /// Each failure's class and code.
    pub fn classes(&self) -> Vec<(FailureClass, Option<&str>)> {
        self.failures
            .iter()
            .map(|f| (f.class, f.code.as_deref()))
            .collect()
    }
}

/// Sends calls `0..n` as one worker on one connection would (request `seq` asks for
/// `ids.id(seq)`), each bounded by [`REQUEST_BOUND`]; a failure that breaks the connection
/// makes the next call open another.
pub async fn send(stack: &dyn Stack, settings: &ClientSettings, n: u64) -> Run {
    let ids: IdRange = match &settings.calls {
        Calls::Rest(calls) => calls.ids,
        _ => panic!("a REST target's calls"),
    };
    let client = stack.client(settings).expect("client");
    let mut run = Run::default();
    let mut conn = None;
    for seq in 0..n {
        let call = Call {
            id: ids.id(seq),
            seq,
            worker: 0,
        };
        let c = match &conn {
            Some(c) => std::sync::Arc::clone(c),
            None => match client.connect().await {
                Ok(connected) => {
                    conn = Some(connected.conn.clone());
                    connected.conn
                }
                Err(f) => {
                    run.failures.push(f);
                    continue;
                }
            },
        };
        let outcome = tokio::time::timeout(REQUEST_BOUND, c.request(call))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::new(
                    FailureClass::RequestTimeout,
                    "request timeout",
                ))
            });
        match outcome {
            Ok(reply) => run.replies.push(reply),
            Err(f) => {
                if f.breaks_connection() {
                    if let Some(c) = conn.take() {
                        c.close().await;
                    }
                }
                run.failures.push(f);
            }
        }
    }
    if let Some(c) = conn.take() {
        c.close().await;
    }
    client.settle(Duration::from_secs(1)).await;
    run
}

/// One stack's client against one server.
pub struct Case<'a> {
    pub stack: &'a dyn Stack,
    pub client: ClientImplementation,
    pub server: &'a dyn Recorder,
    pub cert_dir: &'a Path,
    /// The HTTP version the server must see ("1.1", "2", "3").
    pub http_version: &'a str,
}

impl Case<'_> {
    /// `https://localhost:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.server.addr().port())
    }

    fn label(&self) -> String {
        format!(
            "{} ({} client) against {}",
            self.stack.name(),
            self.client,
            self.server.name()
        )
    }

    /// Sends `n` calls of the target `targets_toml` and returns the outcome with the
    /// requests the server recorded meanwhile (each checked to be of the expected HTTP
    /// version).
    pub async fn run(&self, targets_toml: &str, n: u64) -> (Run, Vec<Seen>) {
        let before = self.server.seen().len();
        let settings = client_settings(
            self.server.addr(),
            self.cert_dir,
            calls(targets_toml),
            self.client,
        );
        let run = send(self.stack, &settings, n).await;
        let deadline = Instant::now() + LOG_BOUND;
        let mut seen = self.server.seen();
        while seen.len() < before + n as usize && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            seen = self.server.seen();
        }
        let seen = seen.split_off(before.min(seen.len()));
        for s in &seen {
            assert_eq!(s.http_version, self.http_version, "{}: {s:?}", self.label());
        }
        (run, seen)
    }

    /// Sends `n` calls that must all succeed; returns what the server saw.
    pub async fn all_succeed(&self, targets_toml: &str, n: u64) -> (Vec<Reply>, Vec<Seen>) {
        let (run, seen) = self.run(targets_toml, n).await;
        assert!(
            run.failures.is_empty(),
            "{}: {} of {n} failed, first: {}\n{targets_toml}",
            self.label(),
            run.failures.len(),
            run.failures[0]
        );
        assert_eq!(run.replies.len() as u64, n, "{}", self.label());
        for r in &run.replies {
            assert!(r.total >= r.ttfb, "{}: {r:?}", self.label());
        }
        (run.replies, seen)
    }

    /// Sends `n` calls that must each fail as `class` with `code`.
    pub async fn all_fail(&self, targets_toml: &str, n: u64, class: FailureClass, code: &str) {
        let (run, seen) = self.run(targets_toml, n).await;
        assert_eq!(
            run.classes(),
            vec![(class, Some(code)); n as usize],
            "{}: {:?}\n{targets_toml}",
            self.label(),
            run.failures.first()
        );
        // Judged answers leave the connection as it was: the server got every request.
        assert_eq!(seen.len() as u64, n, "{}: {seen:?}", self.label());
    }

    /// A GET target at `path_template` (`{{id}}` in it), validated by status and pointers.
    fn get(&self, ids: &str, path_template: &str, status: &str, json: &str) -> String {
        format!(
            "[ids]\n{ids}\n[rest]\nurl = \"{}\"\nexpect_status = {status}\nexpect_json = {json}\n",
            self.url(path_template)
        )
    }

    /// What every server answers alike: `path` (`/items/{{id}}` with `?seq={{seq}}` added)
    /// reaches the server in the configured order, sequential and random, and wrong
    /// expectations and a 404 land in their classes.
    pub async fn common(&self, path: &str) {
        let with_seq = format!("{path}?seq={{{{seq}}}}");
        let ok = r#"["/id", "/name"]"#;

        // Sequential ids wrap around their range.
        let n = 25;
        let ids = "from = 100\nto = 109";
        let (replies, seen) = self
            .all_succeed(&self.get(ids, &with_seq, "[200]", ok), n)
            .await;
        assert!(replies.iter().all(|r| r.body_bytes > 0));
        let expected: Vec<String> = (0..n)
            .map(|seq| {
                with_seq
                    .replace("{{id}}", &(100 + seq % 10).to_string())
                    .replace("{{seq}}", &seq.to_string())
            })
            .collect();
        let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, expected, "{}", self.label());
        assert!(seen.iter().all(|s| s.method == "GET"));

        // Random order: request seq asks for IdRange::id(seq) of the seeded sequence.
        let n = 20;
        let ids = "from = 1\nto = 1000\norder = \"random\"\nseed = 7";
        let (_, seen) = self
            .all_succeed(&self.get(ids, &with_seq, "[200]", ok), n)
            .await;
        let range: IdRange = toml::from_str(ids).expect("id range");
        let expected: Vec<String> = (0..n)
            .map(|seq| {
                with_seq
                    .replace("{{id}}", &range.id(seq).to_string())
                    .replace("{{seq}}", &seq.to_string())
            })
            .collect();
        let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, expected, "{}", self.label());
        let sequential: Vec<u64> = (0..n).map(|seq| 1 + seq).collect();
        let random: Vec<u64> = (0..n).map(|seq| range.id(seq)).collect();
        assert_ne!(random, sequential);

        // Wrong expectations, and a status the server chose.
        let ids = "from = 5\nto = 6";
        self.all_fail(
            &self.get(ids, path, "[201]", ok),
            3,
            FailureClass::BadStatus,
            "200",
        )
        .await;
        self.all_fail(
            &self.get(ids, path, "[200]", r#"["/id", "/missing"]"#),
            3,
            FailureClass::MissingData,
            "/missing",
        )
        .await;
        self.all_fail(
            &self.get("from = 404\nto = 404", path, "[200]", ok),
            2,
            FailureClass::BadStatus,
            "404",
        )
        .await;
    }

    /// HEAD requests: the answer has no body whatever its framing headers say.
    pub async fn head(&self, path: &str) {
        let target = format!(
            "[ids]\nfrom = 1\nto = 3\n[rest]\nurl = \"{}\"\nmethod = \"HEAD\"\n",
            self.url(path)
        );
        let (replies, seen) = self.all_succeed(&target, 4).await;
        assert!(
            replies.iter().all(|r| r.body_bytes == 0),
            "{}",
            self.label()
        );
        assert!(seen.iter().all(|s| s.method == "HEAD"), "{seen:?}");
    }

    /// A status that has no body (204) and is expected.
    pub async fn no_content(&self, path: &str) {
        let target = format!(
            "[rest]\nurl = \"{}\"\nexpect_status = [204]\n",
            self.url(path)
        );
        let (replies, _) = self.all_succeed(&target, 3).await;
        assert!(replies.iter().all(|r| r.body_bytes == 0));
    }

    /// POSTs with a templated JSON body and a templated header: the server gets each
    /// rendering and echoes the body's fields.
    pub async fn post(&self, path: &str) {
        let target = format!(
            r#"[ids]
from = 7
to = 9
[rest]
url = "{}"
method = "post"
headers = {{ "Content-Type" = "application/json", "x-seq" = "{{{{seq}}}}" }}
body = '{{"id": {{{{id}}}}, "name": "n-{{{{seq}}}}"}}'
expect_json = ["/id", "/name", "/path_id"]
"#,
            self.url(path)
        );
        let n = 5;
        let (_, seen) = self.all_succeed(&target, n).await;
        let bodies: Vec<Option<&str>> = seen.iter().map(|s| s.body.as_deref()).collect();
        let expected: Vec<String> = (0..n)
            .map(|seq| format!(r#"{{"id": {}, "name": "n-{seq}"}}"#, 7 + seq % 3))
            .collect();
        assert_eq!(
            bodies,
            expected
                .iter()
                .map(|b| Some(b.as_str()))
                .collect::<Vec<_>>(),
            "{}",
            self.label()
        );
        let x_seq: Vec<Option<String>> = seen.iter().map(|s| s.x_seq.clone()).collect();
        assert_eq!(
            x_seq,
            (0..n).map(|seq| Some(seq.to_string())).collect::<Vec<_>>()
        );
        assert!(seen.iter().all(|s| s.method == "POST"));
    }
}

/// Everything a REST stack's client is checked for against nginx (`http_version` "1.1" or
/// "2"): the common checks on its SSI answer (chunked on HTTP/1.1), a Content-Length file,
/// HEAD on both, and a 204.
pub async fn nginx_checks(
    stack: &dyn Stack,
    client: ClientImplementation,
    nginx: &crate::nginx::Nginx,
    cert_dir: &Path,
    http_version: &str,
) {
    // What nginx really sends on HTTP/1.1, so the checks cannot pass on one framing only.
    let logged = nginx.seen().len();
    let head = crate::raw_head(nginx.plain, "GET", "/items/5");
    assert!(
        head.contains("transfer-encoding: chunked") && !head.contains("content-length"),
        "{head}"
    );
    let head = crate::raw_head(nginx.plain, "HEAD", "/static/5");
    assert!(head.contains("content-length: "), "{head}");
    // nginx logs after answering: let these two land before the checks count lines.
    let deadline = Instant::now() + LOG_BOUND;
    while nginx.seen().len() < logged + 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let case = Case {
        stack,
        client,
        server: nginx,
        cert_dir,
        http_version,
    };
    case.common("/items/{{id}}").await;
    let ok = r#"["/id", "/name"]"#;
    let (replies, _) = case
        .all_succeed(
            &case.get("from = 1\nto = 9", "/static/{{id}}", "[200]", ok),
            5,
        )
        .await;
    assert!(replies.iter().all(|r| r.body_bytes > 0));
    case.head("/static/{{id}}").await;
    case.head("/items/{{id}}").await;
    case.no_content("/nocontent").await;
}

/// Everything a REST stack's client is checked for against hypercorn (`http_version` "1.1",
/// "2" or "3"): the common checks on the app's streamed answer, HEAD, and POST bodies.
pub async fn hypercorn_checks(
    stack: &dyn Stack,
    client: ClientImplementation,
    hypercorn: &crate::hypercorn::Hypercorn,
    cert_dir: &Path,
    http_version: &str,
) {
    // The app streams its answer: chunked on HTTP/1.1.
    let head = crate::raw_head(hypercorn.plain, "GET", "/items/5");
    assert!(
        head.contains("transfer-encoding: chunked") && !head.contains("content-length"),
        "{head}"
    );
    let case = Case {
        stack,
        client,
        server: hypercorn,
        cert_dir,
        http_version,
    };
    case.common("/items/{{id}}").await;
    case.head("/items/{{id}}").await;
    case.post("/items/{{id}}").await;
}
