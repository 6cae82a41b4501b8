//! `timeline`: per-interval throughput of each stream of one run, as steps
//! over time — slow starts, stalls and a stream starved by the others.

use plotters::prelude::*;

use super::{color, draw_err, font, legend, si, titled, upper, Area, ChartError, Marks};

/// One stream's intervals: (start s, end s, bit/s).
#[derive(Debug, Clone)]
pub struct StreamLine {
    pub name: String,
    pub intervals: Vec<(f64, f64, f64)>,
}

/// Seconds with at most three decimals: `0.25`, `1`, `10.5`.
fn seconds(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub title: String,
    pub streams: Vec<StreamLine>,
}

impl Timeline {
    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let all = || self.streams.iter().flat_map(|s| s.intervals.iter());
        let end = all().map(|i| i.1).fold(0.0, f64::max);
        let top = all().map(|i| i.2).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..if end > 0.0 { end } else { 1.0 }, 0f64..upper(top))
            .map_err(draw_err)?;
        marks.set("axes");
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|v| seconds(*v))
            .y_label_formatter(&|v| si(*v))
            .x_desc("time since the start (s)")
            .y_desc("receiver throughput (bit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        for (i, stream) in self.streams.iter().enumerate() {
            let c = color(i);
            let steps = stream
                .intervals
                .iter()
                .flat_map(|(start, end, rate)| [(*start, *rate), (*end, *rate)]);
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(draw_err)?
                .label(stream.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        }
        legend(&mut chart, marks, SeriesLabelPosition::LowerRight)
    }
}
