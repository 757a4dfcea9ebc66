//! The page's charts as inline SVG: the shared time axis, value scales with round
//! ticks, and line charts that leave gaps where a reading failed.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::{escape, seconds_between};
use crate::report::series::SeriesPoint;
use wattline_model::report::EnergyReport;

/// Width of every chart's drawing, in SVG units (it scales with the page).
pub(super) const CHART_WIDTH: f64 = 1160.0;
/// Room left of the plot for the value axis.
pub(super) const PLOT_LEFT: f64 = 76.0;
/// Room right of the plot.
pub(super) const PLOT_RIGHT: f64 = 20.0;
/// Room above the plot.
pub(super) const PLOT_TOP: f64 = 14.0;
/// Room below the plot for the time axis and its title.
const PLOT_BOTTOM: f64 = 44.0;
/// Height of a line chart's plot.
const PLOT_HEIGHT: f64 = 180.0;
/// Height of one Agent scope's lane.
pub(super) const LANE_HEIGHT: f64 = 30.0;
/// Lines with at most this many points also get a dot at each reading.
const DOTTED_UP_TO: usize = 80;

/// Line colours, told apart by colour-blind readers too (Okabe-Ito, darkened).
pub(super) const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f00", "#000000",
];

/// The shared time axis: seconds from the report's start to its end.
pub(super) struct TimeAxis {
    pub(super) start: DateTime<Utc>,
    pub(super) seconds: f64,
}

impl TimeAxis {
    pub(super) fn of(report: &EnergyReport) -> Self {
        TimeAxis {
            start: report.started_at,
            seconds: seconds_between(report.started_at, report.ended_at).max(0.001),
        }
    }

    pub(super) fn right(&self) -> f64 {
        CHART_WIDTH - PLOT_RIGHT
    }

    pub(super) fn x(&self, at: DateTime<Utc>) -> f64 {
        PLOT_LEFT + seconds_between(self.start, at) / self.seconds * (self.right() - PLOT_LEFT)
    }

    /// The unit ticks are counted in: seconds, minutes for runs of ten minutes or
    /// more, hours from six hours.
    pub(super) fn unit(&self) -> (f64, &'static str) {
        if self.seconds >= 6.0 * 3600.0 {
            (3600.0, "hours")
        } else if self.seconds >= 600.0 {
            (60.0, "minutes")
        } else {
            (1.0, "seconds")
        }
    }

