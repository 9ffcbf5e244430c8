//! Source-address spreading: a client's connections to one server take their source addresses
//! round-robin from a small set, so the ephemeral ports of one address (≈ 28,000 by default, and
//! each closed connection holds its port in TIME_WAIT for 60 s) are not the first limit of a
//! new-connection or many-connection cell.
//!
//! Loopback targets spread over 127.0.0.1 + k: all of 127.0.0.0/8 is local on Linux (also
//! inside a private namespace whose `lo` is up), so they need no setup. Any other IPv4 target
//! spreads over the addresses this host has on the target's own subnet (an interface that is
//! up, whose address and netmask contain the target: the agent hosts of the `hosts` executor,
//! or a load machine with several addresses on the service's network). With fewer than two
//! such addresses, or IPv6, the kernel chooses, since only configured addresses can be bound.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most addresses a client spreads over: 127.0.0.1 … 127.255.255.254 stay inside 127/8.
pub const MAX_SOURCE_ADDRESSES: u32 = (1 << 24) - 2;

/// Where the source addresses come from.
#[derive(Debug)]
enum Pool {
    /// The kernel picks the source.
    Kernel,
    /// 127.0.0.1 + k, k < count.
    Loopback { count: u32 },
    /// Addresses configured on the target's subnet, in ascending order.
    OnLink(Vec<Ipv4Addr>),
}

/// The source addresses of one client and the counter that takes them in turn.
#[derive(Debug)]
pub struct SourceAddresses {
    pool: Pool,
    /// Connects so far; shared by every worker of the client, hence atomic.
    next: AtomicU64,
}

impl SourceAddresses {
    /// Spreads over `count` addresses when `count > 1`: 127.0.0.1 + k for an IPv4 loopback
    /// target, otherwise up to `count` of this host's addresses on the target's subnet (when it
    /// has at least two); else leaves the source to the kernel.
    pub fn new(target: SocketAddr, count: u32) -> Self {
        let local = match target.ip() {
            IpAddr::V4(ip) if !ip.is_loopback() && count > 1 => on_link_addresses(ip),
            _ => Vec::new(),
        };
        Self::with_local(target, count, local)
    }

    /// [`SourceAddresses::new`] with this host's on-link addresses given (for tests).
    fn with_local(target: SocketAddr, count: u32, mut local: Vec<Ipv4Addr>) -> Self {
        let count = count.min(MAX_SOURCE_ADDRESSES);
        let pool = match target.ip() {
            IpAddr::V4(ip) if ip.is_loopback() && count > 1 => Pool::Loopback { count },
            IpAddr::V4(_) => {
                local.sort();
                local.dedup();
                local.truncate(count as usize);
                if local.len() > 1 {
                    Pool::OnLink(local)
                } else {
                    Pool::Kernel
                }
            }
            IpAddr::V6(_) => Pool::Kernel,
        };
        SourceAddresses {
            pool,
            next: AtomicU64::new(0),
        }
    }

    /// How many addresses connections actually spread over (1 = the kernel's choice).
    pub fn count(&self) -> u32 {
        match &self.pool {
            Pool::Kernel => 1,
            Pool::Loopback { count } => *count,
            Pool::OnLink(addrs) => addrs.len() as u32,
        }
    }

    /// The source address of the next connection, or `None` to let the kernel choose.
    pub fn next(&self) -> Option<IpAddr> {
        let k = |n: u64| self.next.fetch_add(1, Ordering::Relaxed) % n;
        match &self.pool {
            Pool::Kernel => None,
            Pool::Loopback { count } => {
                let first = u32::from(Ipv4Addr::new(127, 0, 0, 1));
                Some(IpAddr::V4(Ipv4Addr::from(
                    first + k(u64::from(*count)) as u32,
                )))
            }
            Pool::OnLink(addrs) => Some(IpAddr::V4(addrs[k(addrs.len() as u64) as usize])),
        }
    }
}

/// This host's IPv4 addresses on interfaces that are up and whose subnet contains `target`
/// (none when the interfaces cannot be read: the kernel then chooses).
fn on_link_addresses(target: Ipv4Addr) -> Vec<Ipv4Addr> {
    use nix::ifaddrs::getifaddrs;
    use nix::net::if_::InterfaceFlags;
    let Ok(interfaces) = getifaddrs() else {
        return Vec::new();
    };
    interfaces
        .filter(|i| i.flags.contains(InterfaceFlags::IFF_UP))
        .filter_map(|i| {
            let addr = i.address?.as_sockaddr_in()?.ip();
            let mask = i.netmask?.as_sockaddr_in()?.ip();
            same_subnet(addr, mask, target).then_some(addr)
        })
        .collect()
}

fn same_subnet(addr: Ipv4Addr, mask: Ipv4Addr, target: Ipv4Addr) -> bool {
    let (a, m, t) = (u32::from(addr), u32::from(mask), u32::from(target));
    m != 0 && a != t && a & m == t & m
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
    fn one_address_or_a_target_without_local_addresses_on_its_subnet_leaves_the_source_to_the_kernel(
    ) {
        let one = vec![Ipv4Addr::new(198, 18, 0, 11)];
        for (target, count, local) in [
            ("127.0.0.1:443", 1, vec![]),
            ("127.0.0.1:443", 0, vec![]),
            ("198.18.0.2:443", 16, vec![]),
            ("198.18.0.2:443", 16, one.clone()),
            (
                "198.18.0.2:443",
                1,
                vec![one[0], Ipv4Addr::new(198, 19, 0, 2)],
            ),
            ("[::1]:443", 16, vec![]),
        ] {
            let s = SourceAddresses::with_local(target.parse().unwrap(), count, local);
            assert_eq!(take(&s, 3), [None, None, None], "{target} × {count}");
            assert_eq!(s.count(), 1);
        }
        // A host with no address on 203.0.113.0/24 (TEST-NET-3): nothing is read as on-link.
        let s = SourceAddresses::new("203.0.113.9:443".parse().unwrap(), 16);
        assert_eq!(s.count(), 1);
    }

    #[test]
    fn other_targets_spread_over_this_hosts_addresses_on_their_subnet() {
        let a = |c: u8, d: u8| Ipv4Addr::new(198, c, 0, d);
        let s = SourceAddresses::with_local(
            "198.18.0.1:443".parse().unwrap(),
            3,
            vec![a(19, 2), a(18, 11), a(19, 1), a(18, 11), a(19, 3)],
        );
        assert_eq!(s.count(), 3);
        let ip = |c, d| Some(IpAddr::V4(a(c, d)));
        assert_eq!(take(&s, 4), [ip(18, 11), ip(19, 1), ip(19, 2), ip(18, 11)]);
        assert!(same_subnet(
            a(19, 2),
            Ipv4Addr::new(255, 254, 0, 0),
            a(18, 1)
        ));
        assert!(!same_subnet(
            a(19, 2),
            Ipv4Addr::new(255, 255, 0, 0),
            a(18, 1)
        ));
        assert!(!same_subnet(
            a(18, 1),
            Ipv4Addr::new(255, 254, 0, 0),
            a(18, 1)
        ));
    }

    #[test]
    fn on_link_addresses_include_loopbacks_own_subnet() {
        // 127.0.0.1/8 on `lo` is on the subnet of any 127/8 address but itself.
        let found = on_link_addresses(Ipv4Addr::new(127, 0, 0, 2));
        assert!(found.contains(&Ipv4Addr::LOCALHOST), "{found:?}");
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
