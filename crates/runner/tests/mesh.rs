//! Mesh paths through the real proxies (HAProxy, nginx, Caddy from Debian's packages; a
//! missing one skips with a note unless TBENCH_REQUIRE_HAPROXY / _NGINX / _CADDY is 1, as
//! scripts/test sets them): a stack a proxy cannot carry is refused before the run; an edge
//! proxy carries every request (the client's TLS ends at it, the server speaks plaintext) and
//! is measured; HTTP/3 ends at a Caddy edge, which forwards over HTTP/2; sidecars on the hosts executor (root, as CI has) pool their connections across
//! the bridge with `pool = "keep"` and open one per request with `per-request`; a sidecar whose
//! certificate another CA issued is refused; no proxy outlives its run.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use bench_core::HttpVersion;
use common::*;
use executors::proxy::{Hop, ListenTls, ProxyProcess, UpstreamTls};
use experiment::settings::mesh::Carried;
use experiment::settings::{Pool, ProxyKind};

/// The proxies installed here; each missing one is skipped with a note (a failure when its
/// TBENCH_REQUIRE_* is 1).
fn installed_proxies() -> Vec<ProxyKind> {
    ProxyKind::ALL
        .into_iter()
        .filter(|kind| {
            let here = executors::proxy::installed(*kind);
            if !here {
                let var = format!("TBENCH_REQUIRE_{}", kind.as_str().to_uppercase());
                test_servers::skip(
                    kind.as_str(),
                    &var,
                    "apt-get install haproxy nginx-light caddy",
                );
            }
            here
        })
        .collect()
}

