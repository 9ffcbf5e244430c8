//! The run's figures as the endpoint shows them: every cell's counters since the run began,
//! and, while a cell measures, its gauges. The cell loop tells the board when a cell starts
//! and ends; the load generators' live snapshots (relayed by the cell's supervisor, about
//! five a second) and the sampler's latest readings fill it in between. Rendering reads it;
//! nothing here is on a load generator's request path.
//!
//! What each metric is, with the `cells.csv` column it ends equal to, is documented in
//! docs/results-schema.md ("Live metrics").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use bench_core::FailureClass;
use load::live::{LatencyBuckets, LiveSnapshot, Reading, LATENCY_BUCKETS_US};
use load::sampler::{Latest, Role};

use crate::text::{Exposition, Kind};

/// A cell's labels: bounded in number by the plan (no per-request label), and nothing secret
/// (a variant's, stack's and mix entry's names, all from the experiment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellLabels {
    /// The variant's name (`default` without variants).
    pub variant: String,
    pub stack: String,
    /// `reuse` or `new-conn`.
    pub regime: String,
    /// The cell key's level: `c<concurrency>`, `c<concurrency>/q<rate>` for a rate sweep's
    /// cell, or `baseline`.
    pub level: String,
    pub repetition: u32,
}

impl CellLabels {
    fn pairs(&self, repetition: &str) -> Vec<(&'static str, String)> {
        vec![
            ("variant", self.variant.clone()),
            ("stack", self.stack.clone()),
            ("regime", self.regime.clone()),
            ("level", self.level.clone()),
            ("repetition", repetition.to_string()),
        ]
    }
}

/// One cell's counters as shown.
struct Cell {
    labels: CellLabels,
    shown: LiveSnapshot,
}

/// The cell measuring now.
struct Current {
    /// Its entry in [`State::cells`].
    index: usize,
    /// Each load generator's latest snapshot.
    generators: Vec<Option<LiveSnapshot>>,
    /// The generators' gauges added up, once one reported.
    in_flight: Option<u64>,
    connections_open: Option<u64>,
    /// The load generators' latest readings as their agents sent them, added up (none when
    /// the runner samples its own local load generator).
    load_generators: Option<Reading>,
}

#[derive(Default)]
struct State {
    cells: Vec<Cell>,
    current: Option<Current>,
    cells_finished: u64,
}

/// The run's live figures.
#[derive(Default)]
pub struct Board {
    state: Mutex<State>,
    /// The sampler's latest readings of the cell's server and local load generator.
    readings: Latest,
    /// Set when the run is over: what renders after it is final.
    over: AtomicBool,
}

/// Raises each counter of `shown` to `seen`'s where that is higher: what a counter shows
/// never goes down, even when a snapshot missed some bytes ([`LiveSnapshot`]).
fn raise(shown: &mut LiveSnapshot, seen: &LiveSnapshot) {
    let max = |a: &mut u64, b: u64| *a = (*a).max(b);
    max(&mut shown.sent, seen.sent);
    max(&mut shown.ok, seen.ok);
    raise_counts(&mut shown.failures, &seen.failures);
    max(&mut shown.wire_sent_bytes, seen.wire_sent_bytes);
    max(&mut shown.wire_received_bytes, seen.wire_received_bytes);
    raise_latency(&mut shown.latency, &seen.latency);
    for r in &seen.by_request {
        match shown.by_request.iter_mut().find(|s| s.name == r.name) {
            Some(s) => {
                max(&mut s.sent, r.sent);
                max(&mut s.ok, r.ok);
                raise_counts(&mut s.failures, &r.failures);
                raise_latency(&mut s.latency, &r.latency);
            }
            None => shown.by_request.push(r.clone()),
        }
    }
}

fn raise_counts(shown: &mut Vec<u64>, seen: &[u64]) {
    if shown.len() < seen.len() {
        shown.resize(seen.len(), 0);
    }
    for (a, b) in shown.iter_mut().zip(seen) {
        *a = (*a).max(*b);
    }
}

fn raise_latency(shown: &mut LatencyBuckets, seen: &LatencyBuckets) {
    raise_counts(&mut shown.counts, &seen.counts);
    shown.count = shown.count.max(seen.count);
    shown.sum_us = shown.sum_us.max(seen.sum_us);
}

