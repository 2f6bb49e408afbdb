//! Figures: each drawn with plotters' SVG backend into a string, with the title, axis
//! labels and caption kept beside it for the page (and the tests).

pub mod attribution;
pub mod histogram;
pub mod lines;
pub mod ratios;
pub mod snapshot;
pub mod tail;
pub mod timeline;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{ReportError, Result};
use crate::model::Context;

pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 480;
/// Font of every text in a figure: a generic family, so nothing is fetched or embedded.
pub const FONT: &str = "sans-serif";

/// One figure: its SVG and what the page prints around it.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Unique on the page; also its file name (`ID.svg`).
    pub id: String,
    /// histogram | tail | timeline | attribution | ratios | scaling | shares | snapshot.
    pub kind: &'static str,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A standalone SVG document.
    pub svg: String,
    /// How to read it, plain text.
    pub caption: String,
    /// The configurations drawn: environment and command line.
    pub contexts: Vec<Context>,
}

/// Colours of the configurations (and of series inside one figure), in order: the
/// Tableau 10 palette, distinct for the colour-blind in its first entries.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

pub fn colour(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// How values of a metric are shown on an axis: ns, µs or ms as their size asks (cycles
/// stay cycles).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub div: f64,
    pub unit: &'static str,
}

impl Scale {
    /// The unit for values up to `max` of a metric in `unit` (`ns`, `ps` — mem's time per
    /// access — or `cycles`).
    pub fn for_values(unit: &str, max: u64) -> Scale {
        match unit {
            "ps" if max >= 10_000_000 => Scale {
                div: 1e6,
                unit: "µs",
            },
            "ps" if max >= 10_000 => Scale {
                div: 1e3,
                unit: "ns",
            },
            "ps" => Scale {
                div: 1.0,
                unit: "ps",
            },
            "ns" if max >= 10_000_000 => Scale {
                div: 1e6,
                unit: "ms",
            },
            "ns" if max >= 10_000 => Scale {
                div: 1e3,
                unit: "µs",
            },
            "ns" => Scale {
                div: 1.0,
                unit: "ns",
            },
            _ => Scale {
                div: 1.0,
                unit: "cycles",
            },
        }
    }

    pub fn of(&self, v: u64) -> f64 {
        v as f64 / self.div
    }
}

/// Draw onto an SVG of `size` and return it as a standalone document.
pub fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        draw(&root).map_err(|e| ReportError::Draw(e.to_string()))?;
        root.present().map_err(drawing)?;
    }
    Ok(buf)
}

fn drawing(e: impl std::fmt::Display) -> ReportError {
    ReportError::Draw(e.to_string())
}

/// The powers of ten enclosing `lo..hi` (at least one decade), for a log axis whose ticks
/// fall on round numbers.
pub fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(f64::MIN_POSITIVE);
    let hi = hi.max(lo);
    let a = 10f64.powf(lo.log10().floor());
    let mut b = 10f64.powf(hi.log10().ceil());
    if b <= a {
        b = a * 10.0;
    }
    (a, b)
}

/// A tick label: up to three significant digits, no trailing zeros.
pub fn tick(v: f64) -> String {
    tame_rt::duration::figure(v)
}

/// Style of a figure's title.
pub fn title_style() -> TextStyle<'static> {
    (FONT, 20).into_font().into()
}

/// The legend every figure draws: the series' labels at `position`, on a pale box.
pub fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(label_style())
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Style of axis descriptions and tick labels.
pub fn label_style() -> TextStyle<'static> {
    (FONT, 14).into_font().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_follow_the_largest_value() {
        assert_eq!(Scale::for_values("ns", 9_999).unit, "ns");
        assert_eq!(Scale::for_values("ns", 10_000).unit, "µs");
        assert_eq!(Scale::for_values("ns", 32_000_000).unit, "ms");
        assert_eq!(Scale::for_values("cycles", 32_000_000).unit, "cycles");
        assert_eq!(Scale::for_values("ns", 12_345).of(12_345), 12.345);
        assert_eq!(Scale::for_values("ps", 150_000).unit, "ns");
        assert_eq!(Scale::for_values("ps", 150_000).of(1_500), 1.5);
        assert_eq!(Scale::for_values("ps", 20_000_000).unit, "µs");
        assert_eq!(Scale::for_values("ps", 900).unit, "ps");
    }

    #[test]
    fn decades_enclose_the_range() {
        assert_eq!(decades(9_000.0, 32_000.0), (1_000.0, 100_000.0));
        assert_eq!(decades(10.0, 10.0), (10.0, 100.0));
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(0.5), "0.5");
    }
}