    /// Vertical grid lines, tick labels and the axis title under a plot of
    /// `plot_height`.
    pub(super) fn grid_and_labels(&self, plot_height: f64) -> String {
        let (per_unit, unit) = self.unit();
        let span = self.seconds / per_unit;
        let step = nice_step(span / 10.0);
        let bottom = PLOT_TOP + plot_height;
        let mut out = String::new();
        for tick in ticks(span, step) {
            let x = PLOT_LEFT + tick / span * (self.right() - PLOT_LEFT);
            let _ = writeln!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{PLOT_TOP}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                bottom + 17.0,
                tick_label(tick, step)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{unit} since the start ({} UTC)</text>",
            (PLOT_LEFT + self.right()) / 2.0,
            bottom + 37.0,
            self.start.format("%Y-%m-%d %H:%M:%S")
        );
        out
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// 0, `step`, 2 `step` ... up to `end`.
pub(super) fn ticks(end: f64, step: f64) -> Vec<f64> {
    let count = (end / step + 1e-9).floor() as usize;
    (0..=count.min(1000))
        .map(|index| index as f64 * step)
        .collect()
}

pub(super) fn tick_label(value: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// A value axis: the unit it is labelled in and how many base units one is.
pub(super) struct ValueScale {
    pub(super) unit: String,
    pub(super) divisor: f64,
}

impl ValueScale {
    pub(super) fn plain(unit: &str) -> Self {
        ValueScale {
            unit: unit.into(),
            divisor: 1.0,
        }
    }

    /// Bytes, counted in the binary unit that keeps `peak` readable.
    pub(super) fn bytes(peak: f64) -> Self {
        let (unit, divisor) = if peak >= 1024f64.powi(3) {
            ("GiB", 1024f64.powi(3))
        } else if peak >= 1024f64.powi(2) {
            ("MiB", 1024f64.powi(2))
        } else {
            ("KiB", 1024.0)
        };
        ValueScale {
            unit: unit.into(),
            divisor,
        }
    }
}

/// One line's legend: its label and a summary.
pub(super) struct LegendEntry {
    pub(super) label: String,
    pub(super) detail: Option<String>,
}

pub(super) fn svg_open(id: &str, plot_height: f64, description: &str) -> String {
    let height = PLOT_TOP + plot_height + PLOT_BOTTOM;
    format!(
        "<svg id=\"{id}-chart\" viewBox=\"0 0 {CHART_WIDTH} {height}\" role=\"img\" \
         aria-label=\"{}\">\n<defs><clipPath id=\"{id}-plot\"><rect x=\"{PLOT_LEFT}\" \
         y=\"{PLOT_TOP}\" width=\"{:.1}\" height=\"{plot_height:.1}\"/></clipPath></defs>\n",
        escape(description),
        CHART_WIDTH - PLOT_RIGHT - PLOT_LEFT,
    )
}

pub(super) fn frame(plot_height: f64) -> String {
    format!(
        "<rect class=\"frame\" x=\"{PLOT_LEFT}\" y=\"{PLOT_TOP}\" width=\"{:.1}\" \
         height=\"{plot_height:.1}\"/>\n",
        CHART_WIDTH - PLOT_RIGHT - PLOT_LEFT
    )
}

/// A chart of `lines` (one per legend entry) over the time axis, from zero up.
pub(super) fn line_chart(
    id: &str,
    axis: &TimeAxis,
    scale: &ValueScale,
    legend: &[LegendEntry],
    lines: &[&[SeriesPoint]],
) -> String {
    let mut out = String::from("<ul class=\"legend\">\n");
    for (index, entry) in legend.iter().enumerate() {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}{}</li>",
            PALETTE[index % PALETTE.len()],
            escape(&entry.label),
            entry
                .detail
                .as_ref()
                .map_or_else(String::new, |detail| format!(": {}", escape(detail)))
        );
    }
    out.push_str("</ul>\n");
    let peak = lines
        .iter()
        .flat_map(|points| points.iter().filter_map(|point| point.value))
        .fold(0.0, f64::max)
        / scale.divisor;
    // From zero to a round value a little above the peak (0 to 1 for a line of zeros).
    let (step, top) = if peak > 0.0 {
        let step = nice_step(peak * 1.05 / 5.0);
        (step, (peak * 1.05 / step).ceil() * step)
    } else {
        (0.2, 1.0)
    };
    let y = |value: f64| PLOT_TOP + PLOT_HEIGHT - (value / scale.divisor / top) * PLOT_HEIGHT;
    let description = legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    out.push_str(&svg_open(id, PLOT_HEIGHT, &description));
    for tick in ticks(top, step) {
        let at = y(tick * scale.divisor);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{PLOT_LEFT}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            axis.right(),
            PLOT_LEFT - 8.0,
            at + 4.0,
            tick_label(tick, step)
        );
    }
    let _ = writeln!(
        out,
        "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        PLOT_TOP + PLOT_HEIGHT / 2.0,
        escape(&scale.unit)
    );
    out.push_str(&axis.grid_and_labels(PLOT_HEIGHT));
    let _ = writeln!(out, "<g clip-path=\"url(#{id}-plot)\">");
    for (index, points) in lines.iter().enumerate() {
        out.push_str(&line_path(
            points,
            PALETTE[index % PALETTE.len()],
            |at| axis.x(at),
            y,
        ));
    }
    out.push_str("</g>\n");
    out.push_str(&frame(PLOT_HEIGHT));
    out.push_str("</svg>\n");
    out
}

/// One line as a path broken at every gap, with a dot at each reading when the line
/// is sparse (a lone reading between gaps would otherwise not show).
fn line_path(
    points: &[SeriesPoint],
    color: &str,
    x: impl Fn(DateTime<Utc>) -> f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let mut path = String::new();
    let mut pen_down = false;
    for point in points {
        match point.value {
            Some(value) => {
                let _ = write!(
                    path,
                    "{}{:.1} {:.1} ",
                    if pen_down { "L" } else { "M" },
                    x(point.at),
                    y(value)
                );
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    let mut out = format!(
        "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" \
         stroke-linejoin=\"round\"/>\n",
        path.trim_end()
    );
    if points.len() <= DOTTED_UP_TO {
        for point in points {
            if let Some(value) = point.value {
                let _ = writeln!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
                    x(point.at),
                    y(value)
                );
            }
        }
    }
    out
}
