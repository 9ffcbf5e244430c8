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

use crate::closing::{CloseWatch, ClosingSocket};

pub struct RefusalAwareSocket {
    io: tokio::net::UdpSocket,
    state: Arc<UdpSocketState>,
    /// Datagrams the kernel may coalesce into one read (GRO): 1 where GRO is off.
    receive_segments: usize,
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
    /// `source` (port 0) when given, otherwise to the address the kernel picks. `platform` is
    /// the client's one [`platform_state`] for that family. With `receive_offload`, GRO is
    /// turned on where the kernel has it, as quinn-udp does on its own sockets: for a socket
    /// that carries many connections, made once (see [`set_quinn_options`] for why not per
    /// connection).
    pub fn connect(
        target: SocketAddr,
        source: Option<std::net::IpAddr>,
        tuning: &bench_core::Tuning,
        platform: &Arc<UdpSocketState>,
        watch: Arc<CloseWatch>,
        receive_offload: bool,
    ) -> io::Result<Arc<Self>> {
        let local = source.map_or_else(|| unspecified(target), |ip| SocketAddr::new(ip, 0));
        let sock = std::net::UdpSocket::bind(local)?;
        sock.connect(target)?;
        crate::tuning::size_buffers(&sock, tuning)?;
        sock.set_nonblocking(true)?;
        set_quinn_options(&sock, local.is_ipv4())?;
        // quinn-udp ignores a kernel without UDP_GRO too; then one datagram per read.
        let gro = receive_offload
            && nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGroSegment, &true)
                .is_ok();
        Ok(Arc::new(RefusalAwareSocket {
            io: tokio::net::UdpSocket::from_std(sock)?,
            state: platform.clone(),
            watch,
            receive_segments: if gro { platform.gro_segments() } else { 1 },
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
}

#[cfg(test)]
impl RefusalAwareSocket {
    /// SO_RCVBUF as the kernel reports it (twice what was granted, on Linux).
    pub(crate) fn recv_buffer_bytes(&self) -> io::Result<usize> {
        socket2::SockRef::from(&self.io).recv_buffer_size()
    }
}

impl ClosingSocket for RefusalAwareSocket {
    async fn recv_discard(&self) -> io::Result<()> {
        let mut byte = [0u8; 1];
        self.io.recv(&mut byte).await.map(drop)
    }

    fn send_raw(&self, datagram: &[u8]) -> io::Result<()> {
        self.io.try_send(datagram).map(drop)
    }
}

/// What quinn-udp learns of the kernel for one address family (GSO, whether IPv4 may
/// fragment, whether `sendmsg` takes a TOS control message), learnt once per client and shared
/// by all its sockets. `UdpSocketState::new` probes with two throwaway IPv6 sockets on every
/// call, and enabling GRO on one and closing it flips a kernel static key each time: the kernel
/// rewrites its own code and interrupts every core twice per probe. With a socket per
/// connection that was 0.20 ms of kernel time per connection, 0.05 ms without it
/// (results/quic-breakdown/changes.md, `perf record`), and the
/// interrupts landed on the server's core too. No real client opens sockets at this rate.
pub fn platform_state(target: SocketAddr) -> io::Result<Arc<UdpSocketState>> {
    let template = std::net::UdpSocket::bind(unspecified(target))?;
    Ok(Arc::new(UdpSocketState::new((&template).into())?))
}

fn unspecified(target: SocketAddr) -> SocketAddr {
    if target.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    }
}

/// The per-socket options quinn-udp 0.5's `UdpSocketState::new` sets on Linux (ECN marks and
/// destination addresses reported, no fragmentation), less GRO: with it quinn would size each
/// endpoint's receive buffer for 64 coalesced datagrams × 32 per batch (≈ 3 MB), and the
/// client has one endpoint per connection; one datagram per slot is plenty for small answers.
fn set_quinn_options(sock: &std::net::UdpSocket, ipv4: bool) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    use rustix::net::sockopt as rx;
    let unsupported = |e: &rustix::io::Errno| {
        *e == rustix::io::Errno::NOPROTOOPT || *e == rustix::io::Errno::OPNOTSUPP
    };
    if ipv4 || !rx::ipv6_v6only(sock)? {
        // quinn-udp ignores a failure here too (older kernels on dual-stack sockets).
        let _ = setsockopt(sock, sockopt::IpRecvTos, &true);
    }
    match rx::set_ip_mtu_discover(sock, rx::Ipv4PathMtuDiscovery::PROBE) {
        Err(e) if !unsupported(&e) => return Err(e.into()),
        _ => {}
    }
    if ipv4 {
        setsockopt(sock, sockopt::Ipv4PacketInfo, &true)?;
    } else {
        match rx::set_ipv6_mtu_discover(sock, rx::Ipv6PathMtuDiscovery::PROBE) {
            Err(e) if !unsupported(&e) => return Err(e.into()),
            _ => {}
        }
        setsockopt(sock, sockopt::Ipv6RecvPacketInfo, &true)?;
        setsockopt(sock, sockopt::Ipv6RecvTClass, &true)?;
        match setsockopt(sock, sockopt::Ipv6DontFrag, &true) {
            Err(nix::errno::Errno::ENOPROTOOPT | nix::errno::Errno::EOPNOTSUPP) | Ok(()) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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
        self.receive_segments
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

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{getsockopt, sockopt};
    use rustix::net::sockopt as rx;
    use std::os::fd::AsFd;

    /// The options that decide what quinn sees (ECN marks, destination addresses, no
    /// fragmentation), read back from a socket.
    #[derive(Debug, PartialEq)]
    struct Options {
        recv_tos: bool,
        ip_mtu_discover: i32,
        pktinfo: Option<bool>,
        ipv6: Option<(i32, bool, bool, bool)>,
    }

    fn options(sock: &std::net::UdpSocket, ipv4: bool) -> Options {
        Options {
            recv_tos: getsockopt(sock, sockopt::IpRecvTos).expect("IP_RECVTOS"),
            ip_mtu_discover: rx::ip_mtu_discover(sock).expect("IP_MTU_DISCOVER").as_raw(),
            pktinfo: ipv4.then(|| getsockopt(sock, sockopt::Ipv4PacketInfo).expect("IP_PKTINFO")),
            ipv6: (!ipv4).then(|| {
                (
                    rx::ipv6_mtu_discover(sock)
                        .expect("IPV6_MTU_DISCOVER")
                        .as_raw(),
                    getsockopt(sock, sockopt::Ipv6RecvPacketInfo).expect("IPV6_RECVPKTINFO"),
                    getsockopt(sock, sockopt::Ipv6RecvTClass).expect("IPV6_RECVTCLASS"),
                    getsockopt(sock, sockopt::Ipv6DontFrag).expect("IPV6_DONTFRAG"),
                )
            }),
        }
    }

    /// A client socket carries every option quinn-udp's own set-up would give it (which this
    /// test runs on a second socket), except GRO, and its shared platform state reaches the
    /// same conclusions as a per-socket one.
    #[tokio::test]
    async fn client_sockets_get_quinn_udps_options_without_its_probes() {
        for peer_addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(peer) = std::net::UdpSocket::bind(peer_addr) else {
                assert!(peer_addr.contains("::1"), "no IPv4 loopback");
                continue; // no IPv6 on this machine
            };
            let target = peer.local_addr().expect("addr");
            let ipv4 = target.is_ipv4();
            let platform = platform_state(target).expect("platform");
            let ours = RefusalAwareSocket::connect(
                target,
                None,
                &Default::default(),
                &platform,
                Arc::default(),
                false,
            )
            .expect("socket");
            let ours_std = ours.io.as_fd().try_clone_to_owned().expect("dup");
            let ours_std = std::net::UdpSocket::from(ours_std);

            let reference = std::net::UdpSocket::bind(unspecified(target)).expect("bind");
            let reference_state = UdpSocketState::new((&reference).into()).expect("quinn-udp");

            assert_eq!(
                options(&ours_std, ipv4),
                options(&reference, ipv4),
                "{target}"
            );
            assert!(
                options(&ours_std, ipv4).recv_tos,
                "ECN marks would be invisible to quinn"
            );
            assert!(
                !getsockopt(&ours_std, sockopt::UdpGroSegment).expect("UDP_GRO"),
                "GRO on a client socket"
            );
            assert!(getsockopt(&reference, sockopt::UdpGroSegment).expect("UDP_GRO"));
            assert_eq!(platform.may_fragment(), reference_state.may_fragment());
            assert_eq!(
                platform.max_gso_segments(),
                reference_state.max_gso_segments()
            );
            assert_eq!(ours.max_transmit_segments(), platform.max_gso_segments());
            assert_eq!(ours.max_receive_segments(), 1);

            // A socket for many connections asks for GRO, as quinn-udp's own set-up does.
            let shared = RefusalAwareSocket::connect(
                target,
                None,
                &Default::default(),
                &platform,
                Arc::default(),
                true,
            )
            .expect("socket");
            let shared_std =
                std::net::UdpSocket::from(shared.io.as_fd().try_clone_to_owned().expect("dup"));
            assert!(getsockopt(&shared_std, sockopt::UdpGroSegment).expect("UDP_GRO"));
            assert_eq!(
                shared.max_receive_segments(),
                reference_state.gro_segments()
            );
            assert!(shared.max_receive_segments() > 1, "the kernel has GRO");
        }
    }
}
