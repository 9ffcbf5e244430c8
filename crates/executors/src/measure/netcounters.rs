//! The kernel's TCP and UDP counters around a cell (`/proc/net/snmp`, `/proc/net/netstat`):
//! retransmits, listen-queue overflows, SYN cookies, resets and UDP buffer drops are what
//! explain a failure class or a tail that the load generator can only see as a timeout.
//!
//! Read through `/proc/thread-self/net`: `/proc/net` is `/proc/self/net`, which the kernel
//! resolves through the thread group leader (the runner's main thread, on the host), while a
//! cell's runtime threads have entered the cell's private namespace. Only a reading taken on
//! such a thread, through `thread-self`, counts the cell's namespace (and nothing else).

use std::collections::HashMap;
use std::path::Path;

/// Which `/proc/net` file a counter lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcFile {
    Snmp,
    Netstat,
}

/// One counter: its `cells.csv` column, where the kernel keeps it, and what its moving means.
#[derive(Debug, Clone, Copy)]
pub struct Counter {
    pub column: &'static str,
    file: ProcFile,
    /// The line prefix (`Tcp`, `TcpExt`, `Udp`) and the field name in the header line.
    prefix: &'static str,
    field: &'static str,
}

const fn counter(
    column: &'static str,
    file: ProcFile,
    prefix: &'static str,
    field: &'static str,
) -> Counter {
    Counter {
        column,
        file,
        prefix,
        field,
    }
}

/// The counters recorded per cell, in column order (docs/results-schema.md).
pub const COUNTERS: [Counter; 12] = [
    counter("net_tcp_retrans_segs", ProcFile::Snmp, "Tcp", "RetransSegs"),
    counter(
        "net_tcp_timeouts",
        ProcFile::Netstat,
        "TcpExt",
        "TCPTimeouts",
    ),
    counter(
        "net_listen_overflows",
        ProcFile::Netstat,
        "TcpExt",
        "ListenOverflows",
    ),
    counter(
        "net_listen_drops",
        ProcFile::Netstat,
        "TcpExt",
        "ListenDrops",
    ),
    counter("net_tcp_out_rsts", ProcFile::Snmp, "Tcp", "OutRsts"),
    counter("net_tcp_estab_resets", ProcFile::Snmp, "Tcp", "EstabResets"),
    counter(
        "net_syncookies_sent",
        ProcFile::Netstat,
        "TcpExt",
        "SyncookiesSent",
    ),
    counter(
        "net_udp_rcvbuf_errors",
        ProcFile::Snmp,
        "Udp",
        "RcvbufErrors",
    ),
    counter(
        "net_udp_sndbuf_errors",
        ProcFile::Snmp,
        "Udp",
        "SndbufErrors",
    ),
    counter("net_udp_in_errors", ProcFile::Snmp, "Udp", "InErrors"),
    // Connections opened and accepted: on a proxied path they count the proxies' upstream
    // connections (docs/mesh.md).
    counter("net_tcp_active_opens", ProcFile::Snmp, "Tcp", "ActiveOpens"),
    counter(
        "net_tcp_passive_opens",
        ProcFile::Snmp,
        "Tcp",
        "PassiveOpens",
    ),
];

/// The column saying whose counters a row holds.
pub const SCOPE_COLUMN: &str = "net_counters_scope";

/// Whose packets the counters count (the values of [`SCOPE_COLUMN`]).
pub use results::rows::NetScope as Scope;

/// Values of [`COUNTERS`], in the same order: a reading, or the difference of two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    pub values: [u64; COUNTERS.len()],
}

impl NetCounters {
    /// Picks [`COUNTERS`] out of the text of `snmp` and `netstat`; a counter the kernel does
    /// not have (an old kernel, a trimmed config) reads 0 rather than failing the cell.
    pub fn parse(snmp: &str, netstat: &str) -> NetCounters {
        let (snmp, netstat) = (fields(snmp), fields(netstat));
        let mut out = NetCounters::default();
        for (slot, c) in out.values.iter_mut().zip(COUNTERS.iter()) {
            let table = match c.file {
                ProcFile::Snmp => &snmp,
                ProcFile::Netstat => &netstat,
            };
            *slot = table.get(&(c.prefix, c.field)).copied().unwrap_or_default();
        }
        out
    }

