//! `bars`: a metric per configuration, grouped by one key and coloured by
//! another, with the spread of repeated runs (min-max) as error bars.

use plotters::prelude::*;

use super::{base_unit, color, draw_err, font, legend, si, titled, upper, Area, ChartError, Keyed, Marks};
use crate::report::compare::{col_label, Table};

/// One bar: the statistic of a cell of the comparison table.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: usize,
    pub series: usize,
    pub value: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    /// What the bars measure, e.g. "receiver throughput".
    pub axis: String,
    /// The metric's unit in the store (bit/s, %, us, ...).
    pub unit: String,
    pub group_key: String,
    pub series_key: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub bars: Vec<Bar>,
}

impl Bars {
    /// The bars of a comparison table: its rows are the groups, its
    /// columns the series.
    pub fn from_table(table: &Table, axis: &str, stat: &str) -> Bars {
        let groups: Vec<String> = table.rows.iter().map(|r| col_label(r)).collect();
        let series: Vec<String> = table.cols.iter().map(|c| col_label(c)).collect();
        let bars = table
            .cells
            .iter()
            .filter_map(|c| {
                Some(Bar {
                    group: table.rows.iter().position(|r| *r == c.row)?,
                    series: table.cols.iter().position(|s| *s == c.col)?,
                    value: c.value,
                    min: c.min,
                    max: c.max,
                    runs: c.runs,
                })
            })
            .collect();
        let group_key = table.row_keys.join(" / ");
        let series_key = table.col_keys.join(" / ");
        let by = if series_key.is_empty() {
            String::new()
        } else {
            format!(" and {series_key}")
        };
        Bars {
            title: format!("{axis} by {group_key}{by} ({stat}, bars: min-max)"),
            axis: axis.into(),
            unit: table.unit.clone(),
            group_key,
            series_key,
            groups,
            series,
            bars,
        }
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let (factor, unit) = base_unit(&self.unit);
        let n = self.groups.len().max(1);
        let top = self
            .bars
            .iter()
            .map(|b| b.max.max(b.value) * factor)
            .fold(0.0, f64::max);
        let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers), 0f64..upper(top))
            .map_err(draw_err)?;
        marks.set("axes");
        let groups = &self.groups;
        let group_name = |v: &f64| groups.get(v.floor().max(0.0) as usize).cloned().unwrap_or_default();
        let y_name = format!("{} ({unit})", self.axis);
        chart
            .configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_label_formatter(&group_name)
            .y_label_formatter(&|v| si(*v))
            .x_desc(self.group_key.as_str())
            .y_desc(y_name.as_str())
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        let k = self.series.len().max(1);
        let width = 0.8 / k as f64;
        let x_of = |b: &Bar| b.group as f64 + 0.1 + b.series as f64 * width;
        let show_values = self.bars.len() <= 24;
        for (s, name) in self.series.iter().enumerate() {
            let c = color(s);
            let mine: Vec<&Bar> = self.bars.iter().filter(|b| b.series == s).collect();
            chart
                .draw_series(mine.iter().map(|b| {
                    let x0 = x_of(b);
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, b.value * factor)], c.filled())
                }))
                .map_err(draw_err)?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
            let whisker = |b: &&Bar| {
                let xc = x_of(b) + width * 0.45;
                let cap = width * 0.15;
                let (lo, hi) = (b.min * factor, b.max * factor);
                vec![
                    PathElement::new(vec![(xc, lo), (xc, hi)], BLACK.stroke_width(1)),
                    PathElement::new(vec![(xc - cap, lo), (xc + cap, lo)], BLACK.stroke_width(1)),
                    PathElement::new(vec![(xc - cap, hi), (xc + cap, hi)], BLACK.stroke_width(1)),
                ]
            };
            chart
                .draw_series(mine.iter().filter(|b| b.runs > 1).flat_map(whisker))
                .map_err(draw_err)?;
            if show_values {
                let label = font(11).pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Bottom,
                ));
                chart
                    .draw_series(mine.iter().map(|b| {
                        let xc = x_of(b) + width * 0.45;
                        Text::new(si(b.value * factor), (xc, b.max.max(b.value) * factor), label.clone())
                    }))
                    .map_err(draw_err)?;
            }
        }
        if !self.series_key.is_empty() {
            legend(&mut chart, marks, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    }
}
