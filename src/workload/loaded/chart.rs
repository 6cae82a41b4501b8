//! `loaded`: the classic picture of a latency-under-load test, for one
//! run. Two panels share the time axis: above, the receivers' throughput
//! per direction; below, the round trip of every probe kind (UDP probes,
//! TCP request/response on the idle connection, the load streams' own
//! smoothed RTT at each end), on a log scale when idle and loaded round
//! trips lie far apart. The phases (idle, download, upload, both) are
//! shaded and named across both panels. The distribution of the UDP
//! probes' round trips per phase is [`super::chart_cdf`].
//!
//! The data is read from a run document (docs/SCHEMA.md): the schedule,
//! probes and queue samples are the part at `key` of the stream ends
//! carrying one, the phases' windows are at `/sum/KEY/phases`. Both
//! charts are the workload's [`crate::workload::ChartData::PerRun`].

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use crate::chart_kit::legend::{self, Entry, Swatch};
use crate::chart_kit::{
    draw_err, font, log_axis, scale_top, scaled, si, svg, titled, upper, Area, ChartError, Drawing, Keyed, Marks,
    RunChart, AXIS_CEILING, PALETTE,
};

/// A phase's window on the time axis, seconds since the start.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub name: String,
    pub start: f64,
    pub end: f64,
}

/// One direction's receiver throughput: (start s, end s, bit/s) steps.
#[derive(Debug, Clone)]
pub struct RateLine {
    pub name: String,
    pub steps: Vec<(f64, f64, f64)>,
}

/// One probe kind's round trips: (seconds since the start, round trip in
/// seconds); None where a probe got no answer or no sample was taken (a
/// load stream's RTT while it does not send).
#[derive(Debug, Clone)]
pub struct RttLine {
    pub name: String,
    pub points: Vec<(f64, Option<f64>)>,
}

/// The time-series view of one run.
#[derive(Debug, Clone)]
pub struct LoadTimeline {
    pub title: String,
    pub phases: Vec<Span>,
    pub rates: Vec<RateLine>,
    pub rtts: Vec<RttLine>,
}

/// The part at `key` of each stream end that carries one, with its party
/// (`client`, `agent`).
pub(crate) fn parts<'a>(doc: &'a Value, key: &str) -> Vec<(&'a str, &'a Value)> {
    let Some(streams) = doc["streams"].as_array() else {
        return Vec::new();
    };
    streams
        .iter()
        .flat_map(|s| [&s["sender"][key], &s["receiver"][key]])
        .filter(|p| p.is_object())
        .map(|p| (p["party"].as_str().unwrap_or(""), p))
        .collect()
}

/// The part of `party`, if one of the stream ends carries it.
pub(crate) fn part_of<'a>(doc: &'a Value, key: &str, party: &str) -> Option<&'a Value> {
    parts(doc, key).into_iter().find(|(p, _)| *p == party).map(|(_, v)| v)
}

/// Microseconds as seconds.
fn micros(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite()).map(|x| x / 1e6)
}

/// The idle phase and each load phase, in order: the idle from the start
/// to its length in the schedule, the load phases from `/sum/KEY/phases`.
/// Empty when the document has no phases.
pub fn phases(doc: &Value, key: &str) -> Vec<Span> {
    let Some(loaded) = doc["sum"][key]["phases"].as_array() else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    let idle = parts(doc, key).iter().find_map(|(_, p)| p["idle_seconds"].as_f64());
    if let Some(idle) = idle.filter(|s| *s > 0.0) {
        spans.push(Span {
            name: "idle".into(),
            start: 0.0,
            end: idle,
        });
    }
    spans.extend(loaded.iter().filter_map(|p| {
        let start = p["start_seconds"].as_f64()?;
        Some(Span {
            name: p["name"].as_str()?.to_string(),
            start,
            end: start + p["seconds"].as_f64()?,
        })
    }));
    spans
}

