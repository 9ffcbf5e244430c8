//! Your own service in the first minutes: `runner check` opens a connection to every target
//! on every selected stack and explains a refused certificate in one line; a run probes the
//! same way before any load (against nginx: `http://` to its TLS port, a self-signed
//! certificate given as the CA file); a flags-only first look (`--url`, `--ca`) runs a short
//! sweep and says so.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use test_servers::nginx::Nginx;
use test_servers::rest::Recorder;

/// `runner serve` of `stack` with the certificates in `certs`, on `port` (0: any); killed
/// when dropped.
struct Served(Child, u16);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(stack: &str, certs: &Path, port: u16) -> Served {
    let mut child = runner()
        .args([
            "serve",
            "--stack",
            stack,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--certs")
        .arg(certs)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
    let addr: std::net::SocketAddr = ready["addr"].as_str().unwrap().parse().unwrap();
    Served(child, addr.port())
}

/// An HTTP/1.1 server and an HTTP/3 server on one port number (TCP and UDP).
fn rest_service(certs: &Path) -> (Served, Served) {
    let h1 = serve("h1", certs, 0);
    let h3 = serve("h3", certs, h1.1);
    (h1, h3)
}

/// What `openssl req -x509 -addext subjectAltName=DNS:localhost` makes: a self-signed
/// certificate with CA:TRUE, written as the server's certificate (and as its own CA).
fn self_signed_ca_certs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("ca.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

fn check(dir: &Path, toml: &str) -> std::process::Output {
    let file = dir.join("exp.toml");
    std::fs::write(&file, toml).unwrap();
    runner().arg("check").arg(&file).output().unwrap()
}

fn rest_toml(port: u16, extra: &str) -> String {
    format!(
        "stacks = [\"h1\", \"h3\"]\nconcurrency = [1]\nrepetitions = 1\nbaseline_seconds = 0\n\
         [targets.rest]\nurl = \"https://localhost:{port}/items/{{{{id}}}}\"\n{extra}\n"
    )
}

#[test]
fn check_connects_on_every_stack_and_explains_a_refused_certificate() {
    let tmp = tempfile::tempdir().unwrap();

    // The most common development certificate (self-signed, CA:TRUE), with another such
    // certificate as the CA file: refused on HTTP/1.1 and HTTP/3 alike, with the fix, in one
    // line each.
    let ca_true = tmp.path().join("ca-true");
    self_signed_ca_certs(&ca_true);
    let another = tmp.path().join("another");
    self_signed_ca_certs(&another);
    let (h1, _h3) = rest_service(&ca_true);
    let ca = format!("ca = \"{}\"", another.join("server.pem").display());
    let o = check(tmp.path(), &rest_toml(h1.1, &ca));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    for stack in ["(h1)", "(h3)"] {
        let line = stdout
            .lines()
            .find(|l| l.contains(stack) && l.contains("your service's rest target"))
            .unwrap_or_else(|| panic!("a line for {stack}: {stdout}"));
        assert!(
            line.contains("FAILED") && line.contains("is a CA certificate"),
            "{line}"
        );
        assert!(
            line.contains("basicConstraints=critical,CA:FALSE"),
            "{line}"
        );
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // That very certificate as the CA file: accepted on both (docs/your-service.md, TLS).
    let ca = format!("ca = \"{}\"", ca_true.join("server.pem").display());
    let o = check(tmp.path(), &rest_toml(h1.1, &ca));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.contains(": connected, TLS 1.3, verified as localhost"))
            .count(),
        2,
        "{stdout}"
    );
    drop(h1);

    // The suite's certificates (a leaf signed by a CA): connected on both, with its CA.
    let suite = tmp.path().join("suite");
    bench_core::tls::ensure_certs(&suite).unwrap();
    let (h1, _h3) = rest_service(&suite);
    let ca = format!("ca = \"{}\"", suite.join("ca.pem").display());
    // A gRPC target that no selected stack sends to is not part of the check.
    let grpc = "[targets.grpc]\naddress = \"https://localhost:1\"\nmethod = \"a.B/C\"\nproto = [\"x.proto\"]\n";
    std::fs::write(tmp.path().join("x.proto"), "syntax = \"proto3\";\n").unwrap();
    let o = check(tmp.path(), &format!("{}{grpc}", rest_toml(h1.1, &ca)));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    assert_eq!(
        stdout
            .lines()
            .filter(
                |l| l.contains(": connected, TLS 1.3, verified as localhost against the CA file")
            )
            .count(),
        2,
        "{stdout}"
    );
    assert!(!stdout.contains("grpc target"), "{stdout}");
    assert!(!stdout.contains("()"), "{stdout}");

    // The name sent is not the certificate's: both names are said.
    let named = format!("{ca}\nserver_name = \"api.example\"");
    let o = check(tmp.path(), &rest_toml(h1.1, &named));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        stdout.contains("not valid for \"api.example\"") && stdout.contains("it names localhost"),
        "{stdout}"
    );
    drop(h1);

    // Nothing listens: the REST target is tried, not passed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = check(tmp.path(), &rest_toml(port, &ca));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        stdout.contains("(h1)") && stdout.contains("FAILED: connect_refused"),
        "{stdout}"
    );
}

