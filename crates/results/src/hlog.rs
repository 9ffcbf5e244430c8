//! `hlog/<cell>.hlog`: a cell's histograms as an HdrHistogram interval log, the format of
//! HdrHistogram's own `HistogramLogWriter` (one line per tagged interval: start, length, max,
//! then the histogram V2-deflate-compressed and base64-encoded), so that HdrHistogram's tools
//! (Java `HistogramLogProcessor`, Python `hdrh`) read what the runner measured, and so that
//! `runner merge` can add separately measured histograms exactly. Values are microseconds.
//!
//! One log per cell holds one interval, the measured phase: the `StartTime` and `BaseTime`
//! headers are its wall-clock start, each interval starts at 0 (relative to `BaseTime`) and
//! lasts the phase. Tags: `latency` and `ttfb` always, `connect`, `handshake`, `pacing_lag`
//! and `message_gap` (streaming calls) when they recorded anything.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context};
use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Three significant digits from 1 µs; the bucket array grows with the largest value recorded
/// (the runner clamps at 60 s), so a cell whose answers take milliseconds holds half the
/// memory of one sized for 60 s up front. Every histogram of the suite has this precision, so
/// adding two ([`Histogram::add`]) is exact, and [`decode`] refuses any other.
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid histogram bounds");
    h.auto(true);
    h
}

/// Each tag's histogram, in the order of [`TAGS`]: what a log is written from.
pub type Tagged<'a> = [(&'static str, &'a Histogram<u64>); 6];

/// The folder of a results directory that holds the `.hlog` files.
pub const DIR: &str = "hlog";

/// The tags a log may hold, each naming one histogram of a cell's measurements.
pub const TAGS: [&str; 6] = [
    "latency",
    "ttfb",
    "connect",
    "handshake",
    "pacing_lag",
    "message_gap",
];

/// Tags written even when their histogram is empty (a cell whose every request failed).
const ALWAYS: [&str; 2] = ["latency", "ttfb"];

/// `h1/reuse/c10/r1` → `h1_reuse_c10_r1.hlog`. Key parts never contain `/` or `_` except a
/// variant's name, which comes first, so two cells of a run never share a file name.
pub fn file_name(cell_key: &str) -> String {
    format!("{}.hlog", stem(cell_key))
}

/// The log of one load generator of a cell that several ran: `<cell>.agent-<i>.hlog`, next
/// to the cell's merged `<cell>.hlog` (reserved: written by the runner's agents).
pub fn agent_file_name(cell_key: &str, agent: usize) -> String {
    format!("{}.agent-{agent}.hlog", stem(cell_key))
}

/// A cell's key as the start of its log files' names.
pub fn stem(cell_key: &str) -> String {
    cell_key.replace('/', "_")
}

/// Where the log of `cell_key` is in the results directory `dir`.
pub fn path(dir: &Path, cell_key: &str) -> PathBuf {
    dir.join(DIR).join(file_name(cell_key))
}

/// The measured phase in wall-clock time (this host's clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Seconds since the Unix epoch.
    pub start_unix_s: f64,
    pub duration_s: f64,
}

/// The histograms of one log, by tag (empty for a tag the log does not have), and the window
/// its intervals cover.
#[derive(Debug, Clone)]
pub struct Histograms {
    pub latency: Histogram<u64>,
    pub ttfb: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub handshake: Histogram<u64>,
    pub pacing_lag: Histogram<u64>,
    pub message_gap: Histogram<u64>,
    /// From the earliest interval start to the latest interval end; `None` without intervals.
    pub window: Option<Window>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            latency: histogram(),
            ttfb: histogram(),
            connect: histogram(),
            handshake: histogram(),
            pacing_lag: histogram(),
            message_gap: histogram(),
            window: None,
        }
    }
}

impl Histograms {
    fn slot(&mut self, tag: &str) -> Option<&mut Histogram<u64>> {
        Some(match tag {
            "latency" => &mut self.latency,
            "ttfb" => &mut self.ttfb,
            "connect" => &mut self.connect,
            "handshake" => &mut self.handshake,
            "pacing_lag" => &mut self.pacing_lag,
            "message_gap" => &mut self.message_gap,
            _ => return None,
        })
    }

