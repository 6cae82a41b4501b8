//! `bars`: a metric per configuration, grouped by one key and coloured by
//! another, with the spread of its trials (the stopping rule's interval, else min-max) as error bars.

use plotters::prelude::*;

use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

use super::legend::{self, Entry, Swatch};
use super::size_curve::run_list;
use super::{base_unit, color, draw_err, font, in_unit, titled, upper, Area, ChartError, Keyed, Marks};
use crate::report::compare::{col_label, Table};

/// One bar: the statistic of a cell of the comparison table.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: usize,
    pub series: usize,
    pub value: f64,
    /// The whisker: the cell's stopping-rule interval, else its trials'
    /// min-max.
    pub min: f64,
    pub max: f64,
    /// The highest trial of the bar's runs: the axis is scaled to the data
    /// (this and the bar), never to an interval reaching past it; a whisker
    /// that does is cut at the axis's top, an arrow there.
    pub highest_trial: f64,
    pub runs: usize,
    /// The trials of its runs: a whisker is drawn for two or more.
    pub trials: usize,
    /// The runs of the bar, for its hover tip (empty when not known).
    pub run_ids: Vec<i64>,
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
                    min: c.low,
                    max: c.high,
                    highest_trial: c.max,
                    runs: c.runs,
                    trials: c.trials,
                    run_ids: Vec::new(),
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
            title: format!("{axis} by {group_key}{by} ({stat}; whiskers: interval, else min-max of the trials)"),
            axis: axis.into(),
            unit: table.unit.clone(),
            group_key,
            series_key,
            groups,
            series,
            bars,
        }
    }

    /// The highest figure the bars stand for (a bar's value or a trial),
    /// in the metric's unit: what the axis is scaled to. An interval that
    /// reaches past it (two or three trials far apart) does not stretch
    /// the axis: two trials of 518 and 855 Mbit/s drew a 1 Gbit/s link's
    /// bars on an axis to 3.3 Gbit/s.
    pub fn data_top(&self) -> f64 {
        self.bars
            .iter()
            .map(|b| b.highest_trial.max(b.value))
            .fold(0.0, f64::max)
    }

    /// What a hover over bar `b` shows: its group and series, value,
    /// spread and runs.
    fn tip(&self, b: &Bar, factor: f64, unit: &str) -> String {
        let mut tip = self.groups[b.group].clone();
        if !self.series_key.is_empty() {
            tip += &format!(", {}", self.series[b.series]);
        }
        tip += &format!("\n{}: {}{unit}", self.axis, in_unit(b.value * factor, unit));
        if b.trials > 1 {
            tip += &format!(
                " ({} to {})",
                in_unit(b.min * factor, unit),
                in_unit(b.max * factor, unit)
            );
        }
        tip += &format!("\n{} trial(s)", b.trials);
        if b.run_ids.is_empty() {
            tip += &format!(", {} run(s)", b.runs);
        } else {
            tip += &format!("\nruns {}", run_list(&b.run_ids));
        }
        tip
    }

    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, marks: &Marks) -> Result<(), ChartError> {
        let area = titled(root, marks, &self.title)?;
        let entries: Vec<Entry> = if self.series_key.is_empty() {
            Vec::new()
        } else {
            self.series
                .iter()
                .enumerate()
                .map(|(s, name)| Entry {
                    swatch: Swatch::Box,
                    color: color(s),
                    text: name.clone(),
                })
                .collect()
        };
        let area = legend::strip(&area, marks, &entries)?;
        let (factor, unit) = base_unit(&self.unit);
        let n = self.groups.len().max(1);
        let ceiling = upper(self.data_top() * factor);
        let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let (names, label_room) = group_label_room(&area, &self.groups, 100, 0.4);
        let apart = names.drawn_apart();
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(label_room)
            .y_label_area_size(72)
            .build_cartesian_2d(Keyed::linear(0f64..n as f64, centers), 0f64..ceiling)
            .map_err(draw_err)?;
        marks.set("axes");
        let groups = &self.groups;
        let group_name = |v: &f64| {
            if apart {
                return String::new();
            }
            groups.get(v.floor().max(0.0) as usize).cloned().unwrap_or_default()
        };
        let y_name = format!("{} ({unit})", self.axis);
        let x_name = if names == GroupNames::Upright {
            String::new()
        } else {
            self.group_key.clone()
        };
        chart
            .configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_label_formatter(&group_name)
            .y_label_formatter(&|v| in_unit(*v, &unit))
            .x_desc(x_name.as_str())
            .y_desc(y_name.as_str())
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()
            .map_err(draw_err)?;
        draw_group_names(&mut chart, &area, &self.groups, &names, label_room)?;
        marks.set("data");
        let k = self.series.len().max(1);
        let width = 0.8 / k as f64;
        let x_of = |b: &Bar| b.group as f64 + 0.1 + b.series as f64 * width;
        // The width of one bar in pixels: its value is written above it
        // when it fits, turned upright when it fits that way, else left
        // to the hover tip and the table.
        let plot_width = chart.plotting_area().dim_in_pixel().0 as f64;
        let bar_pixels = plot_width / n as f64 * width * 0.9;
        for (s, _) in self.series.iter().enumerate() {
            let c = color(s);
            let mine: Vec<&Bar> = self.bars.iter().filter(|b| b.series == s).collect();
            for b in &mine {
                marks.tip(Some(self.tip(b, factor, &unit)));
                let x0 = x_of(b);
                chart
                    .draw_series([Rectangle::new(
                        // Within the axis: a stored -1.7e308 overflows
                        // plotters' pixel arithmetic.
                        [(x0, 0.0), (x0 + width * 0.9, (b.value * factor).clamp(0.0, ceiling))],
                        c.filled(),
                    )])
                    .map_err(draw_err)?;
            }
            marks.tip(None);
            let whisker = |b: &&Bar| {
                let xc = x_of(b) + width * 0.45;
                let cap = width * 0.15;
                // Within the axis: an interval past the data is cut at the
                // top and ends in an arrowhead there, not in a cap.
                let (lo, hi) = (
                    (b.min * factor).clamp(0.0, ceiling),
                    (b.max * factor).clamp(0.0, ceiling),
                );
                let cut = b.max * factor > ceiling;
                let tip = ceiling * 0.03;
                let mut marks = vec![
                    PathElement::new(vec![(xc, lo), (xc, hi)], BLACK.stroke_width(1)),
                    PathElement::new(vec![(xc - cap, lo), (xc + cap, lo)], BLACK.stroke_width(1)),
                ];
                marks.push(match cut {
                    true => PathElement::new(
                        vec![(xc - cap, hi - tip), (xc, hi), (xc + cap, hi - tip)],
                        BLACK.stroke_width(1),
                    ),
                    false => PathElement::new(vec![(xc - cap, hi), (xc + cap, hi)], BLACK.stroke_width(1)),
                });
                marks
            };
            chart
                .draw_series(mine.iter().filter(|b| b.trials > 1).flat_map(whisker))
                .map_err(draw_err)?;
            let area = chart.plotting_area().clone();
            let labels = mine.iter().filter_map(|b| {
                let text = in_unit(b.value * factor, &unit);
                let xc = x_of(b) + width * 0.45;
                let at = (xc, (b.max.max(b.value) * factor).clamp(0.0, ceiling));
                value_label(&area, text, at, bar_pixels)
            });
            chart.draw_series(labels).map_err(draw_err)?;
        }
        Ok(())
    }
}