    /// Reads `snmp` and `netstat` in `dir` (a `/proc/.../net` directory).
    pub fn read_dir(dir: &Path) -> std::io::Result<NetCounters> {
        Ok(NetCounters::parse(
            &std::fs::read_to_string(dir.join("snmp"))?,
            &std::fs::read_to_string(dir.join("netstat"))?,
        ))
    }

    /// The counters of the calling thread's network namespace (see the module's note on why
    /// `thread-self`).
    pub fn read_this_thread() -> std::io::Result<NetCounters> {
        NetCounters::read_dir(Path::new("/proc/thread-self/net"))
    }

    /// `self − before` per counter; 0 where a counter went backwards (it cannot, short of a
    /// wrapped 32-bit field on an old kernel).
    pub fn since(&self, before: &NetCounters) -> NetCounters {
        let mut out = NetCounters::default();
        for ((d, a), b) in out
            .values
            .iter_mut()
            .zip(self.values.iter())
            .zip(before.values.iter())
        {
            *d = a.saturating_sub(*b);
        }
        out
    }

    /// The value of the counter written as `column`.
    pub fn get(&self, column: &str) -> Option<u64> {
        COUNTERS
            .iter()
            .position(|c| c.column == column)
            .map(|i| self.values[i])
    }
}

/// Whether the calling thread is in another network namespace than the process's main
/// thread (the runner's): then its readings are the cell's namespace alone.
pub fn this_thread_scope() -> Scope {
    let ns = |p: &str| std::fs::read_link(p).ok();
    match (ns("/proc/thread-self/ns/net"), ns("/proc/self/ns/net")) {
        (Some(thread), Some(process)) if thread != process => Scope::Namespace,
        _ => Scope::Host,
    }
}

/// The deltas of one cell and whose they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellCounters {
    pub deltas: NetCounters,
    pub scope: Scope,
}

/// A reading on the calling thread, taken as a phase starts; [`Before::finish`], called on a
/// thread of the same namespace, gives the deltas over the phase.
pub struct Before {
    reading: NetCounters,
    scope: Scope,
}

impl Before {
    /// `None` when `/proc` cannot be read (no counters is better than a failed cell).
    pub fn take() -> Option<Before> {
        Some(Before {
            reading: NetCounters::read_this_thread().ok()?,
            scope: this_thread_scope(),
        })
    }

    pub fn finish(&self) -> Option<CellCounters> {
        Some(CellCounters {
            deltas: NetCounters::read_this_thread().ok()?.since(&self.reading),
            scope: self.scope,
        })
    }
}