/// The receivers' throughput per direction, the streams of one direction
/// summed interval by interval (the ends count intervals from their own
/// starts, a few ms apart: intervals are matched by their index).
pub fn rates(doc: &Value) -> Vec<RateLine> {
    let streams = doc["streams"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let intervals = |s: &Value| -> Vec<(f64, f64, f64)> {
        s["receiver"]["intervals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| {
                Some((
                    i["start_seconds"].as_f64()?,
                    i["end_seconds"].as_f64()?,
                    i["bits_per_second"].as_f64()?,
                ))
            })
            .collect()
    };
    let mut lines = Vec::new();
    for (flow, name) in [
        ("agent_to_client", "download (agent -> client)"),
        ("client_to_agent", "upload (client -> agent)"),
    ] {
        let mut sum: Vec<(f64, f64, f64)> = Vec::new();
        for s in streams.iter().filter(|s| s["flow"] == flow) {
            for (i, (start, end, rate)) in intervals(s).into_iter().enumerate() {
                match sum.get_mut(i) {
                    Some(step) => step.2 += rate,
                    None => sum.push((start, end, rate)),
                }
            }
        }
        if !sum.is_empty() {
            lines.push(RateLine {
                name: name.into(),
                steps: sum,
            });
        }
    }
    lines
}

/// Each probe kind's round trips over time; a kind without a single
/// sample is left out.
pub fn rtts(doc: &Value, key: &str) -> Vec<RttLine> {
    let rows = |part: Option<&Value>, field: &str, at: usize| -> Vec<(f64, Option<f64>)> {
        part.and_then(|p| p[field].as_array())
            .into_iter()
            .flatten()
            .filter_map(|row| Some((micros(&row[0])?, micros(&row[at]))))
            .collect()
    };
    let client = part_of(doc, key, "client");
    let agent = part_of(doc, key, "agent");
    let lines = [
        ("UDP probes", rows(client, "udp_probes", 1)),
        ("TCP probes, idle connection (foreign)", rows(client, "tcp_probes", 1)),
        ("load streams' srtt, client sending (self)", rows(client, "queues", 1)),
        ("load streams' srtt, agent sending (self)", rows(agent, "queues", 1)),
    ];
    lines
        .into_iter()
        .filter(|(_, points)| points.iter().any(|p| p.1.is_some()))
        .map(|(name, points)| RttLine {
            name: name.into(),
            points,
        })
        .collect()
}

/// Pixels between the plot's right edge and a note that would touch it.
const NOTE_INSET: i32 = 8;

impl LoadTimeline {
    /// The view of `doc`, titled after `run` (its label); None when the
    /// document has no phases or no probe.
    pub fn of(doc: &Value, key: &str, run: &str) -> Option<LoadTimeline> {
        let phases = phases(doc, key);
        let rtts = rtts(doc, key);
        if phases.is_empty() || rtts.is_empty() {
            return None;
        }
        Some(LoadTimeline {
            title: format!("Throughput and round trips under load, {run}"),
            phases,
            rates: rates(doc),
            rtts,
        })
    }

    /// Every series, in legend order.
    pub fn series_names(&self) -> Vec<String> {
        let rates = self.rates.iter().map(|r| r.name.clone());
        rates.chain(self.rtts.iter().map(|r| r.name.clone())).collect()
    }

    /// The round trips' axis: log when the slowest is more than 20 times
    /// the fastest (idle and loaded both readable), else linear from 0.
    pub(crate) fn rtt_axis(&self) -> Keyed {
        let all = || self.rtts.iter().flat_map(|l| l.points.iter().filter_map(|p| p.1));
        let low = all().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let high = all().fold(0.0, f64::max);
        if low.is_finite() && high > 20.0 * low {
            log_axis(low, high)
        } else {
            let top = upper(high);
            let step = nice_step(top / 5.0);
            let ticks = (0..).map(|i| i as f64 * step).take_while(|v| *v <= top).collect();
            Keyed::linear(0.0..top, ticks)
        }
    }

    /// The top of the throughput panel: the highest rate of the intervals
    /// that make up the run; a sliver at the end (a few bytes over almost
    /// no time) is drawn clipped, with its value, instead of setting the
    /// scale ([`scale_top`]).
    pub fn rate_top(&self) -> f64 {
        scale_top(self.rates.iter().flat_map(|r| &r.steps))
    }

