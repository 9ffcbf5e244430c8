//! The conformance checks every stack must pass, written once and run by each stack crate's
//! tests, so "the same workload and the same classification on all stacks" is tested, not hoped.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::call::Call;
use crate::failure::FailureClass;
use crate::stack::{ClientSettings, ServerSettings, Stack};
use crate::tls::ClientTls;
use crate::tls::{ensure_certs, load_ca, HandshakeVariant, ServerIdentity, SERVER_NAME};
use crate::workload::{FaultSpec, PayloadProfile};

/// A server of `stack` running on this runtime, stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a loopback server with certificates from `cert_dir`.
pub async fn start_server(
    stack: &dyn Stack,
    cert_dir: &Path,
    plaintext: bool,
    payload: PayloadProfile,
    fault: Option<&str>,
) -> TestServer {
    let paths = ensure_certs(cert_dir).expect("certificates");
    let tls = if plaintext {
        None
    } else {
        Some(Arc::new(ServerIdentity::load(&paths).expect("identity")))
    };
    let bound = stack
        .bind(ServerSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            tls,
            payload,
            fault: fault.map(|f| f.parse::<FaultSpec>().expect("fault spec")),
            backlog: 1024,
            tuning: Default::default(),
            service_time: Default::default(),
        })
        .await
        .expect("bind");
    let addr = bound.local_addr;
    let task = tokio::spawn(async move {
        let _ = bound.serving.await;
    });
    TestServer { addr, task }
}

/// Client settings for a test server, trusting the CA in `cert_dir`.
pub fn client_settings(
    addr: SocketAddr,
    cert_dir: &Path,
    plaintext: bool,
    payload: PayloadProfile,
) -> ClientSettings {
    let paths = ensure_certs(cert_dir).expect("certificates");
    ClientSettings {
        target: addr,
        server_name: SERVER_NAME.to_string(),
        tls: (!plaintext).then(|| {
            ClientTls::suite(
                load_ca(&paths.ca_cert()).expect("CA"),
                HandshakeVariant::Full,
            )
        }),
        connect_timeout: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(5),
        payload,
        tuning: Default::default(),
        calls: Default::default(),
    }
}

/// N requests on one reused connection all validate, and wire bytes are at least the payload.
pub async fn reuse_validates(stack: &dyn Stack, cert_dir: &Path, plaintext: bool, n: u64) {
    for payload in [PayloadProfile::Small, PayloadProfile::K64] {
        let server = start_server(stack, cert_dir, plaintext, payload, None).await;
        let client = stack
            .client(&client_settings(server.addr, cert_dir, plaintext, payload))
            .unwrap();
        let connected = client.connect().await.expect("connect");
        for id in 0..n {
            let reply = connected
                .conn
                .request(Call::item(id * 7919))
                .await
                .unwrap_or_else(|f| panic!("{} request {id}: {f}", stack.name()));
            assert!(reply.total >= reply.ttfb);
            assert!(reply.body_bytes as usize >= payload.padding_bytes());
        }
        let wire = connected.conn.wire_bytes();
        assert!(
            wire.received >= n * payload.padding_bytes() as u64,
            "{}: {} wire bytes received for {n} × {payload}",
            stack.name(),
            wire.received
        );
        assert!(wire.sent > 0);
        connected.conn.close().await;
    }
}

/// N requests each on a new connection validate, each with a non-zero handshake time.
pub async fn new_conn_validates(stack: &dyn Stack, cert_dir: &Path, plaintext: bool, n: u64) {
    let payload = PayloadProfile::Small;
    let server = start_server(stack, cert_dir, plaintext, payload, None).await;
    let client = stack
        .client(&client_settings(server.addr, cert_dir, plaintext, payload))
        .unwrap();
    for id in 0..n {
        let connected = client.connect().await.expect("connect");
        if !plaintext {
            assert!(connected.timing.handshake > Duration::ZERO);
            assert!(!connected.timing.resumed, "full handshake expected");
        }
        connected
            .conn
            .request(Call::item(id))
            .await
            .expect("request");
        connected.conn.close().await;
    }
}

/// Every injected fault kind lands in its own class; the delay shows in the latency.
pub async fn faults_are_classified(stack: &dyn Stack, cert_dir: &Path) {
    let payload = PayloadProfile::Small;
    for (fault, class) in [
        ("status", FailureClass::BadStatus),
        ("bad-body", FailureClass::BadBody),
        ("missing-field", FailureClass::MissingData),
    ] {
        let server = start_server(stack, cert_dir, false, payload, Some(fault)).await;
        let client = stack
            .client(&client_settings(server.addr, cert_dir, false, payload))
            .unwrap();
        let connected = client.connect().await.expect("connect");
        for id in 0..3 {
            let failure = connected
                .conn
                .request(Call::item(id))
                .await
                .expect_err("fault must fail the request");
            assert_eq!(failure.class, class, "{} {fault}: {failure}", stack.name());
        }
    }
    let delay = Duration::from_millis(60);
    let server = start_server(stack, cert_dir, false, payload, Some("delay-60ms")).await;
    let client = stack
        .client(&client_settings(server.addr, cert_dir, false, payload))
        .unwrap();
    let connected = client.connect().await.expect("connect");
    let reply = connected
        .conn
        .request(Call::item(1))
        .await
        .expect("delayed request");
    assert!(reply.ttfb >= delay, "{}: {:?}", stack.name(), reply.ttfb);
}