/// Processes still running from proxy directories of the runner with `pid`.
fn proxies_left_by(pid: u32) -> Vec<String> {
    let marker = format!("tbench-proxy-{pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect()
}

/// Runs the runner with `args` (results and certificates in `tmp`), asserting success; its
/// pid and results directory.
fn run_in(tmp: &std::path::Path, args: &[&str]) -> (u32, std::path::PathBuf) {
    let out = tmp.join("results");
    let child = runner()
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("--certs")
        .arg(tmp.join("certs"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        output_text(&output)
    );
    (pid, results_dir(&out))
}

#[test]
fn a_path_the_proxy_or_executor_cannot_build_is_refused_with_one_line() {
    let cases: [(&[&str], &[&str]); 8] = [
        (
            &["--path", "edge", "--proxy", "nginx", "--stacks", "h1,h2"],
            &["proxy", "nginx cannot carry h2"],
        ),
        // QUIC: Caddy terminates it at an edge only, and carries no gRPC answer's trailers
        // over it; HAProxy and nginx as packaged have none.
        (
            &[
                "--path",
                "edge",
                "--proxy",
                "caddy",
                "--stacks",
                "h3,grpc-h3",
            ],
            &[
                "proxy",
                "caddy cannot carry grpc-h3",
                "no response trailers",
            ],
        ),
        (
            &[
                "--executor",
                "hosts",
                "--path",
                "sidecar",
                "--proxy",
                "caddy",
                "--stacks",
                "h3",
            ],
            &["proxy", "caddy cannot carry h3", "versions 3", "dials TCP"],
        ),
        (
            &["--path", "edge", "--proxy", "haproxy", "--stacks", "h3"],
            &["proxy", "without QUIC"],
        ),
        (
            &[
                "--path", "edge", "--proxy", "haproxy", "--stacks", "grpc-h3",
            ],
            &["proxy", "without QUIC"],
        ),
        (
            &["--path", "edge", "--proxy", "nginx", "--stacks", "h3"],
            &["proxy", "nginx 1.22 has no HTTP/3"],
        ),
        (
            &["--path", "sidecar", "--stacks", "h1"],
            &["path", "hosts executor"],
        ),
        (
            &["--path", "edge", "--plaintext", "--stacks", "h1"],
            &["plaintext", "TLS per hop"],
        ),
    ];
    for (args, expect) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("results");
        let output = runner()
            .args(args)
            .args(["--regime", "reuse", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        for e in expect {
            assert!(stderr.contains(e), "{args:?}: {e:?} not in {stderr}");
        }
        assert!(!out.exists(), "nothing is written");
    }
}

/// Through each proxy in front of the server: every request succeeds over TLS, which only the
/// proxy speaks (the server behind it is plaintext), the proxy's CPU and memory are measured,
/// the manifest names its version and configuration (no key), and it is gone afterwards.
#[test]
fn an_edge_proxy_carries_every_request_and_is_measured() {
    for kind in installed_proxies() {
        let name = kind.as_str();
        let stacks = if kind == ProxyKind::Nginx {
            "h1,grpc"
        } else {
            "h1,h2,grpc"
        };
        let tmp = tempfile::tempdir().unwrap();
        let (pid, dir) = run_in(
            tmp.path(),
            &[
                "--path",
                "edge",
                "--proxy",
                name,
                "--stacks",
                stacks,
                "--regime",
                "new-conn",
                "--concurrency",
                "2",
                "--requests",
                "20",
                "--baseline-seconds",
                "0",
            ],
        );
        let cells = read_csv(&dir.join("cells.csv"));
        assert_eq!(cells.len(), stacks.split(',').count());
        for c in &cells {
            let key = &c["cell_key"];
            assert_eq!(c["error"], "", "{name} {key}");
            assert_eq!(num(c, "ok"), 20.0, "{name} {key}");
            assert_eq!((&*c["path"], &*c["proxy"]), ("edge", name));
            assert_eq!(c["pool"], "keep");
            // On TCP the proxy passes the stack's own protocol on.
            let alpn = if c["stack"] == "h1" { "http/1.1" } else { "h2" };
            assert_eq!(
                (&*c["client_protocol"], &*c["upstream_protocol"]),
                (alpn, alpn),
                "{name} {key}"
            );
            // A TLS handshake per request, with a server that has no TLS: it ended at the proxy.
            assert!(num(c, "handshake_p50_us") > 0.0, "{name} {key}");
            assert!(num(c, "proxy_server_cpu_s") > 0.0, "{name} {key}");
            assert!(num(c, "proxy_server_rss_hwm_bytes") > 1e6, "{name} {key}");
            assert!(num(c, "proxy_cpu_ms_per_1k_ok") > 0.0, "{name} {key}");
            assert_eq!(
                c["proxy_client_cpu_s"], "",
                "no client-side proxy on an edge path"
            );
        }
        let resources = read_csv(&dir.join("resources.csv"));
        assert!(resources.iter().any(|r| r["role"] == "proxy-server"));
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        let proxies = manifest["proxies"].as_array().unwrap();
        assert_eq!(proxies.len(), cells.len(), "one per stack: {proxies:?}");
        for p in proxies {
            assert_eq!(p["proxy"], name);
            assert_eq!(p["role"], "edge");
            let version = p["version"].as_str().unwrap();
            assert!(version.chars().any(|c| c.is_ascii_digit()), "{version}");
            let config = p["config"].as_str().unwrap();
            assert!(config.contains("127.0.0.1:"), "{config}");
            assert!(!config.contains("PRIVATE KEY"), "{config}");
        }
        assert!(
            proxies_left_by(pid).is_empty(),
            "{name}: {:?}",
            proxies_left_by(pid)
        );
    }
}

/// QUIC terminated at a Caddy edge: the HTTP/3 client's requests reach the HTTP/2 stack's
/// server over TCP (h2c) behind it, in both regimes, on the local and the hosts executor;
/// every answer is validated as direct, each row records `h3` in front and `h2` upstream, and
/// Caddy's CPU and memory are measured. Across the hosts' bridge no TCP connection arrives
/// (the clients' are QUIC), and Caddy keeps its few to the server.
#[test]
fn http3_terminated_at_a_caddy_edge_reaches_the_http2_server_in_both_regimes() {
    if !installed_proxies().contains(&ProxyKind::Caddy) {
        return;
    }
    for executor in ["local", "hosts"] {
        let tmp = tempfile::tempdir().unwrap();
        let (pid, dir) = run_in(
            tmp.path(),
            &[
                "--executor",
                executor,
                "--path",
                "edge",
                "--proxy",
                "caddy",
                "--stacks",
                "h3",
                "--regime",
                "both",
                "--concurrency",
                "2",
                "--requests",
                "20",
                "--baseline-seconds",
                "0",
            ],
        );
        let cells = read_csv(&dir.join("cells.csv"));
        let regimes: Vec<&str> = cells.iter().map(|c| &*c["regime"]).collect();
        assert_eq!(regimes.len(), 2, "{regimes:?}");
        assert!(regimes.contains(&"reuse") && regimes.contains(&"new-conn"));
        for c in &cells {
            let key = format!("{executor} {}", c["cell_key"]);
            assert_eq!(c["error"], "", "{key}");
            assert_eq!(c["stack"], "h3");
            assert_eq!(num(c, "ok"), 20.0, "{key}");
            assert_eq!(num(c, "failed"), 0.0, "{key}");
            assert_eq!((&*c["path"], &*c["proxy"]), ("edge", "caddy"));
            assert_eq!(
                (&*c["client_protocol"], &*c["upstream_protocol"]),
                ("h3", "h2"),
                "{key}"
            );
            // A QUIC handshake with the edge (the server behind it has no TLS).
            assert!(num(c, "handshake_p50_us") > 0.0, "{key}");
            assert!(num(c, "proxy_server_cpu_s") > 0.0, "{key}");
            assert!(num(c, "proxy_server_rss_hwm_bytes") > 1e6, "{key}");
            assert!(num(c, "proxy_cpu_ms_per_1k_ok") > 0.0, "{key}");
            assert!(
                num(c, "server_rss_hwm_bytes") > 0.0,
                "{key}: the server is measured"
            );
            if executor == "hosts" {
                let to_server = num(c, "net_tcp_active_opens");
                let across = num(c, "net_tcp_passive_opens") - to_server;
                assert_eq!(across, 0.0, "{key}: no TCP from the clients");
                assert!(to_server <= 4.0, "{key}: {to_server} to the server");
            }
        }
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        let config = manifest["proxies"][0]["config"].as_str().unwrap();
        // HTTP/3 alone in front, HTTP/2 without TLS (h2c) behind.
        for wanted in ["\"h3\"", "\"h2c\""] {
            assert!(config.contains(wanted), "{wanted} not in {config}");
        }
        assert!(
            proxies_left_by(pid).is_empty(),
            "{:?}",
            proxies_left_by(pid)
        );
    }
}

/// Sidecars across the hosts executor's bridge: with `keep` the client-side sidecar reuses its
/// connections to the server-side one (a handful for 40 requests); with `per-request` it opens
/// one per request (the server host accepts exactly as many from across the bridge as the
/// phase sent). Both proxies are measured.
#[test]
fn sidecars_pool_connections_across_the_bridge_only_with_keep() {
    const REQUESTS: f64 = 40.0;
    for kind in installed_proxies() {
        let name = kind.as_str();
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("mesh.toml");
        std::fs::write(
            &file,
            format!(
                r#"name = "sidecar-{name}"
executor = "hosts"
host_agents = 1
path = "sidecar"
proxy = "{name}"
stacks = ["h1", "grpc"]
regimes = ["reuse"]
concurrency = [2]
requests_reuse = {REQUESTS}
baseline_seconds = 0

[[variants]]
name = "keep"
pool = "keep"

[[variants]]
name = "per-request"
pool = "per-request"
"#
            ),
        )
        .unwrap();
        let (pid, dir) = run_in(tmp.path(), &["--experiment", file.to_str().unwrap()]);
        let cells = read_csv(&dir.join("cells.csv"));
        let failures = std::fs::read_to_string(dir.join("failures.csv")).unwrap();
        assert_eq!(cells.len(), 4);
        for c in &cells {
            let key = &c["cell_key"];
            assert_eq!(c["error"], "", "{name} {key}");
            assert_eq!(num(c, "sent"), REQUESTS, "{name} {key}");
            // A new upstream connection per request leaves room for one lost race (seen once
            // in Caddy's HTTP/2 transport); pooled, every request succeeds.
            let lost = if c["variant"] == "keep" { 0.0 } else { 1.0 };
            assert!(
                num(c, "ok") >= REQUESTS - lost,
                "{name} {key}: {} ok; {failures}",
                c["ok"]
            );
            assert_eq!(c["path"], "sidecar");
            assert!(num(c, "proxy_client_cpu_s") > 0.0, "{name} {key}");
            assert!(num(c, "proxy_server_cpu_s") > 0.0, "{name} {key}");
            // Accepted in the server's host minus opened there (server-side proxy → server):
            // the connections that came across the bridge from the client-side sidecar.
            let across = num(c, "net_tcp_passive_opens") - num(c, "net_tcp_active_opens");
            match &*c["variant"] {
                "keep" => assert!(across <= 4.0, "{name} {key}: {across} connections"),
                _ if c["stack"] == "h1" => {
                    assert_eq!(across, REQUESTS, "{name} {key}: one per request")
                }
                // HTTP/2's clients may open a spare connection or two.
                _ => assert!(across >= REQUESTS, "{name} {key}: {across}"),
            }
        }
        assert!(
            proxies_left_by(pid).is_empty(),
            "{name}: {:?}",
            proxies_left_by(pid)
        );
    }
}

/// A plaintext HTTP/1.1 `runner serve` and its address (the caller kills the child).
fn plaintext_server(certs: &std::path::Path) -> (std::process::Child, SocketAddr) {
    let mut child = runner()
        .args(["serve", "--stack", "h1", "--plaintext", "--certs"])
        .arg(certs)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    (child, ready["addr"].as_str().unwrap().parse().unwrap())
}

/// One HTTP/1.1 request for item 1 through `addr`; the status line.
fn status_through(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        bench_core::workload::item_path(1)
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.lines().next().unwrap_or("").to_string()
}

/// The server-side sidecar requires a certificate from the suite's CA: the client-side sidecar
/// holding the suite's client certificate gets the server's 200; one holding a certificate of
/// another CA is refused (HAProxy and Caddy at the handshake, nginx with a 400 after it), and
/// the request never gets the server's 200.
#[test]
fn a_sidecar_with_another_cas_certificate_is_refused() {
    for kind in installed_proxies() {
        let tmp = tempfile::tempdir().unwrap();
        let suite = bench_core::tls::ensure_certs(&tmp.path().join("suite")).unwrap();
        let other = bench_core::tls::ensure_certs(&tmp.path().join("other")).unwrap();
        let (mut server, server_addr) = plaintext_server(&suite.dir);
        let port = || test_servers::free_port();
        let hop = |role: &'static str, listen: SocketAddr, upstream: SocketAddr| Hop {
            kind,
            role,
            listen,
            listen_tls: None,
            upstream,
            upstream_tls: None,
            carried: Carried {
                front: HttpVersion::Http1,
                protocol: HttpVersion::Http1,
                grpc: false,
                server_stack: "h1",
            },
            pool: Pool::Keep,
            threads: 1,
            connect_timeout_ms: 5_000,
            request_timeout_ms: 10_000,
        };
        let inbound: SocketAddr = ([127, 0, 0, 1], port()).into();
        let server_side = ProxyProcess::start(
            &Hop {
                listen_tls: Some(ListenTls {
                    cert: suite.server_cert(),
                    key: suite.server_key(),
                    client_ca: Some(suite.ca_cert()),
                }),
                ..hop("server-sidecar", inbound, server_addr)
            },
            None,
        )
        .unwrap();
        let client_side = |paths: &bench_core::tls::CertPaths| {
            let listen: SocketAddr = ([127, 0, 0, 1], port()).into();
            let proxy = ProxyProcess::start(
                &Hop {
                    upstream_tls: Some(UpstreamTls {
                        ca: suite.ca_cert(),
                        server_name: "localhost".into(),
                        cert: paths.client_cert(),
                        key: paths.client_key(),
                    }),
                    ..hop("client-sidecar", listen, inbound)
                },
                None,
            )
            .unwrap();
            (proxy, listen)
        };
        let (trusted, trusted_addr) = client_side(&suite);
        let (stranger, stranger_addr) = client_side(&other);
        let ok = status_through(trusted_addr);
        let refused = status_through(stranger_addr);
        drop((trusted, stranger, server_side));
        let _ = server.kill();
        let _ = server.wait();
        assert!(ok.starts_with("HTTP/1.1 200"), "{}: {ok:?}", kind.as_str());
        // HAProxy and Caddy refuse the handshake (the client-side proxy answers 502/503);
        // nginx completes it and answers 400 ("The SSL certificate error") itself.
        let status: u16 = refused
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            [400, 502, 503].contains(&status),
            "{}: {refused:?}",
            kind.as_str()
        );
    }
}

/// The proxy programs print a version line (what the manifest records).
#[test]
fn each_installed_proxy_reports_its_version() {
    for kind in installed_proxies() {
        let v = executors::proxy::version(kind);
        assert_ne!(v, "not installed");
        assert!(v.chars().any(|c| c.is_ascii_digit()), "{v}");
    }
}

/// A runner in a long HTTP/1.1 cell through an edge `kind` proxy (results and certificates
/// in `tmp`), returned once its proxy has run for 1.5 s.
fn a_long_cell_through_an_edge_proxy(
    kind: ProxyKind,
    tmp: &std::path::Path,
) -> std::process::Child {
    let child = runner()
        .args(["--path", "edge", "--proxy", kind.as_str()])
        .args(["--stacks", "h1", "--regime", "reuse", "--concurrency", "2"])
        .args(["--requests", "100000000", "--max-cell-seconds", "30"])
        .args(["--baseline-seconds", "0", "--out"])
        .arg(tmp.join("results"))
        .arg("--certs")
        .arg(tmp.join("certs"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while proxies_left_by(child.id()).is_empty() {
        assert!(std::time::Instant::now() < until, "the proxy did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    child
}

/// SIGINT while a cell runs through an edge proxy: the run stops as any interrupted run does
/// (exit 130) and the proxy's processes are gone with it.
#[test]
fn sigint_mid_cell_leaves_no_proxy() {
    let Some(kind) = installed_proxies().into_iter().next() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut child = a_long_cell_through_an_edge_proxy(kind, tmp.path());
    let pid = child.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < until,
            "the run did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert!(
        proxies_left_by(pid).is_empty(),
        "{:?}",
        proxies_left_by(pid)
    );
}

/// The pids of `pid`'s child processes (`/proc/*/stat`: the field after the state is the
/// parent's pid).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let after_name = &stat[stat.rfind(')')? + 1..];
            let ppid: u32 = after_name.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pid).then_some(child)
        })
        .collect()
}