    fn end(&self) -> f64 {
        let phases = self.phases.iter().map(|p| p.end);
        let rates = self.rates.iter().flat_map(|r| r.steps.iter().map(|s| s.1));
        // Within the axis ceiling: a stored phase of 1.7e308 s made
        // plotters' tick search on the time axis loop for ever.
        phases.chain(rates).fold(0.0, f64::max).clamp(1e-3, AXIS_CEILING)
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let entries: Vec<Entry> = self
            .series_names()
            .into_iter()
            .enumerate()
            .map(|(i, text)| Entry {
                swatch: Swatch::Line,
                color: series_color(i),
                text,
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let (_, h) = area.dim_in_pixel();
        let (top, bottom) = area.split_vertically(h * 2 / 5);
        let end = self.end();

        let ceiling = upper(self.rate_top());
        let mut rate = ChartBuilder::on(&top)
            .margin(12)
            .margin_bottom(4)
            .x_label_area_size(6)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..end, 0f64..ceiling)
            .map_err(draw_err)?;
        self.shade(&mut rate.plotting_area().clone(), marks, 0.0, ceiling, true)?;
        marks.set("axes");
        rate.configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|_| String::new())
            .y_label_formatter(&|v| si(*v))
            .y_desc("throughput (bit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        let note = font(11).pos(Pos::new(HPos::Right, VPos::Top));
        for (i, line) in self.rates.iter().enumerate() {
            let steps = line.steps.iter().flat_map(|(s, e, r)| {
                // Within both axes (a stored 1.7e308 overflows plotters'
                // pixel arithmetic); what is above the scale is named below.
                let r = r.clamp(0.0, ceiling);
                [(s.clamp(0.0, end), r), (e.clamp(0.0, end), r)]
            });
            rate.draw_series(LineSeries::new(steps, series_color(i).stroke_width(2)))
                .map_err(draw_err)?;
            // Each interval above the scale is named where it starts, under
            // the phases' names, its text ending there; one that starts at
            // the right edge ends a few pixels inside it, not cut by the edge.
            let pixels = rate.plotting_area().strip_coord_spec();
            let (base_x, base_y) = pixels.get_base_pixel();
            let right = pixels.dim_in_pixel().0 as i32 - NOTE_INSET;
            for (start, stop, r) in line.steps.iter().filter(|s| s.2 > ceiling) {
                let text = format!("↑ {}bit/s over {} s", si(*r), seconds(stop - start));
                let (x, y) = rate.backend_coord(&(start.clamp(0.0, end), ceiling * 0.9));
                pixels
                    .draw(&Text::new(text, ((x - base_x).min(right), y - base_y), note.clone()))
                    .map_err(draw_err)?;
            }
        }

        let axis = self.rtt_axis();
        let (low, high) = (axis.range.start, axis.range.end);
        let log = axis.log;
        let mut rtt = ChartBuilder::on(&bottom)
            .margin(12)
            .margin_top(4)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..end, axis)
            .map_err(draw_err)?;
        self.shade(&mut rtt.plotting_area().clone(), marks, low, high, false)?;
        marks.set("axes");
        rtt.configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|v| seconds(*v))
            .y_label_formatter(&|v| si(*v))
            .x_desc("time since the start (s)")
            .y_desc(if log { "round trip (s, log)" } else { "round trip (s)" })
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        // The UDP probes (the first) drawn last, on top of the others.
        for (i, line) in self.rtts.iter().enumerate().rev() {
            let c = series_color(self.rates.len() + i);
            let width = if line.name.contains("(self)") { 2 } else { 1 };
            // A line through the answered samples, broken where none came.
            for run in line.points.split(|p| p.1.is_none()) {
                let points = run
                    .iter()
                    .filter_map(|(t, v)| Some((t.clamp(0.0, end), (*v)?.clamp(low, high))));
                rtt.draw_series(LineSeries::new(points, c.stroke_width(width)))
                    .map_err(draw_err)?;
            }
        }
        Ok(())
    }

    /// Shades each phase across the panel from `low` to `high`, its name
    /// written at the top of the `named` panel.
    fn shade<DB: DrawingBackend, Y: plotters::coord::ranged1d::Ranged<ValueType = f64>>(
        &self,
        area: &mut DrawingArea<DB, plotters::coord::cartesian::Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
        marks: &Marks,
        low: f64,
        high: f64,
        named: bool,
    ) -> Result<(), ChartError> {
        marks.set("phases");
        let label = font(13).pos(Pos::new(HPos::Center, VPos::Top));
        // Within the time axis: a stored phase far past it (1.7e308 s) is
        // mapped to pixels beyond i32, which overflows in plotters.
        let end = self.end();
        for span in &self.phases {
            let (start, stop) = (span.start.clamp(0.0, end), span.end.clamp(0.0, end));
            area.draw(&Rectangle::new(
                [(start, low), (stop, high)],
                phase_tint(&span.name).filled(),
            ))
            .map_err(draw_err)?;
            if named {
                area.draw(&Text::new(
                    span.name.clone(),
                    ((start + stop) / 2.0, high),
                    label.clone(),
                ))
                .map_err(draw_err)?;
            }
        }
        Ok(())
    }
}

