//! A connected UDP socket for one client endpoint that notices ICMP "port unreachable".
//!
//! quinn uses unconnected sockets and never hears of ICMP errors, so a QUIC client aimed at a
//! closed port waits out its handshake timeout. A connected socket gets ECONNREFUSED from the
//! kernel as a pending socket error, which quinn's send path would swallow; this socket lets
//! the client wait for that error, so it can report "connect refused" like the TCP stacks do.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::task::ready;

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;

use crate::closing::CloseWatch;

pub struct RefusalAwareSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    /// Told of every datagram sent, for the closing period ([`crate::closing`]).
    watch: Arc<CloseWatch>,
}

impl fmt::Debug for RefusalAwareSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefusalAwareSocket").finish_non_exhaustive()
    }
}

impl RefusalAwareSocket {
    /// A new UDP socket on the target's address family, connected to `target`, bound to
    /// `source` (port 0) when given, otherwise to the address the kernel picks.
    pub fn connect(
        target: SocketAddr,
        source: Option<std::net::IpAddr>,
        tuning: &bench_core::Tuning,
        watch: Arc<CloseWatch>,
    ) -> io::Result<Arc<Self>> {
        let local: SocketAddr = if let Some(source) = source {
            SocketAddr::new(source, 0)
        } else if target.is_ipv4() {
            "0.0.0.0:0".parse().expect("address")
        } else {
            "[::]:0".parse().expect("address")
        };
        let sock = std::net::UdpSocket::bind(local)?;
        sock.connect(target)?;
        crate::tuning::size_buffers(&sock, tuning)?;
        sock.set_nonblocking(true)?;
        let state = UdpSocketState::new((&sock).into())?;
        // No GRO on client sockets: with it quinn sizes each endpoint's receive buffer for 64
        // coalesced datagrams × 32 per batch (≈ 3 MB), and the client has one endpoint per
        // connection, so 500 workers would hold ≈ 1.5 GB. One datagram per slot is plenty for
        // a client that receives small answers.
        nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGroSegment, &false)
            .map_err(io::Error::from)?;
        Ok(Arc::new(RefusalAwareSocket {
            io: tokio::net::UdpSocket::from_std(sock)?,
            state,
            watch,
        }))
    }

    /// Resolves once the kernel reports the peer's port unreachable. The error wakes this
    /// task as soon as the ICMP message arrives, before quinn's next send would consume it.
    pub async fn refused(&self) {
        loop {
            if self.io.ready(Interest::ERROR).await.is_err() {
                return std::future::pending().await;
            }
            match self.io.take_error() {
                Ok(Some(e)) if is_refusal(&e) => return,
                _ => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            }
        }
    }

    /// Waits for the next datagram and drops it (a closing endpoint only counts them).
    pub async fn recv_discard(&self) -> io::Result<()> {
        let mut byte = [0u8; 1];
        self.io.recv(&mut byte).await.map(drop)
    }

    /// Sends one datagram as it is, if the socket can take it now.
    pub fn send_raw(&self, datagram: &[u8]) -> io::Result<()> {
        self.io.try_send(datagram).map(drop)
    }
}

fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionRefused
}

impl AsyncUdpSocket for RefusalAwareSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(WritablePoller(self))
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            self.state.send((&self.io).into(), transmit)
        })?;
        let contents = transmit.contents;
        let segment = transmit.segment_size.unwrap_or(contents.len()).max(1);
        let datagrams = contents.len().div_ceil(segment).max(1);
        let last = &contents[(datagrams - 1) * segment..];
        self.watch.sent(datagrams as u64, last);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_recv_ready(cx))?;
            // WouldBlock clears the readiness; other errors are per-datagram. Poll again.
            if let Ok(n) = self.io.try_io(Interest::READABLE, || {
                self.state.recv((&self.io).into(), bufs, meta)
            }) {
                return Poll::Ready(Ok(n));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }
    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }
    fn max_receive_segments(&self) -> usize {
        1
    }
    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }
}

#[derive(Debug)]
struct WritablePoller(Arc<RefusalAwareSocket>);

impl UdpPoller for WritablePoller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        self.0.io.poll_send_ready(cx)
    }
}