/// A client trusting another CA fails the handshake with the TLS class.
pub async fn wrong_ca_is_tls_failure(stack: &dyn Stack, cert_dir: &Path, other_cert_dir: &Path) {
    let payload = PayloadProfile::Small;
    let server = start_server(stack, cert_dir, false, payload, None).await;
    let client = stack
        .client(&client_settings(
            server.addr,
            other_cert_dir,
            false,
            payload,
        ))
        .unwrap();
    let failure = match client.connect().await {
        Err(f) => f,
        Ok(c) => c
            .conn
            .request(Call::item(1))
            .await
            .expect_err("wrong CA must fail"),
    };
    assert_eq!(
        failure.class,
        FailureClass::TlsFailed,
        "{}: {failure}",
        stack.name()
    );
}

/// Connecting where nothing listens is "connect refused".
pub async fn not_listening_is_refused(stack: &dyn Stack, cert_dir: &Path) {
    let payload = PayloadProfile::Small;
    let addr = {
        // A port that was free a moment ago and is closed now.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let t = std::net::TcpListener::bind(s.local_addr().unwrap());
        let addr = s.local_addr().unwrap();
        drop(t);
        addr
    };
    let client = stack
        .client(&client_settings(addr, cert_dir, false, payload))
        .unwrap();
    let failure = match client.connect().await {
        Err(f) => f,
        Ok(c) => c
            .conn
            .request(Call::item(1))
            .await
            .expect_err("nothing listens"),
    };
    assert_eq!(
        failure.class,
        FailureClass::ConnectRefused,
        "{}: {failure}",
        stack.name()
    );
}

/// Runs every check against `stack`, once per client implementation it has; each stack crate's
/// test calls this.
pub async fn conformance(stack: &'static dyn Stack) {
    for implementation in stack.client_implementations() {
        conformance_of(&WithClient(stack, *implementation)).await;
    }
}

/// A stack whose clients are always of one implementation.
struct WithClient(&'static dyn Stack, crate::ClientImplementation);

#[async_trait::async_trait]
impl Stack for WithClient {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn description(&self) -> &'static str {
        self.0.description()
    }
    fn label(&self) -> &'static str {
        self.0.label()
    }
    fn http_version(&self) -> crate::HttpVersion {
        self.0.http_version()
    }
    fn libraries(&self) -> &'static [&'static str] {
        self.0.libraries()
    }
    fn supports_plaintext(&self) -> bool {
        self.0.supports_plaintext()
    }
    fn supports_zero_rtt(&self) -> bool {
        self.0.supports_zero_rtt()
    }
    fn encoding(&self) -> &'static str {
        self.0.encoding()
    }
    async fn bind(&self, settings: crate::ServerSettings) -> anyhow::Result<crate::BoundServer> {
        self.0.bind(settings).await
    }
    fn client_implementations(&self) -> &'static [crate::ClientImplementation] {
        self.0.client_implementations()
    }
    fn client(
        &self,
        settings: &ClientSettings,
    ) -> anyhow::Result<std::sync::Arc<dyn crate::Client>> {
        let mut settings = settings.clone();
        settings.tuning.client = self.1;
        self.0.client(&settings)
    }
}

async fn conformance_of(stack: &dyn Stack) {
    crate::tls::install_crypto_provider();
    let certs = tempfile_dir("certs");
    let other = tempfile_dir("other-certs");
    reuse_validates(stack, &certs, false, 20).await;
    new_conn_validates(stack, &certs, false, 10).await;
    if stack.supports_plaintext() {
        reuse_validates(stack, &certs, true, 20).await;
        new_conn_validates(stack, &certs, true, 5).await;
    }
    faults_are_classified(stack, &certs).await;
    wrong_ca_is_tls_failure(stack, &certs, &other).await;
    not_listening_is_refused(stack, &certs).await;
    let _ = std::fs::remove_dir_all(&certs);
    let _ = std::fs::remove_dir_all(&other);
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "bench-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A streamed answer the client ended at its `duration_ms` (`duration`) while the server sent
/// a message every `pace`: the call succeeded at (not long after) the duration with about
/// `duration / pace` messages (down to a tenth of them on a loaded machine), never the whole feed.
pub fn assert_ended_at_duration(reply: &crate::Reply, duration: Duration, pace: Duration) {
    assert!(
        reply.total >= duration && reply.total < duration + Duration::from_millis(2_700),
        "ended after {:?}, the duration being {duration:?}",
        reply.total
    );
    let most = (duration.as_millis() / pace.as_millis()) as u32;
    assert!(
        (most / 10..=most + most / 3).contains(&reply.messages),
        "{} messages in {duration:?} at one per {pace:?}",
        reply.messages
    );
    assert!(reply.ttfb < reply.total);
}
