//! nginx (Debian's `nginx-light`) over TLS with the suite's certificate: HTTP/1.1 and HTTP/2
//! by ALPN on one port, and the same locations in plaintext on another (to look at the raw
//! framing). Its access log records each request's method, URI and protocol.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bench_core::tls::CertPaths;

use crate::seen::{Recorder, Seen};
use crate::{find_binary, read_text, skip, wait_listening, Process};

/// A running nginx; stopped when dropped.
pub struct Nginx {
    // Declared first: the process stops before its directory goes.
    _process: Process,
    dir: tempfile::TempDir,
    /// TLS (HTTP/1.1 and HTTP/2 by ALPN).
    pub addr: SocketAddr,
    /// Plaintext HTTP/1.1, the same locations.
    pub plain: SocketAddr,
}

/// The answers: `/items/{id}` is JSON with the id, chunked on HTTP/1.1 (the SSI filter drops
/// the length); `/static/{id}` a JSON file with a Content-Length; `/items/404` a 404 and
/// `/nocontent` a 204.
fn config(dir: &Path, certs: &CertPaths, port: u16, plain_port: u16) -> String {
    let d = dir.display();
    let (cert, key) = (certs.server_cert(), certs.server_key());
    let (cert, key) = (cert.display(), key.display());
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 128; }}
http {{
    log_format seen '$request_method $request_uri $server_protocol';
    access_log {d}/access.log seen;
    gzip off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        listen 127.0.0.1:{plain_port};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        root {d}/www;
        location ~ ^/items/404$ {{ return 404; }}
        location = /nocontent {{ return 204; }}
        location ~ ^/items/(?<item_id>[0-9]+)$ {{
            ssi on;
            ssi_types application/json;
            default_type application/json;
            rewrite ^ /item.json break;
        }}
        location ~ ^/static/[0-9]+$ {{
            default_type application/json;
            rewrite ^ /static.json break;
        }}
    }}
}}
"#
    )
}

impl Nginx {
    /// Starts nginx with the certificates in `cert_dir`; `None` (after a note) when nginx is
    /// not installed and `TBENCH_REQUIRE_NGINX` is not `1`.
    pub fn start(cert_dir: &Path) -> Option<Nginx> {
        let Some(nginx) = find_binary(&["/usr/sbin/nginx", "nginx"], "-v") else {
            skip(
                "nginx",
                "TBENCH_REQUIRE_NGINX",
                "apt-get install nginx-light",
            );
            return None;
        };
        let certs = bench_core::tls::ensure_certs(cert_dir).expect("certificates");
        let dir = tempfile::tempdir().expect("temp dir");
        let www = dir.path().join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(
            www.join("item.json"),
            r#"{"id":<!--# echo var="item_id" -->,"name":"widget","from":"nginx"}"#,
        )
        .unwrap();
        std::fs::write(
            www.join("static.json"),
            r#"{"id":1,"name":"static","from":"nginx"}"#,
        )
        .unwrap();
        let (port, plain_port) = (crate::free_port(), crate::free_port());
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config(dir.path(), &certs, port, plain_port)).unwrap();
        let mut process = spawn(&nginx, dir.path(), &conf);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let plain: SocketAddr = ([127, 0, 0, 1], plain_port).into();
        wait_listening(addr, &mut process.0);
        wait_listening(plain, &mut process.0);
        Some(Nginx {
            _process: process,
            dir,
            addr,
            plain,
        })
    }

    fn access_log(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }
}

impl Recorder for Nginx {
    fn name(&self) -> &'static str {
        "nginx"
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn seen(&self) -> Vec<Seen> {
        read_text(&self.access_log())
            .lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                let (method, path, protocol) = (parts.next()?, parts.next()?, parts.next()?);
                Some(Seen {
                    method: method.to_string(),
                    path: path.to_string(),
                    http_version: protocol
                        .trim_start_matches("HTTP/")
                        .trim_end_matches(".0")
                        .to_string(),
                    x_seq: None,
                    body: None,
                })
            })
            .collect()
    }
}

/// Starts `nginx` with prefix `dir` and configuration `conf` (its error log in `dir`);
/// stopped when the returned process is dropped.
pub fn spawn(nginx: &str, dir: &Path, conf: &Path) -> Process {
    let child = Command::new(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(conf)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    Process(child)
}