    /// The histogram of `tag`; `None` for a tag not in [`TAGS`].
    pub fn get(&self, tag: &str) -> Option<&Histogram<u64>> {
        Some(match tag {
            "latency" => &self.latency,
            "ttfb" => &self.ttfb,
            "connect" => &self.connect,
            "handshake" => &self.handshake,
            "pacing_lag" => &self.pacing_lag,
            "message_gap" => &self.message_gap,
            _ => return None,
        })
    }

    /// The histograms by tag, in the order of [`TAGS`].
    pub fn tagged(&self) -> Tagged<'_> {
        tagged([
            &self.latency,
            &self.ttfb,
            &self.connect,
            &self.handshake,
            &self.pacing_lag,
            &self.message_gap,
        ])
    }
}

/// Six histograms given in the order of [`TAGS`], each with its tag: the one pairing of tags
/// and histograms, for [`Histograms`] and for the runner's measurements alike.
pub fn tagged(histograms: [&Histogram<u64>; 6]) -> Tagged<'_> {
    std::array::from_fn(|i| (TAGS[i], histograms[i]))
}

fn duration(seconds: f64) -> Duration {
    if seconds.is_finite() && seconds > 0.0 {
        Duration::from_secs_f64(seconds)
    } else {
        Duration::ZERO
    }
}

/// The interval log of one cell's measured phase.
pub fn encode(cell_key: &str, m: Tagged<'_>, window: Window) -> anyhow::Result<Vec<u8>> {
    let start = UNIX_EPOCH + duration(window.start_unix_s);
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(&format!(
            "transport-bench cell {cell_key}: the measured phase (warm-up excluded), one interval per histogram"
        ))
        .add_comment(
            "values in microseconds (1 us to 60 s, 3 significant digits); tags: latency, ttfb, connect, handshake, pacing_lag, message_gap (docs/results-schema.md)",
        )
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(&mut out, &mut serializer)?;
    for (tag, h) in m {
        if h.is_empty() && !ALWAYS.contains(&tag) {
            continue;
        }
        log.write_histogram(
            h,
            Duration::ZERO,
            duration(window.duration_s),
            Tag::new(tag),
        )
        .map_err(|e| anyhow!("cannot encode the {tag} histogram of {cell_key}: {e}"))?;
    }
    drop(log);
    Ok(out)
}

/// Writes the log of `cell_key` into `dir/hlog/` (whole or not at all) and returns its path.
pub fn write(dir: &Path, cell_key: &str, m: Tagged<'_>, window: Window) -> anyhow::Result<PathBuf> {
    write_named(dir, &file_name(cell_key), cell_key, m, window)
}

/// Writes the log of agent `agent` (1-based) of `cell_key` next to the cell's merged log.
pub fn write_agent(
    dir: &Path,
    cell_key: &str,
    agent: usize,
    m: Tagged<'_>,
    window: Window,
) -> anyhow::Result<PathBuf> {
    write_named(dir, &agent_file_name(cell_key, agent), cell_key, m, window)
}

