//! `loaded-cdf`: the UDP probes' round trips of one latency-under-load run
//! as cumulative distributions, one curve for the idle phase and one per
//! load phase: x the round trip (log), y the fraction of probes answered
//! within it. Each curve covers the window its phase's figures are taken
//! over (after the load was stable, else the phase's second half; the idle
//! phase whole), so its 0.5 and 0.99 crossings are the text's p50 and p99.

use plotters::prelude::*;
use serde_json::Value;

use super::chart::{part_of, phase_color, phases};
use crate::chart_kit::legend::{self, Entry, Swatch};
use crate::chart_kit::{
    draw_err, font, log_axis, scaled, si, svg, titled, Area, ChartError, Drawing, Keyed, Marks, RunChart,
};

/// One phase's distribution: (round trip s, fraction of its answered
/// probes at or under it), both rising.
#[derive(Debug, Clone)]
pub struct CdfLine {
    pub name: String,
    /// The phase, for its colour.
    pub phase: String,
    pub points: Vec<(f64, f64)>,
}

impl CdfLine {
    /// The curve of `values` (seconds, any order); None when empty.
    pub fn of(name: String, phase: String, mut values: Vec<f64>) -> Option<CdfLine> {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let fraction = (i + 1) as f64 / n;
            match points.last_mut() {
                Some(last) if last.0 == *v => last.1 = fraction,
                _ => points.push((*v, fraction)),
            }
        }
        Some(CdfLine { name, phase, points })
    }

    /// The smallest round trip that at least `fraction` of the probes
    /// stayed under (the nearest-rank percentile).
    pub fn at(&self, fraction: f64) -> Option<f64> {
        self.points.iter().find(|p| p.1 >= fraction - 1e-12).map(|p| p.0)
    }
}

#[derive(Debug, Clone)]
pub struct LoadCdf {
    pub title: String,
    pub lines: Vec<CdfLine>,
}

/// The answered UDP probes' round trips sent in `[from, to)`, seconds.
fn round_trips(client: &Value, from: f64, to: f64) -> Vec<f64> {
    client["udp_probes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let at = p[0].as_f64()? / 1e6;
            (from..to).contains(&at).then_some(p[1].as_f64()? / 1e6)
        })
        .collect()
}

impl LoadCdf {
    /// The curves of `doc`, titled after `run`; None without phases or
    /// answered probes.
    pub fn of(doc: &Value, key: &str, run: &str) -> Option<LoadCdf> {
        let client = part_of(doc, key, "client")?;
        let figures = doc["sum"][key]["phases"].as_array();
        let mut lines = Vec::new();
        for span in phases(doc, key) {
            // The figures' window: from stability (else mid-phase) on.
            let from = match figures.and_then(|f| f.iter().find(|p| p["name"] == span.name.as_str())) {
                Some(p) => {
                    span.start
                        + p["stable_after_seconds"]
                            .as_f64()
                            .unwrap_or((span.end - span.start) / 2.0)
                }
                None => span.start,
            };
            let values = round_trips(client, from, span.end);
            let name = format!("{} ({} probes)", span.name, values.len());
            lines.extend(CdfLine::of(name, span.name.clone(), values));
        }
        (!lines.is_empty()).then(|| LoadCdf {
            title: format!("UDP probe round trips, idle against each load phase, {run}"),
            lines,
        })
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let entries: Vec<Entry> = self
            .lines
            .iter()
            .map(|l| Entry {
                swatch: Swatch::Line,
                color: phase_color(&l.phase),
                text: l.name.clone(),
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let all = || self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let low = all().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let high = all().fold(0.0, f64::max);
        let fractions = vec![0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0];
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(log_axis(low, high), Keyed::linear(0.0..1.02, fractions))
            .map_err(draw_err)?;
        marks.set("axes");
        chart
            .configure_mesh()
            .x_label_formatter(&|v| si(*v))
            .y_label_formatter(&|v| format!("{v}"))
            .x_desc("round trip (s, log)")
            .y_desc("fraction of probes")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        for line in &self.lines {
            // Steps: each round trip raises the fraction where it lies.
            let mut below = 0.0;
            let steps: Vec<(f64, f64)> = line
                .points
                .iter()
                .flat_map(|&(v, f)| {
                    let step = [(v, below), (v, f)];
                    below = f;
                    step
                })
                .collect();
            marks.tip(Some(format!(
                "{}\np50 {}s, p99 {}s",
                line.name,
                si(line.at(0.5).unwrap_or(0.0)),
                si(line.at(0.99).unwrap_or(0.0))
            )));
            chart
                .draw_series(LineSeries::new(steps, phase_color(&line.phase).stroke_width(2)))
                .map_err(draw_err)?;
            marks.tip(None);
        }
        Ok(())
    }
}

impl Drawing for LoadCdf {
    fn title(&self) -> &str {
        &self.title
    }

    fn description(&self) -> String {
        format!(
            "Cumulative distribution of the UDP probes' round trips (log scale), one curve per phase; series: {}.",
            self.series_names().join(", ")
        )
    }

    fn draw_svg(&self, root: &Area<svg::SvgBackend<'_>>, marks: &Marks) -> Result<(), ChartError> {
        self.draw(root, marks)
    }

    fn draw_png(&self, root: &Area<scaled::Scaled<BitMapBackend<'_>>>, marks: &Marks) -> Result<(), ChartError> {
        self.draw(root, marks)
    }
}

impl RunChart for LoadCdf {
    fn series_names(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.name.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::chart::tests::fixture;
    use super::*;

    #[test]
    fn a_curve_per_phase_rising_to_one() {
        let cdf = LoadCdf::of(&fixture(), "loaded", "run 1").unwrap();
        let phases: Vec<&str> = cdf.lines.iter().map(|l| l.phase.as_str()).collect();
        assert_eq!(phases, ["idle", "download", "upload", "bidirectional"]);
        for line in &cdf.lines {
            assert!(line.points.len() > 1, "{}", line.name);
            for w in line.points.windows(2) {
                assert!(w[1].0 > w[0].0 && w[1].1 > w[0].1, "{}: {w:?}", line.name);
            }
            assert_eq!(line.points.last().unwrap().1, 1.0, "{}", line.name);
        }
    }

    /// The curves cover the probes the figures were taken from: each
    /// crosses 0.5 and 0.99 at the document's p50 and p99.
    #[test]
    fn the_curves_cross_the_median_and_p99_at_the_figures() {
        let doc = fixture();
        let cdf = LoadCdf::of(&doc, "loaded", "run 1").unwrap();
        let loaded = &doc["sum"]["loaded"];
        let figures = std::iter::once(&loaded["idle"]).chain(loaded["phases"].as_array().unwrap());
        for (line, figures) in cdf.lines.iter().zip(figures) {
            for (fraction, key) in [(0.5, "rtt_p50_seconds"), (0.99, "rtt_p99_seconds")] {
                let expected = figures[key].as_f64().unwrap();
                let drawn = line.at(fraction).unwrap();
                assert!(
                    (drawn - expected).abs() < 1e-9,
                    "{} {key}: {drawn} != {expected}",
                    line.name
                );
            }
        }
    }

    #[test]
    fn equal_round_trips_are_one_step() {
        let line = CdfLine::of("x".into(), "idle".into(), vec![2.0, 1.0, 2.0, f64::NAN, 4.0]).unwrap();
        assert_eq!(line.points, [(1.0, 0.25), (2.0, 0.75), (4.0, 1.0)]);
        assert!(CdfLine::of("x".into(), "idle".into(), Vec::new()).is_none());
    }
}