/// How the names under a bar chart's groups are written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GroupNames {
    /// Level, on one line each: they fit their groups.
    Level,
    /// Level, wrapped at words into these lines (at most five per name).
    Wrapped(Vec<Vec<String>>),
    /// Upright, cut at a word where too long: more groups than room.
    Upright,
}

impl GroupNames {
    /// Whether the axis's own tick labels are left out (drawn apart).
    pub(crate) fn drawn_apart(&self) -> bool {
        *self != GroupNames::Level
    }
}

/// A name's words in lines no wider than `width`, or none when a word is
/// wider or it takes more than five lines.
fn wrap<DB: DrawingBackend>(area: &Area<DB>, name: &str, width: f64) -> Option<Vec<String>> {
    let wide = |t: &str| {
        area.estimate_text_size(t, &font(13))
            .map_or(0.0, |(w, _)| w as f64 * 1.2)
    };
    let mut lines: Vec<String> = Vec::new();
    for word in name.split(' ') {
        match lines.last_mut() {
            Some(line) if wide(&format!("{line} {word}")) <= width => *line = format!("{line} {word}"),
            _ if wide(word) <= width => lines.push(word.to_string()),
            _ => return None,
        }
    }
    (lines.len() <= 5).then_some(lines)
}

/// How the names under the groups are written (level on one line, level
/// wrapped at words, or upright: "TCP, 8 KiB writes, nodelay" never runs
/// into its neighbours), and the room under the plot for them; `margins`
/// is the width of the area not in the plot, `most` the share of the
/// height upright names may take (the rest is the plot's).
pub(crate) fn group_label_room<DB: DrawingBackend>(
    area: &Area<DB>,
    groups: &[String],
    margins: u32,
    most: f64,
) -> (GroupNames, u32) {
    let (w, h) = area.dim_in_pixel();
    let n = groups.len().max(1);
    let room = w.saturating_sub(margins) as f64 / n as f64 * 0.95;
    let widest = groups
        .iter()
        .filter_map(|g| area.estimate_text_size(g, &font(13)).ok())
        .map(|(w, _)| w as f64 * 1.2)
        .fold(0.0, f64::max);
    if widest <= room {
        return (GroupNames::Level, 44);
    }
    let wrapped: Option<Vec<Vec<String>>> = groups.iter().map(|g| wrap(area, g, room)).collect();
    if let Some(lines) = wrapped {
        let most = lines.iter().map(Vec::len).max().unwrap_or(1) as u32;
        return (GroupNames::Wrapped(lines), 30 + most * 16);
    }
    (GroupNames::Upright, (widest as u32 + 30).min((h as f64 * most) as u32))
}