/// SIGKILL while a cell runs through an edge proxy: the runner runs no cleanup at all, yet
/// its proxy (through the guard holding the other end of the runner's pipe) and its server
/// (which watches its parent) are gone within seconds.
#[test]
fn sigkill_mid_cell_leaves_no_proxy_and_no_server() {
    let Some(kind) = installed_proxies().into_iter().next() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut child = a_long_cell_through_an_edge_proxy(kind, tmp.path());
    let pid = child.id();
    // The server, the proxy's guard and the load generator: everything the runner started.
    let started = children_of(pid);
    assert!(started.len() >= 2, "server and guard at least: {started:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = child.wait();
    // Gone or a zombie (reparented to a PID 1 that may never reap it).
    let alive = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
    };
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let proxies = proxies_left_by(pid);
        // A load generator ends by its own bound (count and time), not by this rule.
        let others: Vec<u32> = started
            .iter()
            .copied()
            .filter(alive)
            .filter(|p| {
                !std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("\0load\0"))
            })
            .collect();
        if proxies.is_empty() && others.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "10 s after SIGKILL: proxies {proxies:?}, processes {others:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .any(|e| e
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("tbench-proxy-{pid}-"))),
        "the guard removes the proxy's directory"
    );
}

/// An edge proxy on the hosts executor fronts the server host's address, and the server's
/// host counts both hops: every new client connection arrives across the bridge, and the proxy
/// opens one connection to the server per request with `per-request`, a handful with `keep`.
#[test]
fn an_edge_proxy_on_the_hosts_executor_counts_both_hops() {
    const REQUESTS: f64 = 30.0;
    for kind in installed_proxies() {
        let name = kind.as_str();
        for pool in ["keep", "per-request"] {
            let tmp = tempfile::tempdir().unwrap();
            let (pid, dir) = run_in(
                tmp.path(),
                &[
                    "--executor",
                    "hosts",
                    "--host-agents",
                    "2",
                    "--path",
                    "edge",
                    "--proxy",
                    name,
                    "--pool",
                    pool,
                    "--stacks",
                    "h1",
                    "--regime",
                    "new-conn",
                    "--concurrency",
                    "2",
                    "--requests",
                    "30",
                    "--baseline-seconds",
                    "0",
                ],
            );
            let cells = read_csv(&dir.join("cells.csv"));
            let c = &cells[0];
            assert_eq!(c["error"], "", "{name} {pool}");
            assert_eq!(num(c, "ok"), REQUESTS, "{name} {pool}");
            let to_server = num(c, "net_tcp_active_opens");
            let across = num(c, "net_tcp_passive_opens") - to_server;
            assert_eq!(
                across, REQUESTS,
                "{name} {pool}: a client connection per request"
            );
            if pool == "keep" {
                assert!(to_server <= 4.0, "{name} {pool}: {to_server}");
            } else {
                assert_eq!(to_server, REQUESTS, "{name} {pool}");
            }
            assert!(
                proxies_left_by(pid).is_empty(),
                "{name}: {:?}",
                proxies_left_by(pid)
            );
        }
    }
}
