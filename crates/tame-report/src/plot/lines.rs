//! A plain line chart with points: a figure against a count (sleep jitter against the
//! number of tasks, the reserve client's CPU share against background processes).

use plotters::prelude::*;

use super::{colour, label_style, svg, title_style, Figure, HEIGHT, WIDTH};
use crate::error::Result;
use crate::model::Context;

/// One line: its label and (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

pub struct Axes<'a> {
    pub kind: &'static str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Tick labels of each axis: [`super::tick`] for plain values; a figure that plots
    /// logarithms (mem's sizes and times) labels each tick with the value it stands for.
    pub x_tick: fn(f64) -> String,
    pub y_tick: fn(f64) -> String,
}

pub fn figure(
    id: &str,
    title: &str,
    axes: Axes<'_>,
    lines: &[Line],
    caption: String,
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    let points = lines.iter().flat_map(|(_, p)| p.iter());
    let Some((x0, x1, y0, y1)) = points.fold(None, |acc: Option<(f64, f64, f64, f64)>, &(x, y)| {
        Some(match acc {
            None => (x, x, y, y),
            Some((a, b, lo, hi)) => (a.min(x), b.max(x), lo.min(y), hi.max(y)),
        })
    }) else {
        return Ok(None);
    };
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    // From zero, unless a line goes below it (logarithms of values under one).
    let y0 = y0.min(0.0);
    let y1 = if y1 > 0.0 { y1 + (y1 - y0) * 0.15 } else { 1.0 };
    let svg = svg((WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .x_desc(axes.x_label)
            .y_desc(axes.y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| (axes.x_tick)(*v))
            .y_label_formatter(&|v| (axes.y_tick)(*v))
            .draw()?;
        for (i, (label, p)) in lines.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(p.clone(), c.stroke_width(2)))?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart.draw_series(p.iter().map(|&q| Circle::new(q, 4, c.filled())))?;
        }
        super::legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })?;
    Ok(Some(Figure {
        id: id.to_string(),
        kind: axes.kind,
        title: title.to_string(),
        x_label: axes.x_label.to_string(),
        y_label: axes.y_label.to_string(),
        svg,
        caption,
        contexts,
    }))
}
