//! The runner measuring a service it did not start (`[targets]`), end to end: REST targets on
//! hypercorn (HTTP/1.1, HTTP/2, HTTP/3) and a gRPC target on grpcio, both third-party servers
//! on 127.0.0.1. Checks the rows, the requests the servers saw, the failure codes, the report
//! of a service (no server columns pretending to be zero, the network-path warning) and that
//! no secret reaches any output file. Skipped with a note when a server is missing, unless
//! TBENCH_REQUIRE_HYPERCORN / TBENCH_REQUIRE_GRPCIO require it (CI).

use std::path::Path;

mod common;

use common::*;
use test_servers::grpcio::Grpcio;
use test_servers::hypercorn::Hypercorn;
use test_servers::rest::Recorder;

const TOKEN: &str = "tok-S3CRET-from-env";
const LITERAL: &str = "literal-S3CRET-in-file";

/// Every file under `dir`, as text.
fn every_file(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(every_file(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path, text));
        }
    }
    out
}

fn run(exp: &str, dir: &Path, extra: &[&str]) -> (std::process::Output, std::path::PathBuf) {
    let file = dir.join("exp.toml");
    std::fs::write(&file, exp).unwrap();
    let out = dir.join("results");
    // These count the requests the service saw, or measure failures by design: no probe
    // requests (request_mix.rs and your_service.rs test the probe).
    let output = runner()
        .arg("--experiment")
        .arg(&file)
        .arg("--no-probe")
        .arg("--out")
        .arg(&out)
        .args(extra)
        .env("TBENCH_TEST_TOKEN", TOKEN)
        .output()
        .expect("runner runs");
    (output, out)
}

