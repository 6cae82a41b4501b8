//! `cpu`: CPU utilisation of both ends per configuration, stacked by kind
//! (user, system, softirq, irq), with the receiver throughput beside it —
//! the "CPU load" chart of a NIC roundup.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{color, draw_err, font, legend, si, titled, upper, Area, ChartError, Keyed, Marks};

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
        let group_name = |v: &f64| {
            groups
                .get(v.floor().max(0.0) as usize)
                .map(|g| g.name.clone())
                .unwrap_or_default()
        };
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers.clone()), 0f64..118.0)
            .map_err(draw_err)?;
        marks.set("axes");
        let x_desc = format!("{} (bars: c = client, a = agent)", self.group_key);
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
        marks.set("data");
        let sides = |g: &CpuGroup| [(0.12, g.client), (0.53, g.agent)];
        for (p, (name, c)) in PARTS.iter().enumerate() {
            let c = *c;
            let rects: Vec<Rectangle<(f64, f64)>> = self
                .groups
                .iter()
                .enumerate()
                .flat_map(|(i, g)| {
                    sides(g).map(|(offset, parts)| {
                        let below: f64 = parts[..p].iter().sum();
                        let x0 = i as f64 + offset;
                        Rectangle::new([(x0, below), (x0 + 0.35, below + parts[p])], c.filled())
                    })
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(draw_err)?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
        }
        let tag = font(11).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(self.groups.iter().enumerate().flat_map(|(i, g)| {
                let total = |parts: [f64; 4]| parts.iter().sum::<f64>();
                [
                    Text::new(
                        format!("c {:.0}%", total(g.client)),
                        (i as f64 + 0.295, total(g.client)),
                        tag.clone(),
                    ),
                    Text::new(
                        format!("a {:.0}%", total(g.agent)),
                        (i as f64 + 0.705, total(g.agent)),
                        tag.clone(),
                    ),
                ]
            }))
            .map_err(draw_err)?;
        legend(&mut chart, marks, SeriesLabelPosition::UpperLeft)?;
        let Some(right) = right else { return Ok(()) };
        let top = self
            .groups
            .iter()
            .filter_map(|g| g.throughput_bits_per_second)
            .fold(0.0, f64::max);
        let mut rate = ChartBuilder::on(&right)
            .margin(12)
            .x_label_area_size(44)
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
            .x_desc(self.group_key.as_str())
            .y_desc("receiver throughput (bit/s)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        let c = color(4);
        rate.draw_series(self.groups.iter().enumerate().filter_map(|(i, g)| {
            let v = g.throughput_bits_per_second?;
            Some(Rectangle::new([(i as f64 + 0.2, 0.0), (i as f64 + 0.8, v)], c.filled()))
        }))
        .map_err(draw_err)?;
        Ok(())
    }
}
