//! What the report tests share: the fixtures, rendering files, and the structure every
//! page must have (figures with ids, captions and labelled axes, nothing fetched, no
//! script, summary numbers equal to the JSON's).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use tame_report::html::escape;
use tame_report::{Doc, Input, Rendered};

/// This crate's fixtures: results of short runs of tame. The lead adds recorded results
/// below `recorded/`; [`render_every_file`] picks them up with no change here.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A file of another crate's test data (`tame-bench/testdata/compare/a-noise.json`).
pub fn crate_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

pub fn read(paths: &[PathBuf]) -> Vec<Input> {
    tame_report::read(paths).unwrap_or_else(|e| panic!("{paths:?} should be read: {e}"))
}

pub fn render(paths: &[PathBuf]) -> (Vec<Input>, Rendered) {
    let inputs = read(paths);
    let r = tame_report::render(&inputs).unwrap_or_else(|e| panic!("{paths:?} should render: {e}"));
    check_page(&r);
    (inputs, r)
}

pub fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Write `value` to `dir/name` and return the path.
pub fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(value).unwrap()).unwrap();
    p
}

/// The `<figure>` element of figure `id` in the page.
pub fn figure_block<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure id=\"fig-{id}\" data-figure=\"{id}\""))
        .unwrap_or_else(|| panic!("figure {id} on the page"));
    let end = start + html[start..].find("</figure>").expect("figure closed");
    &html[start..end]
}

/// What every page must be: self-contained (no script, nothing a browser would fetch),
/// every figure with its id, caption, title, labelled axes, environment and command line,
/// and unique ids.
pub fn check_page(r: &Rendered) {
    let html = &r.html;
    assert_times_readable(html);
    // The first screen shows the key figure: before any table.
    if let (Some(figure), Some(table)) = (html.find("<figure"), html.find("<table")) {
        assert!(figure < table, "a table before the first figure");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    let lower = html.to_lowercase();
    for fetch in [
        "<script", "http://", "https://", "url(", "@import", " src=", "<link", "<img", "<iframe",
    ] {
        assert!(
            !lower.contains(fetch),
            "the page must not contain {fetch:?}"
        );
    }
    let mut ids: Vec<&str> = r.figures().map(|f| f.id.as_str()).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "figure ids are unique");
    for f in r.figures() {
        let block = figure_block(html, &f.id);
        assert!(
            block.contains(&format!("<svg data-figure=\"{}\"", f.id)),
            "{}: inline svg",
            f.id
        );
        assert!(block.contains("<figcaption>"), "{}: caption", f.id);
        assert!(
            block.contains(&escape(&f.title)),
            "{}: title in the caption",
            f.id
        );
        assert!(
            !f.x_label.is_empty() && !f.y_label.is_empty(),
            "{}: axes labelled",
            f.id
        );
        for text in [&f.title, &f.x_label, &f.y_label] {
            assert!(
                f.svg.contains(&svg_text(text)),
                "{}: {text:?} drawn in the SVG",
                f.id
            );
        }
        assert!(
            f.svg.starts_with("<svg") && f.svg.contains("xmlns=\"http://www.w3.org/2000/svg\""),
            "{}: a standalone SVG",
            f.id
        );
        assert!(
            !f.contexts.is_empty(),
            "{}: environment and command line beside it",
            f.id
        );
        for c in &f.contexts {
            assert!(
                block.contains(&escape(&c.environment)),
                "{}: environment",
                f.id
            );
            assert!(
                block.contains(&escape(&c.command)),
                "{}: command line",
                f.id
            );
        }
    }
}

/// Text as plotters writes it into an SVG.
pub fn svg_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

pub fn has_figure(r: &Rendered, id: &str) -> bool {
    r.figures().any(|f| f.id == id)
}

/// Every cell of `stat` in a row labelled `row` (one per table that has such a row): its
/// attributes after `data-stat` and its text.
pub fn cells<'a>(html: &'a str, row: &str, stat: &str) -> Vec<(&'a str, &'a str)> {
    let head = format!(
        "<td data-row=\"{}\" data-stat=\"{}\"",
        escape(row),
        escape(stat)
    );
    html.split(&head)
        .skip(1)
        .filter_map(|rest| {
            let open = rest.find('>')?;
            let close = rest.find("</td>")?;
            Some((&rest[..open], &rest[open + 1..close]))
        })
        .collect()
}

