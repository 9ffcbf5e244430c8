//! Prometheus's text exposition format, version 0.0.4 (what every Prometheus server reads):
//! per metric family a `# HELP` and a `# TYPE` line, then its samples, one per line,
//! `name{label="value",…} value`. Label values escape `\`, `"` and newlines; help text escapes
//! `\` and newlines. Counters' and gauges' integer values are written exactly; other values
//! as the shortest decimal that reads back to the same `f64`, infinities as `+Inf`/`-Inf`.

use std::fmt::Write;

/// The `Content-Type` of a text exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count, written exactly (an `f64` holds integers exactly only up to 2^53).
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// Writes a number as the format has it.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        // Rust's shortest round-trip form, never in exponent notation: Go's ParseFloat (and
        // so Prometheus) reads it back to the same value.
        format!("{v}")
    }
}

/// A name the format allows: `[a-zA-Z_:][a-zA-Z0-9_:]*` for metrics, without `:` for labels.
fn valid_name(name: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic() || c == '_' || (colon && c == ':') || (!first && c.is_ascii_digit())
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

/// One exposition, built family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the family `name`: its help and type. Every sample of the family follows
    /// before the next family starts.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(valid_name(name, true), "metric name {name}");
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
    }

    /// One sample of the current family (`name` carries a histogram's `_bucket`, `_sum` or
    /// `_count` suffix).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        debug_assert!(valid_name(name, true), "metric name {name}");
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                debug_assert!(valid_name(label, false), "label name {label}");
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(label);
                self.out.push_str("=\"");
                for c in value.chars() {
                    match c {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        match value.into() {
            Value::Int(v) => {
                let _ = write!(self.out, "{v}");
            }
            Value::Float(v) => self.out.push_str(&number(v)),
        }
        self.out.push('\n');
    }

    /// A histogram's samples: a cumulative count at each upper bound `bounds` (in the
    /// family's unit), then at `+Inf` (the last of `cumulative`, which has one more element
    /// than `bounds`), the sum and the count.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        sum: f64,
    ) {
        assert_eq!(
            cumulative.len(),
            bounds.len() + 1,
            "a count per bound, and +Inf"
        );
        let bucket = format!("{name}_bucket");
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        let les: Vec<String> = bounds
            .iter()
            .map(|b| number(*b))
            .chain(std::iter::once("+Inf".to_string()))
            .collect();
        for (le, count) in les.iter().zip(cumulative) {
            with_le.push(("le", le));
            self.sample(&bucket, &with_le, *count);
            with_le.pop();
        }
        let count = *cumulative.last().expect("+Inf");
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, count);
    }

    /// The exposition's text.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escapes_are_as_the_format_has_them() {
        let mut e = Exposition::new();
        e.family(
            "tbench_requests_sent_total",
            Kind::Counter,
            "Requests sent.\nA back\\slash.",
        );
        e.sample(
            "tbench_requests_sent_total",
            &[("stack", "h1"), ("request", "say \"hi\"\\\nnow")],
            18_446_744_073_709_551_615u64,
        );
        e.family("tbench_up", Kind::Gauge, "Up.");
        e.sample("tbench_up", &[], 1u64);
        e.sample("tbench_up", &[("x", "")], 0.25);
        assert_eq!(
            e.finish(),
            "# HELP tbench_requests_sent_total Requests sent.\\nA back\\\\slash.\n\
             # TYPE tbench_requests_sent_total counter\n\
             tbench_requests_sent_total{stack=\"h1\",request=\"say \\\"hi\\\"\\\\\\nnow\"} 18446744073709551615\n\
             # HELP tbench_up Up.\n\
             # TYPE tbench_up gauge\n\
             tbench_up 1\n\
             tbench_up{x=\"\"} 0.25\n"
        );
    }

    #[test]
    fn numbers_read_back_exactly_and_never_in_exponent_form() {
        for v in [0.00005, 0.0001, 2.5, 1e-9, 1e21, 123456789.125, 0.1 + 0.2] {
            let text = number(v);
            assert!(!text.contains('e'), "{text}");
            assert_eq!(text.parse::<f64>().unwrap(), v, "{text}");
        }
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(3.0), "3");
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_then_sum_and_count() {
        let mut e = Exposition::new();
        e.family("lat_seconds", Kind::Histogram, "Latency.");
        e.histogram(
            "lat_seconds",
            &[("cell", "a")],
            &[0.001, 0.5],
            &[2, 5, 7],
            1.5,
        );
        assert_eq!(
            e.finish(),
            "# HELP lat_seconds Latency.\n\
             # TYPE lat_seconds histogram\n\
             lat_seconds_bucket{cell=\"a\",le=\"0.001\"} 2\n\
             lat_seconds_bucket{cell=\"a\",le=\"0.5\"} 5\n\
             lat_seconds_bucket{cell=\"a\",le=\"+Inf\"} 7\n\
             lat_seconds_sum{cell=\"a\"} 1.5\n\
             lat_seconds_count{cell=\"a\"} 7\n"
        );
    }

    #[test]
    fn names_outside_the_format_are_caught() {
        assert!(valid_name("tbench_a:b_total", true));
        assert!(valid_name("_x9", false));
        assert!(!valid_name("9x", true));
        assert!(!valid_name("a:b", false));
        assert!(!valid_name("a-b", true));
        assert!(!valid_name("", true));
    }
}
