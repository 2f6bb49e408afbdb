//! Noise attribution: one stacked bar per CPU (and configuration), each segment a source's
//! share of the run time, so where the time went reads at a glance.

use plotters::prelude::*;

use super::{colour, label_style, svg, title_style, Figure, HEIGHT, WIDTH};
use crate::error::Result;
use crate::model::Context;

/// The segment that holds whatever was not charged to a named source.
pub const NOT_ATTRIBUTED: &str = "not attributed";
/// Sources beyond the largest few, together.
pub const OTHER: &str = "other sources";
/// Named sources drawn in a colour of their own; the rest become [`OTHER`].
const NAMED: usize = 8;

/// One bar: a label and its segments (source, percent of the run).
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<(String, f64)>,
}

pub fn figure(
    id: &str,
    title: &str,
    bars: &[Bar],
    caption: String,
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    if bars.is_empty() {
        return Ok(None);
    }
    let bars = fold_small_sources(bars);
    let mut names: Vec<String> = Vec::new();
    for b in &bars {
        for (s, _) in &b.segments {
            if !names.contains(s) {
                names.push(s.clone());
            }
        }
    }
    let colour_of = |name: &str| -> RGBColor {
        match name {
            NOT_ATTRIBUTED => RGBColor(200, 200, 200),
            OTHER => RGBColor(120, 120, 120),
            _ => colour(names.iter().position(|n| n == name).unwrap_or(0)),
        }
    };
    let top = bars
        .iter()
        .map(|b| b.segments.iter().map(|(_, v)| v).sum::<f64>())
        .fold(0.0, f64::max);
    let y1 = (top * 1.15).max(0.01);
    // A discrete range holds both its ends: 0..n - 1 has n slots.
    let n = bars.len();
    let x_label = "CPU (and configuration)".to_string();
    let y_label = "share of the run time (%)".to_string();
    // The legend gets its own column: stacked bars fill the plot, a legend inside would hide them.
    let legend: Vec<String> = names.clone();
    let svg = svg((WIDTH, HEIGHT), |root| {
        let (plot, side) = root.split_horizontally(WIDTH - 250);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y1)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(&x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) if *i < n => bars[*i].label.clone(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| super::tick(*v))
            .draw()?;
        for (i, b) in bars.iter().enumerate() {
            let mut base = 0.0;
            for (name, v) in &b.segments {
                let mut rect = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), base),
                        (SegmentValue::Exact(i + 1), base + v),
                    ],
                    colour_of(name).filled(),
                );
                rect.set_margin(0, 0, 12, 12);
                chart.draw_series(std::iter::once(rect))?;
                base += v;
            }
        }
        for (k, name) in legend.iter().enumerate() {
            let y = 60 + 22 * k as i32;
            side.draw(&Rectangle::new(
                [(8, y - 6), (22, y + 6)],
                colour_of(name).filled(),
            ))?;
            side.draw(&Text::new(
                name.clone(),
                (30, y - 7),
                (super::FONT, 13).into_font(),
            ))?;
        }
        Ok(())
    })?;
    Ok(Some(Figure {
        id: id.to_string(),
        kind: "attribution",
        title: title.to_string(),
        x_label,
        y_label,
        svg,
        caption,
        contexts,
    }))
}

/// The largest sources over all bars keep their name; the rest add up to [`OTHER`].
fn fold_small_sources(bars: &[Bar]) -> Vec<Bar> {
    let mut totals: Vec<(String, f64)> = Vec::new();
    for b in bars {
        for (s, v) in &b.segments {
            if s == NOT_ATTRIBUTED {
                continue;
            }
            match totals.iter_mut().find(|(n, _)| n == s) {
                Some((_, t)) => *t += v,
                None => totals.push((s.clone(), *v)),
            }
        }
    }
    totals.sort_by(|a, b| b.1.total_cmp(&a.1));
    let keep: Vec<&String> = totals.iter().take(NAMED).map(|(n, _)| n).collect();
    bars.iter()
        .map(|b| {
            let mut segments: Vec<(String, f64)> = Vec::new();
            let mut other = 0.0;
            for (s, v) in &b.segments {
                if s == NOT_ATTRIBUTED || keep.contains(&s) {
                    segments.push((s.clone(), *v));
                } else {
                    other += v;
                }
            }
            if other > 0.0 {
                segments.push((OTHER.to_string(), other));
            }
            Bar {
                label: b.label.clone(),
                segments,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sources_add_up_to_other_and_nothing_is_lost() {
        let segments: Vec<(String, f64)> = (0..12)
            .map(|i| (format!("s{i}"), 12.0 - i as f64))
            .collect();
        let bars = vec![Bar {
            label: "cpu1".into(),
            segments,
        }];
        let folded = fold_small_sources(&bars);
        let s = &folded[0].segments;
        assert_eq!(s.len(), NAMED + 1);
        assert_eq!(
            s.last().unwrap(),
            &(OTHER.to_string(), 4.0 + 3.0 + 2.0 + 1.0)
        );
        let sum: f64 = s.iter().map(|x| x.1).sum();
        assert_eq!(sum, (1..=12).sum::<i32>() as f64);
    }
}
