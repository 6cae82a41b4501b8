//! What every chart is drawn with: the embedded font, the palette, SI and
//! binary tick labels, log axes whose ticks sit on the data, the title
//! that wraps, the legend strip, the SVG backend (groups and tips for the
//! HTML report) and the scaled backend (sharp PNGs), and rendering any
//! [`Drawing`] to SVG or PNG. It knows no chart: the report's and the
//! workloads' charts stand above it.
//!
//! Text is laid out with DejaVu Sans, embedded in the binary (no system
//! fonts needed; license in assets/fonts/LICENSE-DejaVu.txt).

pub mod legend;
pub mod scaled;
pub mod svg;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// DejaVu Sans (Bitstream Vera license, see assets/fonts/LICENSE-DejaVu.txt).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// What could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Nothing to draw: says which runs were asked for and what they lacked.
    #[error("{0}")]
    Empty(String),
    #[error("drawing the chart failed: {0}")]
    Draw(String),
    #[error("encoding the PNG failed: {0}")]
    Png(String),
}

pub(crate) fn draw_err<E: std::error::Error>(e: E) -> ChartError {
    ChartError::Draw(e.to_string())
}

/// The part of a chart being drawn; the SVG backend groups elements by it.
/// A data mark may carry a tip (its value, runs and case), which the SVG
/// writes as `data-tip` for the HTML report's hover box.
#[derive(Clone, Default)]
pub struct Marks {
    part: Rc<Cell<&'static str>>,
    tip: Rc<RefCell<Option<String>>>,
}

impl Marks {
    pub fn set(&self, part: &'static str) {
        self.part.set(part);
        self.tip.replace(None);
    }
    pub fn get(&self) -> &'static str {
        let part = self.part.get();
        if part.is_empty() {
            "background"
        } else {
            part
        }
    }
    /// The tip of the marks drawn next (none after the next [`Marks::set`]).
    pub fn tip(&self, tip: Option<String>) {
        self.tip.replace(tip);
    }
    pub fn current_tip(&self) -> Option<String> {
        self.tip.borrow().clone()
    }
}

pub(crate) type Area<DB> = DrawingArea<DB, Shift>;