/// The latency histogram's bucket bounds, in seconds.
fn bounds_s() -> Vec<f64> {
    LATENCY_BUCKETS_US
        .iter()
        .map(|&us| us as f64 / 1e6)
        .collect()
}

impl Board {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the sampler keeps up to date while a cell measures
    /// ([`load::sampler::Sampler::start_with`]).
    pub fn readings(&self) -> Latest {
        self.readings.clone()
    }

    /// A cell starts (a cell measured again, as after an error, continues its series).
    pub fn begin_cell(&self, labels: CellLabels) {
        let mut state = self.state.lock().expect("board");
        let index = match state.cells.iter().position(|c| c.labels == labels) {
            Some(i) => i,
            None => {
                state.cells.push(Cell {
                    labels,
                    shown: LiveSnapshot::default(),
                });
                state.cells.len() - 1
            }
        };
        state.current = Some(Current {
            index,
            generators: Vec::new(),
            in_flight: None,
            connections_open: None,
            load_generators: None,
        });
        self.readings.clear();
    }

    /// Load generator `generator` of the cell's `generators` reports its figures so far.
    pub fn progress(&self, generator: usize, generators: usize, snapshot: LiveSnapshot) {
        let mut state = self.state.lock().expect("board");
        let State { cells, current, .. } = &mut *state;
        let Some(current) = current.as_mut() else {
            return;
        };
        if current.generators.len() < generators.max(generator + 1) {
            current
                .generators
                .resize(generators.max(generator + 1), None);
        }
        current.generators[generator] = Some(snapshot);
        let mut sum = LiveSnapshot::default();
        let mut open = Some(0);
        let mut sampled: Option<Reading> = None;
        for s in current.generators.iter().flatten() {
            sum.add(s);
            open = open.zip(s.connections_open).map(|(a, b)| a + b);
            if let Some(r) = s.load_generator {
                let total = sampled.get_or_insert(Reading {
                    rss_bytes: 0,
                    cpu_pct: 0.0,
                });
                total.rss_bytes += r.rss_bytes;
                total.cpu_pct += r.cpu_pct;
            }
        }
        current.in_flight = Some(sum.in_flight);
        current.connections_open = open;
        current.load_generators = sampled;
        raise(&mut cells[current.index].shown, &sum);
    }

    /// The cell is over: its counters show `last`, its results' figures, from now on
    /// (`None`: a cell that could not run keeps what it showed); its gauges go.
    pub fn end_cell(&self, last: Option<LiveSnapshot>) {
        let mut state = self.state.lock().expect("board");
        if let Some(current) = state.current.take() {
            if let Some(last) = last {
                state.cells[current.index].shown = last;
            }
            state.cells_finished += 1;
        }
        self.readings.clear();
    }

    /// The run is over: no cell measures any more, and what renders from now on is final.
    pub fn finish_run(&self) {
        self.state.lock().expect("board").current = None;
        self.readings.clear();
        self.over.store(true, Ordering::SeqCst);
    }

    /// The exposition, and whether it is final (rendered after [`Board::finish_run`]).
    pub fn render(&self) -> (String, bool) {
        let over = self.over.load(Ordering::SeqCst);
        let state = self.state.lock().expect("board");
        let mut readings: Vec<(Role, Reading)> = Vec::new();
        if let Some(current) = &state.current {
            for s in self.readings.get() {
                let reading = Reading {
                    rss_bytes: s.rss_bytes,
                    cpu_pct: s.cpu_pct,
                };
                readings.push((s.role, reading));
            }
            // Agents' load generators, sampled by their agents.
            if let Some(r) = current.load_generators {
                if !readings.iter().any(|(role, _)| *role == Role::Client) {
                    readings.push((Role::Client, r));
                }
            }
        }
        (render(&state, &readings), over)
    }
}

