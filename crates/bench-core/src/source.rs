//! Source-address spreading: a client's connections to one server take their source addresses
//! round-robin from a small set, so the ephemeral ports of one address (≈ 28,000 by default, and
//! each closed connection holds its port in TIME_WAIT for 60 s) are not the first limit of a
//! new-connection or many-connection cell.
//!
//! Only loopback targets spread: all of 127.0.0.0/8 is local on Linux (also inside a private
//! namespace whose `lo` is up, where the runner's cells reach their server at 127.0.0.1), so
//! 127.0.0.1 + k needs no setup. Any other target (an external server, IPv6) keeps the kernel's
//! choice, since only addresses configured on an interface could be bound.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most addresses a client spreads over: 127.0.0.1 … 127.255.255.254 stay inside 127/8.
pub const MAX_SOURCE_ADDRESSES: u32 = (1 << 24) - 2;

/// The source addresses of one client and the counter that takes them in turn.
#[derive(Debug)]
pub struct SourceAddresses {
    /// The first address (127.0.0.1); `None` = the kernel picks the source.
    first: Option<u32>,
    count: u32,
    /// Connects so far; shared by every worker of the client, hence atomic.
    next: AtomicU64,
}

impl SourceAddresses {
    /// Spreads over `count` addresses when `target` is IPv4 loopback and `count > 1`;
    /// otherwise leaves the source to the kernel (today's behaviour).
    pub fn new(target: SocketAddr, count: u32) -> Self {
        let loopback = matches!(target.ip(), IpAddr::V4(ip) if ip.is_loopback());
        let count = count.min(MAX_SOURCE_ADDRESSES);
        SourceAddresses {
            first: (loopback && count > 1).then_some(u32::from(Ipv4Addr::new(127, 0, 0, 1))),
            count,
            next: AtomicU64::new(0),
        }
    }

    /// How many addresses connections actually spread over (1 = the kernel's choice).
    pub fn count(&self) -> u32 {
        if self.first.is_some() {
            self.count
        } else {
            1
        }
    }

    /// The source address of the next connection, or `None` to let the kernel choose.
    pub fn next(&self) -> Option<IpAddr> {
        let first = self.first?;
        let k = self.next.fetch_add(1, Ordering::Relaxed) % u64::from(self.count);
        Some(IpAddr::V4(Ipv4Addr::from(first + k as u32)))
    }
}

/// Binds a client TCP socket to `source` (port 0) before connect, with
/// IP_BIND_ADDRESS_NO_PORT: without it the bind itself would reserve an ephemeral port for the
/// address alone, so every (address, port) would be usable for one connection only; with it the
/// port is chosen at connect time and needs only a unique 4-tuple, as the kernel's own choice.
pub fn bind_tcp_source(socket: &tokio::net::TcpSocket, source: IpAddr) -> io::Result<()> {
    nix::sys::socket::setsockopt(
        socket,
        nix::sys::socket::sockopt::IpBindAddressNoPort,
        &true,
    )
    .map_err(io::Error::from)?;
    socket.bind(SocketAddr::new(source, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(s: &SourceAddresses, n: usize) -> Vec<Option<IpAddr>> {
        (0..n).map(|_| s.next()).collect()
    }

    #[test]
    fn loopback_targets_take_addresses_round_robin_from_127_0_0_1() {
        let s = SourceAddresses::new("127.0.0.1:443".parse().unwrap(), 3);
        let ip = |d: u8| Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, d)));
        assert_eq!(
            take(&s, 7),
            [ip(1), ip(2), ip(3), ip(1), ip(2), ip(3), ip(1)]
        );
        assert_eq!(s.count(), 3);
    }

    #[test]
    fn large_counts_carry_into_the_next_octet_and_stay_in_127_8() {
        let s = SourceAddresses::new("127.0.0.1:443".parse().unwrap(), 300);
        let all = take(&s, 300);
        assert_eq!(all[255], Some(IpAddr::V4(Ipv4Addr::new(127, 0, 1, 0))));
        assert_eq!(all[299], Some(IpAddr::V4(Ipv4Addr::new(127, 0, 1, 44))));
        let s = SourceAddresses::new("127.0.0.1:443".parse().unwrap(), u32::MAX);
        assert_eq!(s.count(), MAX_SOURCE_ADDRESSES);
    }

    #[test]
    fn one_address_or_a_non_loopback_target_leaves_the_source_to_the_kernel() {
        for (target, count) in [
            ("127.0.0.1:443", 1),
            ("127.0.0.1:443", 0),
            ("198.18.0.2:443", 16),
            ("[::1]:443", 16),
        ] {
            let s = SourceAddresses::new(target.parse().unwrap(), count);
            assert_eq!(take(&s, 3), [None, None, None], "{target} × {count}");
            assert_eq!(s.count(), 1);
        }
    }

    #[tokio::test]
    async fn a_bound_socket_connects_from_its_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let s = SourceAddresses::new(target, 4);
        for d in [1u8, 2, 3, 4, 1] {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            bind_tcp_source(&socket, s.next().unwrap()).unwrap();
            let stream = socket.connect(target).await.unwrap();
            let local = stream.local_addr().unwrap();
            assert_eq!(local.ip(), IpAddr::V4(Ipv4Addr::new(127, 0, 0, d)));
            assert_ne!(local.port(), 0);
        }
    }
}
