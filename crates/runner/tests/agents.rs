//! Agents (`runner agent`) on loopback, driven by the real binary: a cell's load split over
//! three agents and merged exactly; the control channel refusing a wrong token and a wrong
//! CA before anything runs; an agent killed mid-cell failing its cell while the sweep goes on.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;

const TOKEN: &str = "agents-test-token-0123456789";

fn run_with_agents(
    agents: &[&Agent],
    certs: &Path,
    out: &Path,
    token: &str,
    extra: &[&str],
) -> std::process::Output {
    let list: Vec<&str> = agents.iter().map(|a| a.addr.as_str()).collect();
    runner()
        .args([
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--baseline-seconds",
            "0",
        ])
        .arg("--agents")
        .arg(list.join(","))
        .arg("--certs")
        .arg(certs)
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("TBENCH_AGENT_TOKEN", token)
        .output()
        .unwrap()
}

#[test]
fn a_cell_split_over_three_agents_is_merged_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let agents: Vec<Agent> = (0..3).map(|_| Agent::start(&certs, TOKEN)).collect();
    let refs: Vec<&Agent> = agents.iter().collect();
    let out = tmp.path().join("results");
    let output = run_with_agents(
        &refs,
        &certs,
        &out,
        TOKEN,
        &["--concurrency", "6", "--requests", "601"],
    );
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 1);
    assert_eq!(num(&cells[0], "ok"), 601.0);
    assert_eq!(num(&cells[0], "agents"), 3.0);
    let rows = read_csv(&dir.join("agents.csv"));
    assert_eq!(rows.len(), 3);
    let sum = |k: &str| rows.iter().map(|r| num(r, k)).sum::<f64>();
    assert_eq!(sum("sent"), num(&cells[0], "sent"));
    assert_eq!(sum("ok"), 601.0);
    // Workers and requests split as evenly as integers allow.
    let mut oks: Vec<f64> = rows.iter().map(|r| num(r, "ok")).collect();
    oks.sort_by(f64::total_cmp);
    assert_eq!(oks, [200.0, 200.0, 201.0]);
    // The merged max is the largest agent's max; the merged p50 lies within the agents'.
    let max = rows
        .iter()
        .map(|r| num(r, "latency_max_us"))
        .fold(0.0, f64::max);
    assert_eq!(num(&cells[0], "latency_max_us"), max);
    let p50s: Vec<f64> = rows.iter().map(|r| num(r, "latency_p50_us")).collect();
    let p50 = num(&cells[0], "latency_p50_us");
    assert!(
        p50s.iter().any(|v| *v <= p50) && p50s.iter().any(|v| *v >= p50),
        "{p50} within {p50s:?}"
    );
    // Each agent's histograms are in its own .hlog; added up they are the cell's, exactly.
    let hlog = |name: &str| {
        results::hlog::read(&dir.join("hlog").join(name))
            .unwrap()
            .get("latency")
            .unwrap()
            .clone()
    };
    let merged = hlog("h1_reuse_c6_r1.hlog");
    let mut sum = hlog("h1_reuse_c6_r1.agent-1.hlog");
    for i in 2..=3 {
        sum.add(hlog(&format!("h1_reuse_c6_r1.agent-{i}.hlog")))
            .unwrap();
    }
    assert_eq!(sum.len(), 601);
    for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
        assert_eq!(
            sum.value_at_quantile(q),
            merged.value_at_quantile(q),
            "q {q}"
        );
    }
    assert_eq!(
        sum.value_at_quantile(0.99),
        num(&cells[0], "latency_p99_us") as u64
    );
    // Resources are the agents' own, summed (each rounded to 1 ms in the CSVs).
    let cpu: f64 = rows.iter().map(|r| num(r, "client_cpu_s")).sum();
    assert!(
        (num(&cells[0], "client_cpu_s") - cpu).abs() <= 0.004,
        "cell {} vs agents' sum {cpu}",
        cells[0]["client_cpu_s"]
    );
    assert!(rows.iter().all(|r| num(r, "client_rss_peak_bytes") > 1e6));
}

