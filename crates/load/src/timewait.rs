//! TCP connections in TIME_WAIT in the load generator's network namespace, read from
//! `sockstat` (`TCP: inuse … tw N`). Each one holds its 4-tuple's source port for the
//! TIME_WAIT lifetime (60 s on Linux), so the count is the port budget a cell has used up:
//! a new-conn cell whose count reaches the ephemeral range of its source addresses can open no
//! more connections to the server. `sockstat` is per network namespace, and
//! `/proc/PID/net/sockstat` is the one of PID's namespace, so reading it by the load
//! generator's pid counts that namespace's sockets, wherever the runner itself runs.

use std::path::Path;

/// TIME_WAIT counts over a measured phase, in connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimeWaitCounts {
    /// At the phase's start: what earlier cells (and the warm-up) left behind.
    pub before: u64,
    /// At the phase's end.
    pub after: u64,
    /// The largest reading, sampled at the resource sampler's interval and at both ends.
    pub peak: u64,
}

impl TimeWaitCounts {
    /// Counts from one reading.
    pub fn first(reading: u64) -> Self {
        TimeWaitCounts {
            before: reading,
            after: reading,
            peak: reading,
        }
    }

    /// A later reading: the latest is `after`, the largest `peak`.
    pub fn observe(&mut self, reading: u64) {
        self.after = reading;
        self.peak = self.peak.max(reading);
    }

    /// Two load generators' namespaces as one: counts add up (the peak of the sum is at most
    /// the sum of the peaks, which is what is recorded).
    pub fn plus(self, other: TimeWaitCounts) -> TimeWaitCounts {
        TimeWaitCounts {
            before: self.before + other.before,
            after: self.after + other.after,
            peak: self.peak + other.peak,
        }
    }
}

/// The `tw` figure of the `TCP:` line of a `sockstat` text; `None` when it has none.
pub fn parse_sockstat(text: &str) -> Option<u64> {
    let fields = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut words = fields.split_whitespace();
    while let Some(word) = words.next() {
        if word == "tw" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// TIME_WAIT connections in the network namespace of `pid`; `None` once it has exited.
pub fn of_pid(pid: u32) -> Option<u64> {
    read(
        &Path::new("/proc")
            .join(pid.to_string())
            .join("net/sockstat"),
    )
}

/// TIME_WAIT connections in the calling thread's network namespace.
pub fn of_this_thread() -> Option<u64> {
    read(Path::new("/proc/thread-self/net/sockstat"))
}

fn read(path: &Path) -> Option<u64> {
    parse_sockstat(&std::fs::read_to_string(path).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tw_from_the_tcp_line() {
        let text = "sockets: used 22\nTCP: inuse 5 orphan 0 tw 17 alloc 5 mem 254\n\
                    UDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat(text), Some(17));
        assert_eq!(parse_sockstat("UDP: inuse 0 mem 0\n"), None);
        assert_eq!(parse_sockstat("TCP: inuse 5 tw\n"), None);
    }

    #[test]
    fn counts_follow_readings_and_add_up() {
        let mut c = TimeWaitCounts::first(3);
        c.observe(10);
        c.observe(7);
        assert_eq!(
            c,
            TimeWaitCounts {
                before: 3,
                after: 7,
                peak: 10
            }
        );
        let sum = c.plus(TimeWaitCounts::first(1));
        assert_eq!((sum.before, sum.after, sum.peak), (4, 8, 11));
    }
}
