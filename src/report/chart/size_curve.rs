//! A size curve (`plot --kind sweep`, and NetPIPE files drawn with
//! `plot FILE`): bandwidth and latency against message size (log x), one
//! line per series (one point per size, the best of its passes and runs),
//! with the peak and n-1/2 (the size that reaches half the peak) marked on
//! the curve and written out in the legend, where no two notes can
//! overlap: the NetPIPE picture. Any run whose workload declares a
//! `ChartData::SizeCurve` is drawn this way.

use plotters::prelude::*;

use super::legend::{self, Entry, Swatch};
use super::{binary, color, draw_err, font, log_axis, si, titled, upper, Area, ChartError, Keyed, Marks};

/// One point of a sweep: message size, best bandwidth, best latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub size_bytes: f64,
    pub bits_per_second: f64,
    pub latency_us: f64,
}

#[derive(Debug, Clone)]
pub struct CurveLine {
    pub name: String,
    /// The runs the line is drawn from.
    pub runs: Vec<i64>,
    /// By size, one point each.
    pub points: Vec<CurvePoint>,
    /// Peak bandwidth and the size where it was reached.
    pub peak: Option<(f64, f64)>,
    /// n-1/2: the smallest size reaching half the peak.
    pub half_peak_size_bytes: Option<f64>,
    /// The line rate its runs were measured against, when all agree.
    pub line_rate_bits_per_second: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct SizeCurve {
    pub title: String,
    pub lines: Vec<CurveLine>,
}

/// One point per size, in size order: the highest bandwidth and the
/// lowest latency any pass reached at that size. Two passes drawn in the
/// order they ran would zig-zag back and forth.
pub fn best_per_size(points: impl IntoIterator<Item = CurvePoint>) -> Vec<CurvePoint> {
    let mut by_size: Vec<CurvePoint> = Vec::new();
    for p in points {
        match by_size.iter_mut().find(|q| q.size_bytes == p.size_bytes) {
            Some(q) => {
                q.bits_per_second = q.bits_per_second.max(p.bits_per_second);
                q.latency_us = match (q.latency_us > 0.0, p.latency_us > 0.0) {
                    (true, true) => q.latency_us.min(p.latency_us),
                    (false, _) => p.latency_us,
                    (true, false) => q.latency_us,
                };
            }
            None => by_size.push(p),
        }
    }
    by_size.sort_by(|a, b| a.size_bytes.total_cmp(&b.size_bytes));
    by_size
}

/// The size a perturbed size stands for: a sweep measures each power of
/// two and its neighbours `perturbation` bytes either side (32765, 32768,
/// 32771); drawn apart on a log axis they make a vertical hook at every
/// size. Where the perturbation is small beside the size (an eighth or
/// less), a size within it of a power of two is that power of two; the
/// small sizes (5 is 8 - 3) are sizes of their own.
pub fn nominal_size(size_bytes: f64, perturbation_bytes: f64) -> f64 {
    if perturbation_bytes <= 0.0 || size_bytes <= 0.0 {
        return size_bytes;
    }
    let power = 2f64.powf(size_bytes.log2().round());
    if perturbation_bytes <= power / 8.0 && (size_bytes - power).abs() <= perturbation_bytes {
        power
    } else {
        size_bytes
    }
}

impl CurveLine {
    /// Peak and n½ of the sizes a wire of the line rate could carry, when
    /// some size reads above it (a shaper's bucket): those stay drawn,
    /// hollow, but make no peak (a sweep saved before 2026-12-06 counted
    /// them in its summary). No size within the line rate: left as it is.
    pub fn carried_peak(&mut self) {
        let Some(rate) = self.line_rate_bits_per_second else {
            return;
        };
        if self.points_above_line_rate() == 0 {
            return;
        }
        let within: Vec<&CurvePoint> = self.points.iter().filter(|p| p.bits_per_second <= rate).collect();
        let Some(peak) = within
            .iter()
            .max_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second))
        else {
            return;
        };
        let peak = (peak.size_bytes, peak.bits_per_second);
        self.half_peak_size_bytes = within
            .iter()
            .filter(|p| p.bits_per_second >= peak.1 / 2.0)
            .map(|p| p.size_bytes)
            .reduce(f64::min);
        self.peak = Some(peak);
    }

    /// The line's name and its peak and n½, for the legend.
    pub fn legend_text(&self) -> String {
        let mut text = self.name.clone();
        if let Some((size, peak)) = self.peak {
            text += &format!(": peak {}bit/s at {}B", si(peak), binary_unit(size));
        }
        if let Some(half) = self.half_peak_size_bytes {
            text += &format!(", n½ {}B", binary_unit(half));
        }
        if let Some(rate) = self.line_rate_bits_per_second {
            // Short: the legend is one line; the why is in the sweep's text.
            text += &format!("; line rate {}bit/s dashed", si(rate));
            let above = self.points_above_line_rate();
            if above > 0 {
                text += &format!(
                    ", {above} size{} above it hollow, not in the peak",
                    if above == 1 { "" } else { "s" }
                );
            }
        }
        text
    }

    /// How many sizes read above the line rate.
    pub fn points_above_line_rate(&self) -> usize {
        self.line_rate_bits_per_second.map_or(0, |rate| {
            self.points.iter().filter(|p| p.bits_per_second > rate).count()
        })
    }

    fn tip(&self, p: &CurvePoint) -> String {
        format!(
            "{}\n{}B: {}bit/s, {}s\nruns {}",
            self.name,
            binary_unit(p.size_bytes),
            si(p.bits_per_second),
            si(p.latency_us * 1e-6),
            run_list(&self.runs)
        )
    }
}

