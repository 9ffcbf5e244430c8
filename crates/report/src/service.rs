//! What a report says about a measured service (`[targets]`): the targets, and seed 000's
//! network-path warning, computed: when the REST and gRPC targets differ in host, address,
//! port or TLS, or their measured connection setup differs, the comparison is not of
//! protocols alone.

use results::manifest::{ServiceRecord, TargetRecord};
use results::rows::CellRow;

/// Setup times of one stack, medians over its cells (µs).
struct Setup {
    stack: String,
    connect_us: Option<u64>,
    handshake_us: Option<u64>,
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    (!v.is_empty()).then(|| v[v.len() / 2])
}

/// Setup times of a stack, from the cells that time setup best: the single-user new-conn
/// baseline (one connection at a time, so the times are the path's and not a queue's), else
/// the new-conn cells, else any cell that opened connections.
fn setup_of(stack: &str, cells: &[CellRow]) -> Setup {
    let preferences: [fn(&CellRow) -> bool; 3] = [
        |r| r.regime == "new-conn" && r.stage == "baseline",
        |r| r.regime == "new-conn",
        |_| true,
    ];
    let of = |f: fn(&CellRow) -> u64| {
        preferences.iter().find_map(|prefer| {
            median(
                cells
                    .iter()
                    .filter(|r| r.stack == stack && prefer(r) && f(r) > 0)
                    .map(f)
                    .collect(),
            )
        })
    };
    Setup {
        stack: stack.to_string(),
        connect_us: of(|r| r.connect_p50_us),
        handshake_us: of(|r| r.handshake_p50_us),
    }
}

/// The record's targets as the run measured them: each with only its stacks that have cells,
/// and a target none of whose stacks ran left out (a configured gRPC target of a run of the
/// REST stacks only is not part of what the report shows).
pub fn ran(service: &ServiceRecord, cells: &[CellRow]) -> Vec<TargetRecord> {
    service
        .targets
        .iter()
        .filter_map(|t| {
            let stacks: Vec<String> = t
                .stacks
                .iter()
                .filter(|s| cells.iter().any(|r| &r.stack == *s))
                .cloned()
                .collect();
            (!stacks.is_empty()).then(|| TargetRecord {
                stacks,
                ..t.clone()
            })
        })
        .collect()
}

/// The warning box's text, or `None` when the targets' paths look alike (or there is one).
pub fn network_path_warning(service: &ServiceRecord, cells: &[CellRow]) -> Option<String> {
    let targets = ran(service, cells);
    let [a, b] = targets.as_slice() else {
        return None;
    };
    let mut differences = Vec::new();
    let differ = |what: &str, x: &str, y: &str, out: &mut Vec<String>| {
        if x != y {
            out.push(format!("{what}: {} {x}, {} {y}", a.api, b.api));
        }
    };
    differ("host", &a.host, &b.host, &mut differences);
    differ("address", &a.address, &b.address, &mut differences);
    differ(
        "port",
        &a.port.to_string(),
        &b.port.to_string(),
        &mut differences,
    );
    differ("transport", &a.transport, &b.transport, &mut differences);
    let setups: Vec<Setup> = [a, b]
        .iter()
        .flat_map(|t: &&TargetRecord| t.stacks.iter())
        .map(|s| setup_of(s, cells))
        .collect();
    // TCP connect ≈ one round trip: compare the two targets' TCP stacks.
    let connect = |t: &TargetRecord| {
        median(
            setups
                .iter()
                .filter(|s| t.stacks.contains(&s.stack))
                .filter_map(|s| s.connect_us)
                .collect(),
        )
    };
    let rtt_differs = match (connect(a), connect(b)) {
        (Some(x), Some(y)) => {
            let (lo, hi) = (x.min(y), x.max(y));
            hi > 2 * lo && hi - lo > 200
        }
        _ => false,
    };
    // A different port alone is how two endpoints of one service usually differ.
    let only_port = differences.len() == 1 && differences[0].starts_with("port");
    if (differences.is_empty() || only_port) && !rtt_differs {
        return None;
    }
    let measured: Vec<String> = setups
        .iter()
        .map(|s| {
            let us = |v: Option<u64>| v.map_or("—".to_string(), |v| format!("{v} µs"));
            format!(
                "{} TCP connect {}, TLS/QUIC handshake {}",
                s.stack,
                us(s.connect_us),
                us(s.handshake_us)
            )
        })
        .collect();
    Some(format!(
        "The targets do not share one network path, so this compares paths as well as protocols. {}{}. Measured setup (p50, single-user new-conn baseline where there is one): {}.",
        if differences.is_empty() {
            String::new()
        } else {
            format!("They differ in {}", differences.join("; "))
        },
        if rtt_differs {
            format!(
                "{}their TCP connect times (≈ one round trip) differ by more than 2×",
                if differences.is_empty() { "" } else { "; " }
            )
        } else {
            String::new()
        },
        measured.join("; ")
    ))
}

/// One line naming the service, for the report's header: the targets and stacks that ran.
pub fn header(service: &ServiceRecord, cells: &[CellRow]) -> String {
    let targets: Vec<String> = ran(service, cells)
        .iter()
        .map(|t| {
            format!(
                "{} ({}) {} → {}, {}{}",
                t.api,
                t.stacks.join(", "),
                t.authority,
                t.address,
                t.transport,
                if t.transport == "tls" {
                    format!(", {}", t.trust)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    format!("Your service: {}", targets.join(" · "))
}
