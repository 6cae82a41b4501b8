//! A drawing backend that draws a chart laid out at one size onto a
//! bitmap `factor` times larger: coordinates, radii, stroke widths and
//! font sizes all multiplied. The chart keeps the layout of its nominal
//! size (the same text fits in the same places) and a PNG drawn at 2x
//! is sharp on a slide instead of a blurred enlargement.

use plotters::style::{FontDesc, FontFamily, TextStyle};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

/// `inner`, `factor` times the size it reports to plotters.
pub struct Scaled<B> {
    inner: B,
    factor: u32,
}

impl<B: DrawingBackend> Scaled<B> {
    /// `inner` must be `factor` times the nominal size in each direction.
    pub fn new(inner: B, factor: u32) -> Scaled<B> {
        Scaled {
            inner,
            factor: factor.max(1),
        }
    }

    fn at(&self, (x, y): BackendCoord) -> BackendCoord {
        let f = self.factor as i32;
        (x * f, y * f)
    }
}

/// A stroke `factor` times as wide.
struct Wider {
    color: BackendColor,
    width: u32,
}

impl BackendStyle for Wider {
    fn color(&self) -> BackendColor {
        self.color
    }
    fn stroke_width(&self) -> u32 {
        self.width
    }
}

impl<B: DrawingBackend> Scaled<B> {
    fn wider<S: BackendStyle>(&self, style: &S) -> Wider {
        Wider {
            color: style.color(),
            width: style.stroke_width() * self.factor,
        }
    }
}

type Result<E> = std::result::Result<(), DrawingErrorKind<E>>;

impl<B: DrawingBackend> DrawingBackend for Scaled<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        let (w, h) = self.inner.get_size();
        (w / self.factor, h / self.factor)
    }

    fn ensure_prepared(&mut self) -> Result<B::ErrorType> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<B::ErrorType> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<B::ErrorType> {
        let (x, y) = self.at(point);
        let f = self.factor as i32;
        self.inner.draw_rect((x, y), (x + f - 1, y + f - 1), &color, true)
    }

    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result<B::ErrorType> {
        let (from, to, wider) = (self.at(from), self.at(to), self.wider(style));
        if wider.width > 1 {
            // A wide line is a filled quadrilateral around it.
            self.inner.draw_path([from, to], &wider)
        } else {
            self.inner.draw_line(from, to, &wider)
        }
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<B::ErrorType> {
        let (ul, br) = (self.at(upper_left), self.at(bottom_right));
        if fill {
            return self.inner.draw_rect(ul, br, &self.wider(style), true);
        }
        let wider = self.wider(style);
        let corners = [ul, (br.0, ul.1), br, (ul.0, br.1), ul];
        self.inner.draw_path(corners, &wider)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<B::ErrorType> {
        let points: Vec<BackendCoord> = path.into_iter().map(|p| self.at(p)).collect();
        let wider = self.wider(style);
        self.inner.draw_path(points, &wider)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<B::ErrorType> {
        let center = self.at(center);
        let wider = self.wider(style);
        self.inner.draw_circle(center, radius * self.factor, &wider, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<B::ErrorType> {
        let points: Vec<BackendCoord> = vert.into_iter().map(|p| self.at(p)).collect();
        self.inner.fill_polygon(points, &style.color())
    }

    fn draw_text<T: BackendTextStyle>(&mut self, text: &str, style: &T, pos: BackendCoord) -> Result<B::ErrorType> {
        let family = style.family();
        let font = FontDesc::new(
            FontFamily::Name(family.as_str()),
            style.size() * self.factor as f64,
            style.style(),
        )
        .transform(style.transform());
        let scaled = TextStyle {
            font,
            color: style.color(),
            pos: style.anchor(),
        };
        let at = self.at(pos);
        self.inner.draw_text(text, &scaled, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;

    /// The pixels that are not white in an RGB buffer.
    fn inked(pixels: &[u8]) -> usize {
        pixels.chunks(3).filter(|p| *p != [255, 255, 255]).count()
    }

    #[test]
    fn a_chart_at_twice_the_scale_covers_four_times_the_pixels() {
        let draw = |factor: u32| {
            let (w, h) = (120 * factor, 80 * factor);
            let mut pixels = vec![255u8; (w * h * 3) as usize];
            {
                let backend = Scaled::new(BitMapBackend::with_buffer(&mut pixels, (w, h)), factor);
                assert_eq!(backend.get_size(), (120, 80));
                let root = backend.into_drawing_area();
                root.draw(&Rectangle::new([(10, 10), (30, 40)], BLACK.filled()))
                    .unwrap();
                root.draw(&PathElement::new(
                    vec![(50, 10), (50, 70)],
                    Color::stroke_width(&BLACK, 2),
                ))
                .unwrap();
                root.present().unwrap();
            }
            inked(&pixels)
        };
        let (one, two) = (draw(1), draw(2));
        assert!(one > 600, "nothing drawn at 1x: {one}");
        // Exactly 4x for the rectangle; the line's ends may differ by a pixel row.
        assert!(
            (two as f64 / one as f64 - 4.0).abs() < 0.2,
            "2x drew {two} pixels, 1x {one}: not four times"
        );
    }
}