#[test]
fn a_flags_only_first_look_runs_a_short_sweep_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    bench_core::tls::ensure_certs(&suite).unwrap();
    let h1 = serve("h1", &suite, 0);
    let url = format!("https://localhost:{}/items/{{{{id}}}}", h1.1);
    let o = runner()
        .args([
            "--url",
            &url,
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--concurrency",
            "1",
        ])
        .arg("--ca")
        .arg(suite.join("ca.pem"))
        .arg("--out")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("first look: a short sweep") && first.contains("--full-sweep"),
        "{first}"
    );
    assert!(
        stdout.contains("against the CA file"),
        "the banner names the trust source: {stdout}"
    );
    let dir = results_dir(&tmp.path().join("results"));
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 1, "no baseline, one repetition: {cells:?}");
    assert_eq!(cells[0]["duration_s"], "2");
    assert!(num(&cells[0], "ok") > 0.0);
    assert_eq!(num(&cells[0], "failed"), 0.0);
    // The report speaks of your service, not of the study this suite reproduces.
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Your service was measured"), "{html}");
    assert!(html.contains("No request failed in any stress stage."));
    for study in [
        "seed 000",
        "the collapse the study reports",
        "Payload profile",
    ] {
        assert!(!html.contains(study), "{study}");
    }
}

/// A run of `toml` (written to `dir`): its output and the folder given as `--out`.
fn run(dir: &Path, toml: &str) -> (std::process::Output, std::path::PathBuf) {
    let file = dir.join("run.toml");
    std::fs::write(&file, toml).unwrap();
    let out = dir.join("results");
    let o = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    (o, out)
}

/// 20 requests in one reuse cell per stack, nothing else, to `url`.
fn nginx_toml(stacks: &str, url: &str, extra: &str) -> String {
    format!(
        "stacks = [{stacks}]\nregimes = [\"reuse\"]\nconcurrency = [1]\nrequests_reuse = 20\n\
         warmup_fraction = 0.0\nbaseline_seconds = 0\n\
         [targets.rest]\nurl = \"{url}\"\n{extra}\n"
    )
}

/// `check`'s line for `stack` (e.g. "(h1)").
fn line_of<'a>(stdout: &'a str, stack: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(&format!("{stack} to your service's rest target")))
        .unwrap_or_else(|| panic!("a line for {stack}: {stdout}"))
}

/// `http://` to nginx's TLS port: the probe says the server speaks TLS there and to use
/// https://, `check` and a run exit 2 with that line, and nginx saw no request. nginx's
/// plaintext port stays "connected, plaintext".
#[test]
fn http_to_a_tls_port_is_named_and_stops_check_and_run_before_any_load() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(nginx) = Nginx::start(&tmp.path().join("certs")) else {
        return;
    };
    let port = nginx.addr.port();
    let toml = nginx_toml(
        "\"h1\", \"h2\"",
        &format!("http://localhost:{port}/items/{{{{id}}}}"),
        "",
    );
    let fix = format!("use https://localhost:{port} (targets.rest.url, or --url)");
    let o = check(tmp.path(), &toml);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    for stack in ["(h1)", "(h2)"] {
        let line = line_of(&stdout, stack);
        assert!(
            line.contains("FAILED: the server speaks TLS on this port") && line.contains(&fix),
            "{line}"
        );
    }

    let (o, out) = run(tmp.path(), &toml);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line: {stderr}"));
    assert!(
        error.contains("the server speaks TLS on this port") && error.contains(&fix),
        "{error}"
    );
    assert!(!out.exists(), "no results folder: nothing was measured");
    assert!(nginx.seen().is_empty(), "requests: {:?}", nginx.seen());

    // The same nginx's plaintext port: a plaintext server is not taken for a TLS one.
    let plain = nginx_toml(
        "\"h1\"",
        &format!("http://localhost:{}/items/{{{{id}}}}", nginx.plain.port()),
        "",
    );
    let o = check(tmp.path(), &plain);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        line_of(&stdout, "(h1)").ends_with(": connected, plaintext"),
        "{stdout}"
    );
}

