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

/// A stack's place in [`PALETTE`]: its registry position as the run recorded it; stacks the
/// run did not record (older runs) follow the recorded ones in the order `shown` lists them.
pub fn palette_index(stack: &str, shown: &[String]) -> usize {
    let names = crate::labels::names();
    names.iter().position(|n| n == stack).unwrap_or_else(|| {
        names.len()
            + shown
                .iter()
                .filter(|s| !names.contains(s))
                .position(|s| s == stack)
                .unwrap_or(0)
    })
}

pub(crate) fn marker(i: usize, x: f64, y: f64, colour: &str) -> String {
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

/// The x ticks' labels under the plot, both axes and their labels: the same on every chart.
pub(crate) fn x_ticks_and_axes(
    svg: &mut String,
    x_ticks: &[f64],
    px: impl Fn(f64) -> f64,
    x_label: &str,
    y_label: &str,
) {
    for x in x_ticks {
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

/// What the y axis holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YAxis {
    /// From 0 to just above the largest value.
    Auto,
    /// Percentages: from 0 to just above the largest value but never past 100, 0–100 when
    /// every value is 0, each tick labelled with `%`.
    Percent,
}

/// A line chart; `log_x` spaces the x axis logarithmically (concurrency sweeps).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> String {
    line_chart_on(title, x_label, y_label, series, log_x, YAxis::Auto)
}

/// A line chart whose y axis holds `axis`.
pub fn line_chart_on(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
    axis: YAxis,
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
    let y_ticks = match axis {
        YAxis::Auto => ticks(0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 }),
        YAxis::Percent => ticks(
            0.0,
            if y1 > 0.0 {
                (y1 * 1.05).min(100.0)
            } else {
                100.0
            },
        ),
    };
    let tick_text = |t: f64| match axis {
        YAxis::Auto => fmt_tick(t),
        YAxis::Percent => format!("{} %", fmt_tick(t)),
    };
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
            tick_text(*t)
        );
    }
    let mut x_values: Vec<f64> = xs.clone();
    x_values.sort_by(f64::total_cmp);
    x_values.dedup();
    x_ticks_and_axes(&mut svg, &x_values, px, x_label, y_label);
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

/// One bar of a [`delta_chart`]: the relative change of a mean and, when tested, the 95 %
/// interval of the difference relative to the base mean; filled when significant, outlined
/// when not.
pub struct Bar {
    /// Where along x (the concurrency).
    pub group: String,
    /// The legend's name (the stack).
    pub series: String,
    /// Its place in [`PALETTE`], as for [`Series::style`].
    pub style: usize,
    pub pct: f64,
    pub ci_pct: Option<(f64, f64)>,
    pub significant: bool,
}

