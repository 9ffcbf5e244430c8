//! Each proxy's configuration, written from one hop's description ([`Hop`]): its listener
//! (plaintext or TLS, with client certificates required or not; QUIC for an edge that
//! terminates HTTP/3), its upstream (plaintext or mutual TLS), the protocol it carries,
//! upstream pooling, timeouts and worker threads.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bench_core::HttpVersion;
use experiment::settings::mesh::Carried;
use experiment::settings::{Pool, ProxyKind};

/// The TLS a listener terminates.
#[derive(Debug, Clone)]
pub struct ListenTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate issued by this CA (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// The TLS a proxy speaks to its upstream: the CA it verifies the upstream against, the name
/// it verifies, and the certificate it presents (mutual TLS).
#[derive(Debug, Clone)]
pub struct UpstreamTls {
    pub ca: PathBuf,
    pub server_name: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// One proxy hop of a path.
#[derive(Debug, Clone)]
pub struct Hop {
    pub kind: ProxyKind,
    /// `edge`, `client-sidecar` or `server-sidecar` (the manifest's name for it).
    pub role: &'static str,
    pub listen: SocketAddr,
    pub listen_tls: Option<ListenTls>,
    pub upstream: SocketAddr,
    pub upstream_tls: Option<UpstreamTls>,
    pub carried: Carried,
    pub pool: Pool,
    pub threads: u32,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
}

/// A configuration ready to start: the files to write into the proxy's private directory
/// (name, contents, whether it holds a private key) and the command line.
pub struct Rendered {
    pub files: Vec<(String, String, bool)>,
    /// The configuration file's name among `files` (recorded in the manifest).
    pub config_file: String,
    pub program: &'static str,
    pub args: Vec<String>,
    /// Environment the program needs (Caddy's data and config homes, its thread count).
    pub env: Vec<(String, String)>,
}

/// Reads a PEM file for a combined certificate-and-key file (HAProxy wants both in one).
fn combined(cert: &Path, key: &Path) -> anyhow::Result<String> {
    use anyhow::Context;
    let c =
        std::fs::read_to_string(cert).with_context(|| format!("cannot read {}", cert.display()))?;
    let k =
        std::fs::read_to_string(key).with_context(|| format!("cannot read {}", key.display()))?;
    Ok(format!("{}\n{}", c.trim_end(), k))
}

/// The configuration of `hop` for its proxy, its files under `dir`.
pub fn render(hop: &Hop, dir: &Path) -> anyhow::Result<Rendered> {
    match hop.kind {
        ProxyKind::Haproxy => haproxy(hop, dir),
        ProxyKind::Nginx => nginx(hop, dir),
        ProxyKind::Caddy => caddy(hop, dir),
    }
}

fn haproxy(hop: &Hop, dir: &Path) -> anyhow::Result<Rendered> {
    let mut files = Vec::new();
    let h2 = hop.carried.protocol == HttpVersion::Http2;
    let alpn = hop.carried.protocol.alpn();
    let mut bind = format!("bind {}", hop.listen);
    if let Some(tls) = &hop.listen_tls {
        files.push(("listen.pem".into(), combined(&tls.cert, &tls.key)?, true));
        write!(
            bind,
            " ssl crt {} alpn {alpn}",
            dir.join("listen.pem").display()
        )?;
        if let Some(ca) = &tls.client_ca {
            write!(bind, " ca-file {} verify required", ca.display())?;
        }
    } else if h2 {
        bind.push_str(" proto h2");
    }
    let mut server = format!("server upstream {}", hop.upstream);
    if let Some(tls) = &hop.upstream_tls {
        files.push(("client.pem".into(), combined(&tls.cert, &tls.key)?, true));
        write!(
            server,
            " ssl crt {} ca-file {} verify required sni str({name}) verifyhost {name} alpn {alpn}",
            dir.join("client.pem").display(),
            tls.ca.display(),
            name = tls.server_name
        )?;
    } else if h2 {
        server.push_str(" proto h2");
    }
    let reuse = match hop.pool {
        Pool::Keep => "    http-reuse always\n".to_string(),
        // Not shared between clients, not reused at all, and closed after each response.
        Pool::PerRequest => {
            server.push_str(" max-reuse 0");
            "    http-reuse never\n    option http-server-close\n".to_string()
        }
    };
    let config = format!(
        "global\n    nbthread {threads}\n\n\
         defaults\n    mode http\n    timeout connect {connect}ms\n    timeout client {request}ms\n    \
         timeout server {request}ms\n    timeout http-keep-alive {request}ms\n\n\
         frontend mesh\n    {bind}\n    default_backend upstream\n\n\
         backend upstream\n{reuse}    {server}\n",
        threads = hop.threads,
        connect = hop.connect_timeout_ms,
        request = hop.request_timeout_ms,
    );
    files.push(("haproxy.cfg".into(), config, false));
    Ok(Rendered {
        files,
        config_file: "haproxy.cfg".into(),
        program: "haproxy",
        args: vec![
            "-db".into(),
            "-f".into(),
            dir.join("haproxy.cfg").display().to_string(),
        ],
        env: Vec::new(),
    })
}

fn nginx(hop: &Hop, dir: &Path) -> anyhow::Result<Rendered> {
    let h2 = hop.carried.protocol == HttpVersion::Http2;
    let d = dir.display();
    let mut listen = format!("listen {}", hop.listen);
    let mut server_tls = String::new();
    if let Some(tls) = &hop.listen_tls {
        listen.push_str(" ssl");
        writeln!(
            server_tls,
            "        ssl_certificate {};\n        ssl_certificate_key {};\n        ssl_protocols TLSv1.3;",
            tls.cert.display(),
            tls.key.display()
        )?;
        if let Some(ca) = &tls.client_ca {
            writeln!(
                server_tls,
                "        ssl_verify_client on;\n        ssl_client_certificate {};",
                ca.display()
            )?;
        }
    }
    if h2 {
        listen.push_str(" http2");
    }
    // gRPC goes upstream with grpc_pass (HTTP/2); everything else with proxy_pass (HTTP/1.1).
    let directive = if hop.carried.grpc { "grpc" } else { "proxy" };
    let scheme = match (&hop.upstream_tls, hop.carried.grpc) {
        (Some(_), true) => "grpcs",
        (None, true) => "grpc",
        (Some(_), false) => "https",
        (None, false) => "http",
    };
    let mut location = format!("            {directive}_pass {scheme}://upstream;\n");
    if !hop.carried.grpc {
        location.push_str(
            "            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n            proxy_buffering off;\n",
        );
    }
    writeln!(
        location,
        "            {directive}_connect_timeout {}ms;\n            {directive}_read_timeout {}ms;\n            {directive}_send_timeout {}ms;",
        hop.connect_timeout_ms, hop.request_timeout_ms, hop.request_timeout_ms
    )?;
    if let Some(tls) = &hop.upstream_tls {
        writeln!(
            location,
            "            {directive}_ssl_certificate {cert};\n            {directive}_ssl_certificate_key {key};\n            \
             {directive}_ssl_trusted_certificate {ca};\n            {directive}_ssl_verify on;\n            \
             {directive}_ssl_name {name};\n            {directive}_ssl_server_name on;\n            \
             {directive}_ssl_protocols TLSv1.3;\n            {directive}_ssl_session_reuse on;",
            cert = tls.cert.display(),
            key = tls.key.display(),
            ca = tls.ca.display(),
            name = tls.server_name
        )?;
    }
    let keepalive = match hop.pool {
        Pool::Keep => "        keepalive 1024;\n        keepalive_requests 1000000;\n",
        Pool::PerRequest => "",
    };
    let config = format!(
        "daemon off;\nmaster_process on;\nworker_processes {threads};\npid {d}/nginx.pid;\n\
         error_log {d}/error.log error;\n\
         events {{\n    worker_connections 65536;\n}}\n\
         http {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    \
         fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    \
         keepalive_requests 1000000;\n    keepalive_timeout {idle}s;\n    http2_max_requests 1000000;\n    \
         upstream upstream {{\n        server {upstream};\n{keepalive}    }}\n    \
         server {{\n        {listen};\n{server_tls}        location / {{\n{location}        }}\n    }}\n}}\n",
        threads = hop.threads,
        upstream = hop.upstream,
        idle = hop.request_timeout_ms.div_ceil(1000).max(1),
    );
    Ok(Rendered {
        files: vec![("nginx.conf".into(), config, false)],
        config_file: "nginx.conf".into(),
        program: "nginx",
        args: vec![
            "-e".into(),
            format!("{d}/error.log"),
            "-p".into(),
            d.to_string(),
            "-c".into(),
            format!("{d}/nginx.conf"),
        ],
        env: Vec::new(),
    })
}

fn caddy(hop: &Hop, dir: &Path) -> anyhow::Result<Rendered> {
    use serde_json::json;
    let h2 = hop.carried.protocol == HttpVersion::Http2;
    let tls_listen = hop.listen_tls.is_some();
    // Caddy enables HTTP/2 only beside HTTP/1.1; the clients here speak one of them. HTTP/3
    // alone: QUIC on the listener's UDP port (Caddy still opens the TCP one, which no client
    // here uses).
    let protocols = match (hop.carried.front, h2, tls_listen) {
        (HttpVersion::Http3, _, _) => vec!["h3"],
        (_, false, _) => vec!["h1"],
        (_, true, true) => vec!["h1", "h2"],
        (_, true, false) => vec!["h1", "h2c"],
    };
    let versions = match (h2, hop.upstream_tls.is_some()) {
        (false, _) => vec!["1.1"],
        (true, true) => vec!["2"],
        (true, false) => vec!["h2c"],
    };
    let mut transport = json!({
        "protocol": "http",
        "versions": versions,
        "dial_timeout": format!("{}ms", hop.connect_timeout_ms),
        "response_header_timeout": format!("{}ms", hop.request_timeout_ms),
        "keep_alive": match hop.pool {
            Pool::Keep => json!({"enabled": true, "max_idle_conns_per_host": 1024}),
            Pool::PerRequest => json!({"enabled": false}),
        },
    });
    if let Some(tls) = &hop.upstream_tls {
        transport["tls"] = json!({
            "root_ca_pem_files": [tls.ca],
            "client_certificate_file": tls.cert,
            "client_certificate_key_file": tls.key,
            "server_name": tls.server_name,
        });
    }
    let mut server = json!({
        "listen": [hop.listen.to_string()],
        "protocols": protocols,
        "automatic_https": {"disable": true},
        "routes": [{
            "handle": [{
                "handler": "reverse_proxy",
                "upstreams": [{"dial": hop.upstream.to_string()}],
                "transport": transport,
                "flush_interval": -1,
            }]
        }],
    });
    let mut apps = json!({"http": {"servers": {}}});
    if let Some(tls) = &hop.listen_tls {
        let mut policy = json!({
            "certificate_selection": {"any_tag": ["mesh"]},
            "alpn": [hop.carried.front.alpn()],
            "protocol_min": "tls1.3",
        });
        if let Some(ca) = &tls.client_ca {
            policy["client_authentication"] = json!({
                "trusted_ca_certs_pem_files": [ca],
                "mode": "require_and_verify",
            });
        }
        server["tls_connection_policies"] = json!([policy]);
        apps["tls"] = json!({
            "certificates": {"load_files": [{
                "certificate": tls.cert, "key": tls.key, "tags": ["mesh"],
            }]},
            "automation": {"policies": [{"on_demand": false}]},
        });
    }
    apps["http"]["servers"]["mesh"] = server;
    let config = json!({
        "admin": {"disabled": true},
        "logging": {"logs": {"default": {"level": "ERROR"}}},
        "storage": {"module": "file_system", "root": dir.join("data")},
        "apps": apps,
    });
    let d = dir.display().to_string();
    Ok(Rendered {
        files: vec![(
            "caddy.json".into(),
            serde_json::to_string_pretty(&config)?,
            false,
        )],
        config_file: "caddy.json".into(),
        program: "caddy",
        args: vec![
            "run".into(),
            "--config".into(),
            dir.join("caddy.json").display().to_string(),
        ],
        env: vec![
            ("XDG_DATA_HOME".into(), d.clone()),
            ("XDG_CONFIG_HOME".into(), d.clone()),
            ("HOME".into(), d),
            ("GOMAXPROCS".into(), hop.threads.to_string()),
        ],
    })
}
