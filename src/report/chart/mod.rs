//! Charts of saved runs, drawn with plotters: grouped bars of a metric,
//! the size curve, CPU load split by kind, latency percentiles, the
//! per-interval throughput of one run's streams, a mesh's heat map and
//! the receivers of a fan-out test (a bar each, its loss over it);
//! a workload's own charts of one run live in its folder
//! ([`Chart::OfRun`]). Each kind is a plain data
//! struct (built from run documents in [`data`]) with a `draw` over any
//! plotters backend; [`render_svg`] and [`render_png`] (of the chart kit,
//! `crate::chart_kit`, which every chart is drawn with) pick the backend.

pub mod bars;
pub mod cpu;
pub mod data;
pub mod heatmap;
pub mod latency;
pub mod receivers;
pub mod size_curve;
pub mod timeline;

use std::sync::Arc;

use plotters::prelude::*;

pub use crate::chart_kit::{
    base_unit, binary, color, in_unit, legend, render_png, render_png_scaled, render_svg, render_svg_scaled,
    render_svg_with_id, scaled, si, svg, ChartError, Drawing, Marks, RunChart, PALETTE,
};
pub(crate) use crate::chart_kit::{draw_err, font, log_axis, scale_top, titled, upper, Area, Keyed};

pub use bars::Bars;
pub use cpu::Cpu;
pub use heatmap::Heatmap;
pub use latency::Latency;
pub use receivers::Receivers;
pub use size_curve::SizeCurve;
pub use timeline::Timeline;

/// One chart, ready to draw.
#[derive(Debug, Clone)]
pub enum Chart {
    Bars(Bars),
    SizeCurve(SizeCurve),
    Cpu(Cpu),
    Latency(Latency),
    Timeline(Timeline),
    /// The matrix of a mesh (`nicbench mesh --chart`, and its report).
    Heatmap(Heatmap),
    /// The receivers of one fan-out test (`nicbench multicast`).
    Receivers(Receivers),
    /// A chart a workload draws of one run, in its own folder
    /// ([`crate::workload::ChartData::PerRun`]).
    OfRun(Arc<dyn RunChart>),
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Bars(c) => &c.title,
            Chart::SizeCurve(c) => &c.title,
            Chart::Cpu(c) => &c.title,
            Chart::Latency(c) => &c.title,
            Chart::Timeline(c) => &c.title,
            Chart::Heatmap(c) => &c.title,
            Chart::Receivers(c) => &c.title,
            Chart::OfRun(c) => c.title(),
        }
    }

    /// The names in the legend, for the description (alt text).
    pub fn series_names(&self) -> Vec<String> {
        match self {
            Chart::Bars(c) => c.series.clone(),
            Chart::SizeCurve(c) => c.lines.iter().map(|l| l.name.clone()).collect(),
            Chart::Cpu(_) => cpu::PARTS.iter().map(|(n, _)| n.to_string()).collect(),
            Chart::Latency(c) => c.lines.iter().map(|l| l.name.clone()).collect(),
            Chart::Timeline(c) => c.streams.iter().map(|l| l.name.clone()).collect(),
            Chart::Heatmap(c) => c.names.clone(),
            Chart::Receivers(c) => c.series_names(),
            Chart::OfRun(c) => c.series_names(),
        }
    }

    /// A sentence saying what the chart shows, for screen readers.
    pub fn description(&self) -> String {
        let what = match self {
            Chart::Bars(c) => format!("Bar chart of {} per {}", c.axis, c.group_key),
            Chart::SizeCurve(_) => "Line chart of bandwidth and latency against message size (log scale)".into(),
            Chart::Cpu(c) => format!(
                "Stacked bars of client and agent CPU (user, system, softirq, irq) per {}{}",
                c.group_key,
                if c.groups.iter().any(|g| g.throughput_bits_per_second.is_some()) {
                    ", with throughput"
                } else {
                    ""
                }
            ),
            Chart::Latency(_) => "Latency percentile curves, p50 to p99.99, log scales".into(),
            Chart::Timeline(_) => "Per-interval throughput of each stream over time".into(),
            Chart::Heatmap(c) => format!(
                "Heat map of {} hosts, senders down and receivers across, lighter is better; {}",
                c.names.len(),
                match c.findings.as_slice() {
                    [] => "no outliers".to_string(),
                    found => format!("framed in red, the outliers: {}", found.join("; ")),
                }
            ),
            Chart::Receivers(c) => return c.description(),
            Chart::OfRun(c) => return c.description(),
        };
        format!("{what}; series: {}.", self.series_names().join(", "))
    }

    /// Draws on `root`; a workload's chart draws itself on the backend
    /// `own` names.
    fn draw<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        marks: &Marks,
        own: impl FnOnce(&dyn RunChart) -> Result<(), ChartError>,
    ) -> Result<(), ChartError> {
        match self {
            Chart::Bars(c) => c.draw(root, marks),
            Chart::SizeCurve(c) => c.draw(root, marks),
            Chart::Cpu(c) => c.draw(root, marks),
            Chart::Latency(c) => c.draw(root, marks),
            Chart::Timeline(c) => c.draw(root, marks),
            Chart::Heatmap(c) => c.draw(root, marks),
            Chart::Receivers(c) => c.draw(root, marks),
            Chart::OfRun(c) => own(c.as_ref()),
        }
    }
}

impl Drawing for Chart {
    fn title(&self) -> &str {
        Chart::title(self)
    }

    fn description(&self) -> String {
        Chart::description(self)
    }

    fn draw_svg(&self, root: &Area<svg::SvgBackend<'_>>, marks: &Marks) -> Result<(), ChartError> {
        self.draw(root, marks, |c| c.draw_svg(root, marks))
    }

    fn draw_png(&self, root: &Area<scaled::Scaled<BitMapBackend<'_>>>, marks: &Marks) -> Result<(), ChartError> {
        self.draw(root, marks, |c| c.draw_png(root, marks))
    }
}