#[test]
fn the_control_channel_refuses_a_wrong_token_and_a_wrong_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let agent = Agent::start(&certs, TOKEN);
    let out = tmp.path().join("results");
    let output = run_with_agents(
        &[&agent],
        &certs,
        &out,
        "a-different-token-0123456789",
        &["--concurrency", "1", "--requests", "10"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refused: wrong token"), "{stderr}");
    assert!(!out.exists());
    // A CA that did not sign the agent's certificate.
    let other = tmp.path().join("other-ca");
    let other_ca = bench_core::tls::ensure_certs(&other)
        .unwrap()
        .ca_cert()
        .display()
        .to_string();
    let output = run_with_agents(
        &[&agent],
        &certs,
        &out,
        TOKEN,
        &[
            "--concurrency",
            "1",
            "--requests",
            "10",
            "--agent-ca",
            &other_ca,
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("TLS handshake failed"), "{stderr}");
    // The token never reaches the command line or the results.
    assert!(!stderr.contains(TOKEN));
}

#[test]
fn an_agent_killed_mid_cell_fails_the_cell_and_the_sweep_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let survivor = Agent::start(&certs, TOKEN);
    let mut victim = Agent::start(&certs, TOKEN);
    let out = tmp.path().join("results");
    let list = format!("{},{}", survivor.addr, victim.addr);
    let mut run = runner()
        .args([
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--baseline-seconds",
            "0",
        ])
        .args(["--concurrency", "2,4", "--requests", "100000000"])
        .args(["--max-cell-seconds", "4"])
        .arg("--agents")
        .arg(&list)
        .arg("--certs")
        .arg(&certs)
        .arg("--out")
        .arg(&out)
        .env("TBENCH_AGENT_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = victim.child.kill();
    let _ = victim.child.wait();
    let output = wait_bounded(&mut run, Duration::from_secs(60));
    assert!(output.status.success(), "{}", output_text(&output));
    let cells = read_csv(&results_dir(&out).join("cells.csv"));
    assert_eq!(cells.len(), 2, "the sweep went on to the next level");
    assert!(
        cells[0]["error"].contains("load generator 2 of 2"),
        "{:?}",
        cells[0]["error"]
    );
    // The survivor stopped its share and serves the next run.
    let out2 = tmp.path().join("again");
    let output = run_with_agents(
        &[&survivor],
        &certs,
        &out2,
        TOKEN,
        &["--concurrency", "1", "--requests", "20"],
    );
    assert!(output.status.success(), "{}", output_text(&output));
    assert_eq!(
        num(&read_csv(&results_dir(&out2).join("cells.csv"))[0], "ok"),
        20.0
    );
}

fn wait_bounded(child: &mut Child, bound: Duration) -> std::process::Output {
    let until = std::time::Instant::now() + bound;
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < until,
            "the run did not end in time"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    std::process::Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}

/// An agent runs each cell's server (`--server-agent`): the runner hands it the server job a
/// local cell gives its child, the agent starts `runner serve` and samples it between the
/// runner's phase marks; another agent sends the load. The row's server columns are the
/// agent's readings of a real server process (megabytes of RSS, CPU time within the phase),
/// and resources.csv has the server's samples.
#[test]
fn an_agent_runs_the_server_and_returns_its_measurements() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let server = Agent::start(&certs, TOKEN);
    let load = Agent::start(&certs, TOKEN);
    let out = tmp.path().join("results");
    let mut run = runner()
        .args([
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--baseline-seconds",
            "0",
        ])
        .args([
            "--concurrency",
            "2",
            "--requests",
            "300",
            "--min-cell-seconds",
            "1",
        ])
        .args(["--agents", &load.addr, "--server-agent", &server.addr])
        .arg("--certs")
        .arg(&certs)
        .arg("--out")
        .arg(&out)
        .env("TBENCH_AGENT_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While the cell runs, its `runner serve` is the server agent's child, not the runner's.
    let mut parents = std::collections::BTreeSet::new();
    while run.try_wait().unwrap().is_none() {
        parents.extend(serve_parents());
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = wait_bounded(&mut run, Duration::from_secs(5));
    assert!(output.status.success(), "{}", output_text(&output));
    assert!(
        parents.contains(&server.child.id()),
        "no `runner serve` under the server agent: {parents:?}"
    );
    assert!(
        !parents.contains(&run.id()),
        "the runner started a server itself"
    );
    let dir = results_dir(&out);
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 1);
    let cell = &cells[0];
    assert_eq!(cell["error"], "");
    assert!(num(cell, "ok") >= 300.0);
    let elapsed = num(cell, "elapsed_s");
    assert!(elapsed >= 1.0, "{elapsed}");
    // A real server process, read by its agent: a few MB resident, not zero, not absurd.
    for key in ["server_rss_peak_bytes", "server_rss_hwm_bytes"] {
        let rss = num(cell, key);
        assert!((1e6..2e9).contains(&rss), "{key} = {rss}");
    }
    assert!(num(cell, "server_rss_mean_bytes") > 1e6);
    // It served the requests, so it used CPU, and no more than this machine's cores allow.
    let cpu = num(cell, "server_cpu_s");
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    assert!(
        cpu > 0.0 && cpu <= elapsed * cores * 1.1,
        "{cpu} s in {elapsed} s"
    );
    let pct = num(cell, "server_cpu_pct_mean");
    assert!(
        (cpu / elapsed * 100.0 - pct).abs() < 1.0,
        "{pct} vs {cpu}/{elapsed}"
    );
    let samples: Vec<_> = read_csv(&dir.join("resources.csv"))
        .into_iter()
        .filter(|r| r["role"] == "server")
        .collect();
    assert!(samples.len() >= 5, "{} server samples", samples.len());
    assert!(samples.iter().all(|r| num(r, "rss_bytes") > 1e6));
}

/// The server job over the control channel, from the library: an agent refuses a runner with
/// the wrong token before starting anything; with the right one it starts the server, takes
/// the first reading on `measure`, and on `finish` returns the summary of a process it
/// sampled (and its samples); closing the connection stops the server.
#[tokio::test]
async fn the_server_job_needs_the_token_and_returns_the_servers_readings() {
    use executors::agent::{AgentLink, RemoteServer};
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let agent = Agent::start(&certs, TOKEN);
    let addr: std::net::SocketAddr = agent.addr.parse().unwrap();
    bench_core::tls::install_crypto_provider();
    let ca = bench_core::tls::CertPaths::new(&certs).ca_cert();
    let exp = experiment::settings::Experiment {
        stacks: vec!["h1".into()],
        ..Default::default()
    };
    let cells = experiment::plan::plan(&exp);
    let serve = runner::run::serve_options(
        &cells[0],
        "127.0.0.1:0".parse().unwrap(),
        certs.clone(),
        None,
    );

    let wrong = AgentLink::new(&ca, "localhost", "not-the-token-0123456789".into()).unwrap();
    let refused = RemoteServer::start(addr, &wrong, &serve).await;
    let error = format!("{:#}", refused.err().expect("refused"));
    assert!(error.contains("refused: wrong token"), "{error}");

    let link = AgentLink::new(&ca, "localhost", TOKEN.into()).unwrap();
    let mut server = RemoteServer::start(addr, &link, &serve).await.unwrap();
    assert!(server.addr.ip().is_loopback() && server.addr.port() != 0);
    // The server accepts connections.
    std::net::TcpStream::connect(server.addr).expect("the server listens");
    server
        .measuring(std::time::Duration::from_millis(50))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (summary, samples) = server
        .finished(std::time::Duration::from_millis(400))
        .await
        .unwrap();
    assert!(summary.sampled, "{summary:?}");
    assert!(summary.rss_peak_bytes > 1_000_000, "{summary:?}");
    assert!(!summary.short_phase, "{summary:?}");
    assert!(samples.len() >= 5, "{}", samples.len());
    assert!(samples
        .iter()
        .all(|s| s.role == load::sampler::Role::Server));
    assert_eq!(server.exited(), None);
    let listening = server.addr;
    assert_eq!(server.stop().await, None);
    // The agent stopped the server once the runner closed the connection.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(listening).is_ok() {
        assert!(
            std::time::Instant::now() < until,
            "the server still listens"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The parent pids of the running `runner serve` processes.
fn serve_parents() -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) != Some(&&b"serve"[..]) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // The fields after the command name's closing parenthesis: state, then the ppid.
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        parents.extend(ppid);
    }
    parents
}
