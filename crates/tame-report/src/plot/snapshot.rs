//! A watch's snapshot of a miss: one CPU's time line over the window before the
//! activation ended, each stretch a rectangle coloured by what ran (the watched thread,
//! or the class of what took the CPU from it), labelled where it is wide enough, with the
//! activation's release, start, deadline and end marked. Drawn for `tame report` and as
//! the `miss-N.svg` a watch writes beside its `miss-N.json`.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use tame_bench::watch::snapshot::{describe, priority_words, SnapshotSpan};
use tame_bench::watch::Snapshot;
use tame_rt::duration::{format_ns_as, NsStyle};
use tame_trace::NoiseClass;

use super::{colour, label_style, svg, tick, title_style, Figure, Scale, FONT, WIDTH};
use crate::error::Result;
use crate::model::Context;

/// One lane and four rows of marker labels need less height than a chart.
pub const HEIGHT: u32 = 400;
/// The strip under the time line that holds the legend.
const LEGEND_HEIGHT: u32 = 64;
/// The lane the spans are drawn in, and the rows of the markers' labels above it (the
/// y axis runs 0..100 and means nothing else).
const LANE: (f64, f64) = (6.0, 46.0);
const Y_TOP: f64 = 100.0;
/// Text inside a span: at least this many pixels to spare around it, or it is left out.
const LABEL_PAD: i32 = 8;
const SPAN_FONT: f64 = 13.0;

/// The classes in the order the legend lists them.
const CLASSES: [NoiseClass; 10] = [
    NoiseClass::Thread,
    NoiseClass::Irq,
    NoiseClass::Softirq,
    NoiseClass::Timer,
    NoiseClass::Tick,
    NoiseClass::Ipi,
    NoiseClass::Workqueue,
    NoiseClass::Nmi,
    NoiseClass::Idle,
    NoiseClass::Unexplained,
];

/// The colour of a span: the watched thread (`None`) the palette's first, each class one
/// of the rest; idle pale, and unexplained black, unlike anything the trace could name.
pub fn class_colour(class: Option<NoiseClass>) -> RGBColor {
    match class {
        None => colour(0),
        Some(NoiseClass::Thread) => colour(1),
        Some(NoiseClass::Irq) => colour(2),
        Some(NoiseClass::Nmi) => colour(3),
        Some(NoiseClass::Softirq) => colour(4),
        Some(NoiseClass::Timer) => colour(5),
        Some(NoiseClass::Workqueue) => colour(6),
        Some(NoiseClass::Tick) => colour(8),
        Some(NoiseClass::Ipi) => colour(9),
        Some(NoiseClass::Idle) => RGBColor(215, 215, 215),
        Some(NoiseClass::Unexplained) => BLACK,
    }
}

/// Text that reads on `fill`: white on dark colours, black on light ones.
fn ink_on(fill: RGBColor) -> RGBColor {
    let RGBColor(r, g, b) = fill;
    let luma = 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
    if luma < 140.0 {
        WHITE
    } else {
        BLACK
    }
}

/// The shade of the stretch before the window (nothing of it was kept).
const BEFORE_WINDOW: RGBColor = RGBColor(240, 240, 240);

/// A snapshot drawn, with the texts the page prints around it.
#[derive(Clone, Debug)]
pub struct Drawn {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub svg: String,
}

/// The title: which thread, where, how late and mostly why.
pub fn title(s: &Snapshot) -> String {
    format!(
        "{}: activation {} on CPU {}, response {}, mostly {}",
        s.thread,
        s.activation,
        s.cpu,
        rounded(s.response_ns),
        s.main_cause().unwrap_or_else(|| "nothing traced".into())
    )
}

fn rounded(ns: u64) -> String {
    format_ns_as(ns, NsStyle::Rounded)
}

/// `+250 µs`, `-1.2 ms`: a time after (before) the release.
fn signed(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", rounded(ns.unsigned_abs()))
}

/// A marker: where it is (ns from the window's start), its label and its line's width.
struct Marker {
    at: i64,
    label: String,
    width: u32,
}

