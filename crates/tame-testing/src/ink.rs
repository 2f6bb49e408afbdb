//! Whether a picture shows something: the share of pixels that differ from the
//! background, and how many colours there are. A drawn chart has axes, labels and
//! data in several colours (and anti-aliased edges); a blank one is one colour.
//!
//! The background is the most frequent colour of the region looked at: the page or
//! the plot area, whatever its colour. A region filled more than half by one data
//! colour still counts as drawn, by its other pixels.

use std::collections::HashMap;

/// A decoded picture, 8-bit RGBA, rows top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    rgba: Vec<u8>,
}

/// A rectangle of an image, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// How much of a region is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ink {
    /// Share of the pixels whose colour is not the background's, 0 to 1.
    pub fraction_non_background: f64,
    /// Distinct RGBA colours, the background's included.
    pub distinct_colours: usize,
}

impl Ink {
    /// What an empty region holds.
    pub const NONE: Ink = Ink {
        fraction_non_background: 0.0,
        distinct_colours: 0,
    };

    /// Least ink of a drawn figure for [`Ink::looks_drawn`]: 1 % of its pixels…
    pub const DRAWN_FRACTION: f64 = 0.01;
    /// …in at least 3 colours (background, axes or text, data).
    pub const DRAWN_COLOURS: usize = 3;

    /// Whether at least `fraction` of the pixels are ink, in at least `colours` colours.
    pub fn is_drawn(&self, fraction: f64, colours: usize) -> bool {
        self.fraction_non_background >= fraction && self.distinct_colours >= colours
    }

    /// [`Ink::is_drawn`] with [`Ink::DRAWN_FRACTION`] and [`Ink::DRAWN_COLOURS`].
    pub fn looks_drawn(&self) -> bool {
        self.is_drawn(Self::DRAWN_FRACTION, Self::DRAWN_COLOURS)
    }
}

impl Image {
    /// Decode a PNG of any colour type and bit depth into 8-bit RGBA.
    pub fn decode(png_bytes: &[u8]) -> Result<Image, String> {
        let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder
            .read_info()
            .map_err(|e| format!("not a PNG image: {e}"))?;
        let size = reader
            .output_buffer_size()
            .ok_or("PNG image too large to decode")?;
        let mut buf = vec![0; size];
        let frame = reader
            .next_frame(&mut buf)
            .map_err(|e| format!("broken PNG image: {e}"))?;
        buf.truncate(frame.buffer_size());
        let pixels = frame.width as usize * frame.height as usize;
        let rgba = match frame.color_type {
            png::ColorType::Rgba => buf,
            png::ColorType::Rgb => buf
                .chunks_exact(3)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect(),
            png::ColorType::GrayscaleAlpha => buf
                .chunks_exact(2)
                .flat_map(|p| [p[0], p[0], p[0], p[1]])
                .collect(),
            png::ColorType::Grayscale => buf.iter().flat_map(|&g| [g, g, g, 255]).collect(),
            png::ColorType::Indexed => return Err("PNG palette was not expanded".into()),
        };
        debug_assert_eq!(rgba.len(), pixels * 4);
        Ok(Image {
            width: frame.width,
            height: frame.height,
            rgba,
        })
    }

    /// An image from RGBA bytes (4 per pixel, rows top to bottom).
    pub fn from_rgba(width: u32, height: u32, rgba: Vec<u8>) -> Result<Image, String> {
        let want = width as usize * height as usize * 4;
        if rgba.len() != want {
            return Err(format!(
                "{width}×{height} RGBA needs {want} bytes, got {}",
                rgba.len()
            ));
        }
        Ok(Image {
            width,
            height,
            rgba,
        })
    }