/// `(prefix, field) → value` from `/proc/net/snmp` or `/proc/net/netstat`, which hold pairs
/// of lines per prefix: `Tcp: RtoAlgorithm RtoMin …` then `Tcp: 1 200 …`. Fields that are
/// not unsigned numbers (Tcp `MaxConn` is -1) are left out.
fn fields(text: &str) -> HashMap<(&str, &str), u64> {
    let mut out = HashMap::new();
    let mut lines = text.lines();
    while let (Some(header), Some(values)) = (lines.next(), lines.next()) {
        let (Some((prefix, names)), Some((value_prefix, numbers))) =
            (header.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if prefix != value_prefix {
            // Out of step (a truncated file): nothing after this can be trusted.
            break;
        }
        for (name, value) in names.split_whitespace().zip(numbers.split_whitespace()) {
            if let Ok(v) = value.parse::<u64>() {
                out.insert((prefix, name), v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a 6.x kernel, trimmed to the lines the counters need plus neighbours
    /// that share a prefix (`UdpLite` after `Udp`, `IpExt` after `TcpExt`).
    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 126967203 0 0 0 0 0 126967203 126958227 0 0 0 0 0 0 0 0 0 126958227
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 1911017 955571 955414 12345 12 123918211 124233373 7744 0 958031 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 2851939 20 6661 2856412 6600 61 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 1 2 3 4 5 6 7 8 9
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled TCPTimeouts ListenOverflows ListenDrops
TcpExt: 17 3 0 0 0 305 42 43
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
";

    #[test]
    fn counters_come_from_their_prefix_and_field() {
        let c = NetCounters::parse(SNMP, NETSTAT);
        let expect = [
            ("net_tcp_retrans_segs", 7744),
            ("net_tcp_timeouts", 305),
            ("net_listen_overflows", 42),
            ("net_listen_drops", 43),
            ("net_tcp_out_rsts", 958031),
            ("net_tcp_estab_resets", 12345),
            ("net_syncookies_sent", 17),
            // Udp's, not UdpLite's, though both lines have the same field names.
            ("net_udp_rcvbuf_errors", 6600),
            ("net_udp_sndbuf_errors", 61),
            ("net_udp_in_errors", 6661),
            ("net_tcp_active_opens", 1911017),
            ("net_tcp_passive_opens", 955571),
        ];
        for (column, value) in expect {
            assert_eq!(c.get(column), Some(value), "{column}");
        }
        assert_eq!(expect.len(), COUNTERS.len());
    }

    #[test]
    fn missing_or_malformed_text_reads_zero_and_deltas_never_go_negative() {
        assert_eq!(NetCounters::parse("", ""), NetCounters::default());
        // A value line out of step with its header stops the parse instead of misreading.
        let skewed = "Tcp: RetransSegs\nUdp: 5\n";
        assert_eq!(NetCounters::parse(skewed, ""), NetCounters::default());
        let before = NetCounters::parse(SNMP, NETSTAT);
        let mut after = before;
        after.values[0] += 5;
        after.values[1] = 0;
        let d = after.since(&before);
        assert_eq!(d.values[0], 5);
        assert_eq!(d.values[1], 0);
    }

    #[test]
    fn this_machine_has_every_counter() {
        let host = std::fs::read_to_string("/proc/net/snmp").unwrap();
        let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap();
        let (snmp, netstat) = (fields(&host), fields(&netstat));
        for c in COUNTERS {
            let table = match c.file {
                ProcFile::Snmp => &snmp,
                ProcFile::Netstat => &netstat,
            };
            assert!(table.contains_key(&(c.prefix, c.field)), "{}", c.field);
        }
    }

    /// A thread that entered a namespace reads that namespace's counters through
    /// `thread-self` (not through `/proc/self/net`, which follows the main thread): in a
    /// fresh namespace, datagrams sent to a socket that never reads are exactly delivered or
    /// counted as receive-buffer errors there. Needs root; skipped otherwise.
    #[test]
    fn thread_self_reads_the_namespace_the_thread_entered() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root to create a network namespace");
            return;
        }
        let ns = crate::netem::netns::Netns::create(
            &experiment::settings::Experiment::default(),
            90_001,
        )
        .expect("namespace");
        let ns = std::sync::Arc::new(ns);
        let inside = ns.clone();
        std::thread::spawn(move || {
            inside.enter().expect("setns");
            assert_eq!(this_thread_scope(), Scope::Namespace);
            let dir = Path::new("/proc/thread-self/net");
            let udp = |name| {
                fields(&std::fs::read_to_string(dir.join("snmp")).unwrap())
                    .get(&("Udp", name))
                    .copied()
                    .unwrap()
            };
            assert_eq!(udp("InDatagrams"), 0, "a fresh namespace has seen nothing");
            let before = NetCounters::read_this_thread().unwrap();
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            socket2::SockRef::from(&rx)
                .set_recv_buffer_size(1024)
                .unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            const SENT: u64 = 200;
            for _ in 0..SENT {
                tx.send_to(&[0u8; 1000], rx.local_addr().unwrap()).unwrap();
            }
            rx.set_nonblocking(true).unwrap();
            let mut received = 0;
            while rx.recv(&mut [0u8; 2048]).is_ok() {
                received += 1;
            }
            let d = NetCounters::read_this_thread().unwrap().since(&before);
            let dropped = d.get("net_udp_rcvbuf_errors").unwrap();
            assert!(dropped > 0, "{d:?}");
            assert_eq!(received + dropped, SENT, "{d:?}");
            assert_eq!(udp("InDatagrams"), received);
        })
        .join()
        .unwrap();
        // The main thread stayed on the host.
        assert_eq!(this_thread_scope(), Scope::Host);
    }
}
