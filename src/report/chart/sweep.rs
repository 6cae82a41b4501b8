//! `sweep`: bandwidth and latency against message size (log x), one line
//! per run, with the peak and n-1/2 (the size that reaches half the peak)
//! marked: the NetPIPE picture.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{binary, color, draw_err, font, legend, log_axis, si, titled, upper, Area, ChartError, Keyed, Marks};

/// One point of a sweep: message size, best bandwidth, best latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPoint {
    pub size_bytes: f64,
    pub bits_per_second: f64,
    pub latency_us: f64,
}

#[derive(Debug, Clone)]
pub struct SweepLine {
    pub name: String,
    pub points: Vec<SweepPoint>,
    /// Peak bandwidth and the size where it was reached.
    pub peak: Option<(f64, f64)>,
    /// n-1/2: the smallest size reaching half the peak.
    pub half_peak_size_bytes: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct Sweep {
    pub title: String,
    pub lines: Vec<SweepLine>,
}

/// Powers of two every `step` doublings inside the range, for the size axis.
fn size_ticks(range: &std::ops::Range<f64>) -> Vec<f64> {
    let decades = (range.end / range.start).log2();
    let step = (decades / 8.0).ceil().max(1.0) as i32;
    (0..64)
        .step_by(step as usize)
        .map(|e| 2f64.powi(e))
        .filter(|v| range.contains(v))
        .collect()
}

impl Sweep {
    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let (_, h) = area.dim_in_pixel();
        let (upper_area, lower_area) = area.split_vertically(h * 58 / 100);
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let min_size = all().map(|p| p.size_bytes).fold(f64::INFINITY, f64::min);
        let max_size = all().map(|p| p.size_bytes).fold(0.0, f64::max);
        let xs = 2f64.powf(min_size.max(1.0).log2().floor())..2f64.powf(max_size.max(2.0).log2().ceil() + 1.0);
        let ticks = size_ticks(&xs);
        let top = all().map(|p| p.bits_per_second).fold(0.0, f64::max);
        let mut bandwidth = ChartBuilder::on(&upper_area)
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::log(xs.clone(), ticks.clone()), 0f64..upper(top))
            .map_err(draw_err)?;
        marks.set("axes");
        bandwidth
            .configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|v| binary(*v))
            .y_label_formatter(&|v| si(*v))
            .y_desc("bandwidth (bit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        let note = font(12).pos(Pos::new(HPos::Right, VPos::Bottom));
        for (i, line) in self.lines.iter().enumerate() {
            let c = color(i);
            bandwidth
                .draw_series(LineSeries::new(
                    line.points.iter().map(|p| (p.size_bytes, p.bits_per_second)),
                    c.stroke_width(2),
                ))
                .map_err(draw_err)?
                .label(line.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
            if let Some((size, peak)) = line.peak {
                bandwidth
                    .draw_series([EmptyElement::at((size, peak))
                        + Circle::new((0, 0), 5, c.filled())
                        + Text::new(
                            format!("peak {}bit/s at {} B", si(peak), binary(size)),
                            (-8, -6),
                            note.clone(),
                        )])
                    .map_err(draw_err)?;
                if let Some(half) = line.half_peak_size_bytes {
                    bandwidth
                        .draw_series([EmptyElement::at((half, peak / 2.0))
                            + TriangleMarker::new((0, 0), 6, c.filled())
                            + Text::new(format!("n½ = {} B", binary(half)), (-8, -6), note.clone())])
                        .map_err(draw_err)?;
                }
            }
        }
        legend(&mut bandwidth, marks, SeriesLabelPosition::UpperLeft)?;
        let low = all()
            .map(|p| p.latency_us)
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let high = all().map(|p| p.latency_us).fold(0.0, f64::max);
        let mut latency = ChartBuilder::on(&lower_area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::log(xs, ticks), log_axis(low, high))
            .map_err(draw_err)?;
        marks.set("axes");
        latency
            .configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|v| binary(*v))
            .y_label_formatter(&|v| si(*v * 1e-6))
            .x_desc("message size (bytes, log)")
            .y_desc("latency (s, log)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        for (i, line) in self.lines.iter().enumerate() {
            latency
                .draw_series(LineSeries::new(
                    line.points
                        .iter()
                        .filter(|p| p.latency_us > 0.0)
                        .map(|p| (p.size_bytes, p.latency_us)),
                    color(i).stroke_width(2),
                ))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}
