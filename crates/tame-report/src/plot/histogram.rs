//! The distribution of a metric: counts per log bin on a log count axis (a single event in
//! a million stays visible), one step line per configuration, with p50, p99, p99.9,
//! p99.999 and the maximum marked.

use plotters::prelude::*;

use super::{colour, decades, label_style, svg, tick, title_style, Figure, Scale, HEIGHT, WIDTH};
use crate::error::Result;
use crate::model::{Context, Series};

/// Count axis floor: empty stretches between bins drop to it (a log axis has no zero).
const FLOOR: f64 = 0.5;

/// The histogram of the series that have a distribution; `None` when none has.
pub fn figure(
    id: &str,
    title: &str,
    series: &[Series],
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    let drawn: Vec<(usize, &Series)> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.distribution.as_ref().is_some_and(|d| !d.bins.is_empty()))
        .collect();
    let Some((_, first)) = drawn.first() else {
        return Ok(None);
    };
    let max_value = drawn
        .iter()
        .map(|(_, s)| s.summary.max.max(last_high(s)))
        .max()
        .unwrap_or(1);
    let scale = Scale::for_values(&first.unit, max_value);
    let lowest = drawn
        .iter()
        .filter_map(|(_, s)| s.distribution.as_ref()?.bins.first().map(|b| b[0].max(1)))
        .min()
        .unwrap_or(1);
    let (x0, x1) = decades(scale.of(lowest), scale.of(max_value.max(lowest + 1)));
    let top = drawn
        .iter()
        .flat_map(|(_, s)| {
            s.distribution
                .iter()
                .flat_map(|d| d.bins.iter().map(|b| b[2]))
        })
        .max()
        .unwrap_or(1) as f64;
    let (_, y1) = decades(1.0, top * 1.5);
    let x_label = format!("{} ({}, log)", first.metric, scale.unit);
    let y_label = "count per bin (log)".to_string();
    let svg = svg((WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((x0..x1).log_scale(), (FLOOR..y1).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(&x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| if *v < 1.0 { String::new() } else { tick(*v) })
            .draw()?;
        for (row, (i, s)) in drawn.iter().enumerate() {
            let c = colour(*i);
            let d = s
                .distribution
                .as_ref()
                .expect("filtered: has a distribution");
            let mut path: Vec<(f64, f64)> = Vec::with_capacity(d.bins.len() * 4);
            let mut last_high: Option<f64> = None;
            for b in &d.bins {
                let (low, high, count) = (
                    scale.of(b[0].max(1)).max(x0),
                    scale.of(b[1].max(2)),
                    b[2] as f64,
                );
                match last_high {
                    Some(h) if (low - h).abs() > f64::EPSILON * low => {
                        path.push((h, FLOOR));
                        path.push((low, FLOOR));
                    }
                    None => path.push((low, FLOOR)),
                    _ => {}
                }
                path.push((low, count));
                path.push((high, count));
                last_high = Some(high);
            }
            if let Some(h) = last_high {
                path.push((h, FLOOR));
            }
            chart
                .draw_series(LineSeries::new(path, c.stroke_width(2)))?
                .label(format!("{} (n = {})", s.label, s.summary.count))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            for (name, v) in marks(s) {
                let x = scale.of(v.max(1)).clamp(x0, x1);
                chart.draw_series(DashedLineSeries::new(
                    vec![(x, FLOOR), (x, y1)],
                    6,
                    4,
                    c.stroke_width(1),
                ))?;
                // Labels of one configuration on one row, rows stacked from the top.
                let y = y1 / 10f64.powf(0.25 * (row as f64 + 0.5));
                chart.draw_series(std::iter::once(Text::new(
                    name,
                    (x, y),
                    (super::FONT, 12).into_font().color(&c),
                )))?;
            }
        }
        super::legend(&mut chart, SeriesLabelPosition::UpperRight)
    })?;
    let missing: Vec<&str> = series
        .iter()
        .filter(|s| s.distribution.is_none())
        .map(|s| s.label.as_str())
        .collect();
    let mut caption = format!(
        "How often each {} occurred: counts per bin (16 bins per power of two, each at most 1/16 of its value wide) on a log scale, so rare long ones stay visible. Dashed lines mark p50, p99, p99.9, p99.999 and the maximum of each configuration.",
        first.metric
    );
    if !missing.is_empty() {
        caption.push_str(&format!(
            " Not drawn: {} (written before distributions were recorded: rerun with this tame for histograms).",
            missing.join(", ")
        ));
    }
    Ok(Some(Figure {
        id: id.to_string(),
        kind: "histogram",
        title: title.to_string(),
        x_label,
        y_label,
        svg,
        caption,
        contexts,
    }))
}

fn last_high(s: &Series) -> u64 {
    s.distribution
        .as_ref()
        .and_then(|d| d.bins.last())
        .map_or(0, |b| b[1])
}

/// The marked percentiles; equal values share one mark (`p99.999=max`).
pub fn marks(s: &Series) -> Vec<(String, u64)> {
    let m = &s.summary;
    // A percentile its samples cannot support is not marked.
    let all = [
        ("p50", m.p50, 0.50),
        ("p99", m.p99, 0.99),
        ("p99.9", m.p99_9, 0.999),
        ("p99.999", m.p99_999, 0.99999),
    ]
    .into_iter()
    .filter(|&(_, _, q)| m.supports(q))
    .map(|(name, v, _)| (name, v))
    .chain(std::iter::once(("max", m.max)));
    let mut out: Vec<(String, u64)> = Vec::new();
    for (name, v) in all {
        match out.last_mut() {
            Some((n, last)) if *last == v => {
                n.push('=');
                n.push_str(name);
            }
            _ => out.push((name.to_string(), v)),
        }
    }
    out
}