/// A chart the kit can render: its title and description (the SVG's
/// `<title>` and `<desc>`, for screen readers), and how it draws itself on
/// each backend (a chart's `draw` is generic over plotters' backends; these
/// two name the ones rendering uses).
/// Rendering fills the background white before either draw.
pub trait Drawing {
    fn title(&self) -> &str;
    /// A sentence saying what the chart shows.
    fn description(&self) -> String;
    /// Draws on the SVG backend.
    fn draw_svg(&self, root: &Area<svg::SvgBackend<'_>>, marks: &Marks) -> Result<(), ChartError>;
    /// Draws on the scaled bitmap backend of a PNG.
    fn draw_png(&self, root: &Area<scaled::Scaled<BitMapBackend<'_>>>, marks: &Marks) -> Result<(), ChartError>;
}

/// A chart a workload draws from one run's document, in the workload's own
/// folder: a [`Drawing`], and what a page or a terminal asks of it.
pub trait RunChart: Drawing + std::fmt::Debug + Send + Sync {
    /// The names in its legend.
    fn series_names(&self) -> Vec<String>;
    /// Its size on a page whose charts are `common` pixels (a chart of two
    /// panels over one axis is drawn taller).
    fn size_on_page(&self, common: (u32, u32)) -> (u32, u32) {
        common
    }
}

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font: a failure here is a build error.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// The chart as an SVG document of `width` x `height` pixels.
pub fn render_svg(chart: &dyn Drawing, size: (u32, u32)) -> Result<String, ChartError> {
    render_svg_with_id(chart, size, "chart")
}

/// The same, its title and description ids prefixed by `id` (for several
/// charts inline in one page).
pub fn render_svg_with_id(chart: &dyn Drawing, (width, height): (u32, u32), id: &str) -> Result<String, ChartError> {
    register_font();
    let mut out = String::with_capacity(16 * 1024);
    let marks = Marks::default();
    {
        let backend = svg::SvgBackend::new(
            &mut out,
            (width, height),
            marks.clone(),
            id,
            chart.title(),
            &chart.description(),
        );
        let root = backend.into_drawing_area();
        marks.set("background");
        root.fill(&WHITE).map_err(draw_err)?;
        chart.draw_svg(&root, &marks)?;
    }
    Ok(out)
}

/// The SVG of a chart laid out at `size`, shown `scale` times as large
/// (its `width` and `height`; the `viewBox` keeps the layout).
pub fn render_svg_scaled(chart: &dyn Drawing, (width, height): (u32, u32), scale: u32) -> Result<String, ChartError> {
    let svg = render_svg(chart, (width, height))?;
    let scale = scale.max(1);
    Ok(svg.replacen(
        &format!(r#"width="{width}" height="{height}""#),
        &format!(r#"width="{}" height="{}""#, width * scale, height * scale),
        1,
    ))
}

/// The chart as a PNG image of `width` x `height` pixels (RGB).
pub fn render_png(chart: &dyn Drawing, size: (u32, u32)) -> Result<Vec<u8>, ChartError> {
    render_png_scaled(chart, size, 1)
}

/// The chart laid out at `width` x `height`, drawn `scale` times as
/// large: a PNG of `width * scale` x `height * scale` pixels whose text
/// and lines are as sharp as the rest (for slides and print).
pub fn render_png_scaled(chart: &dyn Drawing, (width, height): (u32, u32), scale: u32) -> Result<Vec<u8>, ChartError> {
    register_font();
    let scale = scale.max(1);
    let (width, height) = (width * scale, height * scale);
    let mut pixels = vec![255u8; width as usize * height as usize * 3];
    {
        let bitmap = BitMapBackend::with_buffer(&mut pixels, (width, height));
        let root = scaled::Scaled::new(bitmap, scale).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        chart.draw_png(&root, &Marks::default())?;
        root.present().map_err(draw_err)?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(|e| ChartError::Png(e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| ChartError::Png(e.to_string()))?;
    }
    Ok(png_bytes)
}

/// Colours that read on white (Tableau 10).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A number with an SI prefix and at most three significant digits:
/// `12.5 G`, `940 M`, `13.3 µ`, `0`.
pub fn si(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "0".into();
    }
    const PREFIXES: [(i32, &str); 9] = [
        (-12, "p"),
        (-9, "n"),
        (-6, "µ"),
        (-3, "m"),
        (0, ""),
        (3, "k"),
        (6, "M"),
        (9, "G"),
        (12, "T"),
    ];
    let mut exponent = ((value.abs().log10() / 3.0).floor() as i32 * 3).clamp(-12, 12);
    // A value a hair under a power of 1000 (an axis tick of 10 x 0.1)
    // rounds to "1000 m": say it with the next prefix, "1".
    if exponent < 12 && value.abs() / 10f64.powi(exponent) >= 999.5 {
        exponent += 3;
    }
    let (e, prefix) = PREFIXES
        .iter()
        .copied()
        .find(|(e, _)| *e == exponent)
        .unwrap_or((0, ""));
    let mantissa = value / 10f64.powi(e);
    let s = three_digits(mantissa);
    if prefix.is_empty() {
        s
    } else {
        format!("{s} {prefix}")
    }
}

/// At most three significant digits, trailing zeros dropped: `12.5`, `940`, `0.25`.
fn three_digits(value: f64) -> String {
    let digits = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else if value.abs() >= 1.0 || value == 0.0 {
        2
    } else {
        // 0.125, 0.0125: three significant digits below one.
        (2 - value.abs().log10().floor() as i32).clamp(2, 12) as usize
    };
    let mut s = format!("{value:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s
}

/// A figure in its unit: percentages as plain numbers (`0.1`, `45`: a
/// "100 m%" reads as nothing), everything else with an SI prefix ([`si`]).
pub fn in_unit(value: f64, unit: &str) -> String {
    // "%", "% of all cores", "% of a core": a share, never "500 m".
    if unit.starts_with('%') {
        if value == 0.0 || !value.is_finite() {
            return "0".into();
        }
        three_digits(value)
    } else {
        si(value)
    }
}

/// A byte count with a binary prefix: `1`, `64`, `4 Ki`, `1 Mi`.
pub fn binary(value: f64) -> String {
    let v = value.round() as u64;
    for (shift, prefix) in [(30, "Gi"), (20, "Mi"), (10, "Ki")] {
        if v >= 1 << shift && v % (1 << shift) == 0 {
            return format!("{} {prefix}", v >> shift);
        }
    }
    v.to_string()
}

/// How a store unit is shown on an axis: the factor into the base SI unit,
/// and that unit (`us` becomes seconds, so ticks read `13 µ` over `(s)`).
pub fn base_unit(unit: &str) -> (f64, String) {
    match unit {
        "us" => (1e-6, "s".into()),
        "ms" => (1e-3, "s".into()),
        "us/KB" => (1e-6, "s/KB".into()),
        other => (1.0, other.into()),
    }
}

/// The text style of tick labels, titles and legends.
pub(crate) fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&BLACK)
}

/// Draws the chart title across the top and returns the area under it. A
/// title wider than the chart (a bar chart named by its rows and columns)
/// wraps at a word onto a second line; only what a second line cannot hold
/// is cut with "…", so it stays centred and readable instead of running
/// off both edges.
pub(crate) fn titled<DB: DrawingBackend>(root: &Area<DB>, marks: &Marks, title: &str) -> Result<Area<DB>, ChartError> {
    marks.set("title");
    let style = font(18);
    // ab_glyph's estimate is in its pixel scale (the font's full height),
    // smaller than the CSS font-size the SVG text is drawn at by about the
    // font's line-height ratio (1.16 for DejaVu Sans): leave that margin.
    let room = root.dim_in_pixel().0 * 4 / 5;
    let fits = |t: &str| root.estimate_text_size(t, &style).map_or(true, |(w, _)| w <= room);
    let lines = title_lines(title, &fits);
    if let [line] = lines.as_slice() {
        return root.titled(line, style).map_err(draw_err);
    }
    let (width, _) = root.dim_in_pixel();
    let line_height = root.estimate_text_size("Ag", &style).map_or(20, |(_, h)| h) as i32 + 5;
    let centred = style.pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in lines.iter().enumerate() {
        root.draw_text(line, &centred, (width as i32 / 2, 5 + i as i32 * line_height))
            .map_err(draw_err)?;
    }
    let (_, rest) = root.split_vertically(10 + lines.len() as i32 * line_height);
    Ok(rest)
}

/// A title in at most two lines that `fits`: words onto the first while
/// they fit, the rest on the second, cut at a word with "…" when that is
/// still too long.
fn title_lines(title: &str, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    if fits(title) {
        return vec![title.to_string()];
    }
    let words: Vec<&str> = title.split(' ').collect();
    let mut first = 0;
    while first < words.len() && fits(&words[..first + 1].join(" ")) {
        first += 1;
    }
    // One word longer than the room: it stands alone and is cut below.
    let first = first.max(1);
    let mut second = words[first..].join(" ");
    while !second.is_empty() && !fits(&second) {
        let cut = second.trim_end_matches('…').trim_end();
        match cut.rfind(' ') {
            Some(at) if at > 0 => second = format!("{}…", &cut[..at]),
            _ => break,
        }
    }
    let mut lines = vec![words[..first].join(" ")];
    if !second.is_empty() {
        lines.push(second);
    }
    lines
}

/// The top of a throughput axis over time: the highest rate of the
/// intervals (start s, end s, bit/s) that make up the run. An interval
/// much shorter than the others (the sliver left at the end, a late
/// wake-up) divides a few bytes by almost no time: it is drawn, clipped at
/// the top with its value written, but does not set the scale for the rest.
pub fn scale_top<'a>(intervals: impl Iterator<Item = &'a (f64, f64, f64)> + Clone) -> f64 {
    let mut lengths: Vec<f64> = intervals.clone().map(|i| i.1 - i.0).filter(|l| *l > 0.0).collect();
    if lengths.is_empty() {
        return 0.0;
    }
    lengths.sort_by(f64::total_cmp);
    let typical = lengths[lengths.len() / 2];
    let top = intervals
        .clone()
        .filter(|i| i.1 - i.0 >= typical / 2.0)
        .map(|i| i.2)
        .fold(0.0, f64::max);
    if top > 0.0 {
        top
    } else {
        intervals.map(|i| i.2).fold(0.0, f64::max)
    }
}

/// The highest value an axis reaches, whatever the data: a figure no
/// network gives (a database written before the store checked its bounds,
/// or by hand) is drawn off the top, and never hands plotters' tick search
/// an infinite range (1.7e308 x 1.18 hung `report` and `plot` for good).
pub(crate) const AXIS_CEILING: f64 = 1e18;

/// Ranges that include zero and leave head room for the legend.
pub(crate) fn upper(max: f64) -> f64 {
    if max > 0.0 {
        (max * 1.18).min(AXIS_CEILING)
    } else {
        1.0
    }
}

/// A log axis over the decades around `[low, high]`, ticks at 1, 2 and 5
/// times a power of ten (only the powers when there are many decades).
pub(crate) fn log_axis(low: f64, high: f64) -> Keyed {
    // Within 1e-12 to the axis ceiling: a stored absurdity (1.7e308) must
    // not make billions of decades.
    let low = if low > 0.0 && low.is_finite() {
        low.clamp(1e-12, AXIS_CEILING / 10.0)
    } else {
        1e-3
    };
    let high = if high > low && high.is_finite() {
        high.min(AXIS_CEILING)
    } else {
        low * 10.0
    };
    let (first, last) = (low.log10().floor() as i32, high.log10().ceil() as i32);
    let range = 10f64.powi(first)..10f64.powi(last);
    let steps: &[f64] = if last - first > 3 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let points = (first..=last)
        .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|v| range.contains(v) || *v == range.end)
        .collect();
    Keyed::log(range, points)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_long_title_wraps_onto_a_second_line_before_anything_is_cut() {
        let fits = |t: &str| t.chars().count() <= 20;
        assert_eq!(title_lines("short title", &fits), ["short title"]);
        assert_eq!(
            title_lines("receiver throughput by workload and agent", &fits),
            ["receiver throughput", "by workload and…"]
        );
        assert_eq!(
            title_lines("receiver throughput by MTU", &fits),
            ["receiver throughput", "by MTU"]
        );
    }

    use super::*;

    #[test]
    fn a_sliver_interval_does_not_set_the_scale() {
        let intervals = [
            (0.0, 1.0, 20e9),
            (1.0, 2.0, 21e9),
            (2.0, 3.0, 19e9),
            (3.0, 3.002, 140e9),
        ];
        assert_eq!(scale_top(intervals.iter()), 21e9);
        // Without a sliver, the highest interval is the top.
        assert_eq!(scale_top(intervals[..3].iter()), 21e9);
        // Whole intervals that carried nothing: the sliver's rate.
        assert_eq!(
            scale_top([(0.0, 1.0, 0.0), (1.0, 2.0, 0.0), (2.0, 2.001, 9.0)].iter()),
            9.0
        );
        assert_eq!(scale_top([].iter()), 0.0);
    }

    #[test]
    fn si_prefixes_keep_three_digits() {
        assert_eq!(si(12.5e9), "12.5 G");
        assert_eq!(si(940e6), "940 M");
        assert_eq!(si(1e9), "1 G");
        assert_eq!(si(13.3e-6), "13.3 µ");
        assert_eq!(si(0.0), "0");
        assert_eq!(si(50.0), "50");
        assert_eq!(si(1234.0), "1.23 k");
        // Ten ticks of 0.1 add up to a hair under one.
        assert_eq!(si((0..10).map(|_| 0.1).sum::<f64>()), "1");
        assert_eq!(si(0.9995e6), "1 M");
        assert_eq!(si(0.999e6), "999 k");
        assert_eq!(si(0.25), "250 m");
    }

    #[test]
    fn a_unit_with_a_prefix_is_drawn_in_its_base_unit() {
        // A handshake of 0.632 ms: "632 µs", never "632 mms".
        for (unit, value, shown) in [
            ("ms", 0.632, "632 µs"),
            ("us", 13.3, "13.3 µs"),
            ("us/KB", 250.0, "250 µs/KB"),
        ] {
            let (factor, base) = base_unit(unit);
            assert_eq!(format!("{}{base}", in_unit(value * factor, &base)), shown, "{unit}");
        }
    }

    #[test]
    fn percentages_are_plain_numbers() {
        assert_eq!(in_unit(0.1, "%"), "0.1");
        assert_eq!(in_unit((0..10).map(|_| 0.1).sum::<f64>(), "%"), "1");
        assert_eq!(in_unit(0.0125, "%"), "0.0125");
        assert_eq!(in_unit(48.0, "%"), "48");
        assert_eq!(in_unit(0.0, "%"), "0");
        assert_eq!(in_unit(0.25, "Gbit/s"), "250 m");
    }

    #[test]
    fn byte_sizes_use_binary_prefixes_only_when_exact() {
        assert_eq!(binary(4096.0), "4 Ki");
        assert_eq!(binary(1048576.0), "1 Mi");
        assert_eq!(binary(1000.0), "1000");
    }
}

/// A numeric axis, linear or logarithmic, whose ticks sit exactly at the
/// given points (group centres, powers of two, percentiles), so that the
/// label formatter can name them.
#[derive(Debug, Clone)]
pub(crate) struct Keyed {
    pub range: std::ops::Range<f64>,
    pub points: Vec<f64>,
    pub log: bool,
}

impl Keyed {
    pub fn linear(range: std::ops::Range<f64>, points: Vec<f64>) -> Keyed {
        Keyed {
            range,
            points,
            log: false,
        }
    }

    pub fn log(range: std::ops::Range<f64>, points: Vec<f64>) -> Keyed {
        Keyed {
            range,
            points,
            log: true,
        }
    }

    fn fraction(&self, v: f64) -> f64 {
        let (a, b) = (self.range.start, self.range.end);
        if self.log {
            let floor = a.max(f64::MIN_POSITIVE);
            (v.max(floor).ln() - floor.ln()) / (b.ln() - floor.ln())
        } else {
            (v - a) / (b - a)
        }
    }
}

impl plotters::coord::ranged1d::Ranged for Keyed {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let f = self.fraction(*value);
        let f = if f.is_finite() { f } else { 0.0 };
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let max = hint.max_num_points().max(1);
        let step = self.points.len().div_ceil(max).max(1);
        self.points.iter().step_by(step).copied().collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}