fn markers(s: &Snapshot) -> [Marker; 4] {
    let from_release = |t: i64| signed(t - s.release_ns);
    let late = s.end_ns - s.deadline_ns;
    let end = if late > 0 {
        format!(
            "end {}, {} late",
            from_release(s.end_ns),
            rounded(late as u64)
        )
    } else {
        format!("end {}", from_release(s.end_ns))
    };
    // Rows from the top: the release highest, so the labels of markers close together
    // (release and start usually are) never overlap.
    [
        Marker {
            at: s.release_ns,
            label: "release".into(),
            width: 1,
        },
        Marker {
            at: s.start_ns,
            label: format!("start {}", from_release(s.start_ns)),
            width: 1,
        },
        Marker {
            at: s.deadline_ns,
            label: format!("deadline {}", from_release(s.deadline_ns)),
            width: 3,
        },
        Marker {
            at: s.end_ns,
            label: end,
            width: 1,
        },
    ]
}

/// The stretch drawn, ns from the window's start: the window and every marker, but at
/// most one window's length before it (a release long before would squeeze the window
/// to a sliver; its marker is drawn at the left edge instead).
fn range(s: &Snapshot) -> (i64, i64) {
    let window = i64::try_from(s.window_ns).unwrap_or(i64::MAX).max(1);
    let ats = markers(s).map(|m| m.at);
    let lo = ats.iter().copied().fold(0, i64::min).max(-window);
    let hi = ats.iter().copied().fold(window, i64::max);
    let end_of_spans = s
        .spans
        .iter()
        .map(|sp| i64::try_from(sp.start_ns.saturating_add(sp.duration_ns)).unwrap_or(i64::MAX))
        .fold(hi, i64::max);
    (lo, end_of_spans.max(lo + 1))
}

/// What a span is called inside it: its source, and a thread's priority as a user sets it
/// (the watched thread's from the snapshot).
fn span_lines(s: &Snapshot, span: &SnapshotSpan) -> Vec<String> {
    let prio = match span.class {
        None => s.prio,
        Some(_) => span.prio,
    };
    let mut lines = vec![span.source.clone()];
    lines.extend(prio.map(priority_words));
    lines
}