/// A bar chart of relative changes around a zero line: groups (concurrency) along x, one bar
/// per series (stack), whiskers for the interval. Inline SVG like the report's charts.
pub fn delta_chart(title: &str, bars: &[Bar]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{title}"><title>{title}</title><rect width="{W}" height="{H}" fill="white"/><text x="{}" y="18" text-anchor="middle" font-size="14" font-family="sans-serif">{title}</text>"#,
        (W - RIGHT + LEFT) / 2.0
    );
    if bars.is_empty() {
        svg.push_str("</svg>");
        return svg;
    }
    let mut groups: Vec<&str> = Vec::new();
    let mut series: Vec<(&str, usize)> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !series.iter().any(|(s, _)| *s == b.series) {
            series.push((&b.series, b.style));
        }
    }
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for b in bars {
        let (l, h) = b.ci_pct.unwrap_or((b.pct, b.pct));
        lo = lo.min(l.min(b.pct));
        hi = hi.max(h.max(b.pct));
    }
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let ticks = ticks(lo, hi);
    let (y0, y1) = (ticks[0], *ticks.last().expect("at least one tick"));
    let py = |v: f64| H - BOTTOM - (v - y0) / (y1 - y0) * (H - TOP - BOTTOM);
    let plot_w = W - LEFT - RIGHT;
    for t in &ticks {
        let y = py(*t);
        let stroke = if t.abs() < 1e-12 { "#333" } else { "#ddd" };
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" font-family="sans-serif">{}%</text>"#,
            W - RIGHT,
            LEFT - 4.0,
            y + 3.0,
            fmt_tick(*t)
        );
    }
    let group_w = plot_w / groups.len() as f64;
    let bar_w = (group_w * 0.8 / series.len() as f64).min(40.0);
    for (gi, g) in groups.iter().enumerate() {
        let gx = LEFT + gi as f64 * group_w;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" font-family="sans-serif">{g}</text>"#,
            gx + group_w / 2.0,
            H - BOTTOM + 14.0
        );
        let start = gx + (group_w - bar_w * series.len() as f64) / 2.0;
        for b in bars.iter().filter(|b| b.group == *g) {
            let si = series
                .iter()
                .position(|(s, _)| *s == b.series)
                .expect("listed");
            let colour = style(b.style).colour;
            let x = start + si as f64 * bar_w;
            let (top, bottom) = (py(b.pct.max(0.0)), py(b.pct.min(0.0)));
            let fill = if b.significant { colour } else { "white" };
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{}: {:+.1} %{}</title></rect>"#,
                x + 1.0,
                bar_w - 2.0,
                (bottom - top).max(0.5),
                b.series,
                b.pct,
                if b.significant { ", significant" } else { "" }
            );
            if let Some((l, h)) = b.ci_pct {
                let cx = x + bar_w / 2.0;
                let _ = write!(
                    svg,
                    r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/>"##,
                    py(l),
                    py(h),
                    cx - 3.0,
                    py(l),
                    cx + 3.0,
                    py(l),
                    cx - 3.0,
                    py(h),
                    cx + 3.0,
                    py(h)
                );
            }
        }
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b:.1}" stroke="#333"/><text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11" font-family="sans-serif">concurrent users</text><text transform="translate(14 {cy:.1}) rotate(-90)" text-anchor="middle" font-size="11" font-family="sans-serif">change, new vs base</text>"##,
        H - 8.0,
        b = H - BOTTOM,
        cx = (W - RIGHT + LEFT) / 2.0,
        cy = (H - BOTTOM + TOP) / 2.0,
    );
    for (si, (s, style_index)) in series.iter().enumerate() {
        let colour = style(*style_index).colour;
        let ly = TOP + 10.0 + si as f64 * 18.0;
        let lx = W - RIGHT + 12.0;
        let _ = write!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="11" font-family="sans-serif">{s}</text>"#,
            ly - 6.0,
            lx + 18.0,
            ly + 4.0
        );
    }
    let ly = TOP + 10.0 + series.len() as f64 * 18.0 + 8.0;
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{ly:.1}" font-size="10" font-family="sans-serif">filled: significant</text><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif">outline: not</text>"##,
        W - RIGHT + 12.0,
        W - RIGHT + 12.0,
        ly + 14.0
    );
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_chart_draws_negative_bars_inside_the_frame_in_the_stacks_colours() {
        let svg = delta_chart(
            "t",
            &[
                Bar {
                    group: "2".into(),
                    series: "A".into(),
                    style: 0,
                    pct: -90.0,
                    ci_pct: Some((-95.0, -85.0)),
                    significant: true,
                },
                Bar {
                    group: "2".into(),
                    series: "B".into(),
                    style: 1,
                    pct: 3.0,
                    ci_pct: Some((-2.0, 8.0)),
                    significant: false,
                },
            ],
        );
        assert_eq!(
            svg.matches("<rect x=").count(),
            2 + 2,
            "bars and legend keys"
        );
        for y in svg
            .split(" y=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next()?.parse::<f64>().ok())
        {
            assert!((0.0..=H).contains(&y), "y {y} outside the chart");
        }
        assert!(
            svg.contains(r##"fill="white" stroke="#c55a11""##),
            "B outlined: {svg}"
        );
        // The colour is the series' palette entry, not its position among the bars.
        let fifth = delta_chart(
            "t",
            &[Bar {
                group: "2".into(),
                series: "E".into(),
                style: 4,
                pct: 1.0,
                ci_pct: None,
                significant: true,
            }],
        );
        assert!(fifth.contains(style(4).colour), "{fifth}");
        assert!(!fifth.contains(style(0).colour), "{fifth}");
    }

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
