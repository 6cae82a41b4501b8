//! `latency`: the percentile curve (p50 to p99.99) of request/response
//! runs, from their HDR histograms, on a "nines" axis and a log latency
//! axis: one line per run.

use plotters::prelude::*;

use super::legend::{self, Entry, Swatch};
use super::{color, draw_err, font, log_axis, si, titled, Area, ChartError, Keyed, Marks};

/// The percentiles marked on the x axis, and where they sit on it
/// (`-log10(1 - p)`: p90 at 1, p99 at 2, ...).
const MARKS: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

fn nines(p: f64) -> f64 {
    -(1.0 - p).log10()
}

#[derive(Debug, Clone)]
pub struct LatencyLine {
    pub name: String,
    /// (percentile as a fraction, latency in microseconds), rising.
    pub points: Vec<(f64, f64)>,
}

impl LatencyLine {
    /// The curve of a histogram given as (value in µs, count) buckets in
    /// rising order: the latency at 60 percentiles from p50 to p99.99.
    pub fn from_histogram(name: String, buckets: &[(f64, u64)]) -> Option<LatencyLine> {
        let total: u64 = buckets.iter().map(|(_, c)| c).sum();
        if total == 0 {
            return None;
        }
        let (from, to) = (nines(0.5), nines(0.9999));
        let steps = 60;
        let mut points = Vec::with_capacity(steps + 1);
        let mut at = 0usize;
        let mut seen = buckets[0].1;
        for i in 0..=steps {
            let x = from + (to - from) * i as f64 / steps as f64;
            let p = 1.0 - 10f64.powf(-x);
            let rank = (p * total as f64).ceil() as u64;
            while seen < rank && at + 1 < buckets.len() {
                at += 1;
                seen += buckets[at].1;
            }
            points.push((p, buckets[at].0));
        }
        Some(LatencyLine { name, points })
    }
}

#[derive(Debug, Clone)]
pub struct Latency {
    pub title: String,
    pub lines: Vec<LatencyLine>,
}

impl Latency {
    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let entries: Vec<Entry> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| Entry {
                swatch: Swatch::Line,
                color: color(i),
                text: l.name.clone(),
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let low = all().map(|p| p.1).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let high = all().map(|p| p.1).fold(0.0, f64::max);
        let ticks: Vec<f64> = MARKS.iter().map(|(p, _)| nines(*p)).collect();
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(
                Keyed::linear(nines(0.5) - 0.05..nines(0.9999) + 0.1, ticks),
                log_axis(low, high),
            )
            .map_err(draw_err)?;
        marks.set("axes");
        let percentile = |x: &f64| {
            MARKS
                .iter()
                .find(|(p, _)| (nines(*p) - x).abs() < 1e-6)
                .map(|(_, name)| name.to_string())
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&percentile)
            .y_label_formatter(&|v| si(*v * 1e-6))
            .x_desc("percentile")
            .y_desc("latency (s, log)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        for (i, line) in self.lines.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().map(|(p, v)| (nines(*p), *v)),
                    c.stroke_width(2),
                ))
                .map_err(draw_err)?;
            for (p, v) in &line.points {
                marks.tip(Some(format!("{}\np{}: {}s", line.name, p * 100.0, si(v * 1e-6))));
                chart
                    .draw_series([Circle::new((nines(*p), *v), 3, c.filled())])
                    .map_err(draw_err)?;
            }
            marks.tip(None);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_cumulative_counts() {
        // 90 samples at 10 us, 9 at 100 us, 1 at 1000 us.
        let line = LatencyLine::from_histogram("r".into(), &[(10.0, 90), (100.0, 9), (1000.0, 1)]).unwrap();
        assert_eq!(line.points[0], (0.5, 10.0));
        for (p, v) in &line.points {
            let expected = if *p < 0.899 {
                10.0
            } else if *p > 0.901 && *p < 0.989 {
                100.0
            } else if *p > 0.991 {
                1000.0
            } else {
                continue;
            };
            assert_eq!(*v, expected, "at p{}", p * 100.0);
        }
        assert_eq!(line.points.last().unwrap().1, 1000.0);
        assert!(LatencyLine::from_histogram("e".into(), &[(1.0, 0)]).is_none());
    }
}