    /// The colour of one pixel.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = (y as usize * self.width as usize + x as usize) * 4;
        [
            self.rgba[i],
            self.rgba[i + 1],
            self.rgba[i + 2],
            self.rgba[i + 3],
        ]
    }

    /// The ink of the whole image.
    pub fn ink(&self) -> Ink {
        self.ink_in(Region {
            x: 0,
            y: 0,
            width: self.width,
            height: self.height,
        })
    }

    /// The ink of `region`, cut to the image (a region outside it holds [`Ink::NONE`]).
    pub fn ink_in(&self, region: Region) -> Ink {
        let x_end = region.x.saturating_add(region.width).min(self.width);
        let y_end = region.y.saturating_add(region.height).min(self.height);
        let mut counts: HashMap<[u8; 4], u64> = HashMap::new();
        for y in region.y..y_end {
            for x in region.x..x_end {
                *counts.entry(self.pixel(x, y)).or_default() += 1;
            }
        }
        let total: u64 = counts.values().sum();
        let Some(&background) = counts.values().max() else {
            return Ink::NONE;
        };
        Ink {
            fraction_non_background: (total - background) as f64 / total as f64,
            distinct_colours: counts.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHITE: [u8; 4] = [255, 255, 255, 255];
    const RED: [u8; 4] = [200, 30, 30, 255];
    const BLUE: [u8; 4] = [30, 30, 200, 255];

    /// A `w`×`h` white image with `paint(x, y)` where it returns a colour.
    fn image(w: u32, h: u32, paint: impl Fn(u32, u32) -> Option<[u8; 4]>) -> Image {
        let mut rgba = Vec::new();
        for y in 0..h {
            for x in 0..w {
                rgba.extend(paint(x, y).unwrap_or(WHITE));
            }
        }
        Image::from_rgba(w, h, rgba).unwrap()
    }

    fn encode(img: &Image, colour: png::ColorType) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, img.width, img.height);
        encoder.set_color(colour);
        encoder.set_depth(png::BitDepth::Eight);
        let data: Vec<u8> = match colour {
            png::ColorType::Rgb => img
                .rgba
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2]])
                .collect(),
            _ => img.rgba.clone(),
        };
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&data).unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn a_blank_image_has_no_ink_and_one_colour() {
        let ink = image(50, 40, |_, _| None).ink();
        assert_eq!(ink.fraction_non_background, 0.0);
        assert_eq!(ink.distinct_colours, 1);
        assert!(!ink.looks_drawn());
    }

    #[test]
    fn a_chart_is_drawn_and_its_empty_corner_is_not() {
        // An axis line (blue) and a bar (red) on white, in the left half only.
        let chart = image(100, 100, |x, y| match (x, y) {
            (10, 10..=90) | (10..=50, 90) => Some(BLUE),
            (20..=30, 40..=89) => Some(RED),
            _ => None,
        });
        let ink = chart.ink();
        let inked = 81 + 40 + 11 * 50; // axis, baseline (less the shared corner), bar
        assert!((ink.fraction_non_background - inked as f64 / 10_000.0).abs() < 1e-12);
        assert_eq!(ink.distinct_colours, 3);
        assert!(ink.looks_drawn());
        let corner = chart.ink_in(Region {
            x: 60,
            y: 0,
            width: 40,
            height: 50,
        });
        assert_eq!(
            corner,
            Ink {
                fraction_non_background: 0.0,
                distinct_colours: 1
            }
        );
        let outside = chart.ink_in(Region {
            x: 200,
            y: 0,
            width: 10,
            height: 10,
        });
        assert_eq!(outside, Ink::NONE);
    }

    #[test]
    fn the_background_is_the_most_frequent_colour_whatever_it_is() {
        // A dark theme: red and white marks on blue.
        let dark = image(10, 10, |x, _| match x {
            0 => Some(RED),
            1 => None,
            _ => Some(BLUE),
        });
        let ink = dark.ink();
        assert!((ink.fraction_non_background - 0.2).abs() < 1e-12);
        assert_eq!(ink.distinct_colours, 3);
    }

    #[test]
    fn pngs_decode_to_the_same_pixels_in_rgb_and_rgba() {
        let img = image(7, 5, |x, y| (x == y).then_some(RED));
        for colour in [png::ColorType::Rgb, png::ColorType::Rgba] {
            let decoded = Image::decode(&encode(&img, colour)).unwrap();
            assert_eq!(decoded, img, "{colour:?}");
        }
        let err = Image::decode(b"GIF89a not a png").unwrap_err();
        assert!(err.starts_with("not a PNG image"), "{err}");
    }
}