#[test]
fn a_service_is_measured_on_every_stack_and_reported_as_a_service() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let Some(rest) = Hypercorn::start(tmp.path()) else {
        return;
    };
    let Some(grpc) = Grpcio::start(None, false) else {
        return;
    };
    let proto = test_servers::grpcio::fixtures().join("catalog.proto");
    let exp = format!(
        r#"
name = "my-service"
regimes = ["reuse", "new-conn"]
concurrency = [2]
requests_reuse = 40
requests_new_conn = 10
warmup_fraction = 0.0
baseline_seconds = 0

[targets.ids]
from = 1
to = 8

[targets.rest]
url = "https://localhost:{rest_port}/items/{{{{id}}}}?w={{{{worker}}}}"
ca = "{ca}"
headers = {{ authorization = "Bearer {{{{env.TBENCH_TEST_TOKEN}}}}", "x-api-key" = "{LITERAL}" }}
expect_json = ["/id", "/name"]

[targets.grpc]
address = "http://127.0.0.1:{grpc_port}"
method = "shop.v1.Catalog/GetItem"
proto = ["{proto}"]
request = '{{"id": {{{{id}}}}}}'
metadata = {{ authorization = "Bearer {{{{env.TBENCH_TEST_TOKEN}}}}" }}
expect_fields = ["name", "owner.name"]
"#,
        rest_port = rest.addr().port(),
        ca = certs.ca_cert().display(),
        grpc_port = grpc.port,
        proto = proto.display(),
    );
    let (output, out) = run(&exp, tmp.path(), &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("your service's rest target (h1, h2, h3): localhost:")
            && text.contains("your service's grpc target (grpc): 127.0.0.1:")
            && text.contains("planned: 200 requests"),
        "the plan and addresses are printed first: {text}"
    );
    // Both expected fields are proto3 strings without presence: said once each before the
    // run, with the value check to write instead.
    for path in ["name", "owner.name"] {
        let line = format!(
            "note: targets.grpc.expect_fields: '{path}' is a proto3 string without presence"
        );
        assert_eq!(text.matches(&line).count(), 1, "{line}: {text}");
    }
    let dir = results_dir(&out);

    // Every stack's cells ran against the service, every request validated.
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(cells.len(), 8, "4 stacks x 2 regimes");
    for c in &cells {
        let want = if c["regime"] == "reuse" { 40.0 } else { 10.0 };
        assert_eq!(num(c, "ok"), want, "{}: {c:?}", c["cell_key"]);
        for column in [
            "server_rss_peak_bytes",
            "server_cpu_s",
            "server_cpu_ms_per_1k_ok",
        ] {
            assert_eq!(
                c[column], "",
                "{column} of an unsampled service is empty, not 0"
            );
        }
    }
    // The servers saw exactly those requests, with the configured ids, over each protocol.
    let seen = rest.seen();
    assert_eq!(seen.len(), 150, "3 REST stacks x 50 requests");
    for version in ["1.1", "2", "3"] {
        assert_eq!(
            seen.iter().filter(|s| s.http_version == version).count(),
            50,
            "HTTP/{version}"
        );
    }
    let ids_of = |path: &str| -> u64 {
        path.trim_start_matches("/items/")
            .split('?')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(seen.iter().all(|s| (1..=8).contains(&ids_of(&s.path))));
    // Each 40-request reuse phase walks 1..=8 five times: every id 5 times per stack.
    for version in ["1.1", "2", "3"] {
        let mut counts = [0u32; 8];
        for s in seen.iter().filter(|s| s.http_version == version) {
            counts[(ids_of(&s.path) - 1) as usize] += 1;
        }
        // 40 reuse (5 each) + 10 new-conn (ids 1..=8, then 1, 2).
        assert_eq!(counts, [7, 7, 6, 6, 6, 6, 6, 6], "HTTP/{version}");
    }
    let grpc_ids: Vec<u64> = grpc.logged().into_iter().map(|(id, _)| id).collect();
    assert_eq!(grpc_ids.len(), 50);
    assert!(grpc_ids.iter().all(|id| (1..=8).contains(id)));

    // No secret in any file of the run; the env placeholder is kept, the literal redacted.
    for (path, content) in every_file(&dir) {
        assert!(
            !content.contains(TOKEN) && !content.contains(LITERAL),
            "a secret reached {path:?}"
        );
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let headers = &manifest["experiment"]["targets"]["rest"]["headers"];
    assert_eq!(headers["authorization"], "Bearer {{env.TBENCH_TEST_TOKEN}}");
    assert_eq!(headers["x-api-key"], "<redacted>");
    let service = &manifest["service"];
    assert_eq!(service["insecure"], false);
    assert_eq!(service["targets"].as_array().unwrap().len(), 2);

    // The report of a service: REST and gRPC rows, the path warning (plaintext gRPC, TLS
    // REST), and "—" where a server column would be, with the reason.
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let doc = scraper::Html::parse_document(&html);
    let text_of = |selector: &str| -> String {
        let sel = scraper::Selector::parse(selector).unwrap();
        doc.select(&sel)
            .map(|e| e.text().collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let service_line = text_of("#service");
    assert!(
        service_line.contains("rest (h1, h2, h3)") && service_line.contains("grpc (grpc)"),
        "{service_line}"
    );
    let path = text_of("#network-path");
    assert!(
        path.contains("transport: grpc plaintext, rest tls") && path.contains("grpc TCP connect"),
        "network-path warning: {path}"
    );
    assert!(text_of("#insecure").is_empty());
    for label in ["HTTP/1.1", "HTTP/2", "HTTP/3", "gRPC"] {
        assert!(html.contains(label), "{label} row");
    }
    assert!(html.contains("Server RSS and CPU — : not measured"));
    let stress = text_of("#stress table");
    assert!(
        !stress.contains("0.0 ‡"),
        "no server RSS shown as zero: {stress}"
    );
}

/// Literal credentials given as `-H` flags (a built-in name, a name marked with
/// `--secret-header`, and userinfo and a token in the URL), and the same header written in an
/// experiment file, reach no file of the run and nothing it prints; a header that is no secret
/// and an `{{env.…}}` placeholder are kept as given.
#[test]
fn literal_credentials_from_flags_and_files_reach_no_record() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let Some(rest) = Hypercorn::start(tmp.path()) else {
        return;
    };
    let secrets = [
        "hdr-S3CRET-bearer",
        "hdr-S3CRET-cookie",
        "hdr-S3CRET-tenant",
        "url-S3CRET-query",
        "url-S3CRET-pass",
        "file-S3CRET-bearer",
        "body-S3CRET-password",
    ];
    let assert_no_secret = |dir: &Path, printed: &str| {
        for (path, content) in every_file(dir) {
            for secret in secrets {
                assert!(!content.contains(secret), "{secret} reached {path:?}");
            }
        }
        for secret in secrets {
            assert!(!printed.contains(secret), "{secret} was printed: {printed}");
        }
    };
    let port = rest.addr().port();
    let ca = certs.ca_cert();
    // A URL with userinfo is refused (use a header), and the refusal does not repeat it.
    let refused = runner()
        .args([
            "--url",
            &format!("https://user:url-S3CRET-pass@localhost:{port}/x"),
            "--out",
        ])
        .arg(tmp.path().join("refused"))
        .output()
        .expect("runner runs");
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("credentials in the URL"), "{text}");
    assert_no_secret(tmp.path(), &text);
    // Flags only.
    let flags_out = tmp.path().join("flags");
    let url = format!("https://localhost:{port}/items/{{{{id}}}}?access_token=url-S3CRET-query");
    let output = runner()
        .args(["--url", &url, "--ca"])
        .arg(&ca)
        .args([
            "-H",
            "Authorization: Bearer hdr-S3CRET-bearer",
            "-HCookie: session=hdr-S3CRET-cookie",
            "--header=X-Tenant: hdr-S3CRET-tenant",
            "--secret-header",
            "x-tenant",
            "-H",
            "X-Trace: kept-1",
            "-d",
            r#"{"password": "body-S3CRET-password"}"#,
            "--stacks",
            "h1",
            "--regime",
            "reuse",
            "--concurrency",
            "1",
            "--requests",
            "5",
            "--baseline-seconds",
            "0",
            "--out",
        ])
        .arg(&flags_out)
        .output()
        .expect("runner runs");
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let dir = results_dir(&flags_out);
    assert_eq!(
        num(&read_csv(&dir.join("cells.csv"))[0], "ok"),
        5.0,
        "{text}"
    );
    assert_no_secret(&dir, &text);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let argv: Vec<&str> = manifest["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(argv.contains(&"Authorization: <redacted>"), "{argv:?}");
    assert!(argv.contains(&"X-Trace: kept-1"), "{argv:?}");
    let headers = &manifest["experiment"]["targets"]["rest"]["headers"];
    assert_eq!(headers["X-Tenant"], "<redacted>", "{headers}");
    assert_eq!(headers["X-Trace"], "kept-1", "{headers}");
    // The body, sent, is recorded as its size and hash only (and so is not resumable).
    let body = manifest["experiment"]["targets"]["rest"]["body"]
        .as_str()
        .unwrap();
    assert!(
        body.starts_with("<redacted body: 36 bytes, sha256 "),
        "{body}"
    );
    assert!(argv.contains(&body), "{argv:?}");
    let refused = resume(&dir, tmp.path());
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    assert!(
        output_text(&refused).contains("record_bodies = true"),
        "{}",
        output_text(&refused)
    );
    // The same header in an experiment file.
    let file_dir = tmp.path().join("file");
    std::fs::create_dir(&file_dir).unwrap();
    let exp = format!(
        r#"
stacks = ["h1"]
regimes = ["reuse"]
concurrency = [1]
requests_reuse = 5
warmup_fraction = 0.0
baseline_seconds = 0
[targets.rest]
url = "https://localhost:{port}/items/{{{{id}}}}"
ca = "{ca}"
headers = {{ Authorization = "Bearer file-S3CRET-bearer" }}
"#,
        ca = ca.display()
    );
    let (output, out) = run(&exp, &file_dir, &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let dir = results_dir(&out);
    assert_no_secret(&dir, &text);
    // The server did get the credentials: the run sent them, it only never wrote them down.
    assert!(
        rest.seen().len() >= 10,
        "both runs reached the service: {}",
        rest.seen().len()
    );
}

#[test]
fn wrong_expectations_land_in_their_classes_with_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let Some(rest) = Hypercorn::start(tmp.path()) else {
        return;
    };
    let Some(grpc) = Grpcio::start(None, true) else {
        return;
    };
    // Id 404: the REST service answers 404 and the gRPC service NOT_FOUND.
    let exp = format!(
        r#"
stacks = ["h1", "grpc"]
regimes = ["reuse"]
concurrency = [1]
requests_reuse = 6
warmup_fraction = 0.0
baseline_seconds = 0
[targets.ids]
from = 404
to = 404
[targets.rest]
url = "https://localhost:{rest_port}/items/{{{{id}}}}"
ca = "{ca}"
[targets.grpc]
address = "http://127.0.0.1:{grpc_port}"
method = "shop.v1.Catalog/GetItem"
reflection = true
request = '{{"id": {{{{id}}}}}}'
"#,
        rest_port = rest.addr().port(),
        ca = certs.ca_cert().display(),
        grpc_port = grpc.port,
    );
    let (output, out) = run(&exp, tmp.path(), &[]);
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let failures = read_csv(&dir.join("failures.csv"));
    let row = |stack: &str| {
        failures
            .iter()
            .find(|f| f["cell_key"].starts_with(stack))
            .unwrap_or_else(|| panic!("{stack} failures: {failures:?}"))
    };
    let h1 = row("h1/");
    assert_eq!(
        (
            h1["class"].as_str(),
            h1["code"].as_str(),
            h1["count"].as_str()
        ),
        ("bad_status", "404", "6")
    );
    let g = row("grpc/");
    assert_eq!(
        (g["class"].as_str(), g["code"].as_str(), g["count"].as_str()),
        ("bad_status", "NOT_FOUND", "6")
    );
    let cells = read_csv(&dir.join("cells.csv"));
    assert!(cells.iter().all(|c| num(c, "fail_bad_status") == 6.0));
}

#[test]
fn a_large_run_to_another_host_needs_yes_and_nothing_is_sent_without_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    // 198.18.0.1 (RFC 2544's benchmark range) is not on this host; nothing may be sent to it.
    // Three REST stacks x (20,000 + 5 % warm-up) = 63,000 requests.
    let output = runner()
        .args([
            "--url",
            "https://198.18.0.1:9/x/{{id}}",
            "--regime",
            "reuse",
            "--concurrency",
            "1",
            "--requests",
            "20000",
            "--baseline-seconds",
            "0",
            "--out",
        ])
        .arg(&out)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give --yes"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("-> 198.18.0.1:9") && stdout.contains("planned: 63000 requests"),
        "the address and the plan are shown: {stdout}"
    );
    assert!(!out.exists(), "nothing was run");
}

