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
    let colours = colours(&names);
    let colour_of = |name: &str| -> RGBColor {
        names
            .iter()
            .position(|n| n == name)
            .map_or(RGBColor(0, 0, 0), |i| colours[i])
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

/// The source of the gaps no guest event explains (the hypervisor, SMIs).
const UNEXPLAINED: &str = "unexplained";

/// A colour per segment name, each its own: a named source one of the palette's hues (its
/// grey left out), `unexplained` black as in the snapshots of misses, [`OTHER`] a mid grey and
/// [`NOT_ATTRIBUTED`] a pale one — so no two segments of a bar can be mistaken for each other.
fn colours(names: &[String]) -> Vec<RGBColor> {
    let mut hues = (0..).map(colour).filter(|c| c.0 != c.1 || c.1 != c.2);
    names
        .iter()
        .map(|name| match name.as_str() {
            UNEXPLAINED => RGBColor(0, 0, 0),
            OTHER => RGBColor(120, 120, 120),
            NOT_ATTRIBUTED => RGBColor(210, 210, 210),
            _ => hues.next().expect("the palette cycles"),
        })
        .collect()
}

/// The largest sources keep their name — each bar's in turn (its largest, then every bar's
/// second, …), so a quiet configuration's sources are not drowned by a loaded one's — and
/// `unexplained` always does (what a partition cannot remove); the rest add up to [`OTHER`].
fn fold_small_sources(bars: &[Bar]) -> Vec<Bar> {
    let special = |s: &str| s == NOT_ATTRIBUTED || s == UNEXPLAINED;
    let ranked: Vec<Vec<&String>> = bars
        .iter()
        .map(|b| {
            let mut own: Vec<&(String, f64)> =
                b.segments.iter().filter(|(s, _)| !special(s)).collect();
            own.sort_by(|x, y| y.1.total_cmp(&x.1));
            own.into_iter().map(|(s, _)| s).collect()
        })
        .collect();
    let mut keep: Vec<&String> = Vec::new();
    let deepest = ranked.iter().map(Vec::len).max().unwrap_or(0);
    for rank in 0..deepest {
        for name in ranked.iter().filter_map(|r| r.get(rank)) {
            if keep.len() < NAMED && !keep.contains(name) {
                keep.push(name);
            }
        }
    }
    bars.iter()
        .map(|b| {
            let mut segments: Vec<(String, f64)> = Vec::new();
            let mut other = 0.0;
            for (s, v) in &b.segments {
                if special(s) || keep.contains(&s) {
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

    /// `unexplained` and `other sources` once shared a grey (a named source took the
    /// palette's grey when it came eighth): every segment of a figure has its own colour now,
    /// however many sources there are and wherever `unexplained` comes.
    #[test]
    fn every_segment_has_a_colour_of_its_own() {
        for at in 0..9 {
            let mut names: Vec<String> = (0..8).map(|i| format!("thread t{i}")).collect();
            names.insert(at, UNEXPLAINED.to_string());
            names.push(OTHER.to_string());
            names.push(NOT_ATTRIBUTED.to_string());
            let c = colours(&names);
            // Apart by eye, not just by value: 120 and 127 grey were two values, one grey.
            let apart = |a: RGBColor, b: RGBColor| {
                let d = |x: u8, y: u8| (f64::from(x) - f64::from(y)).powi(2);
                (d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)).sqrt()
            };
            for i in 0..c.len() {
                for j in i + 1..c.len() {
                    assert!(
                        apart(c[i], c[j]) >= 50.0,
                        "{} and {} look alike (unexplained at {at})",
                        names[i],
                        names[j]
                    );
                }
            }
            assert_eq!(c[at], RGBColor(0, 0, 0), "unexplained is black");
        }
    }

    /// A loaded configuration's many large sources beside a partitioned one's small ones:
    /// `unexplained` keeps its name (it was folded into `other sources` and the partitioned
    /// bar became one grey), and so do the partitioned bar's own sources.
    #[test]
    fn a_quiet_bar_keeps_its_unexplained_and_its_largest_source() {
        let loaded = Bar {
            label: "shared cpu0".into(),
            segments: (0..12).map(|i| (format!("thread load/{i}"), 9.0)).collect(),
        };
        let quiet = Bar {
            label: "partition rt cpu0".into(),
            segments: vec![
                (UNEXPLAINED.to_string(), 2.0),
                ("tick: local_timer".into(), 0.4),
                ("softirq: RCU".into(), 0.01),
            ],
        };
        let folded = fold_small_sources(&[loaded, quiet]);
        let names: Vec<&str> = folded[1].segments.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [UNEXPLAINED, "tick: local_timer", "softirq: RCU"]);
        // The loaded bar names what is left of the NAMED, the rest together.
        let loaded: Vec<&str> = folded[0].segments.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(loaded.len(), NAMED - 2 + 1, "{loaded:?}");
        assert_eq!(loaded.last(), Some(&OTHER));
    }

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
