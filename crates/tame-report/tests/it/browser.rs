//! The reports of the recorded results opened in a real headless chromium: each page loads,
//! logs no console error or exception, fetches nothing but itself, and every figure on it is
//! drawn (its pixels inked in several colours, not blank). Needs chromium
//! (scripts/install-test-deps.sh): skipped without it, failed under CI.
//!
//! `TAME_REPORT_SCREENSHOTS=DIR` also saves the screenshots docs/report.md shows:
//! `TAME_REPORT_SCREENSHOTS=docs/report cargo test -p tame-report --test it browser::`.

use crate::common::*;

use std::path::{Path, PathBuf};

use tame_testing::browser::{chromium, Browser, Viewport};
use tame_testing::require::{have_program, require};

/// The pages of the recorded results, by name: what a user gets from each kind of input.
fn recorded_pages() -> Vec<(&'static str, Vec<PathBuf>)> {
    let r = |names: &[&str]| -> Vec<PathBuf> {
        names
            .iter()
            .map(|n| fixtures().join("recorded").join(n))
            .collect()
    };
    vec![
        ("assess", r(&["assess.json"])),
        ("cycle", r(&["cycle-shared.json", "cycle-partitioned.json"])),
        ("noise", r(&["noise-shared.json", "noise-partitioned.json"])),
        ("ipc", r(&["ipc.json"])),
        (
            "sleep",
            r(&[
                "sleep-tasks1.json",
                "sleep-tasks2.json",
                "sleep-tasks4.json",
            ]),
        ),
        ("fwq", r(&["fwq.json"])),
        ("compare", r(&["compare-cycle.json"])),
        ("reserve", r(&["reserve.json"])),
        ("mem", r(&["mem.json", "mem-load.json"])),
        ("cache", r(&["cache.json"])),
    ]
}

/// Screenshots docs/report.md shows: (page, element selector, file name).
const FOR_THE_DOCS: &[(&str, &str, &str)] = &[
    ("assess", "#verdict", "assess-verdict.png"),
    (
        "assess",
        "#fig-assess-cycle-histogram",
        "assess-cycle-histogram.png",
    ),
    ("assess", "#fig-assess-cycle-tail", "assess-cycle-tail.png"),
    (
        "assess",
        "#fig-assess-cycle-timeline",
        "assess-cycle-timeline.png",
    ),
    (
        "assess",
        "#fig-assess-noise-attribution",
        "assess-noise-attribution.png",
    ),
    ("sleep", "#fig-sleep-tasks", "sleep-tasks.png"),
    ("ipc", "#fig-ipc-64b-tail", "ipc-64b-tail.png"),
    ("mem", "#fig-mem-sweep", "mem-sweep.png"),
    ("cache", "#fig-cache-tail", "cache-tail.png"),
];

/// The ids of the page's figures, in document order.
fn figure_ids(html: &str) -> Vec<String> {
    html.split("<figure id=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_string))
        .collect()
}

fn render_into(dir: &Path, files: &[PathBuf]) -> (PathBuf, String) {
    let inputs = tame_report::read(files).unwrap();
    let rendered = tame_report::render(&inputs).unwrap();
    tame_report::write(&rendered, dir).unwrap();
    (dir.join(tame_report::INDEX), rendered.html.clone())
}

/// Opens each of `pages` in one chromium and checks it; the docs screenshots of those
/// pages go to `screenshots`. The file names saved.
fn check_pages(
    pages: &[(&'static str, Vec<PathBuf>)],
    screenshots: Option<&Path>,
) -> Vec<&'static str> {
    let mut browser = Browser::launch().unwrap();
    let mut saved = Vec::new();
    for (name, files) in pages {
        let name = *name;
        let dir = tempfile::tempdir().unwrap();
        let (index, html) = render_into(dir.path(), files);
        let load = browser
            .open(
                &index,
                Viewport {
                    width: 1100,
                    height: 900,
                },
            )
            .unwrap();
        assert!(load.problems().is_empty(), "{name}: {:?}", load.problems());
        assert_eq!(
            load.requests.len(),
            1,
            "{name}: only the page itself: {:?}",
            load.requests
        );
        assert!(
            load.screenshot_image().unwrap().ink().looks_drawn(),
            "{name}: the page is blank"
        );
        let ids = figure_ids(&html);
        assert!(
            !ids.is_empty() || name == "reserve" || name == "compare",
            "{name}: no figure"
        );
        let shots = browser.screenshot_elements("figure svg").unwrap();
        assert_eq!(shots.len(), ids.len(), "{name}: one drawing per figure");
        for (id, shot) in ids.iter().zip(&shots) {
            let ink = shot.ink().unwrap();
            assert!(
                ink.looks_drawn(),
                "{name}: figure {id} ({}) is blank: {ink:?}",
                shot.describe()
            );
        }
        eprintln!(
            "{name}: loaded in {:?}, {} figures drawn",
            load.load_time,
            ids.len()
        );
        if let Some(out) = screenshots {
            std::fs::create_dir_all(out).unwrap();
            for (_, selector, file) in FOR_THE_DOCS.iter().filter(|(p, _, _)| *p == name) {
                let shot = browser.screenshot_elements(selector).unwrap();
                let shot = shot
                    .first()
                    .unwrap_or_else(|| panic!("{name}: no {selector} to show in the docs"));
                std::fs::write(out.join(file), &shot.png).unwrap();
                saved.push(*file);
            }
        }
    }
    saved
}

/// The pages are shared out between two chromiums (one where there is one CPU), each
/// opening its pages one after another: while one draws and screenshots a page, the
/// test reads the other's pixels.
#[test]
fn every_recorded_report_loads_clean_in_chromium_with_every_figure_drawn() {
    if !require(
        have_program(chromium::PROGRAM),
        "chromium (scripts/install-test-deps.sh installs it)",
    ) {
        return;
    }
    let screenshots = std::env::var_os("TAME_REPORT_SCREENSHOTS").map(PathBuf::from);
    let pages = recorded_pages();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let shares: Vec<Vec<_>> = (0..workers)
        .map(|w| pages.iter().skip(w).step_by(workers).cloned().collect())
        .collect();
    let saved: Vec<&str> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| s.spawn(|| check_pages(share, screenshots.as_deref())))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    if screenshots.is_some() {
        assert_eq!(
            saved.len(),
            FOR_THE_DOCS.len(),
            "every docs screenshot saved"
        );
    }
}
