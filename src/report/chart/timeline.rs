//! `timeline`: per-interval throughput of each stream of one run, as steps
//! over time — slow starts, stalls and a stream starved by the others.

use plotters::prelude::*;

use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::legend::{self, Entry, Swatch};
use super::{color, draw_err, font, scale_top, si, titled, upper, Area, ChartError, Marks};

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
        let entries: Vec<Entry> = self
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| Entry {
                swatch: Swatch::Line,
                color: color(i),
                text: s.name.clone(),
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let all = || self.streams.iter().flat_map(|s| s.intervals.iter());
        let end = all()
            .map(|i| i.1)
            .fold(0.0, f64::max)
            .min(crate::chart_kit::AXIS_CEILING);
        let span = if end > 0.0 { end } else { 1.0 };
        let ceiling = upper(scale_top(self.streams.iter().flat_map(|s| &s.intervals)));
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..span, 0f64..ceiling)
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
        let note = font(11).pos(Pos::new(HPos::Left, VPos::Top));
        for (i, stream) in self.streams.iter().enumerate() {
            let c = color(i);
            let steps = stream
                .intervals
                .iter()
                // Within the axes: a stored -1.7e308 overflows plotters'
                // pixel arithmetic.
                .flat_map(|(start, end, rate)| {
                    let rate = rate.clamp(0.0, ceiling);
                    [(start.clamp(0.0, span), rate), (end.clamp(0.0, span), rate)]
                });
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(draw_err)?;
            let clipped = stream.intervals.iter().filter(|i| i.2 > ceiling);
            chart
                .draw_series(clipped.map(|(start, end, rate)| {
                    let text = format!("↑ {}bit/s over {} s", si(*rate), seconds(end - start));
                    Text::new(text, (start.clamp(0.0, span), ceiling), note.clone())
                }))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}
