//! The TIME_WAIT count is the load generator's namespace's own: connections closed by the
//! client first in a fresh namespace are read back from `/proc/PID/net/sockstat` of a process
//! in it, and a new-conn cell's row carries the count (needs root and iproute2, as the
//! conditions tests do).

mod common;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use common::*;
use load::timewait;

/// A fresh network namespace, removed on drop.
struct Namespace(String);

impl Namespace {
    fn new(tag: &str) -> Namespace {
        // Not `tbench-…`: a runner started by another test removes those of no live process.
        let name = format!("tw-test-{}-{tag}", std::process::id());
        let ok = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().expect("ip runs");
            assert!(status.success(), "ip {args:?}");
        };
        ok(&["netns", "add", &name]);
        let ns = Namespace(name);
        ok(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn time_wait_sockets_made_in_a_namespace_are_read_back_by_a_pid_in_it() {
    const MADE: u64 = 40;
    let ns = Namespace::new("pid");
    // A process in the namespace, whose /proc/PID/net is the namespace's.
    let mut witness = Command::new("ip")
        .args(["netns", "exec", &ns.0, "sleep", "60"])
        .spawn()
        .expect("ip netns exec");
    let pid = witness.id();
    let entered = || {
        let link = |p: String| std::fs::read_link(p).ok();
        link(format!("/proc/{pid}/ns/net")) != link("/proc/self/ns/net".into())
    };
    // `ip netns exec` enters the namespace, then execs: wait (bounded) until it reads.
    let bound = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !(entered() && timewait::of_pid(pid).is_some()) {
        assert!(
            std::time::Instant::now() < bound,
            "the witness never entered: {:?} {:?} {:?}",
            std::fs::read_link(format!("/proc/{pid}/ns/net")),
            std::fs::read_to_string(format!("/proc/{pid}/net/sockstat")),
            witness.try_wait()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(timewait::of_pid(pid), Some(0), "a fresh namespace has none");
    let name = ns.0.clone();
    let in_thread = std::thread::spawn(move || {
        let handle = std::fs::File::open(format!("/var/run/netns/{name}")).unwrap();
        nix::sched::setns(&handle, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns: {e}"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        for _ in 0..MADE {
            let client = TcpStream::connect(addr).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            // The client closes first: its end goes to TIME_WAIT once the server's FIN is in.
            drop(client);
            let mut buf = [0u8; 1];
            assert_eq!(server.read(&mut buf).unwrap(), 0, "the client's FIN");
            drop(server);
        }
        timewait::of_this_thread()
    })
    .join()
    .unwrap();
    // The last FIN's ACK may still be on its way: read until all are counted or a bound.
    let bound = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = timewait::of_pid(pid).unwrap();
    while seen < MADE && std::time::Instant::now() < bound {
        std::thread::sleep(std::time::Duration::from_millis(10));
        seen = timewait::of_pid(pid).unwrap();
    }
    let _ = witness.kill();
    let _ = witness.wait();
    assert!(seen >= MADE, "{seen} TIME_WAIT sockets read, {MADE} made");
    assert!(
        in_thread.unwrap() >= MADE - 1,
        "{in_thread:?} read in the thread"
    );
}

/// A new-conn cell in a namespace of its own (`somaxconn` alone puts it there): every
/// connection the client closed is in TIME_WAIT as the phase ends, 60 s being far longer than
/// the cell, and the first cell of the namespace starts with none from before.
#[test]
fn a_new_conn_cell_row_counts_its_time_wait_sockets() {
    const REQUESTS: f64 = 300.0;
    let (_tmp, dir) = run_toml(
        r#"
name = "time-wait"
stacks = ["h1"]
regimes = ["new-conn"]
concurrency = [4]
requests_new_conn = 300
warmup_fraction = 0
baseline_seconds = 0
somaxconn = 4096
max_cell_seconds = 20
"#,
    );
    let rows = read_csv(&dir.join("cells.csv"));
    let row = &rows[0];
    assert_eq!(row["error"], "", "{row:?}");
    let (before, after, peak) = (
        num(row, "tcp_time_wait_before"),
        num(row, "tcp_time_wait_after"),
        num(row, "tcp_time_wait_peak"),
    );
    assert_eq!(before, 0.0, "{row:?}");
    assert!(after >= REQUESTS * 0.9, "{after} after {REQUESTS} requests");
    assert!(peak >= after && peak >= before, "{row:?}");
}

/// Issue 46, item 7: the count is the load generator's own namespace's when it has one, and
/// the host's on plain loopback. TIME_WAIT sockets this test leaves in the host's namespace
/// (60 s each, longer than the run) show in a plain loopback cell's `before`, and not in a cell
/// of the same run whose load generator has a namespace of its own (`somaxconn` puts it
/// there): cells.csv's counts are host-wide on plain loopback (docs/results-schema.md).
#[test]
fn on_plain_loopback_the_count_is_the_hosts_and_in_a_namespace_its_own() {
    const MADE: u64 = 40;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    for _ in 0..MADE {
        let client = TcpStream::connect(addr).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        drop(client);
        let mut buf = [0u8; 1];
        assert_eq!(server.read(&mut buf).unwrap(), 0, "the client's FIN");
        drop(server);
    }
    let bound = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while timewait::of_this_thread().unwrap() < MADE {
        assert!(std::time::Instant::now() < bound, "TIME_WAIT never counted");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (_tmp, dir) = run_toml(
        r#"
name = "time-wait-scope"
stacks = ["h1"]
regimes = ["reuse"]
concurrency = [1]
requests_reuse = 20
warmup_fraction = 0
baseline_seconds = 0
max_cell_seconds = 20
[[variants]]
name = "loopback"
[[variants]]
name = "own"
somaxconn = 4096
"#,
    );
    let rows = read_csv(&dir.join("cells.csv"));
    let before = |variant: &str| {
        let row = rows
            .iter()
            .find(|r| r["variant"] == variant)
            .unwrap_or_else(|| panic!("{variant}: {rows:?}"));
        assert_eq!(row["error"], "", "{row:?}");
        num(row, "tcp_time_wait_before")
    };
    assert!(
        before("loopback") >= MADE as f64,
        "plain loopback reads the host's namespace: {rows:?}"
    );
    assert_eq!(
        before("own"),
        0.0,
        "a namespace of its own starts with none"
    );
}