/// A self-signed CA:TRUE certificate served by nginx: given as the CA file itself, the probe
/// and every request of the run pass; with another such certificate as the CA file, the
/// probe and the run refuse it with the same line, before any request.
#[test]
fn probe_and_load_agree_on_a_self_signed_ca_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");
    self_signed_ca_certs(&served);
    let Some(nginx) = Nginx::start(&served) else {
        return;
    };
    let url = format!("https://localhost:{}/items/{{{{id}}}}", nginx.addr.port());
    let toml = |ca: &Path| {
        nginx_toml(
            "\"h1\", \"h2\"",
            &url,
            &format!("ca = \"{}\"", ca.display()),
        )
    };

    // The very certificate nginx serves: both pass.
    let exact = toml(&served.join("server.pem"));
    let o = check(tmp.path(), &exact);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    for stack in ["(h1)", "(h2)"] {
        let line = line_of(&stdout, stack);
        assert!(
            line.contains(": connected, TLS 1.3, verified as localhost against the CA file"),
            "{line}"
        );
    }
    let (o, out) = run(tmp.path(), &exact);
    assert!(o.status.success(), "{}", output_text(&o));
    let cells = read_csv(&results_dir(&out).join("cells.csv"));
    assert_eq!(cells.len(), 2, "{cells:?}");
    for cell in &cells {
        assert_eq!(
            (num(cell, "ok"), num(cell, "failed")),
            (20.0, 0.0),
            "{cell:?}"
        );
    }
    let seen = nginx.seen();
    assert_eq!(seen.len(), 41, "the probe's request and 2 x 20: {seen:?}");
    std::fs::remove_dir_all(&out).unwrap();

    // Another self-signed certificate for the same name: both refuse, with one line.
    let other = tmp.path().join("other");
    self_signed_ca_certs(&other);
    let strict = toml(&other.join("server.pem"));
    let o = check(tmp.path(), &strict);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let line = line_of(&stdout, "(h1)");
    let reason = line
        .split_once("FAILED: ")
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("refused: {line}"));
    assert!(reason.contains("is a CA certificate"), "{reason}");
    let (o, out) = run(tmp.path(), &strict);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("error: ") && l.ends_with(reason)),
        "the run's line is the probe's: {reason}\n{stderr}"
    );
    assert!(!out.exists(), "no results folder: nothing was measured");
    assert_eq!(nginx.seen().len(), 41, "no request after the refusal");
}

/// Issue 40, item 10: a flags-only first look at an HTTP/1.1 + HTTP/2 service (nginx, no
/// QUIC) runs HTTP/1.1 and HTTP/2, names HTTP/3 as skipped with the reason, and exits 0,
/// instead of stopping at the HTTP/3 cell.
#[test]
fn a_first_look_runs_the_protocols_the_service_speaks_and_names_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let Some(nginx) = Nginx::start(&certs) else {
        return;
    };
    let out = tmp.path().join("results");
    let url = format!("https://localhost:{}/items/{{{{id}}}}", nginx.addr.port());
    let o = runner()
        .args(["--url", &url, "--ca"])
        .arg(certs.join("ca.pem"))
        .args(["--concurrency", "1", "--duration", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    let skipped = text
        .lines()
        .find(|l| l.starts_with("skipped h3: "))
        .unwrap_or_else(|| panic!("h3 is named as skipped: {text}"));
    assert!(skipped.contains("FAILED"), "with why: {skipped}");
    assert!(
        !text.contains("skipped h1") && !text.contains("skipped h2"),
        "{text}"
    );
    let cells = read_csv(&results_dir(&out).join("cells.csv"));
    let mut stacks: Vec<&str> = cells.iter().map(|c| c["stack"].as_str()).collect();
    stacks.sort();
    stacks.dedup();
    assert_eq!(stacks, ["h1", "h2"], "{text}");
    assert!(cells.iter().all(|c| num(c, "ok") > 0.0), "{cells:?}");
    // An experiment file that asks for HTTP/3 of that service is refused by check, with the fix.
    let toml = nginx_toml(
        "\"h1\", \"h3\"",
        &format!("https://localhost:{}/items/{{{{id}}}}", nginx.addr.port()),
        &format!("ca = \"{}\"", certs.join("ca.pem").display()),
    );
    let o = check(tmp.path(), &toml);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(line_of(&text, "(h1)").contains(": connected,"), "{text}");
    assert!(line_of(&text, "(h3)").contains("FAILED"), "{text}");
    assert!(
        text.contains("leave those stacks out of `stacks`"),
        "{text}"
    );
}