/// A size ready for its unit: `4 Ki` (then `B`: `4 KiB`), `1000 ` (`1000 B`).
fn binary_unit(size: f64) -> String {
    let shown = binary(size);
    if shown.contains(' ') {
        shown
    } else {
        format!("{shown} ")
    }
}

/// Run ids as `3, 5, 9`, the middle elided past eight.
pub fn run_list(runs: &[i64]) -> String {
    let ids: Vec<String> = runs.iter().map(i64::to_string).collect();
    if ids.len() > 8 {
        format!("{}, … {} ({} runs)", ids[..3].join(", "), ids[ids.len() - 1], ids.len())
    } else {
        ids.join(", ")
    }
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

impl SizeCurve {
    /// For each line, the earlier line with the very same points, if any:
    /// drawn, it would lie exactly on that one and hide it.
    pub fn same_as(&self) -> Vec<Option<usize>> {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, l)| self.lines[..i].iter().position(|m| m.points == l.points))
            .collect()
    }

    /// The legend's lines: a line's name, peak and n½, or for a line the
    /// same as an earlier one, that it is (it is not drawn).
    pub fn legend_texts(&self) -> Vec<String> {
        self.same_as()
            .iter()
            .zip(&self.lines)
            .map(|(same, l)| match same {
                Some(j) => format!("{}: the same points as {} (drawn once)", l.name, self.lines[*j].name),
                None => l.legend_text(),
            })
            .collect()
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let same_as = self.same_as();
        let entries: Vec<Entry> = self
            .legend_texts()
            .into_iter()
            .enumerate()
            .map(|(i, text)| Entry {
                swatch: Swatch::Line,
                color: color(same_as[i].unwrap_or(i)),
                text,
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let (_, h) = area.dim_in_pixel();
        let (upper_area, lower_area) = area.split_vertically(h * 58 / 100);
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let min_size = all().map(|p| p.size_bytes).fold(f64::INFINITY, f64::min);
        let max_size = all().map(|p| p.size_bytes).fold(0.0, f64::max);
        let xs = 2f64.powf(min_size.max(1.0).log2().floor())..2f64.powf(max_size.max(2.0).log2().ceil() + 1.0);
        let ticks = size_ticks(&xs);
        let top = all().map(|p| p.bits_per_second).fold(0.0, f64::max);
        // Line rates drawn as reference lines: those within reach of the
        // data (a 100 Gbit/s line over a 1 Gbit/s curve would flatten it).
        let line_rates: Vec<(usize, f64)> = self
            .lines
            .iter()
            .enumerate()
            .filter(|(i, _)| same_as[*i].is_none())
            .filter_map(|(i, l)| Some((i, l.line_rate_bits_per_second?)))
            .filter(|&(_, rate)| rate <= 2.0 * top)
            .collect();
        let top = line_rates.iter().map(|&(_, rate)| rate).fold(top, f64::max);
        let mut bandwidth = ChartBuilder::on(&upper_area)
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::log(xs.clone(), ticks.clone()), 0f64..upper(top))
            .map_err(draw_err)?;
        // Every point within the axes: a stored -1.7e308 overflows
        // plotters' pixel arithmetic.
        let (x_range, ceiling) = (xs.clone(), upper(top));
        let at = move |size: f64, bits: f64| (size.clamp(x_range.start, x_range.end), bits.clamp(0.0, ceiling));
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
        for &(i, rate) in &line_rates {
            let ends = [(xs.start, rate), (xs.end, rate)];
            bandwidth
                .draw_series(DashedLineSeries::new(ends, 8, 6, color(i).stroke_width(1)))
                .map_err(draw_err)?;
        }
        let drawn = || self.lines.iter().enumerate().filter(|(i, _)| same_as[*i].is_none());
        for (i, line) in drawn() {
            let c = color(i);
            bandwidth
                .draw_series(LineSeries::new(
                    line.points.iter().map(|p| at(p.size_bytes, p.bits_per_second)),
                    c.stroke_width(2),
                ))
                .map_err(draw_err)?;
            for p in &line.points {
                marks.tip(Some(line.tip(p)));
                // Above the line rate: hollow, as the legend says.
                let above = line
                    .line_rate_bits_per_second
                    .is_some_and(|rate| p.bits_per_second > rate);
                let style = if above { c.stroke_width(2) } else { c.filled() };
                bandwidth
                    .draw_series([Circle::new(at(p.size_bytes, p.bits_per_second), 3, style)])
                    .map_err(draw_err)?;
            }
            marks.tip(None);
            // The peak (ringed) and n½ (a triangle); their figures are in the legend.
            if let Some((size, peak)) = line.peak {
                bandwidth
                    .draw_series([Circle::new(at(size, peak), 7, c.stroke_width(2))])
                    .map_err(draw_err)?;
            }
            if let (Some(half), Some((_, peak))) = (line.half_peak_size_bytes, line.peak) {
                bandwidth
                    .draw_series([TriangleMarker::new(at(half, peak / 2.0), 7, c.filled())])
                    .map_err(draw_err)?;
            }
        }
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
        for (i, line) in drawn() {
            latency
                .draw_series(LineSeries::new(
                    line.points
                        .iter()
                        .filter(|p| p.latency_us > 0.0)
                        .map(|p| (at(p.size_bytes, 0.0).0, p.latency_us.clamp(low, high))),
                    color(i).stroke_width(2),
                ))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size_bytes: f64, bits_per_second: f64, latency_us: f64) -> CurvePoint {
        CurvePoint {
            size_bytes,
            bits_per_second,
            latency_us,
        }
    }

    /// A sweep's perturbed sizes (32765, 32768, 32771) were three points
    /// a hair apart on the log axis: the line hooked up and down at each
    /// power of two (the latency panel's hook at 32-64 KiB).
    #[test]
    fn perturbed_sizes_are_one_point_at_their_power_of_two() {
        assert_eq!(nominal_size(32765.0, 3.0), 32768.0);
        assert_eq!(nominal_size(32771.0, 3.0), 32768.0);
        assert_eq!(nominal_size(32768.0, 3.0), 32768.0);
        assert_eq!(nominal_size(35.0, 3.0), 32.0);
        // Small sizes are sizes of their own: 5 is not 4, 11 not 8.
        assert_eq!(nominal_size(5.0, 3.0), 5.0);
        assert_eq!(nominal_size(11.0, 3.0), 11.0);
        assert_eq!(nominal_size(1000.0, 0.0), 1000.0);
        let doc = serde_json::json!({
            "spec": {"params": {"perturbation_bytes": 3}},
            "streams": [{"sender": {"sweep": {
                "points": [
                    {"size_bytes": 5, "best_bits_per_second": 1e6, "best_latency_us": 9.0},
                    {"size_bytes": 32765, "best_bits_per_second": 3e9, "best_latency_us": 30.0},
                    {"size_bytes": 32768, "best_bits_per_second": 2e9, "best_latency_us": 20.0},
                    {"size_bytes": 32771, "best_bits_per_second": 1e9, "best_latency_us": 40.0}
                ],
                "summary": {"peak_size_bytes": 32765, "peak_bits_per_second": 3e9, "half_peak_size_bytes": 32771}
            }}}]
        });
        let line = crate::report::chart::data::sweep_line("s".into(), &doc, "sweep").unwrap();
        assert_eq!(line.points, [point(5.0, 1e6, 9.0), point(32768.0, 3e9, 20.0)]);
        assert_eq!(line.peak, Some((32768.0, 3e9)));
        assert_eq!(line.half_peak_size_bytes, Some(32768.0));
    }

    #[test]
    fn two_passes_make_one_point_per_size_in_size_order() {
        // Pass 1 then pass 2 over the same sizes: drawn in that order the
        // line went back from 4 to 1 and forth again.
        let passes = [
            point(1.0, 1e6, 7.0),
            point(2.0, 2e6, 7.0),
            point(4.0, 4e6, 8.0),
            point(1.0, 1.5e6, 6.5),
            point(2.0, 1.8e6, 6.9),
            point(4.0, 4.2e6, 0.0),
        ];
        let best = best_per_size(passes);
        assert_eq!(
            best,
            [point(1.0, 1.5e6, 6.5), point(2.0, 2e6, 6.9), point(4.0, 4.2e6, 8.0)]
        );
    }

    /// Two series of the very same points (one file imported under two
    /// tags) drew one line exactly over the other: the legend showed two
    /// names and the picture one line.
    #[test]
    fn a_series_identical_to_another_is_said_so_in_the_legend_and_drawn_once() {
        let line = |name: &str, bits: f64| CurveLine {
            name: name.into(),
            runs: vec![1],
            points: vec![point(1.0, bits, 7.0), point(2.0, 2.0 * bits, 8.0)],
            peak: None,
            half_peak_size_bytes: None,
            line_rate_bits_per_second: None,
        };
        let sweep = SizeCurve {
            title: "t".into(),
            lines: vec![line("nic=a", 1e6), line("nic=b", 1e6), line("nic=c", 3e6)],
        };
        assert_eq!(sweep.same_as(), [None, Some(0), None]);
        let legend = sweep.legend_texts();
        assert_eq!(legend[1], "nic=b: the same points as nic=a (drawn once)");
        assert_eq!(legend[2], "nic=c");
        let svg = crate::report::chart::render_svg(&crate::report::chart::Chart::SizeCurve(sweep), (900, 540)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("data"))
            .flat_map(|g| g.descendants().filter(|n| n.has_tag_name("polyline")))
            .count();
        // Two lines in each panel, not three.
        assert_eq!(lines, 4, "{svg}");
    }

    /// Through a 1 Gbit/s lab router a 64 KiB message passed at the hosts'
    /// speed (the shaper's bucket): the curve rose above the link with
    /// nothing to say so.
    #[test]
    fn the_line_rate_is_drawn_dashed_and_points_above_it_hollow() {
        let line = CurveLine {
            name: "card-1G".into(),
            runs: vec![1],
            points: vec![
                point(1024.0, 0.4e9, 20.0),
                point(65536.0, 2.2e9, 240.0),
                point(4194304.0, 0.95e9, 35000.0),
            ],
            peak: Some((65536.0, 2.2e9)),
            half_peak_size_bytes: None,
            line_rate_bits_per_second: Some(1e9),
        };
        assert_eq!(line.points_above_line_rate(), 1);
        assert!(
            line.legend_text()
                .ends_with("; line rate 1 Gbit/s dashed, 1 size above it hollow, not in the peak"),
            "{}",
            line.legend_text()
        );
        let sweep = SizeCurve {
            title: "t".into(),
            lines: vec![line.clone()],
        };
        let svg = crate::report::chart::render_svg(&crate::report::chart::Chart::SizeCurve(sweep), (900, 540)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let data: Vec<roxmltree::Node> = doc
            .descendants()
            .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("data"))
            .flat_map(|g| g.descendants())
            .collect();
        let small_circles: Vec<&roxmltree::Node> = data
            .iter()
            .filter(|n| n.has_tag_name("circle") && n.attribute("r") == Some("3"))
            .collect();
        assert_eq!(small_circles.len(), 3, "{svg}");
        let hollow = small_circles
            .iter()
            .filter(|n| n.attribute("fill") == Some("none"))
            .count();
        assert_eq!(hollow, 1, "{svg}");
        // The dashed line: short segments across the plot, beyond the curve's own polyline.
        let without = SizeCurve {
            title: "t".into(),
            lines: vec![CurveLine {
                line_rate_bits_per_second: None,
                ..line
            }],
        };
        let plain =
            crate::report::chart::render_svg(&crate::report::chart::Chart::SizeCurve(without), (900, 540)).unwrap();
        let count =
            |svg: &str| svg.matches("<polyline").count() + svg.matches("<line").count() + svg.matches("<path").count();
        assert!(count(&svg) > count(&plain) + 5, "no dashed line drawn");
    }

    #[test]
    fn the_legend_carries_the_peak_and_half_peak_size() {
        let line = CurveLine {
            name: "sweep stream".into(),
            runs: vec![3],
            points: vec![point(1.0, 1e6, 7.0)],
            peak: Some((1048576.0, 28.5e9)),
            half_peak_size_bytes: Some(262144.0),
            line_rate_bits_per_second: None,
        };
        assert_eq!(
            line.legend_text(),
            "sweep stream: peak 28.5 Gbit/s at 1 MiB, n½ 256 KiB"
        );
    }
}
