//! The columns of `cells.csv` as written by a fresh run, against the committed reference run
//! and against the guide's schema table (`docs/results-schema.md`): renaming or adding a
//! column shows up here.

use std::sync::OnceLock;

mod common;

use common::*;
use results::rows::{CellRow, Row};

/// The header of a fresh, tiny sweep's `cells.csv` (one stack, one level, 20 requests).
fn fresh_header() -> &'static [String] {
    static HEADER: OnceLock<Vec<String>> = OnceLock::new();
    HEADER.get_or_init(|| {
        let run = run_ok(&[&["--stacks", "h1"][..], &ONE_TINY_CELL[..]].concat());
        header(&run.dir().join("cells.csv"))
    })
}

fn header(path: &std::path::Path) -> Vec<String> {
    csv::Reader::from_path(path)
        .unwrap()
        .headers()
        .unwrap()
        .iter()
        .map(String::from)
        .collect()
}

/// Columns added since the committed reference and scale runs were measured: they read as
/// empty where a run lacks them. Emptied when those runs are measured again.
const ADDED_SINCE_COMMITTED: &[&str] = &[
    "steady_window_valid",
    "connections_attempted",
    "quic_endpoint",
    "tcp_time_wait_before",
    "tcp_time_wait_after",
    "tcp_time_wait_peak",
    "proxy_client_rss_hwm_bytes",
    "proxy_client_cpu_s",
    "proxy_server_rss_hwm_bytes",
    "proxy_server_cpu_s",
    "proxy_cpu_ms_per_1k_ok",
    "path",
    "proxy",
    "pool",
    "proxy_threads",
    "client_protocol",
    "upstream_protocol",
    "net_tcp_active_opens",
    "net_tcp_passive_opens",
    "streamed_ok",
    "messages_per_call_mean",
    "messages_per_s",
    "message_gap_p50_us",
    "message_gap_p99_us",
    "message_gap_p999_us",
    "message_gap_max_us",
    "grpc_call",
    "stream_messages",
    "budget_repeats",
    "tcp_congestion",
    "object",
    "object_message_bytes",
    "object_bytes_moved",
    "goodput_bytes_per_s",
    "client_cpu_s_per_gib",
    "server_cpu_s_per_gib",
    "server",
];

#[test]
fn a_fresh_cells_csv_has_the_reference_columns_in_the_reference_order() {
    let fresh = fresh_header();
    assert_eq!(fresh, CellRow::COLUMNS, "the header is CellRow's fields");
    // The committed reference and scale runs have every column but those added since they
    // were written (which each may lack: a run rewritten later has some of them), renamed
    // ones under their old names where they lack the new one; in the same order.
    for run in ["results/reference/cells.csv", "results/scale/cells.csv"] {
        let committed = header(&workspace().join(run));
        if committed == fresh {
            continue;
        }
        let expected: Vec<String> = fresh
            .iter()
            .filter(|c| committed.contains(c) || !ADDED_SINCE_COMMITTED.contains(&c.as_str()))
            .map(|c| {
                if committed.contains(c) {
                    return c.clone();
                }
                results::rows::RENAMED_COLUMNS
                    .iter()
                    .find(|(_, new)| new == c)
                    .map_or(c.clone(), |(old, _)| old.to_string())
            })
            .collect();
        assert_eq!(
            committed, expected,
            "cells.csv columns changed against {run}"
        );
    }
}

/// The guide's page that defines every results file and column.
const SCHEMA_PAGE: &str = "docs/results-schema.md";

/// The column names the guide's `cells.csv` table lists, as patterns: `{a,b}` expands,
/// `*` and `<class>` stand for one or more name characters.
fn documented_patterns() -> Vec<String> {
    let page = std::fs::read_to_string(workspace().join(SCHEMA_PAGE)).expect(SCHEMA_PAGE);
    let start = page
        .find("### `cells.csv`")
        .expect("the schema page has a `cells.csv` section");
    let table = page[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2);
    let mut patterns = Vec::new();
    for line in table {
        let first = line.split('|').nth(1).unwrap_or_default();
        for token in first.split('`').skip(1).step_by(2) {
            patterns.extend(expand(token));
        }
    }
    patterns
}

fn expand(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(a), Some(b)) => token[a + 1..b]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &token[..a], &token[b + 1..])))
            .collect(),
        _ => vec![token.to_string()],
    }
}

fn matches(pattern: &str, column: &str) -> bool {
    let parts: Vec<&str> = pattern
        .split(['*'])
        .flat_map(|p| p.split("<class>"))
        .collect();
    if parts.len() == 1 {
        return pattern == column;
    }
    // Literal parts in order, each wildcard at least one character.
    let mut rest = column;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.len() > part.len() && rest.ends_with(part);
        } else {
            let Some(at) = rest.get(1..).and_then(|r| r.find(part)) else {
                return false;
            };
            rest = &rest[at + 1 + part.len()..];
        }
    }
    false
}

#[test]
fn the_guide_lists_every_cells_csv_column_and_nothing_else() {
    let patterns = documented_patterns();
    assert!(patterns.len() > 50, "{patterns:?}");
    let fresh = fresh_header();
    let undocumented: Vec<&String> = fresh
        .iter()
        .filter(|c| !patterns.iter().any(|p| matches(p, c)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "columns of cells.csv missing from {SCHEMA_PAGE}'s table: {undocumented:?}"
    );
    let unknown: Vec<&String> = patterns
        .iter()
        .filter(|p| !fresh.iter().any(|c| matches(p, c)))
        .collect();
    assert!(
        unknown.is_empty(),
        "{SCHEMA_PAGE}'s table lists columns cells.csv does not have: {unknown:?}"
    );
}

#[test]
fn schema_patterns_expand_and_match_as_meant() {
    assert_eq!(
        expand("{server,client}_cpu_s"),
        ["server_cpu_s", "client_cpu_s"]
    );
    assert!(matches("ttfb_*_us", "ttfb_p50_us"));
    assert!(!matches("ttfb_*_us", "ttfb__us"));
    assert!(matches("fail_<class>", "fail_conn_reset"));
    assert!(!matches("wire_*_bytes_per_request", "wire_sent_bytes"));
}