/// Every cell's series of one request family: the cell's figure, or with a mix one series per
/// request named (`request` label).
fn per_request<'a>(
    cell: &'a Cell,
    repetition: &'a str,
) -> Vec<(Vec<(&'static str, String)>, RequestView<'a>)> {
    let labels = cell.labels.pairs(repetition);
    if cell.shown.by_request.is_empty() {
        return vec![(
            labels,
            RequestView {
                sent: cell.shown.sent,
                ok: cell.shown.ok,
                failures: &cell.shown.failures,
                latency: &cell.shown.latency,
            },
        )];
    }
    cell.shown
        .by_request
        .iter()
        .map(|r| {
            let mut labels = labels.clone();
            labels.push(("request", r.name.clone()));
            (
                labels,
                RequestView {
                    sent: r.sent,
                    ok: r.ok,
                    failures: &r.failures,
                    latency: &r.latency,
                },
            )
        })
        .collect()
}

struct RequestView<'a> {
    sent: u64,
    ok: u64,
    failures: &'a [u64],
    latency: &'a LatencyBuckets,
}

fn borrowed<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn render(state: &State, readings: &[(Role, Reading)]) -> String {
    let mut e = Exposition::new();
    let reps: Vec<String> = state
        .cells
        .iter()
        .map(|c| c.labels.repetition.to_string())
        .collect();
    let series: Vec<_> = state
        .cells
        .iter()
        .zip(&reps)
        .map(|(c, rep)| per_request(c, rep))
        .collect();

    e.family(
        "tbench_cell_current",
        Kind::Gauge,
        "1 for the cell measuring now (its warm-up and measured phase); absent between cells.",
    );
    if let Some(current) = &state.current {
        let labels = state.cells[current.index]
            .labels
            .pairs(&reps[current.index]);
        e.sample("tbench_cell_current", &borrowed(&labels), 1u64);
    }
    e.family(
        "tbench_cells_finished_total",
        Kind::Counter,
        "Cells finished in this run (written to cells.csv, or could not run).",
    );
    e.sample("tbench_cells_finished_total", &[], state.cells_finished);

    e.family(
        "tbench_requests_sent_total",
        Kind::Counter,
        "Attempts with a recorded outcome in the cell's measured phase (cells.csv sent; with a mix, per request).",
    );
    for (labels, r) in series.iter().flatten() {
        e.sample("tbench_requests_sent_total", &borrowed(labels), r.sent);
    }
    e.family(
        "tbench_requests_ok_total",
        Kind::Counter,
        "Validated successes in the cell's measured phase (cells.csv ok; with a mix, per request).",
    );
    for (labels, r) in series.iter().flatten() {
        e.sample("tbench_requests_ok_total", &borrowed(labels), r.ok);
    }
    e.family(
        "tbench_requests_failed_total",
        Kind::Counter,
        "Failed attempts in the cell's measured phase by failure class (cells.csv fail_<class>).",
    );
    for (labels, r) in series.iter().flatten() {
        for (class, n) in FailureClass::ALL.iter().zip(r.failures) {
            let mut labels = borrowed(labels);
            labels.push(("class", class.as_str()));
            e.sample("tbench_requests_failed_total", &labels, *n);
        }
    }
    for (name, help, value) in [
        (
            "tbench_wire_sent_bytes_total",
            "Bytes the load generators sent at their sockets in the cell's measured phase (cells.csv wire_sent_bytes).",
            (|s: &LiveSnapshot| s.wire_sent_bytes) as fn(&LiveSnapshot) -> u64,
        ),
        (
            "tbench_wire_received_bytes_total",
            "Bytes the load generators received at their sockets in the cell's measured phase (cells.csv wire_received_bytes).",
            |s: &LiveSnapshot| s.wire_received_bytes,
        ),
    ] {
        e.family(name, Kind::Counter, help);
        for (cell, rep) in state.cells.iter().zip(&reps) {
            e.sample(name, &borrowed(&cell.labels.pairs(rep)), value(&cell.shown));
        }
    }
    e.family(
        "tbench_latency_seconds",
        Kind::Histogram,
        "Successful requests' latency in the cell's measured phase (cells.csv latency_*), in fixed buckets read from the cell's HdrHistogram.",
    );
    let bounds = bounds_s();
    for (labels, r) in series.iter().flatten() {
        e.histogram(
            "tbench_latency_seconds",
            &borrowed(labels),
            &bounds,
            &r.latency.cumulative(),
            r.latency.sum_us as f64 / 1e6,
        );
    }

    let Some(current) = &state.current else {
        return e.finish();
    };
    if let Some(n) = current.in_flight {
        e.family(
            "tbench_requests_in_flight",
            Kind::Gauge,
            "Requests of the current cell's measured phase handed to a worker, due and not answered yet.",
        );
        e.sample("tbench_requests_in_flight", &[], n);
    }
    if let Some(n) = current.connections_open {
        e.family(
            "tbench_connections_open",
            Kind::Gauge,
            "The current reuse cell's pooled connections open now (absent for new-conn cells).",
        );
        e.sample("tbench_connections_open", &[], n);
    }
    if !readings.is_empty() {
        e.family(
            "tbench_process_resident_memory_bytes",
            Kind::Gauge,
            "Resident set size of the current cell's server and load generators (summed over agents) at the sampler's latest reading.",
        );
        for (role, r) in readings {
            e.sample(
                "tbench_process_resident_memory_bytes",
                &[("role", role.as_str())],
                r.rss_bytes,
            );
        }
        e.family(
            "tbench_process_cpu_ratio",
            Kind::Gauge,
            "CPU time over wall time of the current cell's server and load generators (summed over agents) over the sampler's latest interval (1 = one core).",
        );
        for (role, r) in readings {
            e.sample(
                "tbench_process_cpu_ratio",
                &[("role", role.as_str())],
                r.cpu_pct / 100.0,
            );
        }
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bench_core::{Failure, Reply};
    use load::measurements::Measurements;

    use super::*;

    fn labels(level: &str) -> CellLabels {
        CellLabels {
            variant: "default".into(),
            stack: "h1".into(),
            regime: "reuse".into(),
            level: level.into(),
            repetition: 1,
        }
    }

    fn snapshot(sent: u64, ok: u64, wire: u64) -> LiveSnapshot {
        LiveSnapshot {
            sent,
            ok,
            wire_sent_bytes: wire,
            ..Default::default()
        }
    }

    /// The value of the one sample of `name` whose labels contain `with`.
    fn value(text: &str, name: &str, with: &str) -> Option<String> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .find(|l| l.contains(with))
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    }

    #[test]
    fn generators_add_up_and_counters_never_go_down() {
        let board = Board::new();
        board.begin_cell(labels("c10"));
        board.progress(0, 2, snapshot(10, 9, 1_000));
        board.progress(1, 2, snapshot(5, 5, 500));
        let (text, over) = board.render();
        assert!(!over);
        assert_eq!(
            value(&text, "tbench_requests_sent_total", "c10").unwrap(),
            "15"
        );
        assert_eq!(
            value(&text, "tbench_requests_ok_total", "c10").unwrap(),
            "14"
        );
        // A snapshot that missed a pooled connection's bytes does not lower the counter.
        board.progress(1, 2, snapshot(6, 6, 400));
        let (text, _) = board.render();
        assert_eq!(
            value(&text, "tbench_requests_sent_total", "c10").unwrap(),
            "16"
        );
        assert_eq!(
            value(&text, "tbench_wire_sent_bytes_total", "c10").unwrap(),
            "1500"
        );
        assert!(text.contains(
            "tbench_cell_current{variant=\"default\",stack=\"h1\",regime=\"reuse\",level=\"c10\",repetition=\"1\"} 1\n"
        ));
        assert_eq!(value(&text, "tbench_requests_in_flight", "").unwrap(), "0");
        assert_eq!(value(&text, "tbench_connections_open", ""), None, "unknown");
    }

    #[test]
    fn an_ended_cell_shows_its_results_and_keeps_them_while_the_next_runs() {
        let board = Board::new();
        board.begin_cell(labels("c10"));
        board.progress(0, 1, snapshot(3, 3, 10));
        let mut m = Measurements::default();
        for us in [80, 120, 3_000] {
            m.record_ok(Duration::from_micros(us), &Reply::default());
        }
        m.record_failure(Failure::new(FailureClass::RequestTimeout, "slow"));
        board.end_cell(Some(LiveSnapshot::of(&m)));
        board.begin_cell(labels("c50"));
        let (text, _) = board.render();
        assert_eq!(
            value(&text, "tbench_requests_sent_total", "c10").unwrap(),
            "4"
        );
        assert_eq!(
            value(&text, "tbench_requests_ok_total", "c10").unwrap(),
            "3"
        );
        assert_eq!(
            value(
                &text,
                "tbench_requests_failed_total",
                "class=\"request_timeout\""
            )
            .unwrap(),
            "1"
        );
        assert_eq!(
            value(
                &text,
                "tbench_requests_failed_total",
                "class=\"conn_reset\""
            )
            .unwrap(),
            "0"
        );
        assert_eq!(
            value(&text, "tbench_requests_sent_total", "c50").unwrap(),
            "0"
        );
        assert_eq!(
            value(&text, "tbench_latency_seconds_bucket", "le=\"0.0001\"").unwrap(),
            "1"
        );
        assert_eq!(
            value(&text, "tbench_latency_seconds_bucket", "le=\"0.005\"").unwrap(),
            "3"
        );
        assert_eq!(
            value(&text, "tbench_latency_seconds_count", "c10").unwrap(),
            "3"
        );
        assert_eq!(
            value(&text, "tbench_cells_finished_total", "").unwrap(),
            "1"
        );
        assert!(
            text.contains("level=\"c50\",repetition=\"1\"} 1\n"),
            "current"
        );
        board.end_cell(None);
        board.finish_run();
        let (text, over) = board.render();
        assert!(over);
        assert!(!text.contains("tbench_cell_current{"));
        assert!(!text.contains("tbench_requests_in_flight"));
        assert_eq!(
            value(&text, "tbench_cells_finished_total", "").unwrap(),
            "2"
        );
    }

    #[test]
    fn a_mix_has_a_series_per_request() {
        let board = Board::new();
        board.begin_cell(labels("c10"));
        let mut m = Measurements::default();
        let names = ["get".to_string(), "put \"x\"".to_string()];
        m.request_mut(0, &names)
            .record_ok(Duration::from_micros(100));
        m.record_ok(Duration::from_micros(100), &Reply::default());
        let f = Failure::new(FailureClass::BadStatus, "404");
        m.request_mut(1, &names).record_failure(&f);
        m.record_failure(f);
        board.end_cell(Some(LiveSnapshot::of(&m)));
        let (text, _) = board.render();
        assert_eq!(
            value(&text, "tbench_requests_sent_total", "request=\"get\"").unwrap(),
            "1"
        );
        assert_eq!(
            value(
                &text,
                "tbench_requests_failed_total",
                "request=\"put \\\"x\\\"\",class=\"bad_status\""
            )
            .unwrap(),
            "1"
        );
        // The cell's own figure is the sum over its requests, not a series beside them.
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("tbench_requests_sent_total{"))
                .count(),
            2
        );
        assert_eq!(
            value(&text, "tbench_wire_sent_bytes_total", "c10").unwrap(),
            "0"
        );
    }

    #[test]
    fn agents_readings_of_their_load_generators_add_up() {
        let board = Board::new();
        board.begin_cell(labels("c10"));
        for (i, rss) in [(0, 10_000_000), (1, 20_000_000)] {
            let mut s = snapshot(1, 1, 0);
            s.load_generator = Some(Reading {
                rss_bytes: rss,
                cpu_pct: 50.0,
            });
            board.progress(i, 2, s);
        }
        let (text, _) = board.render();
        assert_eq!(
            value(&text, "tbench_process_resident_memory_bytes", "client").unwrap(),
            "30000000"
        );
        assert_eq!(
            value(&text, "tbench_process_cpu_ratio", "client").unwrap(),
            "1"
        );
        assert_eq!(value(&text, "tbench_process_cpu_ratio", "server"), None);
    }

    #[test]
    fn resource_gauges_show_only_while_a_cell_measures() {
        let board = Board::new();
        board.begin_cell(labels("c10"));
        let latest = board.readings();
        // A sampler on this very process.
        let sampler = load::sampler::Sampler::start_with(
            None,
            Some(std::process::id()),
            Duration::from_millis(5),
            Some(latest),
        );
        std::thread::sleep(Duration::from_millis(30));
        let (text, _) = board.render();
        let rss: u64 = value(&text, "tbench_process_resident_memory_bytes", "client")
            .unwrap()
            .parse()
            .unwrap();
        assert!(rss > 1 << 20, "{rss}");
        assert!(value(&text, "tbench_process_cpu_ratio", "client").is_some());
        sampler.finish(Duration::from_millis(30));
        board.end_cell(None);
        let (text, _) = board.render();
        assert!(!text.contains("tbench_process_resident_memory_bytes"));
    }
}
