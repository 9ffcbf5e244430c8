//! Live metrics while a run goes (`--metrics-listen`): a Prometheus text exposition at
//! `/metrics` of every cell's counters and the running cell's gauges, refreshed from the load
//! generators' live snapshots ([`load::live`]) and the sampler's latest readings.
//!
//! - [`text`]: the exposition format;
//! - [`board`]: the run's figures as shown, and which metric says what;
//! - [`http`]: the HTTP/1.1 endpoint on a tokio listener;
//! - [`Endpoint`]: the three together, as a run starts and lingers with them.
//!
//! The metrics and the `cells.csv` columns they end equal to are documented in
//! docs/results-schema.md ("Live metrics").

pub mod board;
pub mod http;
pub mod text;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use board::{Board, CellLabels};

/// The endpoint of a run: its board, served at `addr` until dropped.
pub struct Endpoint {
    board: Arc<Board>,
    addr: SocketAddr,
    final_served: tokio::sync::watch::Receiver<bool>,
    server: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    /// Listens at `addr` and serves a fresh board from the current tokio runtime.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let board = Arc::new(Board::new());
        let (tx, final_served) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(http::serve(listener, board.clone(), tx));
        Ok(Endpoint {
            board,
            addr,
            final_served,
            server,
        })
    }

    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// Where it listens (the port the kernel chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run is over: keeps serving until one scrape has read the final figures, at most
    /// `bound`. True when one did.
    pub async fn linger(&self, bound: Duration) -> bool {
        self.board.finish_run();
        let mut served = self.final_served.clone();
        let waited =
            tokio::time::timeout(bound, async { served.wait_for(|done| *done).await.is_ok() })
                .await;
        waited == Ok(true)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}