#[test]
fn tls_is_verified_unless_insecure_which_every_output_names() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(rest) = Hypercorn::start(tmp.path()) else {
        return;
    };
    let exp = |extra: &str| {
        format!(
            r#"
stacks = ["h1"]
regimes = ["reuse"]
concurrency = [1]
requests_reuse = 5
warmup_fraction = 0.0
baseline_seconds = 0
[targets.rest]
url = "https://localhost:{}/items/{{{{id}}}}"
{extra}
"#,
            rest.addr().port()
        )
    };
    // The system's trust store does not know the suite's CA: the probe's handshake fails, and
    // the run stops there (bad input, exit 2) with its line, before any request.
    let verified = tmp.path().join("verified");
    std::fs::create_dir(&verified).unwrap();
    let (output, out) = run(&exp(""), &verified, &[]);
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("FAILED: tls_failed: certificate refused: the server's certificate is not signed by a CA this client trusts"),
        "{text}"
    );
    assert!(!out.exists(), "nothing measured: {text}");
    assert!(rest.seen().is_empty(), "{:?}", rest.seen());

    // insecure: the requests succeed, and the run says what it was everywhere.
    let insecure = tmp.path().join("insecure");
    std::fs::create_dir(&insecure).unwrap();
    let pid = rest.pid().to_string();
    let (output, out) = run(&exp("insecure = true"), &insecure, &["--target-pid", &pid]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("NOT verified (insecure)"),
        "at the start: {text}"
    );
    assert!(text.contains("warning: insecure run"), "at the end: {text}");
    let dir = results_dir(&out);
    let cells = read_csv(&dir.join("cells.csv"));
    assert_eq!(num(&cells[0], "ok"), 5.0);
    assert!(
        num(&cells[0], "server_rss_peak_bytes") > 1e6,
        "--target-pid samples the service's process: {:?}",
        cells[0]["server_rss_peak_bytes"]
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["service"]["insecure"], true);
    let report = runner().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", output_text(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"insecure\""), "the report names it");
}