/// A cell of `stat` in the row labelled `row` shows exactly `text`.
pub fn assert_cell(html: &str, row: &str, stat: &str, text: &str) {
    let found = cells(html, row, stat);
    assert!(
        found.iter().any(|(_, shown)| *shown == escape(text)),
        "no cell {stat} of row {row:?} shows {text:?}: {found:?}"
    );
}

/// A cell of `stat` in the row labelled `row` keeps `value` (the JSON's) in `data-value`.
pub fn assert_value(html: &str, row: &str, stat: &str, value: &str) {
    let want = format!(" data-value=\"{}\"", escape(value));
    let found = cells(html, row, stat);
    assert!(
        found.iter().any(|(attrs, _)| attrs.contains(&want)),
        "no cell {stat} of row {row:?} keeps{want}: {found:?}"
    );
}

/// The key figures of `label` equal the summary `s` of the JSON (times of `unit`): each
/// shown as the bench tables print it, its value as the JSON holds it beside.
pub fn assert_summary(html: &str, label: &str, s: &Value, unit: &str) {
    let count = s["count"].as_u64().expect("summary has count");
    assert_cell(html, label, "count", &count.to_string());
    for (stat, key) in [
        ("p50", "p50"),
        ("p99", "p99"),
        ("p99.9", "p99_9"),
        ("p99.999", "p99_999"),
        ("max", "max"),
    ] {
        let v = s[key]
            .as_u64()
            .unwrap_or_else(|| panic!("summary has {key}"));
        // A percentile its samples cannot support is shown as such, never as a number.
        let text = match tame_bench::stats::quantile_of_field(key) {
            Some(q) if !tame_bench::stats::supports(count, q) => {
                tame_bench::stats::unsupported_text(q)
            }
            _ => tame_report::page::time_text(unit, v),
        };
        assert_cell(html, label, stat, &text);
        assert_value(html, label, stat, &v.to_string());
    }
}

/// No time is shown as a bare number: every header names no raw unit (`(ns)`, `(ps)`), and
/// every cell that keeps a time's value shows it with its unit (`14.69ms`), a percentile's
/// want of samples or a dash.
pub fn assert_times_readable(html: &str) {
    for raw in ["(ns)</th>", "(ps)</th>"] {
        assert!(!html.contains(raw), "a header in raw units: {raw}");
    }
    for piece in html.split("<td ").skip(1) {
        let (attrs, rest) = piece.split_once('>').unwrap();
        let text = rest.split("</td>").next().unwrap();
        let time = ["ns", "ps", "cycles"]
            .iter()
            .any(|u| attrs.contains(&format!("data-unit=\"{u}\"")));
        if time {
            let readable = ["ns", "µs", "ms", "s", "cycles"]
                .iter()
                .any(|u| text.ends_with(u))
                || text.starts_with("n/a")
                || text == "—";
            assert!(readable, "a time without its unit: <td {attrs}>{text}");
        }
    }
}

