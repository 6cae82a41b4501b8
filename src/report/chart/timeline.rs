//! `timeline`: per-interval throughput of each stream of one run, as steps
//! over time — slow starts, stalls and a stream starved by the others.

use plotters::prelude::*;

use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::legend::{self, Entry, Swatch};
use super::{color, draw_err, font, si, titled, upper, Area, ChartError, Marks};

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

/// The top of the y axis: the highest rate of the intervals that make up
/// the run. An interval much shorter than the others (the sliver left at
/// the end, a late wake-up) divides a few bytes by almost no time: it is
/// drawn, clipped at the top with its value written, but does not set
/// the scale for the rest.
pub fn scale_top(streams: &[StreamLine]) -> f64 {
    let mut lengths: Vec<f64> = streams
        .iter()
        .flat_map(|s| s.intervals.iter().map(|i| i.1 - i.0))
        .filter(|l| *l > 0.0)
        .collect();
    if lengths.is_empty() {
        return 0.0;
    }
    lengths.sort_by(f64::total_cmp);
    let typical = lengths[lengths.len() / 2];
    let whole = |i: &&(f64, f64, f64)| i.1 - i.0 >= typical / 2.0;
    let top = streams
        .iter()
        .flat_map(|s| s.intervals.iter().filter(whole))
        .map(|i| i.2)
        .fold(0.0, f64::max);
    if top > 0.0 {
        top
    } else {
        streams
            .iter()
            .flat_map(|s| &s.intervals)
            .map(|i| i.2)
            .fold(0.0, f64::max)
    }
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
        let end = all().map(|i| i.1).fold(0.0, f64::max);
        let ceiling = upper(scale_top(&self.streams));
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..if end > 0.0 { end } else { 1.0 }, 0f64..ceiling)
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
                .flat_map(|(start, end, rate)| [(*start, rate.min(ceiling)), (*end, rate.min(ceiling))]);
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(draw_err)?;
            let clipped = stream.intervals.iter().filter(|i| i.2 > ceiling);
            chart
                .draw_series(clipped.map(|(start, end, rate)| {
                    let text = format!("↑ {}bit/s over {} s", si(*rate), seconds(end - start));
                    Text::new(text, (*start, ceiling), note.clone())
                }))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliver_interval_does_not_set_the_scale() {
        let stream = StreamLine {
            name: "stream 1".into(),
            intervals: vec![
                (0.0, 1.0, 20e9),
                (1.0, 2.0, 21e9),
                (2.0, 3.0, 19e9),
                (3.0, 3.002, 140e9),
            ],
        };
        assert_eq!(scale_top(std::slice::from_ref(&stream)), 21e9);
        // Without a sliver, the highest interval is the top.
        let even = StreamLine {
            intervals: stream.intervals[..3].to_vec(),
            ..stream
        };
        assert_eq!(scale_top(&[even]), 21e9);
    }
}
