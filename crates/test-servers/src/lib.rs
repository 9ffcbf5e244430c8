//! Third-party servers for the stacks' and the runner's tests: nginx ([`nginx`]), hypercorn
//! with an ASGI app ([`hypercorn`]), a bare aioquic HTTP/3 server whose answers have a 1 MiB
//! head ([`aioquic`]), a grpcio service ([`grpcio`]) and a Node.js HTTP/2 + HTTP/1.1 server
//! ([`node`]), each started on 127.0.0.1 with a temporary configuration, bounded in time and
//! killed when dropped; and the checks every REST stack runs against them ([`rest`]). A
//! missing server skips its test with a note unless the test is told to require it
//! (`TBENCH_REQUIRE_NGINX=1`, `TBENCH_REQUIRE_HYPERCORN=1`, `TBENCH_REQUIRE_GRPCIO=1`,
//! `TBENCH_REQUIRE_NODE=1`).

pub mod aioquic;
pub mod grpcio;
pub mod hypercorn;
pub mod nginx;
pub mod node;
pub mod rest;
pub mod seen;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server gets to start listening.
const START_BOUND: Duration = Duration::from_secs(15);

/// A server process we started; killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first candidate that runs with `version_flag`.
pub fn find_binary(candidates: &[&str], version_flag: &str) -> Option<String> {
    candidates
        .iter()
        .find(|c| {
            Command::new(c)
                .arg(version_flag)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|c| c.to_string())
}

/// Whether the environment variable `var` is `1` (a missing server then fails the test).
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// Says why the test is skipped, when `what` is missing; panics instead when `require_var`
/// requires it.
/// The python3 that can import `modules` (e.g. `"hypercorn, aioquic"`), or `None` after
/// [`skip`]'s note naming `what` is missing (a failure when `require_var` is `1`).
pub fn python_with(modules: &str, what: &str, require_var: &str, hint: &str) -> Option<String> {
    let Some(python) = find_binary(&["python3"], "--version") else {
        skip("python3", require_var, hint);
        return None;
    };
    let importable = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        skip(what, require_var, hint);
        return None;
    }
    Some(python)
}

pub fn skip(what: &str, require_var: &str, hint: &str) {
    assert!(
        !required(require_var),
        "{require_var}=1 but {what} is not available ({hint})"
    );
    eprintln!("skipped: {what} is not available ({hint})");
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A port free for both TCP and UDP a moment ago (a server binding both on one number).
pub fn free_tcp_udp_port() -> u16 {
    for _ in 0..100 {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind TCP");
        let port = tcp.local_addr().expect("local address").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both TCP and UDP");
}

/// Waits until `addr` accepts TCP connections; panics if `child` exits or time runs out.
pub fn wait_listening(addr: SocketAddr, child: &mut Child) {
    if let Err(e) = wait_until(child, || TcpStream::connect(addr).is_ok()) {
        panic!("nothing listens on {addr}: {e}");
    }
}

/// Waits until `ready` holds; an error says whether `child` exited or time ran out.
pub fn wait_until(child: &mut Child, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + START_BOUND;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the server exited ({status})"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("not ready after {START_BOUND:?}"))
}

/// One plaintext request's response head, lower-cased, to see what framing a server really
/// used.
pub fn raw_head(addr: SocketAddr, method: &str, path: &str) -> String {
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    write!(tcp, "{method} {path} HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && tcp.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).to_ascii_lowercase()
}

/// The text of a file a server writes, or "" if it is not there yet.
fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
