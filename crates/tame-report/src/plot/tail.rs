//! The tail curve: a metric's value against 1 − quantile on a log axis (1 at the left,
//! one in a million to the right), so the whole tail shows in one line — two
//! configurations with the same p99 part where their tails do.

use plotters::prelude::*;

use super::{colour, decades, label_style, svg, title_style, Figure, Scale, HEIGHT, WIDTH};
use crate::error::Result;
use crate::model::{Context, Series};

/// The summary's percentiles as (1 / (1 − q), name).
const SUMMARY_POINTS: [(f64, &str); 6] = [
    (2.0, "p50"),
    (10.0, "p90"),
    (100.0, "p99"),
    (1e3, "p99.9"),
    (1e4, "p99.99"),
    (1e5, "p99.999"),
];

/// The curve of one series as (1 / (1 − q), value) points, and whether it came from the
/// whole distribution (else from the summary's percentiles).
pub fn curve(s: &Series) -> (Vec<(f64, u64)>, bool) {
    let n = s.summary.count;
    if n == 0 {
        return (Vec::new(), false);
    }
    match &s.distribution {
        Some(d) if !d.bins.is_empty() => {
            let total: u64 = d.bins.iter().map(|b| b[2]).sum();
            let mut above = total;
            let mut points = vec![(1.0, s.summary.min)];
            for b in &d.bins {
                above -= b[2];
                // Beyond this bin's quantile the value is at most its upper bound (the
                // exact maximum for the last).
                let value = if above == 0 {
                    s.summary.max
                } else {
                    (b[1] - 1).min(s.summary.max)
                };
                let x = total as f64 / above.max(1) as f64;
                points.push((x, value));
            }
            (points, true)
        }
        _ => {
            let m = &s.summary;
            let values = [m.p50, m.p90, m.p99, m.p99_9, m.p99_99, m.p99_999];
            let mut points = vec![(1.0, m.min)];
            for ((x, _), v) in SUMMARY_POINTS.iter().zip(values) {
                if m.supports(1.0 - 1.0 / x) {
                    points.push((*x, v));
                }
            }
            points.push(((n as f64).max(2.0), m.max));
            (points, false)
        }
    }
}

pub fn figure(
    id: &str,
    title: &str,
    series: &[Series],
    contexts: Vec<Context>,
) -> Result<Option<Figure>> {
    let drawn: Vec<(usize, &Series)> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.summary.count > 0)
        .collect();
    let Some((_, first)) = drawn.first() else {
        return Ok(None);
    };
    let max_value = drawn
        .iter()
        .map(|(_, s)| s.summary.max)
        .max()
        .unwrap_or(1)
        .max(1);
    let min_value = drawn
        .iter()
        .map(|(_, s)| s.summary.min.max(1))
        .min()
        .unwrap_or(1);
    let scale = Scale::for_values(&first.unit, max_value);
    let (y0, y1) = decades(scale.of(min_value), scale.of(max_value));
    let most = drawn
        .iter()
        .map(|(_, s)| s.summary.count)
        .max()
        .unwrap_or(10) as f64;
    let (_, x1) = decades(1.0, most.max(10.0));
    let x_label = "1 − quantile (log; the rarest values to the right)".to_string();
    let y_label = format!("{} ({}, log)", first.metric, scale.unit);
    let svg = svg((WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, title_style())
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((1.0..x1).log_scale(), (y0..y1).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(&x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| one_minus_q(*v))
            .y_label_formatter(&|v| super::tick(*v))
            .draw()?;
        for (i, s) in &drawn {
            let c = colour(*i);
            let (points, whole) = curve(s);
            let line: Vec<(f64, f64)> = points
                .iter()
                .map(|&(x, v)| (x, scale.of(v.max(1))))
                .collect();
            let label = if whole {
                format!("{} (n = {})", s.label, s.summary.count)
            } else {
                format!(
                    "{} (n = {}, from the summary's percentiles)",
                    s.label, s.summary.count
                )
            };
            if whole {
                chart
                    .draw_series(LineSeries::new(line, c.stroke_width(2)))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
            } else {
                chart
                    .draw_series(DashedLineSeries::new(line, 8, 4, c.stroke_width(2)))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
            }
            // The summary's own numbers, as the JSON has them.
            let m = &s.summary;
            let values = [m.p50, m.p90, m.p99, m.p99_9, m.p99_99, m.p99_999];
            let dots = SUMMARY_POINTS
                .iter()
                .zip(values)
                .filter(|((x, _), _)| s.summary.supports(1.0 - 1.0 / x))
                .map(|((x, _), v)| (*x, scale.of(v.max(1))))
                .chain(std::iter::once((
                    (s.summary.count as f64).max(2.0),
                    scale.of(m.max.max(1)),
                )));
            chart.draw_series(dots.map(|p| Circle::new(p, 4, c.filled())))?;
        }
        super::legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })?;
    let caption = format!(
        "Each {} against how rarely it is exceeded: at 10⁻² one value in a hundred is higher (p99), at 10⁻³ one in a thousand (p99.9), at 10⁻⁵ one in 100 000 (p99.999); the curve ends at the maximum (1 − quantile = 1/n). Lower and flatter is better; where two curves part is where the configurations differ. Dots are the summary's percentiles; a dashed curve is drawn from them alone (the result has no distribution).",
        first.metric
    );
    Ok(Some(Figure {
        id: id.to_string(),
        kind: "tail",
        title: title.to_string(),
        x_label,
        y_label,
        svg,
        caption,
        contexts,
    }))
}

