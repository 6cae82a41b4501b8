//! `cpu`: CPU utilisation of both ends per configuration, stacked by kind
//! (user, system, softirq, irq), with the receiver throughput beside it —
//! the "CPU load" chart of a NIC roundup.

use plotters::prelude::*;

use super::bars::{draw_group_names, group_label_room, value_label, GroupNames};
use super::legend::{self, Entry, Swatch};
use super::{color, draw_err, font, si, titled, upper, Area, ChartError, Keyed, Marks};

/// The kinds of CPU time, bottom to top, and their colours.
pub const PARTS: [(&str, RGBColor); 4] = [
    ("user", RGBColor(31, 119, 180)),
    ("system", RGBColor(255, 127, 14)),
    ("softirq", RGBColor(44, 160, 44)),
    ("irq", RGBColor(214, 39, 40)),
];

/// One configuration: mean CPU percentages of its runs (user, system,
/// softirq, irq, of all cores) on each end, and its median throughput.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuGroup {
    pub name: String,
    pub runs: usize,
    pub client: [f64; 4],
    pub agent: [f64; 4],
    pub throughput_bits_per_second: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct Cpu {
    pub title: String,
    pub group_key: String,
    pub groups: Vec<CpuGroup>,
}

impl Cpu {
    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let entries: Vec<Entry> = PARTS
            .iter()
            .map(|(name, c)| Entry {
                swatch: Swatch::Box,
                color: *c,
                text: name.to_string(),
            })
            .collect();
        let area = legend::strip(&area, marks, &entries)?;
        let with_rate = self.groups.iter().any(|g| g.throughput_bits_per_second.is_some());
        let (left, right) = if with_rate {
            let (w, _) = area.dim_in_pixel();
            let (l, r) = area.split_horizontally(w * 62 / 100);
            (l, Some(r))
        } else {
            (area.clone(), None)
        };
        let n = self.groups.len().max(1);
        let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let groups = &self.groups;
        // Names wider than their group are wrapped or written upright, in
        // both panels alike (the narrower decides), so the plots stay level;
        // a name per cell of the tables may take more room than a bar
        // chart's (the plot's 0-100% scale needs less).
        let names: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
        let (shown, label_room) = group_label_room(right.as_ref().unwrap_or(&left), &names, 108, 0.55);
        let upright = shown == GroupNames::Upright;
        let apart = shown.drawn_apart();
        let group_name = |v: &f64| {
            if apart {
                return String::new();
            }
            groups
                .get(v.floor().max(0.0) as usize)
                .map(|g| g.name.clone())
                .unwrap_or_default()
        };
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(label_room)
            .y_label_area_size(60)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers.clone()), 0f64..118.0)
            .map_err(draw_err)?;
        marks.set("axes");
        let x_desc = if upright {
            "bars: c = client, a = agent".to_string()
        } else {
            format!("{} (bars: c = client, a = agent)", self.group_key)
        };
        chart
            .configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_label_formatter(&group_name)
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_desc(x_desc.as_str())
            .y_desc("CPU busy (% of all cores)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        draw_group_names(&mut chart, &left, &names, &shown, label_room)?;
        marks.set("data");
        let sides = |g: &CpuGroup| [(0.12, g.client, "client"), (0.53, g.agent, "agent")];
        for (i, g) in self.groups.iter().enumerate() {
            for (offset, parts, side) in sides(g) {
                let total: f64 = parts.iter().sum();
                let split: Vec<String> = PARTS
                    .iter()
                    .zip(parts)
                    .map(|((name, _), v)| format!("{name} {v:.1}%"))
                    .collect();
                marks.tip(Some(format!(
                    "{}, {side}: {total:.1}% busy\n{}\n{} run(s)",
                    g.name,
                    split.join(", "),
                    g.runs
                )));
                let x0 = i as f64 + offset;
                let mut below = 0.0;
                let rects: Vec<Rectangle<(f64, f64)>> = PARTS
                    .iter()
                    .zip(parts)
                    .map(|((_, c), v)| {
                        // Within the axis: a stored -1.7e308 overflows
                        // plotters' pixel arithmetic.
                        let top = (below + v).clamp(below, 118.0);
                        let r = Rectangle::new([(x0, below), (x0 + 0.35, top)], c.filled());
                        below = top;
                        r
                    })
                    .collect();
                chart.draw_series(rects).map_err(draw_err)?;
            }
        }
        marks.tip(None);
        // "c 99%" over the client's bar and "a 12%" over the agent's, when
        // they fit the bar (level or upright); else the tip and x title say it.
        let plot_width = chart.plotting_area().dim_in_pixel().0 as f64;
        let bar_pixels = plot_width / n as f64 * 0.35;
        let plot = chart.plotting_area().clone();
        let labels: Vec<_> = self
            .groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| {
                sides(g).map(|(offset, parts, side)| {
                    let total: f64 = parts.iter().sum();
                    let text = format!("{} {total:.0}%", &side[..1]);
                    value_label(
                        &plot,
                        text,
                        (i as f64 + offset + 0.175, total.clamp(0.0, 118.0)),
                        bar_pixels,
                    )
                })
            })
            .flatten()
            .collect();
        chart.draw_series(labels).map_err(draw_err)?;
        let Some(right) = right else { return Ok(()) };
        let top = self
            .groups
            .iter()
            .filter_map(|g| g.throughput_bits_per_second)
            .fold(0.0, f64::max);
        let mut rate = ChartBuilder::on(&right)
            .margin(12)
            .x_label_area_size(label_room)
            // SI tick labels ("350 M") are wider than the left panel's "100":
            // room for them and the axis title, as the other charts give.
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers), 0f64..upper(top))
            .map_err(draw_err)?;
        marks.set("axes");
        rate.configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_label_formatter(&group_name)
            .y_label_formatter(&|v| si(*v))
            .x_desc(if upright { "" } else { self.group_key.as_str() })
            .y_desc("receiver throughput (bit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        draw_group_names(&mut rate, &right, &names, &shown, label_room)?;
        marks.set("data");
        let c = color(4);
        for (i, g) in self.groups.iter().enumerate() {
            let Some(v) = g.throughput_bits_per_second else {
                continue;
            };
            marks.tip(Some(format!("{}\nreceiver throughput {}bit/s (median)", g.name, si(v))));
            let v = v.clamp(0.0, upper(top));
            rate.draw_series([Rectangle::new([(i as f64 + 0.2, 0.0), (i as f64 + 0.8, v)], c.filled())])
                .map_err(draw_err)?;
        }
        marks.tip(None);
        Ok(())
    }
}
