//! The page as one self-contained HTML file: inline CSS, the figures as inline SVG, no
//! script, and nothing that a browser would fetch (these machines are often offline).

use std::fmt::Write as _;

use crate::page::{Block, Page, Table, Verdict};
use crate::plot::Figure;

const CSS: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1000px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
caption { text-align: left; font-weight: bold; padding: .3em 0; }
figure { margin: 1.5em 0; border: 1px solid #ddd; padding: .6em; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .9em; }
dl.context { margin: .5em 0 0; } dl.context dt { font-weight: bold; margin-top: .3em; }
dl.context dd { margin-left: 1.2em; } code { font-size: .95em; word-break: break-all; }
.verdict { border: 2px solid #444; padding: .6em 1em; background: #f7f7f7; }
.verdict.real_fast_is_enough { border-color: #2c2; } .verdict.partition_needed { border-color: #e90; }
.verdict.not_met { border-color: #d22; } .verdict.inconclusive { border-color: #999; }
.verdict-details { border-left: 4px solid #ccc; padding: 0 1em; margin: 1em 0; }
.warnings li { color: #a30; } .note { background: #fff8dc; border-left: 4px solid #e0b000; padding: .4em .8em; }
";

/// HTML text: `&`, `<`, `>` and quotes escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

pub fn render(page: &Page) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p>From: {}</p>\n",
        escape(&page.title),
        escape(&page.title),
        page.inputs.iter().map(|i| format!("<code>{}</code>", escape(i))).collect::<Vec<_>>().join(", ")
    );
    h.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    // The first screen: the verdict's headline, then the key figure, then the tables.
    if let Some(v) = &page.verdict {
        headline(&mut h, v);
    }
    let lead = page.lead_figure();
    if let Some(f) = lead {
        figure(&mut h, f);
    }
    if let Some(v) = &page.verdict {
        verdict_details(&mut h, v);
    }
    for t in &page.key_figures {
        table(&mut h, t);
    }
    if !page.warnings.is_empty() {
        h.push_str("<h3>Warnings</h3>\n<ul class=\"warnings\" id=\"warnings\">\n");
        for w in page.warning_lines() {
            let _ = writeln!(h, "<li>{}</li>", escape(&w));
        }
        h.push_str("</ul>\n");
    }
    if !page.notes.is_empty() {
        h.push_str("<h3>What the inputs lack</h3>\n<ul id=\"notes\">\n");
        for n in &page.notes {
            let _ = writeln!(h, "<li class=\"note\">{}</li>", escape(n));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
    for s in &page.sections {
        let _ = writeln!(
            h,
            "<section id=\"{}\">\n<h2>{}</h2>",
            escape(&s.id),
            escape(&s.heading)
        );
        for b in &s.blocks {
            match b {
                // Drawn at the top: here a pointer to it.
                Block::Figure(f) if lead.is_some_and(|l| l.id == f.id) => {
                    let _ = writeln!(
                        h,
                        "<p class=\"moved\"><a href=\"#fig-{}\">{}</a>: at the top of the page.</p>",
                        escape(&f.id),
                        escape(&f.title)
                    );
                }
                Block::Figure(f) => figure(&mut h, f),
                Block::Table(t) => table(&mut h, t),
                Block::Note(n) => {
                    let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(n));
                }
                Block::Text(t) => {
                    let _ = writeln!(h, "<p>{}</p>", escape(t));
                }
            }
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The verdict's outcome and headline, boxed in the outcome's colour.
fn headline(h: &mut String, v: &Verdict) {
    let _ = writeln!(
        h,
        "<div class=\"verdict {}\" id=\"verdict\" data-outcome=\"{}\">\n<p><strong>Verdict: {}</strong></p>\n</div>",
        escape(&v.outcome),
        escape(&v.outcome),
        escape(&v.headline)
    );
}

/// What the verdict rests on, after the key figure: its table, limits, next step, cost.
fn verdict_details(h: &mut String, v: &Verdict) {
    h.push_str("<div class=\"verdict-details\" id=\"verdict-details\">\n");
    if let Some(t) = &v.table {
        table(h, t);
    }
    if !v.limits.is_empty() {
        h.push_str("<p>What limits it, worst first:</p>\n<ul>\n");
        for l in &v.limits {
            let _ = writeln!(h, "<li>{}</li>", escape(l));
        }
        h.push_str("</ul>\n");
    }
    let _ = writeln!(h, "<p>Next step: {}</p>", escape(&v.next_step));
    if let Some(c) = &v.cost {
        let _ = writeln!(h, "<p>Its cost: {}</p>", escape(c));
    }
    for n in &v.notes {
        let _ = writeln!(h, "<p>{}</p>", escape(n));
    }
    h.push_str("</div>\n");
}

fn table(h: &mut String, t: &Table) {
    let _ = writeln!(
        h,
        "<table id=\"{}\">\n<caption>{}</caption>\n<tr>",
        escape(&t.id),
        escape(&t.caption)
    );
    for c in &t.head {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("</tr>\n");
    for row in &t.rows {
        h.push_str("<tr>");
        let key = row.first().map(|c| c.text.as_str()).unwrap_or("");
        for c in row {
            cell(h, key, c);
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

/// A cell: its row and figure named (`data-row`, `data-stat`) where it is a figure, and the
/// value as the JSON holds it (`data-value`, `data-unit`) where the text rounds or converts it.
fn cell(h: &mut String, key: &str, c: &crate::page::Cell) {
    h.push_str("<td");
    if let Some(stat) = &c.stat {
        let _ = write!(
            h,
            " data-row=\"{}\" data-stat=\"{}\"",
            escape(key),
            escape(stat)
        );
    }
    if let Some(v) = &c.value {
        let _ = write!(h, " data-value=\"{}\"", escape(v));
    }
    if let Some(u) = c.unit.as_deref().filter(|u| !u.is_empty()) {
        let _ = write!(h, " data-unit=\"{}\"", escape(u));
    }
    let _ = write!(h, ">{}</td>", escape(&c.text));
}

/// The figure's SVG for inline use: the namespace declaration (a name, never fetched, but
/// an address in the text) is left out — HTML5 places inline `<svg>` in it anyway — and
/// the root carries the figure's id and an accessible name.
pub fn inline_svg(f: &Figure) -> String {
    let svg = f
        .svg
        .replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
    svg.replacen(
        "<svg ",
        &format!(
            "<svg data-figure=\"{}\" role=\"img\" aria-label=\"{}\" ",
            escape(&f.id),
            escape(&f.title)
        ),
        1,
    )
}

fn figure(h: &mut String, f: &Figure) {
    let _ = writeln!(
        h,
        "<figure id=\"fig-{}\" data-figure=\"{}\" data-kind=\"{}\">",
        escape(&f.id),
        escape(&f.id),
        f.kind
    );
    h.push_str(&inline_svg(f));
    let _ = writeln!(
        h,
        "\n<figcaption><strong>{}</strong> — {} <a href=\"{}.svg\">(this figure as an SVG file)</a>\n<dl class=\"context\">",
        escape(&f.title),
        escape(&f.caption),
        escape(&f.id)
    );
    for c in &f.contexts {
        let _ = writeln!(
            h,
            "<dt>{} <small>({})</small></dt>\n<dd>{}</dd>\n<dd><code>{}</code></dd>",
            escape(&c.label),
            escape(&c.file),
            escape(&c.environment),
            escape(&c.command)
        );
    }
    h.push_str("</dl>\n</figcaption>\n</figure>\n");
}
