//! Ratios as horizontal bars on a log axis around 1 (B / A of `tame compare`): a bar to the
//! right is larger in B, to the left smaller, and ×2 and ×0.5 are the same length.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{colour, decades, label_style, svg, title_style, Figure, WIDTH};
use crate::error::Result;
use crate::model::Context;

pub fn figure(
    id: &str,
    title: &str,
    rows: &[(String, f64)],
    x_label: &str,
    caption: String,
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    let rows: Vec<&(String, f64)> = rows
        .iter()
        .filter(|(_, r)| r.is_finite() && *r > 0.0)
        .collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let (lo, hi) = rows.iter().fold((1.0f64, 1.0f64), |(lo, hi), (_, r)| {
        (lo.min(*r), hi.max(*r))
    });
    let (x0, x1) = decades(lo, hi);
    // Symmetric around 1, so a halving and a doubling look alike.
    let reach = (1.0 / x0).max(x1);
    let (x0, x1) = (1.0 / reach, reach);
    // A discrete range holds both its ends: 0..n - 1 has n slots.
    let n = rows.len();
    let height = (110 + 18 * n as u32).max(260);
    let y_label = "figure".to_string();
    let svg = svg((WIDTH, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(260)
            .build_cartesian_2d((x0..x1).log_scale(), -0.5..(n as f64 - 0.5))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| format!("×{}", super::tick(*v)))
            .draw()?;
        // Top to bottom in the given order: row k at y = n − 1 − k.
        let y = |k: usize| (n - 1 - k) as f64;
        chart.draw_series(rows.iter().enumerate().map(|(k, (_, r))| {
            let c = if *r >= 1.0 { colour(3) } else { colour(2) };
            Rectangle::new([(1.0, y(k) - 0.35), (*r, y(k) + 0.35)], c.mix(0.8).filled())
        }))?;
        chart.draw_series(LineSeries::new(
            vec![(1.0, -0.5), (1.0, n as f64 - 0.5)],
            BLACK.stroke_width(1),
        ))?;
        // The row names beside the axis, each level with its bar (plotters' own tick labels
        // would fall where its tick algorithm puts them).
        let style =
            TextStyle::from((super::FONT, 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (k, (name, _)) in rows.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(x0, y(k)));
            root.draw(&Text::new(name.clone(), (px - 6, py), style.clone()))?;
        }
        Ok(())
    })?;
    Ok(Some(Figure {
        id: id.to_string(),
        kind: "ratios",
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label,
        svg,
        caption,
        contexts,
    }))
}