/// The figures a document must give, and its numbers on the page equal to its JSON.
pub fn check_expected(inputs: &[Input], raw: &[Value], r: &Rendered) {
    let html = &r.html;
    match &inputs[0].doc {
        Doc::Bench(c) => {
            let bench = c.result.bench.as_str();
            let results: Vec<(&str, &tame_bench::BenchResult)> = inputs
                .iter()
                .map(|i| match &i.doc {
                    Doc::Bench(c) => (i.file.as_str(), &c.result),
                    _ => unreachable!("one bench"),
                })
                .collect();
            let labels = tame_report::model::labels(&results);
            match bench {
                "ipc" => {
                    for (i, v) in inputs.iter().zip(raw) {
                        for g in v["groups"].as_array().unwrap() {
                            let (transport, size) =
                                g["label"].as_str().unwrap().split_once('/').unwrap();
                            let m = g["metrics"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .find(|m| m["name"] == "one_way_latency")
                                .unwrap();
                            let row = if inputs.len() > 1 {
                                format!("{}: {transport}", labels[0])
                            } else {
                                transport.to_string()
                            };
                            assert_summary(html, &row, &m["summary"], "ns");
                            assert!(
                                has_figure(r, &format!("ipc-{}-tail", size.to_lowercase())),
                                "{}: tail of {size}",
                                i.file
                            );
                        }
                        for (k, d) in v["merged"]["derived"].as_object().unwrap() {
                            assert_value(html, k, k, &format!("{}", d.as_f64().unwrap()));
                        }
                    }
                }
                "cost" => {
                    let mut ratios = false;
                    for (label, v) in labels.iter().zip(raw) {
                        for g in v["groups"].as_array().unwrap() {
                            let name = g["label"].as_str().unwrap();
                            let row = if inputs.len() > 1 {
                                format!("{label}: {name}")
                            } else {
                                name.to_string()
                            };
                            let d = &g["derived"];
                            assert_value(
                                html,
                                &row,
                                "throughput",
                                &format!("{}", d["throughput"].as_f64().unwrap()),
                            );
                            if let Some(c) = d.get("cost_percent") {
                                assert_value(
                                    html,
                                    &row,
                                    "cost_percent",
                                    &format!("{}", c.as_f64().unwrap()),
                                );
                                ratios = true;
                            }
                        }
                    }
                    assert_eq!(
                        has_figure(r, "cost-ratios"),
                        ratios,
                        "ratios iff a result has both configurations"
                    );
                }
                "mem" | "cache" => {
                    // One row per group of the key figures (mem: its size; cache: its
                    // configuration), prefixed by the result's label when overlaid.
                    for (label, v) in labels.iter().zip(raw) {
                        for g in v["groups"].as_array().unwrap() {
                            let name = g["label"].as_str().unwrap();
                            let name = name
                                .split_once(' ')
                                .filter(|_| bench == "mem")
                                .map_or(name, |p| p.1);
                            let row = if inputs.len() > 1 {
                                format!("{label}: {name}")
                            } else {
                                name.to_string()
                            };
                            let m = &g["metrics"][0];
                            assert_summary(html, &row, &m["summary"], m["unit"].as_str().unwrap());
                        }
                        if bench == "cache" {
                            for (k, d) in v["merged"]["derived"].as_object().unwrap() {
                                assert_value(html, k, k, &format!("{}", d.as_f64().unwrap()));
                            }
                        }
                    }
                    let figures: &[&str] = if bench == "mem" {
                        &[
                            "mem-sweep",
                            "mem-chase-histogram",
                            "mem-chase-tail",
                            "mem-stream-tail",
                        ]
                    } else {
                        &["cache-histogram", "cache-tail"]
                    };
                    for id in figures {
                        assert!(has_figure(r, id), "{bench}: figure {id}");
                    }
                }
                "watch" => {
                    // Per thread: each metric's key figures, its misses, each snapshot drawn.
                    let many = inputs.len() > 1;
                    let row = |label: &str, thread: &str| {
                        if many {
                            format!("{label}: {thread}")
                        } else {
                            thread.to_string()
                        }
                    };
                    for (label, v) in labels.iter().zip(raw) {
                        for g in v["groups"].as_array().unwrap() {
                            let thread = row(label, g["label"].as_str().unwrap());
                            for m in g["metrics"].as_array().unwrap() {
                                assert_summary(html, &thread, &m["summary"], "ns");
                            }
                        }
                        let Some(w) = v.get("watch") else { continue };
                        for t in w["threads"].as_array().unwrap() {
                            let thread = row(label, t["label"].as_str().unwrap());
                            for stat in ["misses", "missed_periods", "activations"] {
                                assert_cell(html, &thread, stat, &t[stat].to_string());
                            }
                        }
                        for i in 1..=w["snapshots"].as_array().unwrap().len() {
                            let id = if many {
                                format!("watch-{}-miss-{i}", tame_report::bench::slug(label))
                            } else {
                                format!("watch-miss-{i}")
                            };
                            assert!(has_figure(r, &id), "{id}");
                        }
                    }
                    for metric in ["wake-latency", "response", "run-time"] {
                        assert!(has_figure(r, &format!("watch-{metric}-tail")), "{metric}");
                    }
                }
                _ => {
                    for (label, v) in labels.iter().zip(raw) {
                        let m = &v["merged"]["metrics"][0];
                        assert_summary(html, label, &m["summary"], m["unit"].as_str().unwrap());
                    }
                    assert!(has_figure(r, &format!("{bench}-tail")));
                    let any_distribution = raw
                        .iter()
                        .any(|v| v["merged"]["metrics"][0].get("distribution").is_some());
                    assert_eq!(
                        has_figure(r, &format!("{bench}-histogram")),
                        any_distribution,
                        "histogram iff a distribution"
                    );
                    let any_timeline = raw.iter().any(|v| {
                        v["groups"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|g| g.get("timeline").is_some())
                    });
                    assert_eq!(
                        has_figure(r, &format!("{bench}-timeline")),
                        any_timeline,
                        "time line iff one was kept"
                    );
                    if bench == "noise" {
                        assert!(has_figure(r, "noise-attribution"));
                    }
                }
            }
        }
        Doc::Compare(_) => {
            let v = &raw[0];
            for row in v["rows"].as_array().unwrap() {
                let name = format!(
                    "{} {}",
                    row["group"].as_str().unwrap(),
                    row["name"].as_str().unwrap()
                );
                if let Some(ratio) = row["ratio"].as_f64() {
                    assert_value(html, &name, "ratio", &format!("{ratio}"));
                }
            }
            assert!(has_figure(r, "compare-ratios"));
        }
        Doc::Assess(_) => {
            let v = &raw[0];
            assert!(html.contains(&format!(
                "data-outcome=\"{}\"",
                v["verdict"]["outcome"].as_str().unwrap()
            )));
            for phase in ["shared", "partitioned"] {
                if let Some(h) = v["verdict"].get(phase).filter(|h| !h.is_null()) {
                    assert_value(html, phase, "response_ns", &h["response_ns"].to_string());
                    let late = h["late_fraction"].as_f64().unwrap();
                    assert_value(html, phase, "late_fraction", &format!("{late}"));
                    let percent = tame_report::page::percent_text(late * 100.0);
                    assert_cell(html, phase, "late_fraction", &percent);
                    assert_value(html, phase, "margin_ns", &h["margin_ns"].to_string());
                }
                let p = &v[phase];
                let summary = match p
                    .get("results")
                    .and_then(|r| r.get("cycle"))
                    .filter(|c| !c.is_null())
                {
                    Some(c) => &c["merged"]["metrics"][0]["summary"],
                    None => &p["cycle"]["latency"],
                };
                if !summary.is_null() {
                    assert_summary(html, phase, summary, "ns");
                }
            }
            assert!(has_figure(r, "assess-cycle-tail"));
            let noise = ["shared", "partitioned"].iter().any(|p| {
                v[p].get("results")
                    .is_some_and(|r| r.get("noise").is_some_and(|n| !n.is_null()))
            });
            assert_eq!(
                has_figure(r, "assess-noise-attribution"),
                noise,
                "noise figures iff a phase has its noise result"
            );
        }
        Doc::Reserve(_) => {
            let v = &raw[0];
            // `tame bench reserve` wraps the study's tables in a result of the common schema.
            let study = v.get("reserve").unwrap_or(v);
            assert_value(
                html,
                study["kernel"].as_str().unwrap(),
                "g_before",
                &format!("{}", study["g_before"].as_f64().unwrap()),
            );
            let windows = study["stability"].as_array().unwrap().iter().any(|s| {
                s.get("window_rates")
                    .is_some_and(|w| !w.as_array().unwrap().is_empty())
            });
            assert_eq!(has_figure(r, "reserve-shares-over-time"), windows);
            assert_eq!(
                html.contains(&escape(tame_report::reserve::NO_WINDOWS)),
                !windows
            );
            if let Some(cmd) = v.get("command_line") {
                let cmd: Vec<&str> = cmd
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                assert!(
                    html.contains(&escape(&cmd.join(" "))),
                    "the command line is shown"
                );
            }
        }
    }
}

/// The documents of a file as the report reads them: a sweep's steps, else the file's one.
pub fn raw_docs(f: &Path) -> Vec<Value> {
    let v = json(f);
    if v["schema"] == "tame.sweep/1" {
        return v["results"].as_array().unwrap().clone();
    }
    vec![v]
}

/// The JSON files directly in `dir`, sorted.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Render every JSON file of `dir` by itself, then the bench results of each bench
/// together (overlaid), checking each page; returns the number of pages.
pub fn render_every_file(dir: &Path) -> usize {
    let files = json_files(dir);
    let mut pages = 0;
    let mut by_bench: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for f in &files {
        let (inputs, r) = render(std::slice::from_ref(f));
        check_expected(&inputs, &raw_docs(f), &r);
        pages += 1;
        if let Doc::Bench(c) = &inputs[0].doc {
            match by_bench.iter_mut().find(|(b, _)| *b == c.result.bench) {
                Some((_, v)) => v.push(f.clone()),
                None => by_bench.push((c.result.bench.clone(), vec![f.clone()])),
            }
        }
    }
    for (_, group) in by_bench.iter().filter(|(_, g)| g.len() > 1) {
        let (inputs, r) = render(group);
        let raw: Vec<Value> = group.iter().flat_map(|f| raw_docs(f)).collect();
        check_expected(&inputs, &raw, &r);
        pages += 1;
    }
    pages
}