/// The group names under the groups as `names` says (level ones are the
/// axis's tick labels, drawn with it).
pub(crate) fn draw_group_names<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        plotters::coord::cartesian::Cartesian2d<Keyed, plotters::coord::types::RangedCoordf64>,
    >,
    area: &Area<DB>,
    groups: &[String],
    names: &GroupNames,
    room: u32,
) -> Result<(), ChartError> {
    match names {
        GroupNames::Level => Ok(()),
        GroupNames::Upright => draw_upright_names(chart, area, groups, room),
        GroupNames::Wrapped(lines) => {
            let style = font(13).pos(Pos::new(HPos::Center, VPos::Top));
            let texts = lines.iter().enumerate().flat_map(|(i, name)| {
                let style = style.clone();
                name.iter().enumerate().map(move |(k, line)| {
                    EmptyElement::at((i as f64 + 0.5, 0.0))
                        + Text::new(line.clone(), (0, 8 + 16 * k as i32), style.clone())
                })
            });
            chart.draw_series(texts).map_err(draw_err)?;
            Ok(())
        }
    }
}

/// The group names written upright under the groups (centred at 0.5,
/// 1.5, ...), each cut at a word with "…" when longer than `room` (the
/// table and the hover tip carry it whole).
fn draw_upright_names<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        plotters::coord::cartesian::Cartesian2d<Keyed, plotters::coord::types::RangedCoordf64>,
    >,
    area: &Area<DB>,
    groups: &[String],
    room: u32,
) -> Result<(), ChartError> {
    let style = font(13)
        .transform(FontTransform::Rotate90)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let room = room.saturating_sub(16) as f64;
    let fits = |t: &str| {
        area.estimate_text_size(t, &font(13))
            .map_or(true, |(w, _)| w as f64 * 1.2 <= room)
    };
    let shown = upright_labels(groups, fits);
    chart
        .draw_series(
            shown
                .into_iter()
                .enumerate()
                .map(|(i, g)| EmptyElement::at((i as f64 + 0.5, 0.0)) + Text::new(g, (0, 8), style.clone())),
        )
        .map_err(draw_err)?;
    Ok(())
}