/// Draw the snapshot as a standalone SVG document.
pub fn draw(s: &Snapshot) -> Result<Drawn> {
    let title = title(s);
    let (lo, hi) = range(s);
    let scale = Scale::for_values("ns", (hi - lo).unsigned_abs());
    let x = |ns: i64| ns as f64 / scale.div;
    let (x0, x1) = (x(lo), x(hi));
    let x_label = format!("time from the window's start ({})", scale.unit);
    let y_label = format!("CPU {}", s.cpu);
    let marks = markers(s);
    let mut legend: Vec<(RGBColor, String)> = vec![(
        class_colour(None),
        format!("{} (the watched thread)", s.thread),
    )];
    for c in CLASSES {
        if s.spans.iter().any(|sp| sp.class == Some(c)) {
            legend.push((class_colour(Some(c)), c.to_string()));
        }
    }
    if lo < 0 {
        legend.push((BEFORE_WINDOW, "before the window (not kept)".into()));
    }
    let svg = svg((WIDTH, HEIGHT), |root| {
        let (top, bottom) = root.split_vertically(HEIGHT - LEGEND_HEIGHT);
        let mut chart = ChartBuilder::on(&top)
            .caption(&title, fitting(&top, &title)?)
            .margin(12)
            .margin_right(32)
            .x_label_area_size(48)
            .y_label_area_size(40)
            .build_cartesian_2d(x0..x1, 0.0..Y_TOP)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(&x_label)
            .y_desc(&y_label)
            .axis_desc_style(label_style())
            .label_style(label_style())
            .x_label_formatter(&|v| tick(*v))
            .y_labels(0)
            .draw()?;
        if lo < 0 {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (0.0, Y_TOP)],
                BEFORE_WINDOW.filled(),
            )))?;
        }
        // One pixel at least, so that a 100 ns interrupt in a 20 ms window still shows.
        let coord = chart.as_coord_spec().clone();
        let px = |v: f64| coord.translate(&(v, 0.0)).0;
        let one_px = (x1 - x0) / f64::from((px(x1) - px(x0)).max(1));
        let span_font = (FONT, SPAN_FONT).into_font();
        for span in &s.spans {
            let start = span.start_ns as i64;
            let (a, b) = (x(start), x(start.saturating_add(span.duration_ns as i64)));
            let (a, b) = (a.max(x0), b.min(x1).max(a + one_px));
            let fill = class_colour(span.class);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a, LANE.0), (b, LANE.1)],
                fill.filled(),
            )))?;
            let room = px(b) - px(a) - LABEL_PAD;
            let ink = ink_on(fill);
            let style = TextStyle::from(span_font.clone())
                .pos(Pos::new(HPos::Center, VPos::Center))
                .color(&ink);
            let lines: Vec<String> = span_lines(s, span)
                .into_iter()
                .take_while(|l| {
                    top.estimate_text_size(l, &style)
                        .is_ok_and(|(w, _)| (w as i32) < room)
                })
                .collect();
            let mid = ((a + b) / 2.0, (LANE.0 + LANE.1) / 2.0);
            let step = SPAN_FONT as i32 + 2;
            let first = -(step * (lines.len() as i32 - 1)) / 2;
            for (i, line) in lines.into_iter().enumerate() {
                chart.draw_series(std::iter::once(
                    EmptyElement::at(mid)
                        + Text::new(line, (0, first + step * i as i32), style.clone()),
                ))?;
            }
        }
        let rows = marks.len() as f64;
        for (i, m) in marks.iter().enumerate() {
            let row = Y_TOP - (Y_TOP - LANE.1) * (i as f64 + 0.5) / rows;
            let clipped = m.at < lo;
            let at = x(m.at.max(lo));
            // A white edge keeps the line visible over any span, black ones included.
            for (colour, width) in [(WHITE, m.width + 2), (BLACK, m.width)] {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(at, 0.0), (at, row)],
                    colour.stroke_width(width),
                )))?;
            }
            let label = if clipped {
                format!(
                    "{} (earlier: {} before the window)",
                    m.label,
                    rounded(m.at.unsigned_abs())
                )
            } else {
                m.label.clone()
            };
            // Labels run into the figure: rightwards from a marker in its left part.
            let (h, dx) = if at < x0 + (x1 - x0) * 0.6 {
                (HPos::Left, 5)
            } else {
                (HPos::Right, -5)
            };
            let style = label_style().pos(Pos::new(h, VPos::Center));
            chart.draw_series(std::iter::once(
                EmptyElement::at((at, row)) + Text::new(label, (dx, 0), style),
            ))?;
        }
        draw_legend(&bottom, &legend)
    })?;
    Ok(Drawn {
        title,
        x_label,
        y_label,
        svg,
    })
}

/// A standalone SVG that says why the snapshot is not drawn.
pub fn not_drawn(why: &str) -> String {
    format!(
        "<svg width=\"{WIDTH}\" height=\"40\" viewBox=\"0 0 {WIDTH} 40\" xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"8\" y=\"24\" font-family=\"{FONT}\" font-size=\"14\">snapshot not drawn: {}</text>\n</svg>\n",
        crate::html::escape(why)
    )
}

/// The title's style, smaller where a long thread name or cause would not fit in one line.
fn fitting<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
) -> std::result::Result<TextStyle<'static>, Box<dyn std::error::Error>> {
    let room = area.dim_in_pixel().0.saturating_sub(24);
    let mut style = title_style();
    for smaller in [18.0, 16.0, 14.0, 12.0] {
        let (w, _) = area
            .estimate_text_size(title, &style)
            .map_err(|e| e.to_string())?;
        if w <= room {
            break;
        }
        style = TextStyle::from((FONT, smaller).into_font());
    }
    Ok(style)
}

/// The legend: a box and a name per colour, in rows across the strip.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(RGBColor, String)],
) -> std::result::Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let width = area.dim_in_pixel().0 as i32;
    let style = label_style().pos(Pos::new(HPos::Left, VPos::Center));
    let (mut x, mut y) = (52, 16);
    for (fill, name) in entries {
        let (w, _) = area.estimate_text_size(name, &style)?;
        let need = 20 + w as i32 + 24;
        if x + need > width && x > 52 {
            x = 52;
            y += 24;
        }
        area.draw(&Rectangle::new(
            [(x, y - 7), (x + 14, y + 7)],
            fill.filled(),
        ))?;
        area.draw(&Rectangle::new(
            [(x, y - 7), (x + 14, y + 7)],
            BLACK.stroke_width(1),
        ))?;
        area.draw(&Text::new(name.clone(), (x + 20, y), style.clone()))?;
        x += need;
    }
    Ok(())
}

