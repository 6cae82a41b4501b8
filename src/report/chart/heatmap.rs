//! `heatmap`: the mesh matrix, senders down and receivers across, each cell
//! coloured by its share of the best cell and labelled with its figure;
//! failed cells hatched grey, outlier cells framed in red.

use plotters::prelude::*;

use super::{draw_err, font, in_unit, titled, Area, ChartError, Marks};
use crate::mesh::matrix::MeshResult;
use crate::mesh::outliers::Outlier;

#[derive(Debug, Clone)]
pub struct Heatmap {
    pub title: String,
    pub names: Vec<String>,
    /// `cells[src][dst]`: the figure, None when not measured.
    pub cells: Vec<Vec<Option<f64>>>,
    /// Each cell's share of the best (0..1), for the colour.
    pub shares: Vec<Vec<Option<f64>>>,
    /// The unit the labels are in (`bit/s`, `s`).
    pub unit: String,
    /// Cells named by an outlier (a host's whole row/column, or a path).
    pub flagged: Vec<(usize, usize)>,
    /// Hosts left out of the mesh (down, refused): their cells say so.
    pub down: Vec<bool>,
    /// The outliers in words (what the red frames mean).
    pub findings: Vec<String>,
}

impl Heatmap {
    pub fn of(mesh: &MeshResult) -> Heatmap {
        let cells = mesh.square();
        let shares = cells
            .iter()
            .map(|row| row.iter().map(|v| v.map(|v| mesh.share(v))).collect())
            .collect();
        let n = mesh.hosts.len();
        let mut flagged = Vec::new();
        for o in &mesh.outliers {
            match o.outlier {
                Outlier::Path {
                    src, dst, both_ways, ..
                } => {
                    flagged.push((src, dst));
                    if both_ways {
                        flagged.push((dst, src));
                    }
                }
                Outlier::Host {
                    host, sends, receives, ..
                } => {
                    for k in (0..n).filter(|&k| k != host) {
                        if sends {
                            flagged.push((host, k));
                        }
                        if receives {
                            flagged.push((k, host));
                        }
                    }
                }
            }
        }
        flagged.retain(|&(i, j)| cells[i][j].is_some());
        let what = match mesh.unit.as_str() {
            "s" => "median round trip (s)",
            _ => "receiver throughput (bit/s)",
        };
        // A mesh left at its default name is not named twice ("Mesh mesh").
        let name = if mesh.mesh.eq_ignore_ascii_case("mesh") || mesh.mesh.is_empty() {
            String::new()
        } else {
            format!(" “{}”", mesh.mesh)
        };
        Heatmap {
            title: format!("Mesh{name} ({}): {what}, sender → receiver", mesh.workload),
            names: mesh.hosts.iter().map(|h| h.name.clone()).collect(),
            cells,
            shares,
            unit: mesh.unit.clone(),
            flagged,
            down: mesh.hosts.iter().map(|h| h.status != "ok").collect(),
            findings: mesh.outliers.iter().map(|o| o.words.clone()).collect(),
        }
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        // The colour scale at the right: what a colour means.
        let (w, _) = area.dim_in_pixel();
        let (area, scale) = area.split_horizontally(w.saturating_sub(SCALE_WIDTH));
        self.draw_scale(&scale, marks)?;
        let n = self.names.len().max(1);
        let label_room = self
            .names
            .iter()
            .map(|s| s.chars().count() as u32 * 8 + 16)
            .max()
            .unwrap_or(40)
            .clamp(40, 160);
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_room)
            .build_cartesian_2d(0f64..n as f64, 0f64..n as f64)
            .map_err(draw_err)?;
        marks.set("axes");
        let name_at = |v: f64, flip: bool| -> String {
            let i = v.floor() as usize;
            let i = if flip { n.saturating_sub(1).saturating_sub(i) } else { i };
            self.names.get(i).cloned().unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(n * 2 + 1)
            .y_labels(n * 2 + 1)
            .x_label_formatter(&|v| {
                if (v.fract() - 0.5).abs() < 1e-6 {
                    name_at(*v, false)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| {
                if (v.fract() - 0.5).abs() < 1e-6 {
                    name_at(*v, true)
                } else {
                    String::new()
                }
            })
            .x_desc("receiver")
            .y_desc("sender")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        marks.set("data");
        for (i, row) in self.cells.iter().enumerate() {
            for (j, value) in row.iter().enumerate() {
                // Row 0 at the top.
                let (x0, y0) = (j as f64, (n - 1 - i) as f64);
                let fill = match (i == j, self.shares[i][j]) {
                    (true, _) => RGBColor(255, 255, 255),
                    (false, Some(share)) => ramp(share),
                    (false, None) => RGBColor(200, 200, 200),
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0 + 0.02, y0 + 0.02), (x0 + 0.98, y0 + 0.98)],
                        fill.filled(),
                    )))
                    .map_err(draw_err)?;
                if self.flagged.contains(&(i, j)) {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(x0 + 0.04, y0 + 0.04), (x0 + 0.96, y0 + 0.96)],
                            RGBColor(214, 39, 40).stroke_width(3),
                        )))
                        .map_err(draw_err)?;
                }
                let label = match (i == j, value) {
                    (true, _) => "—".to_string(),
                    (false, Some(v)) => {
                        format!("{}{}", in_unit(*v, &self.unit), if self.unit == "s" { "s" } else { "" })
                    }
                    (false, None) if self.down[i] || self.down[j] => "down".to_string(),
                    (false, None) => "failed".to_string(),
                };
                let dark = self.shares[i][j].is_some_and(|s| s < 0.45);
                let style =
                    font(14)
                        .color(if dark { &WHITE } else { &BLACK })
                        .pos(plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Center,
                        ));
                chart
                    .draw_series(std::iter::once(Text::new(label, (x0 + 0.5, y0 + 0.5), style)))
                    .map_err(draw_err)?;
            }
        }
        Ok(())
    }
}