fn write_named(
    dir: &Path,
    name: &str,
    cell_key: &str,
    m: Tagged<'_>,
    window: Window,
) -> anyhow::Result<PathBuf> {
    let folder = dir.join(DIR);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let path = folder.join(name);
    let tmp = path.with_extension("hlog.tmp");
    std::fs::write(&tmp, encode(cell_key, m, window)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Reads an interval log: each tagged interval's histogram is added to its tag's (intervals
/// with the same tag add up; unknown tags are skipped). Refuses histograms of another
/// precision than the suite's, which could not be added exactly.
pub fn decode(bytes: &[u8]) -> anyhow::Result<Histograms> {
    let mut out = Histograms::default();
    let mut deserializer = Deserializer::new();
    let (mut start_time, mut base_time) = (None::<Duration>, None::<Duration>);
    let mut span: Option<(f64, f64)> = None;
    for entry in IntervalLogIterator::new(bytes) {
        let interval = match entry {
            Ok(LogEntry::StartTime(t)) => {
                start_time = Some(t);
                continue;
            }
            Ok(LogEntry::BaseTime(t)) => {
                base_time = Some(t);
                continue;
            }
            Ok(LogEntry::Interval(i)) => i,
            Err(e) => bail!("not an interval log ({e:?})"),
        };
        let Some(tag) = interval.tag() else {
            bail!(
                "an interval without a tag (expected one of {})",
                TAGS.join(", ")
            );
        };
        let tag = tag.as_str().to_string();
        let Some(slot) = out.slot(&tag) else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .with_context(|| format!("the {tag} histogram is not base64"))?;
        let h: Histogram<u64> = deserializer
            .deserialize(&mut raw.as_slice())
            .with_context(|| format!("the {tag} histogram cannot be decoded"))?;
        let suite = histogram();
        if h.low() != suite.low() || h.sigfig() != suite.sigfig() {
            bail!(
                "the {tag} histogram has lowest value {} and {} significant digits, not the suite's {} and {}: it cannot be added exactly",
                h.low(),
                h.sigfig(),
                suite.low(),
                suite.sigfig()
            );
        }
        slot.add(&h)
            .map_err(|e| anyhow!("cannot add the {tag} histogram: {e}"))?;
        // Java's HistogramLogReader: without BaseTime, timestamps more than a year before
        // StartTime are relative to it, others are absolute.
        let base = base_time.unwrap_or_else(|| match start_time {
            Some(s) if interval.start_timestamp() + Duration::from_secs(365 * 24 * 3600) < s => s,
            _ => Duration::ZERO,
        });
        let begin = (base + interval.start_timestamp()).as_secs_f64();
        let end = begin + interval.duration().as_secs_f64();
        span = Some(match span {
            Some((b, e)) => (b.min(begin), e.max(end)),
            None => (begin, end),
        });
    }
    out.window = span.map(|(begin, end)| Window {
        start_unix_s: begin,
        duration_s: end - begin,
    });
    Ok(out)
}

/// [`decode`] of a file, its errors naming the file.
pub fn read(path: &Path) -> anyhow::Result<Histograms> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    decode(&bytes).with_context(|| format!("{}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_follow_the_cell_key() {
        assert_eq!(file_name("h1/reuse/c10/r1"), "h1_reuse_c10_r1.hlog");
        assert_eq!(
            file_name("no-tickets/h3/new-conn/baseline/r2"),
            "no-tickets_h3_new-conn_baseline_r2.hlog"
        );
        assert_eq!(
            agent_file_name("h1/reuse/c10/r1", 3),
            "h1_reuse_c10_r1.agent-3.hlog"
        );
    }

    #[test]
    fn a_cell_without_successes_logs_empty_latency_and_ttfb() {
        let window = Window {
            start_unix_s: 1_764_000_000.0,
            duration_s: 0.5,
        };
        let text = encode("h3/new-conn/c1/r1", Histograms::default().tagged(), window).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text.matches("\nTag=").count(), 2, "{text}");
        let back = decode(text.as_bytes()).unwrap();
        assert!(back.latency.is_empty() && back.ttfb.is_empty());
        assert_eq!(back.window, Some(window));
    }

    #[test]
    fn foreign_precision_and_garbage_are_refused() {
        let mut coarse = Histogram::<u64>::new_with_bounds(1, 1_000_000, 2).unwrap();
        coarse.record(500).unwrap();
        let mut out = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        IntervalLogWriterBuilder::new()
            .begin_log_with(&mut out, &mut serializer)
            .unwrap()
            .write_histogram(
                &coarse,
                Duration::ZERO,
                Duration::from_secs(1),
                Tag::new("latency"),
            )
            .unwrap();
        let e = decode(&out).unwrap_err().to_string();
        assert!(e.contains("2 significant digits"), "{e}");
        assert!(decode(b"cell_key,class\nx,y\n").is_err());
    }
}
