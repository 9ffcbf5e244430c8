//! The HTTP/1.1 client against servers we did not write, on loopback: nginx answering chunked
//! (its SSI filter drops the length) with `Connection: close` after each answer on a second
//! port and 204 for some ids, and Python's http.server answering HTTP/1.0 close-delimited.
//! A missing binary skips its test with a message, unless `TBENCH_REQUIRE_NGINX=1` (nginx)
//! or `TBENCH_REQUIRE_PYTHON=1` (python3) make it a failure.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bench_core::workload::ItemRenderer;
use bench_core::{FailureClass, PayloadProfile};
use common::{drive, settings};
use stack_h1::client::H1Client;
use test_servers::{find_binary, free_port, required, wait_listening, Process};

const TIMEOUT: Duration = Duration::from_secs(2);

/// The item body after its id: `{"id":` + id + this.
fn item_suffix() -> String {
    let json = ItemRenderer::new(PayloadProfile::Small).json(0);
    let json = String::from_utf8(json.to_vec()).expect("UTF-8 item");
    json.strip_prefix("{\"id\":0")
        .expect("item prefix")
        .to_string()
}

fn raw_head(addr: SocketAddr, path: &str) -> String {
    test_servers::raw_head(addr, "GET", path)
}

fn nginx_config(dir: &Path, port: u16, close_port: u16) -> String {
    let d = dir.display();
    let location = r#"
        location ~ ^/items/(?<item_id>[0-9]*7)$ { return 204; }
        location ~ ^/items/(?<item_id>[0-9]+)$ {
            ssi on;
            ssi_types application/json;
            default_type application/json;
            rewrite ^ /item.json break;
        }"#;
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 128; }}\n\
         http {{\n    access_log off;\n    gzip off;\n\
         client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; root {d}/www; {location} }}\n\
         server {{ listen 127.0.0.1:{close_port}; root {d}/www; keepalive_requests 1; {location} }}\n}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_chunked_close_and_no_content() {
    let Some(nginx) = find_binary(&["/usr/sbin/nginx", "nginx"], "-v") else {
        assert!(
            !required("TBENCH_REQUIRE_NGINX"),
            "TBENCH_REQUIRE_NGINX=1 but nginx is not installed"
        );
        eprintln!("skipped: nginx not installed (apt-get install nginx-light)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("www")).unwrap();
    let template = format!("{{\"id\":<!--# echo var=\"item_id\" -->{}", item_suffix());
    std::fs::write(dir.path().join("www/item.json"), template).unwrap();
    let (port, close_port) = (free_port(), free_port());
    let config = dir.path().join("nginx.conf");
    std::fs::write(&config, nginx_config(dir.path(), port, close_port)).unwrap();
    let mut nginx = test_servers::nginx::spawn(&nginx, dir.path(), &config);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let close_addr: SocketAddr = ([127, 0, 0, 1], close_port).into();
    wait_listening(addr, &mut nginx.0);
    wait_listening(close_addr, &mut nginx.0);

    // What nginx really sends, so the test cannot pass on Content-Length answers.
    let head = raw_head(addr, "/items/42");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    let head = raw_head(close_addr, "/items/42");
    assert!(
        head.contains("transfer-encoding: chunked") && head.contains("connection: close"),
        "{head}"
    );
    assert!(raw_head(addr, "/items/17").starts_with("http/1.1 204"));

    // Ids 0..100: the ten ending in 7 get 204 (bad_status, the connection stays usable).
    for target in [addr, close_addr] {
        let client = H1Client::new(&settings(target)).expect("client");
        let tally = drive(&client, 100, TIMEOUT, Duration::ZERO).await;
        assert_eq!(
            (tally.ok, tally.failures()),
            (90, vec![(FailureClass::BadStatus, 10)]),
            "nginx on {target}"
        );
    }
}

const PYTHON_SERVER: &str = r#"
import http.server, sys
suffix = sys.argv[1].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        body = b'{"id":' + self.path.rsplit("/", 1)[1].encode() + suffix
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_http10_close_delimited() {
    let Some(python) = find_binary(&["python3"], "--version") else {
        assert!(
            !required("TBENCH_REQUIRE_PYTHON"),
            "TBENCH_REQUIRE_PYTHON=1 but python3 is not installed"
        );
        eprintln!("skipped: python3 not installed");
        return;
    };
    let child = Command::new(python)
        .arg("-c")
        .arg(PYTHON_SERVER)
        .arg(item_suffix())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python3");
    let mut server = Process(child);
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port line");
    let port: u16 = line.trim().parse().expect("port");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let head = raw_head(addr, "/items/5");
    assert!(
        head.starts_with("http/1.0 200") && !head.contains("content-length"),
        "{head}"
    );
    let client = H1Client::new(&settings(addr)).expect("client");
    let tally = drive(&client, 50, TIMEOUT, Duration::ZERO).await;
    assert_eq!((tally.ok, tally.failures()), (50, vec![]));
}