/// The snapshot as a figure of the page.
pub fn figure(id: &str, s: &Snapshot, contexts: Vec<Context>) -> Result<Figure> {
    let d = draw(s)?;
    let causes: Vec<String> = s
        .causes
        .iter()
        .map(|c| format!("{} {}", describe(c), rounded(c.total_ns)))
        .collect();
    let causes = if causes.is_empty() {
        "nothing traced delayed it".to_string()
    } else {
        format!("what delayed it, most first: {}", causes.join("; "))
    };
    let caption = format!(
        "CPU {}'s time line over the {} before activation {} of {} ended: each stretch is what ran, coloured by its class (the watched thread in its own colour, unexplained time — the CPU taken where the trace shows nothing, as by a hypervisor — in black), named where it is wide enough. The lines mark its release, its start (switched in {} later), its deadline and its end ({} after the release); {causes}.",
        s.cpu,
        rounded(s.window_ns),
        s.activation,
        s.thread,
        rounded(s.wake_latency_ns),
        rounded(s.response_ns),
    );
    Ok(Figure {
        id: id.to_string(),
        kind: "snapshot",
        title: d.title,
        x_label: d.x_label,
        y_label: d.y_label,
        svg: d.svg,
        caption,
        contexts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_bench::watch::snapshot::SCHEMA;
    use tame_bench::watch::Cause;

    fn span(
        start_ns: u64,
        duration_ns: u64,
        class: Option<NoiseClass>,
        source: &str,
    ) -> SnapshotSpan {
        SnapshotSpan {
            start_ns,
            duration_ns,
            class,
            source: source.into(),
            prio: (class == Some(NoiseClass::Thread)).then_some(9),
        }
    }

    /// A miss of `comm` on CPU 3: released at 4 ms, started at 6 ms, deadline 5 ms, end 10 ms.
    fn snapshot(comm: &str, spans: Vec<SnapshotSpan>) -> Snapshot {
        Snapshot {
            schema: SCHEMA.into(),
            thread: comm.into(),
            tid: 500,
            prio: Some(19),
            cpu: 3,
            activation: 10,
            released_by: Some(tame_bench::watch::ReleasedBy::Timer),
            window_start_ns: 1_000_000_000,
            window_ns: 10_000_000,
            release_ns: 4_000_000,
            start_ns: 6_000_000,
            deadline_ns: 5_000_000,
            end_ns: 10_000_000,
            wake_latency_ns: 2_000_000,
            response_ns: 6_000_000,
            // Less than the rival held the CPU: the rival is the main cause.
            run_ns: 500_000,
            causes: vec![Cause {
                class: NoiseClass::Thread,
                source: "rival/812".into(),
                prio: Some(9),
                count: 1,
                total_ns: 2_000_000,
                max_ns: 2_000_000,
            }],
            spans,
        }
    }

    /// The `<rect>`s of an SVG as (x, y, width, height, fill).
    fn rects(svg: &str) -> Vec<(i32, i32, i32, i32, String)> {
        let attr = |r: &str, name: &str| -> String {
            let from = r.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            r[from..from + r[from..].find('"').unwrap()].to_string()
        };
        svg.split("<rect")
            .skip(1)
            .map(|r| {
                let n = |k| attr(r, k).parse().unwrap();
                (n("x"), n("y"), n("width"), n("height"), attr(r, "fill"))
            })
            .collect()
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    #[test]
    fn spans_are_rectangles_in_order_as_wide_as_they_lasted() {
        let spans = vec![
            span(0, 2_000_000, None, "loop"),
            span(2_000_000, 4_000_000, Some(NoiseClass::Thread), "rival/812"),
            span(6_000_000, 500_000, Some(NoiseClass::Irq), "irq 36 virtio0"),
            span(6_500_000, 3_500_000, None, "loop"),
        ];
        let s = snapshot("loop", spans.clone());
        let d = draw(&s).unwrap();
        // The lane: the rectangles as tall as the rival's.
        let all = rects(&d.svg);
        let rival = all
            .iter()
            .find(|r| r.4 == hex(class_colour(Some(NoiseClass::Thread))))
            .unwrap()
            .clone();
        let lane: Vec<_> = all
            .iter()
            .filter(|r| r.1 == rival.1 && r.3 == rival.3)
            .collect();
        assert_eq!(lane.len(), spans.len(), "{lane:?}");
        let px_per_ns = f64::from(rival.2) / 4_000_000.0;
        for (r, sp) in lane.iter().zip(&spans) {
            assert_eq!(r.4, hex(class_colour(sp.class)));
            let want = sp.duration_ns as f64 * px_per_ns;
            assert!((f64::from(r.2) - want).abs() <= 1.5, "{r:?}: {want}");
        }
        for w in lane.windows(2) {
            assert!(
                (w[0].0 + w[0].2 - w[1].0).abs() <= 1,
                "{w:?}: one after the other"
            );
        }
        // Wide spans are named, the rival with its priority in words.
        assert!(d.svg.contains("rival/812"));
        assert!(d.svg.contains("real-time 90"));
        assert!(d.title.contains("loop") && d.title.contains("CPU 3"));
        assert!(d.title.contains("response 6 ms"), "{}", d.title);
        assert!(
            d.title.contains("mostly thread rival/812 (real-time 90)"),
            "{}",
            d.title
        );
        // Each class present in the legend, and unexplained unlike any other class.
        assert!(d.svg.contains(">\nirq\n<"));
        let unexplained = class_colour(Some(NoiseClass::Unexplained));
        for c in CLASSES.iter().filter(|c| **c != NoiseClass::Unexplained) {
            assert_ne!(class_colour(Some(*c)), unexplained);
        }
        let mut all: Vec<RGBColor> = CLASSES.iter().map(|c| class_colour(Some(*c))).collect();
        all.push(class_colour(None));
        let n = all.len();
        all.sort_by_key(|c| (c.0, c.1, c.2));
        all.dedup();
        assert_eq!(all.len(), n, "every class a colour of its own");
    }

    #[test]
    fn release_start_deadline_and_end_are_marked() {
        let s = snapshot("loop", vec![span(0, 10_000_000, None, "loop")]);
        let d = draw(&s).unwrap();
        for label in [
            "release",
            "start +2 ms",
            "deadline +1 ms",
            "end +6 ms, 5 ms late",
        ] {
            assert!(d.svg.contains(&format!(">\n{label}\n<")), "{label}");
        }
        // A release before the window: drawn at the left edge, said so.
        let mut early = s.clone();
        early.release_ns = -30_000_000;
        let d = draw(&early).unwrap();
        assert!(
            d.svg.contains("release (earlier: 30 ms before the window)"),
            "{}",
            d.svg
        );
        assert!(d.svg.contains("before the window (not kept)"));
    }

    #[test]
    fn names_are_escaped() {
        let s = snapshot(
            "a<b&c",
            vec![
                span(0, 5_000_000, None, "a<b&c"),
                span(5_000_000, 5_000_000, Some(NoiseClass::Thread), "x\"y'/1"),
            ],
        );
        let d = draw(&s).unwrap();
        assert!(d.svg.contains("a&lt;b&amp;c"));
        assert!(!d.svg.contains("a<b"));
        assert!(d.svg.contains("x&quot;y&apos;/1"));
    }

    #[test]
    fn an_empty_snapshot_still_draws() {
        let mut s = snapshot("loop", Vec::new());
        s.causes.clear();
        s.run_ns = 0;
        s.window_ns = 0;
        s.release_ns = 0;
        s.start_ns = 0;
        s.deadline_ns = 0;
        s.end_ns = 0;
        let d = draw(&s).unwrap();
        assert!(d.svg.starts_with("<svg") && d.svg.contains("mostly nothing traced"));
        let f = figure("miss-1", &s, Vec::new()).unwrap();
        assert!(f.caption.contains("nothing traced delayed it"));
    }
}
