//! A plotters drawing backend that writes SVG text, with the elements of
//! each part of a chart (axes, data, legend, ...) in a `<g class="...">`
//! named by [`Marks`], so a test or a stylesheet can find the axes and the
//! data marks. Text is left to the viewer's fonts (DejaVu Sans named first);
//! its size is estimated with the embedded DejaVu Sans, like the PNG's.

use std::fmt::Write as _;

use plotters::style::text_anchor::{HPos, VPos};
use plotters::style::FontTransform;
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

use super::Marks;

/// Writes into a borrowed string; the closing tags are written on drop.
pub struct SvgBackend<'a> {
    out: &'a mut String,
    size: (u32, u32),
    marks: Marks,
    open: Option<&'static str>,
}

/// Text for the document: `&`, `<`, `>` and quotes as entities,
/// characters XML forbids dropped, bidi controls shown escaped
/// ([`crate::outside_text::xml`]). Every text of a chart and of the HTML
/// report goes through here: a host name from a peer can hold anything.
pub fn escape(text: &str) -> String {
    crate::outside_text::xml(text).into_owned()
}

fn paint(color: BackendColor) -> String {
    let (r, g, b) = color.rgb;
    if color.alpha >= 1.0 {
        format!("#{r:02x}{g:02x}{b:02x}")
    } else {
        format!("rgba({r},{g},{b},{:.2})", color.alpha)
    }
}

impl<'a> SvgBackend<'a> {
    /// Starts the document: an `img` with its title and description.
    /// `id` prefixes the ids of the title and description (unique in a page).
    pub fn new(out: &'a mut String, size: (u32, u32), marks: Marks, id: &str, title: &str, description: &str) -> Self {
        let (w, h) = size;
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-labelledby="{id}-title {id}-desc" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><title id="{id}-title">{}</title><desc id="{id}-desc">{}</desc>"#,
            escape(title),
            escape(description)
        );
        SvgBackend {
            out,
            size,
            marks,
            open: None,
        }
    }

    /// Opens the group of the part being drawn, closing the previous one.
    fn group(&mut self) {
        let want = self.marks.get();
        if self.open != Some(want) {
            if self.open.is_some() {
                self.out.push_str("</g>");
            }
            let _ = write!(self.out, r#"<g class="{want}">"#);
            self.open = Some(want);
        }
    }

    fn stroke<S: BackendStyle>(style: &S) -> String {
        format!(
            r#"fill="none" stroke="{}" stroke-width="{}""#,
            paint(style.color()),
            style.stroke_width().max(1)
        )
    }

    /// The paint attributes of a shape: filled with the style's colour, or
    /// only its outline stroked.
    fn fill_or_stroke<S: BackendStyle>(style: &S, fill: bool) -> String {
        if fill {
            format!(r#"fill="{}""#, paint(style.color()))
        } else {
            Self::stroke(style)
        }
    }

    /// ` data-tip="..."` when the mark being drawn has a tip.
    fn tip(&self) -> String {
        match self.marks.current_tip() {
            // A line break as a reference: an XML parser reads a raw one in
            // an attribute as a space.
            Some(tip) => format!(r#" data-tip="{}""#, escape(&tip).replace('\n', "&#10;")),
            None => String::new(),
        }
    }

    /// The `points` attribute's value: `x,y` pairs apart by spaces.
    fn write_points(&mut self, points: impl IntoIterator<Item = BackendCoord>) {
        for (i, (x, y)) in points.into_iter().enumerate() {
            let _ = write!(self.out, "{}{x},{y}", if i == 0 { "" } else { " " });
        }
    }
}

impl Drop for SvgBackend<'_> {
    fn drop(&mut self) {
        if self.open.is_some() {
            self.out.push_str("</g>");
        }
        self.out.push_str("</svg>");
    }
}

type Result = std::result::Result<(), DrawingErrorKind<std::fmt::Error>>;

impl DrawingBackend for SvgBackend<'_> {
    type ErrorType = std::fmt::Error;

    fn get_size(&self) -> (u32, u32) {
        self.size
    }

    fn ensure_prepared(&mut self) -> Result {
        Ok(())
    }

    fn present(&mut self) -> Result {
        Ok(())
    }

    fn draw_pixel(&mut self, (x, y): BackendCoord, color: BackendColor) -> Result {
        if color.alpha == 0.0 {
            return Ok(());
        }
        self.group();
        let _ = write!(
            self.out,
            r#"<rect x="{x}" y="{y}" width="1" height="1" fill="{}"/>"#,
            paint(color)
        );
        Ok(())
    }

    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" {}/>"#,
            from.0,
            from.1,
            to.0,
            to.1,
            Self::stroke(style)
        );
        Ok(())
    }

    fn draw_rect<S: BackendStyle>(&mut self, ul: BackendCoord, br: BackendCoord, style: &S, fill: bool) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        let (x, y) = (ul.0.min(br.0), ul.1.min(br.1));
        let (w, h) = ((br.0 - ul.0).abs(), (br.1 - ul.1).abs());
        let paint_it = Self::fill_or_stroke(style, fill);
        let tip = self.tip();
        let _ = write!(
            self.out,
            r#"<rect x="{x}" y="{y}" width="{w}" height="{h}" {paint_it}{tip}/>"#
        );
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, path: I, style: &S) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        self.out.push_str(r#"<polyline points=""#);
        self.write_points(path);
        let tip = self.tip();
        let _ = write!(self.out, r#"" {} stroke-linejoin="round"{tip}/>"#, Self::stroke(style));
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(&mut self, c: BackendCoord, radius: u32, style: &S, fill: bool) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        let paint_it = Self::fill_or_stroke(style, fill);
        let tip = self.tip();
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{radius}" {paint_it}{tip}/>"#,
            c.0, c.1
        );
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, vert: I, style: &S) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        self.out.push_str(r#"<polygon points=""#);
        self.write_points(vert);
        let tip = self.tip();
        let _ = write!(self.out, r#"" fill="{}"{tip}/>"#, paint(style.color()));
        Ok(())
    }

    fn draw_text<T: BackendTextStyle>(&mut self, text: &str, style: &T, (x, y): BackendCoord) -> Result {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.group();
        let size = style.size();
        let anchor = style.anchor();
        let text_anchor = match anchor.h_pos {
            HPos::Left => "start",
            HPos::Center => "middle",
            HPos::Right => "end",
        };
        // Baseline offset from the anchor: DejaVu's ascent is about 0.76 em.
        let dy = match anchor.v_pos {
            VPos::Top => size * 0.76,
            VPos::Center => size * 0.36,
            VPos::Bottom => -size * 0.24,
        };
        let rotate = match style.transform() {
            FontTransform::Rotate90 => format!(r#" transform="rotate(90,{x},{y})""#),
            FontTransform::Rotate180 => format!(r#" transform="rotate(180,{x},{y})""#),
            FontTransform::Rotate270 => format!(r#" transform="rotate(270,{x},{y})""#),
            FontTransform::None => String::new(),
        };
        let _ = write!(
            self.out,
            r#"<text x="{x}" y="{y}" dy="{dy:.1}" text-anchor="{text_anchor}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="{size:.0}" fill="{}"{rotate}>{}</text>"#,
            paint(style.color()),
            escape(text)
        );
        Ok(())
    }
}