/// The upright names of `groups`: each whole when it `fits`, else cut at
/// a word with "…"; and where two cut names would read the same ("rr
/// QUIC…" under two bars, issue 72, item 9), each keeps the words at its
/// end that tell it from the others ("rr…MTU 9000"), as many words of its
/// start as then fit before the "…".
fn upright_labels(groups: &[String], fits: impl Fn(&str) -> bool) -> Vec<String> {
    let cut_at_a_word = |g: &str| {
        let mut t = g.to_string();
        while !fits(&t) {
            let cut = t.trim_end_matches('…').trim_end_matches([',', ' ']);
            match cut.rfind(' ') {
                Some(at) if at > 0 => t = format!("{}…", &cut[..at]),
                _ => break,
            }
        }
        t
    };
    let mut shown: Vec<String> = groups.iter().map(|g| cut_at_a_word(g)).collect();
    let first_cut = shown.clone();
    for (i, group) in groups.iter().enumerate() {
        let alike: Vec<&String> = (0..groups.len())
            .filter(|&k| k != i && first_cut[k] == first_cut[i])
            .map(|k| &groups[k])
            .collect();
        if alike.is_empty() {
            continue;
        }
        let words: Vec<&str> = group.split(' ').collect();
        // The fewest end words no other alike group ends with.
        let Some(tail_len) = (1..=words.len()).find(|&k| {
            let tail = words[words.len() - k..].join(" ");
            alike.iter().all(|other| !other.ends_with(&tail))
        }) else {
            continue;
        };
        let tail = words[words.len() - tail_len..].join(" ");
        let mut head = words.len() - tail_len;
        let label = |head: usize| {
            let start = words[..head].join(" ");
            format!("{}…{tail}", start.trim_end_matches([',', ' ']))
        };
        while head > 0 && !fits(&label(head)) {
            head -= 1;
        }
        shown[i] = if head == words.len() - tail_len {
            group.clone()
        } else {
            label(head)
        };
    }
    shown
}

