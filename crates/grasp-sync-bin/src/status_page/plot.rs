//! [`Plot`]: one time-series chart as inline SVG, drawn on the server: a value axis from 0 with
//! round ticks, a time axis ending at now, and one polyline per [`Series`] with a dot on its
//! latest value. Rates are drawn as steps (each value holds over the interval it was measured
//! on), levels as lines.

use std::fmt::Write;

use super::html::escape;

/// Line colours, taken in turn; they read on the page's light background.
const PALETTE: [&str; 8] = [
    "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777",
];
const WIDTH: f64 = 400.0;
const HEIGHT: f64 = 150.0;
const LEFT: f64 = 40.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;

/// One line: `(seconds since start, value)` points, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Legend text.
    pub(crate) label: String,
    /// The points. For a step series, each point's value held since the point before it.
    pub(crate) points: Vec<(f64, f64)>,
    /// Draw as steps.
    pub(crate) step: bool,
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plot {
    /// `data-plot` name, for tests and styling.
    pub(crate) id: String,
    /// Caption.
    pub(crate) title: String,
    /// The lines.
    pub(crate) series: Vec<Series>,
    /// Lines left out (shown as a note).
    pub(crate) omitted: usize,
}

impl Plot {
    /// Values drawn, over every series (a step series draws one per interval).
    pub(crate) fn values(&self) -> usize {
        self.series
            .iter()
            .map(|s| s.points.len().saturating_sub(usize::from(s.step)))
            .sum()
    }

    /// The `<figure>` holding the chart, its legend and its caption.
    pub(crate) fn render(&self, now: f64) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<figure class="plot" data-plot="{}" data-values="{}"><figcaption>{}</figcaption>"#,
            escape(&self.id),
            self.values(),
            escape(&self.title)
        );
        out.push_str(&self.svg(now));
        if self.series.len() > 1 || self.omitted > 0 {
            out.push_str(r#"<ul class="legend">"#);
            for (i, series) in self.series.iter().enumerate() {
                let _ = write!(
                    out,
                    r#"<li><span class="swatch" style="background:{}"></span>{}</li>"#,
                    PALETTE[i % PALETTE.len()],
                    escape(&series.label)
                );
            }
            if self.omitted > 0 {
                let _ = write!(out, "<li>and {} more</li>", self.omitted);
            }
            out.push_str("</ul>");
        }
        out.push_str("</figure>");
        out
    }

    fn svg(&self, now: f64) -> String {
        let start = self
            .series
            .iter()
            .filter_map(|s| s.points.first())
            .map(|p| p.0)
            .fold(now, f64::min);
        let span = (now - start).max(60.0);
        let start = now - span;
        let peak = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let step = nice_step(peak / 4.0);
        let ticks = (peak / step).ceil().max(1.0);
        let top = step * ticks;
        let x = |t: f64| LEFT + (t - start) / span * (WIDTH - LEFT - RIGHT);
        let y = |v: f64| TOP + (1.0 - v / top) * (HEIGHT - TOP - BOTTOM);
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{}">"#,
            escape(&self.title)
        );
        for i in 0..=(ticks as u32) {
            let value = step * f64::from(i);
            let _ = write!(
                out,
                r#"<line class="gridline" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 4.0,
                y(value) + 3.5,
                format_value(value),
                y = y(value),
            );
        }
        for i in 0..=3 {
            let t = start + span * f64::from(i) / 3.0;
            let anchor = match i {
                0 => "start",
                3 => "end",
                _ => "middle",
            };
            let _ = write!(
                out,
                r#"<text class="tick" x="{:.1}" y="{}" text-anchor="{anchor}">{}</text>"#,
                x(t),
                HEIGHT - 6.0,
                format_ago(now - t)
            );
        }
        for (i, series) in self.series.iter().enumerate() {
            let mut points = String::new();
            let mut previous: Option<f64> = None;
            for &(t, v) in &series.points {
                if series.step {
                    if let Some(p) = previous {
                        let _ = write!(points, "{:.1},{:.1} {:.1},{:.1} ", x(p), y(v), x(t), y(v));
                    }
                    previous = Some(t);
                } else {
                    let _ = write!(points, "{:.1},{:.1} ", x(t), y(v));
                }
            }
            let colour = PALETTE[i % PALETTE.len()];
            let _ = write!(
                out,
                r#"<polyline class="series" fill="none" stroke="{colour}" points="{}"/>"#,
                points.trim_end()
            );
            if let Some(&(t, v)) = series.points.last() {
                let _ = write!(
                    out,
                    r#"<circle class="last" cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                    x(t),
                    y(v)
                );
            }
        }
        out.push_str("</svg>");
        out
    }
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `value` (1 for 0): a round tick step.
fn nice_step(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|candidate| *candidate >= value * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

/// A tick value: whole numbers plainly, small ones with one decimal.
fn format_value(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1000.0)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// `now`, `-45s`, `-12m`, `-3h`.
fn format_ago(seconds: f64) -> String {
    let seconds = seconds.round();
    if seconds < 1.0 {
        "now".to_owned()
    } else if seconds < 120.0 {
        format!("-{seconds:.0}s")
    } else if seconds < 7200.0 {
        format!("-{:.0}m", seconds / 60.0)
    } else {
        format!("-{:.0}h", seconds / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(40.0), 50.0);
        assert_eq!(nice_step(100.0), 100.0);
        assert_eq!(nice_step(101.0), 200.0);
        assert_eq!(nice_step(0.05), 0.05);
        assert_eq!(format_ago(0.2), "now");
        assert_eq!(format_ago(90.0), "-90s");
        assert_eq!(format_ago(1800.0), "-30m");
    }

    #[test]
    fn a_step_series_draws_one_segment_per_interval_and_labels_are_escaped() {
        let plot = Plot {
            id: "p".into(),
            title: "a < b".into(),
            series: vec![Series {
                label: "<x>".into(),
                points: vec![(0.0, 0.0), (10.0, 6.0), (20.0, 3.0)],
                step: true,
            }],
            omitted: 1,
        };
        assert_eq!(plot.values(), 2);
        let html = plot.render(20.0);
        assert!(html.contains(r#"data-values="2""#), "{html}");
        assert!(
            html.contains("a &lt; b") && html.contains("&lt;x&gt;"),
            "{html}"
        );
        assert!(!html.contains("<x>"), "{html}");
        let points = html
            .split(r#"points=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("points");
        assert_eq!(points.split(' ').count(), 4, "{points}");
    }
}