/// Seconds with at most three decimals: `0.25`, `1`, `10.5`.
fn seconds(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

/// The colours of the series: throughput blue and orange, then the probe
/// kinds in colours the phases' tints do not use.
fn series_color(i: usize) -> RGBColor {
    const ORDER: [usize; 6] = [0, 1, 4, 2, 5, 6];
    PALETTE[ORDER[i % ORDER.len()]]
}

/// A phase's colour: idle grey, download blue, upload orange, both green.
pub(crate) fn phase_color(name: &str) -> RGBColor {
    match name {
        "idle" => RGBColor(90, 90, 90),
        "download" => PALETTE[0],
        "upload" => PALETTE[1],
        "bidirectional" => PALETTE[2],
        _ => PALETTE[7],
    }
}

/// The phase's colour, faint enough to lie under the lines.
fn phase_tint(name: &str) -> RGBColor {
    let RGBColor(r, g, b) = phase_color(name);
    let faint = |c: u8| 255 - ((255 - c as u32) * 12 / 100) as u8;
    RGBColor(faint(r), faint(g), faint(b))
}

impl Drawing for LoadTimeline {
    fn title(&self) -> &str {
        &self.title
    }

    fn description(&self) -> String {
        format!(
            "Receiver throughput per direction above, probe round trips below ({}), over time, \
             the phases shaded: {}; series: {}.",
            if self.rtt_axis().log {
                "log scale"
            } else {
                "linear scale"
            },
            self.phases
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
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

impl RunChart for LoadTimeline {
    fn series_names(&self) -> Vec<String> {
        LoadTimeline::series_names(self)
    }

    /// Two panels over one time axis: taller than the others.
    fn size_on_page(&self, (width, height): (u32, u32)) -> (u32, u32) {
        (width, height * 5 / 4)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A real run: `nicbench loaded 127.0.0.1 --idle 1s --phase-time 1s
    /// -P 1 --probe-interval 20ms --json` against a loopback agent.
    pub(crate) fn fixture() -> Value {
        serde_json::from_str(include_str!("../../../tests/fixtures/loaded-loopback.json")).unwrap()
    }

    #[test]
    fn the_phases_are_shaded_where_the_schedule_put_them() {
        let doc = fixture();
        let spans = phases(&doc, "loaded");
        let at = |name: &str, start: f64, end: f64| Span {
            name: name.into(),
            start,
            end,
        };
        assert_eq!(
            spans,
            [
                at("idle", 0.0, 1.0),
                at("download", 1.0, 2.0),
                at("upload", 2.0, 3.0),
                at("bidirectional", 3.0, 4.0)
            ]
        );
        // The chart's x axis covers them all.
        let chart = LoadTimeline::of(&doc, "loaded", "run 1").unwrap();
        assert!(chart.end() >= 4.0, "{}", chart.end());
    }

    #[test]
    fn every_probe_kind_is_a_series_of_its_own() {
        let chart = LoadTimeline::of(&fixture(), "loaded", "run 1").unwrap();
        let names: Vec<&str> = chart.rtts.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "UDP probes",
                "TCP probes, idle connection (foreign)",
                "load streams' srtt, client sending (self)",
                "load streams' srtt, agent sending (self)"
            ]
        );
        // The load streams' own RTT exists only while they send: none idle.
        for own in &chart.rtts[2..] {
            assert!(
                own.points.iter().filter(|p| p.0 < 1.0).all(|p| p.1.is_none()),
                "{}",
                own.name
            );
        }
        // The client sends in upload (2-3 s), the agent in download (1-2 s).
        let sends =
            |line: &RttLine, from: f64, to: f64| line.points.iter().any(|p| (from..to).contains(&p.0) && p.1.is_some());
        assert!(sends(&chart.rtts[2], 2.0, 3.0) && !sends(&chart.rtts[2], 1.1, 1.9));
        assert!(sends(&chart.rtts[3], 1.0, 2.0) && !sends(&chart.rtts[3], 2.1, 2.9));
    }

    #[test]
    fn throughput_is_summed_per_direction_and_follows_the_phases() {
        let doc = fixture();
        let chart = LoadTimeline::of(&doc, "loaded", "run 1").unwrap();
        let names: Vec<&str> = chart.rates.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["download (agent -> client)", "upload (client -> agent)"]);
        let mean = |line: &RateLine, from: f64, to: f64| {
            let inside: Vec<f64> = line
                .steps
                .iter()
                .filter(|s| s.0 >= from && s.1 <= to)
                .map(|s| s.2)
                .collect();
            inside.iter().sum::<f64>() / inside.len() as f64
        };
        let (download, upload) = (&chart.rates[0], &chart.rates[1]);
        // Idle moves nothing; download loads one way, upload the other.
        assert_eq!(mean(download, 0.0, 1.0) + mean(upload, 0.0, 1.0), 0.0);
        assert!(mean(download, 1.25, 1.9) > 10.0 * mean(upload, 1.25, 1.9).max(1.0));
        assert!(mean(upload, 2.25, 2.9) > 10.0 * mean(download, 2.25, 2.9).max(1.0));
    }

    /// The lab run's picture had its scale set by the last 2 ms of upload
    /// (1.1 Gbit/s), flattening 95 Mbit/s phases to the axis.
    #[test]
    fn a_sliver_interval_at_the_end_does_not_set_the_throughput_scale() {
        let mut chart = LoadTimeline::of(&fixture(), "loaded", "run 1").unwrap();
        let whole = chart.rate_top();
        let upload = &mut chart.rates[1].steps;
        let end = upload.last().unwrap().1;
        upload.push((end, end + 0.002, whole * 20.0));
        assert_eq!(chart.rate_top(), whole);
    }

    /// A note on an interval above the scale ends where the interval starts,
    /// except at the right edge, where it ends a few pixels inside the plot
    /// (the lab picture's "0.093 s" lost its last letter to the edge).
    #[test]
    fn a_note_at_the_right_edge_ends_inside_the_plot() {
        let mut chart = LoadTimeline::of(&fixture(), "loaded", "run 1").unwrap();
        let whole = chart.rate_top();
        let upload = &mut chart.rates[1].steps;
        let end = upload.last().unwrap().1;
        for start in [1.0, 2.0, end] {
            upload.push((start, start + 0.001_f64.min(end - start).max(0.0), whole * 20.0));
        }
        let svg = crate::chart_kit::render_svg(&chart, (1000, 600)).unwrap();
        let xs: Vec<f64> = svg
            .split("<text")
            .filter(|t| t.contains('↑'))
            .map(|t| {
                let x = t.split(" x=\"").nth(1).unwrap();
                x[..x.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(xs.len(), 3, "{svg}");
        let per_second = xs[1] - xs[0];
        assert!(per_second > 100.0, "{xs:?}");
        let unclamped = xs[0] + (end - 1.0) * per_second;
        let inset = unclamped - xs[2];
        assert!(
            (f64::from(NOTE_INSET) - 1.5..=f64::from(NOTE_INSET) + 1.5).contains(&inset),
            "the note at the edge should end {NOTE_INSET} px inside it: {xs:?}, {inset} px"
        );
    }

    #[test]
    fn the_round_trip_axis_is_log_only_when_idle_and_loaded_lie_far_apart() {
        let line = |values: &[f64]| RttLine {
            name: "UDP probes".into(),
            points: values.iter().enumerate().map(|(i, v)| (i as f64, Some(*v))).collect(),
        };
        let chart = |values: &[f64]| LoadTimeline {
            title: String::new(),
            phases: Vec::new(),
            rates: Vec::new(),
            rtts: vec![line(values)],
        };
        // 0.1 ms idle, 200 ms behind a deep queue: log.
        assert!(chart(&[1e-4, 0.2]).rtt_axis().log);
        // 10 ms to 30 ms: linear from 0, ticks 1-2-5 spaced.
        let linear = chart(&[0.01, 0.03]).rtt_axis();
        assert!(!linear.log);
        assert_eq!(linear.range.start, 0.0);
        assert!(linear.range.end >= 0.03);
        assert_eq!(&linear.points[..3], [0.0, 0.01, 0.02]);
    }

    #[test]
    fn a_document_without_phases_or_probes_is_not_drawn() {
        let mut doc = fixture();
        doc["sum"]["loaded"]["phases"] = Value::Null;
        assert!(LoadTimeline::of(&doc, "loaded", "run 1").is_none());
        let tcp: Value = serde_json::from_str(include_str!("../../../tests/fixtures/run-tcp.json")).unwrap();
        assert!(LoadTimeline::of(&tcp, "loaded", "run 1").is_none());
    }
}
