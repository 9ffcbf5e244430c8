//! Small inline-SVG line charts for the HTML report: no scripts, no fonts to fetch, readable in
//! black and white (each series has its own marker shape and dash pattern).

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    pub label: String,
    /// Its place in [`PALETTE`]: the stack's registry position, so a stack keeps its colour,
    /// marker and dash in every chart, whichever other stacks are drawn.
    pub style: usize,
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 560.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// One series' look: colour, dash pattern and marker shape (an index into [`marker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub colour: &'static str,
    pub dash: &'static str,
    pub marker: usize,
}

/// Series styles by registry position; wraps around beyond its length. Colours, dashes and
/// markers each differ between neighbours, so the charts read in black and white.
pub const PALETTE: [Style; 8] = [
    Style {
        colour: "#1f4e79",
        dash: "",
        marker: 0,
    },
    Style {
        colour: "#c55a11",
        dash: "6 3",
        marker: 1,
    },
    Style {
        colour: "#548235",
        dash: "2 3",
        marker: 2,
    },
    Style {
        colour: "#7030a0",
        dash: "8 3 2 3",
        marker: 3,
    },
    Style {
        colour: "#b8860b",
        dash: "10 4",
        marker: 4,
    },
    Style {
        colour: "#008b8b",
        dash: "4 2 1 2",
        marker: 5,
    },
    Style {
        colour: "#a0304a",
        dash: "1 2",
        marker: 0,
    },
    Style {
        colour: "#555555",
        dash: "12 3 3 3",
        marker: 1,
    },
];

/// The style of the series at registry position `i`.
pub fn style(i: usize) -> Style {
    PALETTE[i % PALETTE.len()]
}

fn marker(i: usize, x: f64, y: f64, colour: &str) -> String {
    match i % 6 {
        0 => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{colour}"/>"#),
        1 => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{colour}"/>"#,
            x - 3.5,
            y - 3.5
        ),
        2 => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{colour}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 3.5,
            x - 4.5,
            y + 3.5
        ),
        3 => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="{colour}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 4.5,
            x - 4.5
        ),
        // A downward triangle.
        4 => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{colour}"/>"#,
            y + 4.5,
            x + 4.5,
            y - 3.5,
            x - 4.5,
            y - 3.5
        ),
        // A cross.
        _ => format!(
            r#"<path d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="{colour}" stroke-width="2.5"/>"#,
            x - 4.0,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0,
            y + 4.0,
            x + 4.0,
            y - 4.0
        ),
    }
}

/// "Nice" tick values covering `lo..hi`.
pub(crate) fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    // From the step at or below `lo` to the first step at or above `hi`, so nothing is clipped.
    let first = (lo / step).floor() as i64;
    let last = (hi / step - 1e-9).ceil().max(first as f64 + 1.0) as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

pub(crate) fn fmt_tick(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart; `log_x` spaces the x axis logarithmically (concurrency sweeps).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> String {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{title}"><title>{title}</title><rect width="{W}" height="{H}" fill="white"/><text x="{}" y="18" text-anchor="middle" font-size="14" font-family="sans-serif">{title}</text>"#,
        (W - RIGHT + LEFT) / 2.0
    );
    if xs.is_empty() {
        svg.push_str("</svg>");
        return svg;
    }
    let tx = |x: f64| if log_x { x.max(1e-9).ln() } else { x };
    let (x0, x1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), x| {
        (a.min(tx(*x)), b.max(tx(*x)))
    });
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    let y1 = ys.iter().cloned().fold(0.0, f64::max);
    let y_ticks = ticks(0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 });
    let y_top = *y_ticks.last().expect("at least one tick");
    let px = |x: f64| LEFT + (tx(x) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / y_top * (H - TOP - BOTTOM);
    for t in &y_ticks {
        let y = py(*t);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" font-family="sans-serif">{}</text>"##,
            W - RIGHT,
            LEFT - 4.0,
            y + 3.0,
            fmt_tick(*t)
        );
    }
    let mut x_values: Vec<f64> = xs.clone();
    x_values.sort_by(f64::total_cmp);
    x_values.dedup();
    for x in &x_values {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" font-family="sans-serif">{}</text>"#,
            px(*x),
            H - BOTTOM + 14.0,
            fmt_tick(*x)
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b:.1}" stroke="#333"/><text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11" font-family="sans-serif">{x_label}</text><text transform="translate(14 {cy:.1}) rotate(-90)" text-anchor="middle" font-size="11" font-family="sans-serif">{y_label}</text>"##,
        H - 8.0,
        b = H - BOTTOM,
        r = W - RIGHT,
        cx = (W - RIGHT + LEFT) / 2.0,
        cy = (H - BOTTOM + TOP) / 2.0,
    );
    for (i, s) in series.iter().enumerate() {
        let look = style(s.style);
        let colour = look.colour;
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{}"/>"#,
            points.join(" "),
            look.dash
        );
        for (x, y) in &s.points {
            svg.push_str(&marker(look.marker, px(*x), py(*y), colour));
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
            s.label
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_a_line_and_legend_per_series() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[
                Series {
                    label: "A".into(),
                    style: 0,
                    points: vec![(10.0, 1.0), (100.0, 3.0)],
                },
                Series {
                    label: "B".into(),
                    style: 1,
                    points: vec![(10.0, 2.0), (100.0, 0.5)],
                },
            ],
            true,
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">A</text>") && svg.contains(">B</text>"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }
}

#[cfg(test)]
mod palette_tests {
    use super::*;

    #[test]
    fn the_first_six_styles_differ_in_colour_dash_and_marker() {
        let first: Vec<Style> = (0..6).map(style).collect();
        for (i, a) in first.iter().enumerate() {
            for b in &first[i + 1..] {
                assert_ne!(a.colour, b.colour);
                assert_ne!(a.dash, b.dash);
                assert_ne!(a.marker, b.marker);
            }
        }
    }
}

#[cfg(test)]
mod tick_tests {
    use super::ticks;

    #[test]
    fn ticks_cover_the_maximum() {
        for hi in [0.9, 1.0, 996.0, 1000.0, 12_345.0] {
            let t = ticks(0.0, hi);
            assert!(*t.last().unwrap() >= hi, "{hi}: {t:?}");
            assert_eq!(t[0], 0.0);
            assert!(t.len() <= 8, "{hi}: {t:?}");
        }
    }
}