/// A bar's value over it: level when it fits the bar's width, upright
/// when the bar is too narrow but the text fits that way, else none.
pub(crate) fn value_label<DB: DrawingBackend>(
    area: &plotters::drawing::DrawingArea<
        DB,
        plotters::coord::cartesian::Cartesian2d<Keyed, plotters::coord::types::RangedCoordf64>,
    >,
    text: String,
    at: (f64, f64),
    bar_pixels: f64,
) -> Option<Text<'static, (f64, f64), String>> {
    let style = font(11);
    let (w, h) = area.estimate_text_size(&text, &style).ok()?;
    // ab_glyph's measure is about 1/1.16 of the drawn SVG text.
    if w as f64 * 1.2 <= bar_pixels {
        return Some(Text::new(text, at, style.pos(Pos::new(HPos::Center, VPos::Bottom))));
    }
    if h as f64 * 1.2 <= bar_pixels {
        let upright = style
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Left, VPos::Center));
        return Some(Text::new(text, at, upright));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whisker whose interval reaches far past the data (three trials far
    /// apart) leaves the axis at the data, and is cut there with an arrow.
    #[test]
    fn a_wide_interval_does_not_stretch_the_axis() {
        let bars = Bars {
            title: "t".into(),
            axis: "receiver throughput".into(),
            unit: "bit/s".into(),
            group_key: "case".into(),
            series_key: String::new(),
            series: vec!["all".into()],
            bars: vec![Bar {
                group: 0,
                series: 0,
                value: 686.38e6,
                min: 0.0,
                max: 2823.52e6,
                highest_trial: 854.57e6,
                runs: 1,
                trials: 3,
                run_ids: vec![1],
            }],
            groups: vec!["TCP".into()],
        };
        assert_eq!(bars.data_top(), 854.57e6);
        let svg = super::super::render_svg(&super::super::Chart::Bars(bars), (640, 440)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        // The y axis's tick labels: none reaches 1.5 G (the interval's 2.8 G
        // made ticks to 3 G).
        let ticks: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect();
        assert!(ticks.iter().any(|t| t.trim() == "800 M"), "{ticks:?}");
        assert!(
            !ticks
                .iter()
                .any(|t| ["1.5 G", "2 G", "2.5 G", "3 G"].contains(&t.trim())),
            "{ticks:?}"
        );
    }

    /// Issue 72, item 9: the upright names of two QUIC cases were cut to
    /// the same "rr QUIC…"; each keeps what tells it apart.
    #[test]
    fn upright_names_cut_alike_keep_the_words_that_tell_them_apart() {
        let groups: Vec<String> = [
            "rr QUIC, 1 KiB/1 KiB, MTU 1500",
            "rr QUIC, 1 KiB/1 KiB, MTU 9000",
            "TCP",
        ]
        .map(String::from)
        .to_vec();
        let fits = |t: &str| t.chars().count() <= 16;
        let shown = upright_labels(&groups, fits);
        assert_eq!(shown[2], "TCP");
        assert_ne!(shown[0], shown[1], "{shown:?}");
        assert!(shown[0].ends_with("1500") && shown[1].ends_with("9000"), "{shown:?}");
        assert!(shown[0].starts_with("rr"), "{shown:?}");
        assert!(shown.iter().all(|t| fits(t)), "{shown:?}");
    }

    /// The roundup's four cases under a bar chart beside its table: upright
    /// and cut at a word they read "TCP, 256 KiB…" four times, the MTU
    /// that tells them apart lost; wrapped level, every word is there.
    #[test]
    fn group_names_that_fit_wrapped_are_written_level_over_lines_not_cut() {
        let groups: Vec<String> = ["TCP", "UDP"]
            .iter()
            .flat_map(|w| [1500, 9000].map(|mtu| format!("{w}, 256 KiB writes, MTU {mtu}")))
            .collect();
        let bars = Bars {
            title: "t".into(),
            axis: "receiver throughput".into(),
            unit: "bit/s".into(),
            group_key: "case".into(),
            series_key: "tag:nic".into(),
            series: vec!["a".into(), "b".into()],
            bars: (0..groups.len())
                .map(|group| Bar {
                    group,
                    series: 0,
                    value: 1e9,
                    min: 1e9,
                    max: 1e9,
                    highest_trial: 1e9,
                    runs: 1,
                    trials: 1,
                    run_ids: vec![1],
                })
                .collect(),
            groups,
        };
        let svg = super::super::render_svg(&super::super::Chart::Bars(bars), (640, 440)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<roxmltree::Node> = doc.descendants().filter(|n| n.has_tag_name("text")).collect();
        for mtu in ["1500", "9000"] {
            let lines: Vec<&roxmltree::Node> = texts
                .iter()
                .filter(|t| t.text().is_some_and(|t| t.contains(mtu)))
                .collect();
            assert_eq!(lines.len(), 2, "{mtu} under both its groups: {svg}");
            assert!(
                lines.iter().all(|t| t.attribute("transform").is_none()),
                "level, not turned"
            );
        }
        assert!(!svg.contains('…'), "no name cut");
    }
}