/// A CA and a client certificate it signed (mTLS), written as PEM files into `dir`.
fn client_identity(dir: &Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    // Distinct names: a leaf whose issuer equals its subject looks self-signed to OpenSSL.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test client CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(vec!["bench-client".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bench-client");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &issuer).unwrap();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    (
        write("client-ca.pem", ca_cert.pem()),
        write("client.pem", cert.pem()),
        write("client.key", key.serialize_pem()),
    )
}

#[test]
fn a_service_that_requires_a_client_certificate_gets_one() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = bench_core::tls::ensure_certs(tmp.path()).expect("certificates");
    let (client_ca, client_cert, client_key) = client_identity(tmp.path());
    // CERT_REQUIRED: the server refuses a handshake without a certificate its CA signed.
    let Some(rest) =
        Hypercorn::start_with(tmp.path(), &["--ca-certs", &client_ca, "--cert-reqs", "2"])
    else {
        return;
    };
    let exp = |extra: &str| {
        format!(
            r#"
stacks = ["h1", "h2"]
regimes = ["reuse"]
concurrency = [1]
requests_reuse = 5
warmup_fraction = 0.0
baseline_seconds = 0
[targets.rest]
url = "https://localhost:{}/items/{{{{id}}}}"
ca = "{}"
{extra}
"#,
            rest.addr().port(),
            certs.ca_cert().display()
        )
    };
    let without = tmp.path().join("without");
    std::fs::create_dir(&without).unwrap();
    let (output, out) = run(&exp(""), &without, &[]);
    assert!(output.status.success(), "{}", output_text(&output));
    for c in read_csv(&results_dir(&out).join("cells.csv")) {
        assert_eq!(
            num(&c, "ok"),
            0.0,
            "{}: no certificate, no answer",
            c["cell_key"]
        );
    }
    let with = tmp.path().join("with");
    std::fs::create_dir(&with).unwrap();
    let (output, out) = run(
        &exp(&format!(
            "client_cert = \"{client_cert}\"\nclient_key = \"{client_key}\""
        )),
        &with,
        &[],
    );
    assert!(output.status.success(), "{}", output_text(&output));
    let dir = results_dir(&out);
    let failures = std::fs::read_to_string(dir.join("failures.csv")).unwrap_or_default();
    for c in read_csv(&dir.join("cells.csv")) {
        assert_eq!(num(&c, "ok"), 5.0, "{}: mTLS: {failures}", c["cell_key"]);
    }
}
