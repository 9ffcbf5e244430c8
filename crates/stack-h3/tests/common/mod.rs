//! An HTTP/3 server of this crate on loopback with given tuning, and a client for it.

use std::sync::Arc;

use bench_core::stack::{Client, Stack};
use bench_core::tls::{ensure_certs, ServerIdentity};
use bench_core::{PayloadProfile, ServerSettings, Tuning};

pub struct Server {
    pub addr: std::net::SocketAddr,
    certs: tempfile::TempDir,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Starts the server with `tuning` on 127.0.0.1 (a port of the kernel's choosing).
pub async fn serve(tuning: &Tuning) -> Server {
    let certs = tempfile::tempdir().unwrap();
    let paths = ensure_certs(certs.path()).unwrap();
    let bound = stack_h3::Http3
        .bind(ServerSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            tls: Some(Arc::new(ServerIdentity::load(&paths).unwrap())),
            payload: PayloadProfile::Small,
            fault: None,
            backlog: 1024,
            tuning: tuning.clone(),
            service_time: Default::default(),
        })
        .await
        .unwrap();
    Server {
        addr: bound.local_addr,
        certs,
        serving: tokio::spawn(bound.serving),
    }
}

impl Server {
    /// A client of this server with `tuning` (its certificate authority trusted).
    pub fn client(&self, tuning: &Tuning) -> Arc<dyn Client> {
        let mut settings = bench_core::testkit::client_settings(
            self.addr,
            self.certs.path(),
            false,
            PayloadProfile::Small,
        );
        settings.tuning = tuning.clone();
        stack_h3::Http3.client(&settings).unwrap()
    }

    pub fn stop(self) {
        self.serving.abort();
    }
}