/// Pixels the colour scale takes at the right of the map.
const SCALE_WIDTH: u32 = 150;

impl Heatmap {
    /// A vertical bar of the ramp, the best cell's share (100%) at the top,
    /// labelled every 25%: without it, "yellow" and "green" meant nothing.
    fn draw_scale<DB: DrawingBackend>(&self, area: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        marks.set("axes");
        let (_, h) = area.dim_in_pixel();
        let (top, bottom) = (40i32, h as i32 - 52);
        let (x0, x1) = (12i32, 36i32);
        if bottom <= top + 20 {
            return Ok(());
        }
        let steps = 40;
        let span = (bottom - top) as f64;
        for k in 0..steps {
            // Step k from the bottom (share 0) to the top (share 1).
            let (s0, s1) = (k as f64 / steps as f64, (k + 1) as f64 / steps as f64);
            let y_low = bottom - (s0 * span).round() as i32;
            let y_high = bottom - (s1 * span).round() as i32;
            area.draw(&Rectangle::new(
                [(x0, y_high), (x1, y_low)],
                ramp((s0 + s1) / 2.0).filled(),
            ))
            .map_err(draw_err)?;
        }
        area.draw(&Rectangle::new([(x0, top), (x1, bottom)], BLACK.stroke_width(1)))
            .map_err(draw_err)?;
        let label = font(12).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Left,
            plotters::style::text_anchor::VPos::Center,
        ));
        for pct in [0, 25, 50, 75, 100] {
            let y = bottom - (pct as f64 / 100.0 * span).round() as i32;
            area.draw(&PathElement::new([(x1, y), (x1 + 4, y)], BLACK.stroke_width(1)))
                .map_err(draw_err)?;
            area.draw(&Text::new(format!("{pct}%"), (x1 + 8, y), label.clone()))
                .map_err(draw_err)?;
        }
        let caption = font(12);
        let words = if self.unit == "s" {
            ["share of the best", "(best round trip /", "the cell's)"]
        } else {
            ["share of the best", "cell's throughput", ""]
        };
        for (k, line) in words.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
            area.draw(&Text::new(line.to_string(), (4, 4 + 14 * k as i32), caption.clone()))
                .map_err(draw_err)?;
        }
        area.draw(&Text::new(
            "grey: not measured".to_string(),
            (4, bottom + 16),
            caption.clone(),
        ))
        .map_err(draw_err)?;
        area.draw(&Text::new("red frame: outlier".to_string(), (4, bottom + 32), caption))
            .map_err(draw_err)?;
        Ok(())
    }
}

/// A colour for a share of the best: dark blue (poor) to pale yellow (best),
/// a viridis-like ramp that reads in grey and for colour-blind eyes.
fn ramp(share: f64) -> RGBColor {
    const STOPS: [(f64, (u8, u8, u8)); 5] = [
        (0.0, (68, 1, 84)),
        (0.25, (59, 82, 139)),
        (0.5, (33, 145, 140)),
        (0.75, (94, 201, 98)),
        (1.0, (253, 231, 37)),
    ];
    let s = share.clamp(0.0, 1.0);
    let k = STOPS
        .iter()
        .rposition(|(at, _)| *at <= s)
        .unwrap_or(0)
        .min(STOPS.len() - 2);
    let ((a, ca), (b, cb)) = (STOPS[k], STOPS[k + 1]);
    let t = (s - a) / (b - a);
    let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * t).round() as u8;
    RGBColor(mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ramp_runs_from_dark_to_light() {
        let luminance = |c: RGBColor| 0.2126 * c.0 as f64 + 0.7152 * c.1 as f64 + 0.0722 * c.2 as f64;
        let mut last = -1.0;
        for k in 0..=20 {
            let l = luminance(ramp(k as f64 / 20.0));
            assert!(l > last, "share {}: {l} after {last}", k as f64 / 20.0);
            last = l;
        }
        assert_eq!(ramp(1.0), RGBColor(253, 231, 37));
        assert_eq!(ramp(-1.0), RGBColor(68, 1, 84));
    }

    /// A heat map had no colour scale: a slow cell read "green" and meant
    /// nothing. The scale's ticks and words are drawn beside the map.
    #[test]
    fn the_map_has_a_colour_scale_with_its_ticks() {
        let map = Heatmap {
            title: "Mesh (tcp): receiver throughput (bit/s), sender → receiver".into(),
            names: vec!["a".into(), "b".into()],
            cells: vec![vec![None, Some(9e8)], vec![Some(4e8), None]],
            shares: vec![vec![None, Some(1.0)], vec![Some(0.44), None]],
            unit: "bit/s".into(),
            flagged: vec![],
            down: vec![false, false],
            findings: vec![],
        };
        let svg = crate::report::chart::render_svg(&crate::report::chart::Chart::Heatmap(map), (900, 540)).unwrap();
        for tick in [
            "0%",
            "25%",
            "50%",
            "75%",
            "100%",
            "share of the best",
            "grey: not measured",
        ] {
            assert!(svg.contains(&format!(">{tick}<")), "no {tick}: {svg}");
        }
    }
}
