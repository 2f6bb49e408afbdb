//! Whether a picture shows something: the share of pixels that differ from the
//! background, and how many colours there are. A drawn chart has axes, labels and
//! data in several colours (and anti-aliased edges); a blank one is one colour.
//!
//! The background is the most frequent colour of the region looked at: the page or
//! the plot area, whatever its colour. A region filled more than half by one data
//! colour still counts as drawn, by its other pixels.

use std::collections::HashMap;

/// A decoded picture, 8 bits a channel, rows top to bottom: RGBA, RGB, grey and alpha,
/// or grey, as the PNG had it (seen as RGBA: [`Image::pixel`]).
#[derive(Clone, Debug)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// Bytes a pixel: 4 (RGBA), 3 (RGB), 2 (grey, alpha) or 1 (grey).
    channels: usize,
    data: Vec<u8>,
}

/// Two images are equal when they show the same RGBA pixels, whatever their channels.
impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        (self.width, self.height) == (other.width, other.height)
            && (if self.channels == other.channels {
                self.data == other.data
            } else {
                (0..self.height)
                    .all(|y| (0..self.width).all(|x| self.pixel(x, y) == other.pixel(x, y)))
            })
    }
}

impl Eq for Image {}

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
        let channels = match frame.color_type {
            png::ColorType::Rgba => 4,
            png::ColorType::Rgb => 3,
            png::ColorType::GrayscaleAlpha => 2,
            png::ColorType::Grayscale => 1,
            png::ColorType::Indexed => return Err("PNG palette was not expanded".into()),
        };
        debug_assert_eq!(
            buf.len(),
            frame.width as usize * frame.height as usize * channels
        );
        Ok(Image {
            width: frame.width,
            height: frame.height,
            channels,
            data: buf,
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
            channels: 4,
            data: rgba,
        })
    }

    /// The colour of one pixel, RGBA.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = (y as usize * self.width as usize + x as usize) * self.channels;
        rgba(&self.data[i..i + self.channels])
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
    ///
    /// A report's screenshot has millions of pixels, mostly in runs of one colour (a
    /// row of page background, a bar): colours are counted a run at a time, and a row
    /// of one colour is told by one comparison of the row with itself a pixel on.
    pub fn ink_in(&self, region: Region) -> Ink {
        let x_end = region.x.saturating_add(region.width).min(self.width);
        let y_end = region.y.saturating_add(region.height).min(self.height);
        let mut counts: HashMap<[u8; 4], u64> = HashMap::new();
        let n = self.channels;
        let stride = self.width as usize * n;
        for y in region.y..y_end {
            let start = y as usize * stride;
            let Some(row) = self
                .data
                .get(start + region.x as usize * n..start + x_end as usize * n)
            else {
                continue;
            };
            if row.len() >= n && row[n..] == row[..row.len() - n] {
                *counts.entry(rgba(&row[..n])).or_default() += (row.len() / n) as u64;
                continue;
            }
            let mut i = 0;
            while i < row.len() {
                let run = &row[i..i + n];
                let mut j = i + n;
                while j < row.len() && row[j..j + n] == *run {
                    j += n;
                }
                *counts.entry(rgba(run)).or_default() += ((j - i) / n) as u64;
                i = j;
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

/// A pixel's bytes (RGBA, RGB, grey and alpha, or grey) as RGBA.
fn rgba(pixel: &[u8]) -> [u8; 4] {
    match *pixel {
        [r, g, b, a] => [r, g, b, a],
        [r, g, b] => [r, g, b, 255],
        [grey, a] => [grey, grey, grey, a],
        [grey] => [grey, grey, grey, 255],
        _ => unreachable!("a pixel has 1 to 4 channels"),
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
                .data
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2]])
                .collect(),
            _ => img.data.clone(),
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

    /// Counted a run at a time, the ink is what counting every pixel gives.
    #[test]
    fn runs_count_as_every_pixel_would() {
        let mut state = 7u32;
        let mut next = move || {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            state >> 16
        };
        // Runs of up to 9 pixels in 4 colours, a few one-colour rows.
        let (w, h) = (37, 23);
        let mut rgba = Vec::new();
        let (mut left, mut colour) = (0, WHITE);
        for y in 0..h {
            for _ in 0..w {
                if left == 0 {
                    left = 1 + next() % 9;
                    colour = [WHITE, RED, BLUE, [0, 0, 0, 128]][next() as usize % 4];
                }
                left -= 1;
                rgba.extend(if y % 5 == 0 { BLUE } else { colour });
            }
        }
        let img = Image::from_rgba(w, h, rgba).unwrap();
        let naive = |r: Region| {
            let mut counts: HashMap<[u8; 4], u64> = HashMap::new();
            for y in r.y..(r.y + r.height).min(h) {
                for x in r.x..(r.x + r.width).min(w) {
                    *counts.entry(img.pixel(x, y)).or_default() += 1;
                }
            }
            let total: u64 = counts.values().sum();
            match counts.values().max() {
                None => Ink::NONE,
                Some(&bg) => Ink {
                    fraction_non_background: (total - bg) as f64 / total as f64,
                    distinct_colours: counts.len(),
                },
            }
        };
        for (x, y, width, height) in [
            (0, 0, w, h),
            (3, 4, 10, 1),
            (0, 5, w, 1),
            (30, 20, 20, 20),
            (36, 0, 1, h),
            (5, 5, 0, 3),
            (40, 0, 3, 3),
        ] {
            let r = Region {
                x,
                y,
                width,
                height,
            };
            assert_eq!(img.ink_in(r), naive(r), "{r:?}");
        }
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
            assert_eq!(decoded.ink(), img.ink(), "{colour:?}");
            assert_eq!(decoded.pixel(3, 3), RED, "{colour:?}");
        }
        // Grey, with and without alpha, comes out as RGBA too.
        for (colour, data, want) in [
            (
                png::ColorType::Grayscale,
                vec![0, 200],
                [0, 0, 0, 255, 200, 200, 200, 255],
            ),
            (
                png::ColorType::GrayscaleAlpha,
                vec![0, 9, 200, 255],
                [0, 0, 0, 9, 200, 200, 200, 255],
            ),
        ] {
            let mut out = Vec::new();
            let mut encoder = png::Encoder::new(&mut out, 2, 1);
            encoder.set_color(colour);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(&data).unwrap();
            writer.finish().unwrap();
            let want = Image::from_rgba(2, 1, want.to_vec()).unwrap();
            assert_eq!(Image::decode(&out).unwrap(), want, "{colour:?}");
        }
        let err = Image::decode(b"GIF89a not a png").unwrap_err();
        assert!(err.starts_with("not a PNG image"), "{err}");
    }
}