/// The tick at 1 / (1 − q) = `v`, written as 1 − q: `1`, `10⁻³`.
pub fn one_minus_q(v: f64) -> String {
    let k = v.log10();
    if (k - k.round()).abs() < 1e-9 {
        let k = k.round() as i32;
        if k == 0 {
            return "1".into();
        }
        let digits: String = k
            .to_string()
            .chars()
            .map(|c| match c {
                '0' => '⁰',
                '1' => '¹',
                '2' => '²',
                '3' => '³',
                '4' => '⁴',
                '5' => '⁵',
                '6' => '⁶',
                '7' => '⁷',
                '8' => '⁸',
                _ => '⁹',
            })
            .collect();
        return format!("10⁻{digits}");
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_bench::distribution::Distribution;
    use tame_bench::Recorder;

    fn series(values: &[u64], with_distribution: bool) -> Series {
        let mut r = Recorder::new();
        values.iter().for_each(|&v| r.record(v));
        Series {
            label: "a".into(),
            metric: "latency".into(),
            unit: "ns".into(),
            summary: r.summary(),
            distribution: with_distribution.then(|| Distribution::of(&r)),
            timeline: None,
            missed: 0,
        }
    }

    #[test]
    fn the_curve_rises_to_the_maximum_at_one_in_n() {
        let mut values = vec![1000u64; 999];
        values.push(50_000);
        let (points, whole) = curve(&series(&values, true));
        assert!(whole);
        assert_eq!(points.first(), Some(&(1.0, 1000)));
        assert_eq!(points.last(), Some(&(1000.0, 50_000)));
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
            "{points:?}"
        );
        // Without a distribution: the summary's points up to the count, then the maximum.
        let (points, whole) = curve(&series(&values, false));
        assert!(!whole);
        assert_eq!(
            points.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![1.0, 2.0, 10.0, 100.0, 1000.0]
        );
        assert_eq!(points.last().unwrap().1, 50_000);
    }

    #[test]
    fn ticks_read_as_one_minus_q() {
        assert_eq!(one_minus_q(1.0), "1");
        assert_eq!(one_minus_q(1000.0), "10⁻³");
        assert_eq!(one_minus_q(1e5), "10⁻⁵");
        assert_eq!(one_minus_q(20.0), "");
    }
}
