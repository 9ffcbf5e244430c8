//! The latency–throughput curve of a rate sweep in the report: per variant, regime and level,
//! latency (p50, p99, p99.9; log scale) against achieved throughput, one line per stack in its
//! registry style, each point's offered rate in its tooltip and in the table below, the knee
//! ([`results::curve::knee`]) ringed.

use std::fmt::Write as _;

use crate::chart::{self, fmt_tick, marker, style};
use crate::label;
use results::curve::{self, KNEE_ACHIEVED_SHARE, KNEE_P99_FACTOR};
use results::rows::CellRow;
use results::rows::CurveRow;

const W: f64 = 560.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// The percentiles drawn: column title, and how to read it from a point.
type Percentile = (&'static str, fn(&CurveRow) -> f64);
const PERCENTILES: [Percentile; 3] = [
    ("p50", |p| p.latency_p50_us),
    ("p99", |p| p.latency_p99_us),
    ("p99.9", |p| p.latency_p999_us),
];

/// Powers of ten (and 2×, 5×) covering `lo..hi` for a log axis.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi * 1.0001 {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo / 1.0001 && v <= hi * 1.0001 {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// One chart: `percentile` latency (ms, log) against achieved req/s, one line per stack.
fn chart(title: &str, percentile: usize, curves: &[(&Vec<CurveRow>, usize)]) -> String {
    let (name, value) = PERCENTILES[percentile];
    let points: Vec<(f64, f64)> = curves
        .iter()
        .flat_map(|(c, _)| c.iter().map(|p| (p.achieved_rps, value(p) / 1000.0)))
        .collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{title}"><title>{title}</title><rect width="{W}" height="{H}" fill="white"/><text x="{}" y="18" text-anchor="middle" font-size="14" font-family="sans-serif">{title}</text>"#,
        (W - RIGHT + LEFT) / 2.0
    );
    let x_top = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.05;
    let x_ticks = chart::ticks(0.0, x_top);
    let x_top = *x_ticks.last().expect("a tick");
    // Latencies of at least 1 µs, so the log axis is defined.
    let y_lo = points
        .iter()
        .map(|p| p.1)
        .fold(f64::MAX, f64::min)
        .max(0.001);
    let y_hi = points
        .iter()
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(y_lo * 10.0);
    let (l0, l1) = (
        10f64.powf(y_lo.log10().floor()),
        10f64.powf(y_hi.log10().ceil()),
    );
    let px = |x: f64| LEFT + x / x_top * (W - LEFT - RIGHT);
    let py = |y: f64| {
        let f = (y.max(l0).ln() - l0.ln()) / (l1.ln() - l0.ln());
        H - BOTTOM - f * (H - TOP - BOTTOM)
    };
    for t in log_ticks(l0, l1) {
        let y = py(t);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" font-family="sans-serif">{}</text>"##,
            W - RIGHT,
            LEFT - 4.0,
            y + 3.0,
            if t < 1.0 { format!("{t}") } else { fmt_tick(t) }
        );
    }
    chart::x_ticks_and_axes(
        &mut svg,
        &x_ticks,
        px,
        "achieved throughput (req/s)",
        &format!("{name} latency (ms, log)"),
    );
    for (i, (points, style_index)) in curves.iter().enumerate() {
        let look = style(*style_index);
        let colour = look.colour;
        let line: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.achieved_rps), py(value(p) / 1000.0)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{}"/>"#,
            line.join(" "),
            look.dash
        );
        for p in points.iter() {
            let (x, y) = (px(p.achieved_rps), py(value(p) / 1000.0));
            let _ = write!(
                svg,
                "<g><title>{}: offered {} req/s, achieved {:.0} req/s, {name} {:.3} ms{}</title>{}",
                label(&p.stack),
                results::rows::rate_key(p.offered_rps),
                p.achieved_rps,
                value(p) / 1000.0,
                if p.knee { " (knee)" } else { "" },
                marker(look.marker, x, y, colour)
            );
            if p.knee {
                let _ = write!(
                    svg,
                    r#"<circle class="knee" cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="{colour}" stroke-width="1.5"/>"#
                );
            }
            svg.push_str("</g>");
        }
        let ly = TOP + 10.0 + i as f64 * 18.0;
        let lx = W - RIGHT + 12.0;
        let _ = write!(
            svg,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{}"/>{}<text x="{:.1}" y="{:.1}" font-size="11" font-family="sans-serif">{}</text>"#,
            lx + 26.0,
            look.dash,
            marker(look.marker, lx + 13.0, ly, colour),
            lx + 32.0,
            ly + 4.0,
            label(&points[0].stack)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The report's "Latency–throughput curve" section; empty without a rate sweep.
pub fn section(cells: &[CellRow]) -> String {
    let curves = curve::curves(cells);
    if curves.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = crate::stack_order(&cells.iter().collect::<Vec<_>>());
    // Panels: (variant, regime, level), in first-seen order.
    let mut panels: Vec<(String, String, u32)> = Vec::new();
    for c in &curves {
        let p = (c[0].variant.clone(), c[0].regime.clone(), c[0].concurrency);
        if !panels.contains(&p) {
            panels.push(p);
        }
    }
    let mut html =
        String::from("<section id=\"curve\">\n<h2>Latency–throughput curve (rate sweep)</h2>\n");
    let _ = writeln!(
        html,
        "<p class=\"table-note\">Open loop at each offered rate; latency from each request's scheduled start (no coordinated omission), against the successes per second achieved; means over repetitions, from curve.csv. Ringed: the knee, the last point from the lowest rate up whose p99 stays within {KNEE_P99_FACTOR}× the p99 at the lowest rate and which achieves at least {:.0} % of its offered rate, when a later point breaks that.</p>",
        KNEE_ACHIEVED_SHARE * 100.0
    );
    for (variant, regime, level) in &panels {
        let mine: Vec<&Vec<CurveRow>> = curves
            .iter()
            .filter(|c| {
                &c[0].variant == variant && &c[0].regime == regime && c[0].concurrency == *level
            })
            .collect();
        let mut sorted: Vec<(&Vec<CurveRow>, usize)> = mine
            .iter()
            .map(|c| (*c, chart::palette_index(&c[0].stack, &shown)))
            .collect();
        sorted.sort_by_key(|(_, s)| *s);
        let mut title = format!("{regime}, c = {level}");
        if variant != "default" {
            title = format!("{title} ({variant})");
        }
        html.push_str("<div class=\"charts\">\n");
        for (i, (name, _)) in PERCENTILES.iter().enumerate() {
            let _ = writeln!(
                html,
                "<figure>{}</figure>",
                chart(&format!("{name} vs throughput — {title}"), i, &sorted)
            );
        }
        html.push_str("</div>\n<table>\n<tr><th>Stack</th><th>Offered (req/s)</th><th>Achieved (req/s)</th><th>p50 (ms)</th><th>p99 (ms)</th><th>p99.9 (ms)</th><th>Success</th><th>Late</th><th>Pacing lag p99 (µs)</th><th>n</th><th>Knee</th></tr>\n");
        for (points, _) in &sorted {
            for p in points.iter() {
                let _ = writeln!(
                    html,
                    "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.4}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    label(&p.stack),
                    results::rows::rate_key(p.offered_rps),
                    p.achieved_rps,
                    p.latency_p50_us / 1000.0,
                    p.latency_p99_us / 1000.0,
                    p.latency_p999_us / 1000.0,
                    p.success_rate,
                    p.late,
                    p.pacing_lag_p99_us.map_or("—".into(), |v| v.to_string()),
                    p.repetitions,
                    if p.knee { "knee" } else { "" }
                );
            }
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n");
    html
}
