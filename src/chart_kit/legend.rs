//! The legend of a chart as a strip of its own between the title and the
//! plot, entries flowing left to right and wrapping: it never covers a
//! bar, a point or a label, however many series there are. Notes that
//! would crowd the plot (a sweep's peak and n½) are written into it.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{draw_err, font, Area, ChartError, Marks};

/// How an entry's swatch is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Swatch {
    /// A filled box (bars).
    Box,
    /// A short line (curves).
    Line,
}

/// One entry: its swatch and colour, and its text.
#[derive(Debug, Clone)]
pub struct Entry {
    pub swatch: Swatch,
    pub color: RGBColor,
    pub text: String,
}

const ROW: u32 = 20;
const SWATCH: i32 = 16;
const GAP: i32 = 6;
const SPACING: i32 = 22;
const SIZE: u32 = 13;

/// The x offset and row of each entry, wrapped to `width`.
fn layout<DB: DrawingBackend>(area: &Area<DB>, entries: &[Entry], width: i32) -> Vec<(i32, u32)> {
    let style = font(SIZE);
    let mut at = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (0, 0);
    for e in entries {
        let text = area.estimate_text_size(&e.text, &style).map_or(100, |(w, _)| w as i32);
        // ab_glyph measures about 1/1.16 of the drawn SVG text: leave that.
        let w = SWATCH + GAP + text * 6 / 5;
        if x > 0 && x + w > width {
            x = 0;
            row += 1;
        }
        at.push((x, row));
        x += w + SPACING;
    }
    at
}

/// Draws the legend at the top of `area` and returns the area under it
/// (all of `area` when there is nothing to name).
pub fn strip<DB: DrawingBackend>(area: &Area<DB>, marks: &Marks, entries: &[Entry]) -> Result<Area<DB>, ChartError> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (w, _) = area.dim_in_pixel();
    let margin = 16;
    let at = layout(area, entries, w as i32 - 2 * margin);
    let rows = at.iter().map(|(_, r)| r + 1).max().unwrap_or(1);
    let (top, rest) = area.split_vertically(rows * ROW + 8);
    marks.set("legend");
    let style = font(SIZE).pos(Pos::new(HPos::Left, VPos::Center));
    for (e, (x, row)) in entries.iter().zip(at) {
        let (x, y) = (margin + x, (row * ROW + ROW / 2 + 2) as i32);
        match e.swatch {
            Swatch::Box => top.draw(&Rectangle::new([(x + 2, y - 6), (x + 14, y + 6)], e.color.filled())),
            Swatch::Line => top.draw(&PathElement::new(
                vec![(x, y), (x + SWATCH, y)],
                e.color.stroke_width(3),
            )),
        }
        .map_err(draw_err)?;
        top.draw_text(&e.text, &style, (x + SWATCH + GAP, y))
            .map_err(draw_err)?;
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_wrap_to_new_rows_instead_of_running_off_the_edge() {
        super::super::register_font();
        let mut pixels = vec![255u8; 400 * 200 * 3];
        let root = BitMapBackend::with_buffer(&mut pixels, (400, 200)).into_drawing_area();
        let entries: Vec<Entry> = (0..6)
            .map(|i| Entry {
                swatch: Swatch::Line,
                color: BLACK,
                text: format!("TCP, {i} streams, reverse"),
            })
            .collect();
        let at = layout(&root, &entries, 368);
        assert!(at.iter().any(|(_, row)| *row > 0), "all on one row: {at:?}");
        for (e, (x, _)) in entries.iter().zip(&at) {
            let w = root.estimate_text_size(&e.text, &font(SIZE)).unwrap().0 as i32;
            assert!(x + SWATCH + GAP + w <= 368, "{} runs off at {x}", e.text);
        }
        let rest = strip(&root, &Marks::default(), &entries).unwrap();
        assert!(
            rest.dim_in_pixel().1 < 200 - 2 * ROW,
            "the plot did not give room to the rows"
        );
    }
}
