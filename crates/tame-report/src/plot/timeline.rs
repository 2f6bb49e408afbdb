//! A metric over the run from its time line: per window the highest value (solid) and the
//! mean (thin, pale) of every thread, and the windows with missed periods marked. The time
//! line already holds each window's extremes, so a run of millions of samples draws at
//! most a few thousand points and no peak is lost.

use plotters::prelude::*;

use super::{colour, decades, label_style, svg, title_style, Figure, Scale, HEIGHT, WIDTH};
use crate::error::Result;
use crate::model::{Context, Series};
use tame_rt::duration::{format_ns_as, NsStyle};

pub fn figure(
    id: &str,
    title: &str,
    series: &[Series],
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    let drawn: Vec<(usize, &Series)> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.timeline.as_ref().is_some_and(|t| !t.windows.is_empty()))
        .collect();
    let Some((_, first)) = drawn.first() else {
        return Ok(None);
    };
    let timeline = |s: &Series| s.timeline.clone().expect("filtered: has a time line");
    let span_ns = drawn
        .iter()
        .map(|(_, s)| {
            let t = timeline(s);
            t.window_ns.saturating_mul(t.windows.len() as u64)
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let (t_div, t_unit) = if span_ns >= 10_000_000_000 {
        (1e9, "s")
    } else if span_ns >= 10_000_000 {
        (1e6, "ms")
    } else {
        (1e3, "µs")
    };
    let values = drawn.iter().flat_map(|(_, s)| {
        let t = timeline(s);
        t.windows
            .into_iter()
            .filter(|w| w.count > 0)
            .collect::<Vec<_>>()
    });
    let (lo, hi) = values.fold((u64::MAX, 0u64), |(lo, hi), w| {
        (lo.min(w.min.max(1)), hi.max(w.max))
    });
    let scale = Scale::for_values(&first.unit, hi.max(1));
    let (y0, y1) = decades(scale.of(lo.min(hi).max(1)), scale.of(hi.max(1)) * 3.0);
    let x1 = span_ns as f64 / t_div;
    let metric = timeline(first).metric;
    let x_label = format!("time since the start of the run ({t_unit})");
    let y_label = format!("{metric} ({}, log)", scale.unit);
    let svg = svg((WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x1, (y0..y1).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(&x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| super::tick(*v))
            .y_label_formatter(&|v| super::tick(*v))
            .draw()?;
        for (i, s) in &drawn {
            let c = colour(*i);
            let t = timeline(s);
            let at = |k: usize| (k as f64 + 0.5) * t.window_ns as f64 / t_div;
            // A line per stretch of windows that have values: an empty window breaks it.
            let mut runs: Vec<Vec<(usize, u64, u64)>> = vec![Vec::new()];
            for (k, w) in t.windows.iter().enumerate() {
                if w.count > 0 {
                    runs.last_mut()
                        .expect("never empty")
                        .push((k, w.max, w.mean));
                } else if !runs.last().expect("never empty").is_empty() {
                    runs.push(Vec::new());
                }
            }
            for (n, run) in runs.iter().filter(|r| !r.is_empty()).enumerate() {
                let max: Vec<(f64, f64)> = run
                    .iter()
                    .map(|&(k, m, _)| (at(k), scale.of(m.max(1))))
                    .collect();
                let mean: Vec<(f64, f64)> = run
                    .iter()
                    .map(|&(k, _, m)| (at(k), scale.of(m.max(1))))
                    .collect();
                // A lone window draws as a dot.
                if max.len() == 1 {
                    chart.draw_series(max.iter().map(|&p| Circle::new(p, 2, c.filled())))?;
                }
                let a = chart.draw_series(LineSeries::new(max, c.stroke_width(2)))?;
                if n == 0 {
                    a.label(format!("{}: max per window", s.label))
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                        });
                }
                // Thin and pale rather than dashed: plotters writes each dash as an SVG
                // element of its own, which made a time line of 1024 windows half a megabyte.
                let b = chart.draw_series(LineSeries::new(mean, c.mix(0.45).stroke_width(1)))?;
                if n == 0 {
                    b.label(format!("{}: mean per window", s.label))
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.mix(0.45).stroke_width(1))
                        });
                }
            }
            let missed: Vec<(f64, f64)> = t
                .windows
                .iter()
                .enumerate()
                .filter(|(_, w)| w.missed > 0)
                .map(|(k, _)| (at(k), y1 / 1.6))
                .collect();
            if !missed.is_empty() {
                chart
                    .draw_series(
                        missed
                            .into_iter()
                            .map(|p| TriangleMarker::new(p, 6, c.filled())),
                    )?
                    .label(format!(
                        "{}: missed periods ({} in all)",
                        s.label,
                        t.windows.iter().map(|w| w.missed).sum::<u64>()
                    ))
                    .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, c.filled()));
            }
        }
        super::legend(&mut chart, SeriesLabelPosition::LowerRight)
    })?;
    let windows: Vec<String> = drawn
        .iter()
        .map(|(_, s)| {
            let t = timeline(s);
            format!(
                "{}: {} windows of {}",
                s.label,
                t.windows.len(),
                format_ns_as(t.window_ns, NsStyle::Rounded)
            )
        })
        .collect();
    let caption = format!(
        "The {metric} over the run, per window ({}): the highest value of any thread in the window (solid), their mean (thin, pale line); a gap is a window with no value; triangles at the top mark windows in which periods were missed. Every window keeps its maximum, so no peak is lost however long the run.",
        windows.join("; ")
    );
    Ok(Some(Figure {
        id: id.to_string(),
        kind: "timeline",
        title: title.to_string(),
        x_label,
        y_label,
        svg,
        caption,
        contexts,
    }))
}
