//! `tame report`: the figures of tame's results — latency histograms, tail curves, values
//! over time, noise attribution, a watch's snapshots of misses, comparisons, the assess
//! verdict and the reserve study's tables — as one self-contained HTML page (inline SVG
//! and CSS, no script, nothing fetched) and each figure as an SVG file. See docs/report.md.
//!
//! Figures are drawn with plotters' SVG backend only: no bitmap backend (PNG would need
//! system font libraries), and text stays SVG text in a generic font family.

pub mod assess;
pub mod bench;
pub mod cache;
pub mod compare;
pub mod cost;
pub mod error;
pub mod html;
pub mod input;
pub mod mem;
pub mod model;
pub mod page;
pub mod plot;
pub mod reserve;
pub mod summary;
pub mod watch;

use std::path::{Path, PathBuf};

pub use error::{ReportError, Result};
pub use input::{Doc, Input};
pub use page::Page;
pub use plot::Figure;

use model::Config;

/// The page's file in the output directory.
pub const INDEX: &str = "index.html";

/// A report ready to write: the page as HTML and every figure as an SVG document.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub page: Page,
    pub html: String,
}

impl Rendered {
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.page.figures()
    }
}

/// Read and recognise the inputs, refused (nothing written) when one is not a tame result
/// of a version this tame reads, or when they do not belong on one page.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let inputs: Vec<Input> = paths
        .iter()
        .map(|p| input::read(p))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    input::check_together(&inputs)?;
    Ok(inputs)
}

/// A watch's snapshot of a miss as a standalone SVG document (`miss-N.svg`): the CPU's
/// time line before the activation ended, coloured by what ran, with its release, start,
/// deadline and end marked.
pub fn snapshot_svg(s: &tame_bench::watch::Snapshot) -> String {
    plot::snapshot::draw(s)
        .map(|d| d.svg)
        // Drawing into a string fails only on a fault of tame's: a watch that missed still
        // gets a file that says so rather than losing its result to a panic.
        .unwrap_or_else(|e| plot::snapshot::not_drawn(&e.to_string()))
}

/// Draw the page of `inputs` (see [`read`]).
pub fn render(inputs: &[Input]) -> Result<Rendered> {
    input::check_together(inputs)?;
    let mut page = Page {
        inputs: inputs.iter().map(|i| i.file.clone()).collect(),
        ..Page::default()
    };
    match &inputs[0].doc {
        Doc::Bench(first) => {
            page.title = format!("tame report: {} results", first.result.bench);
            let results: Vec<(&str, &tame_bench::BenchResult)> = inputs
                .iter()
                .filter_map(|i| match &i.doc {
                    Doc::Bench(c) => Some((i.file.as_str(), &c.result)),
                    _ => None,
                })
                .collect();
            let labels = model::labels(&results);
            let configs: Vec<Config> = inputs
                .iter()
                .zip(labels)
                .filter_map(|(i, label)| match &i.doc {
                    Doc::Bench(c) => Some(Config {
                        label,
                        file: i.file.clone(),
                        result: c.result.clone(),
                        noise: c.noise.clone(),
                        watch: c.watch.clone(),
                    }),
                    _ => None,
                })
                .collect();
            let bench = first.result.bench.clone();
            bench::add(&mut page, &configs, &bench)?;
        }
        Doc::Assess(r) => {
            page.title = "tame report: assess".into();
            assess::add(&mut page, &inputs[0].file, r)?;
        }
        Doc::Compare(c) => {
            page.title = format!("tame report: comparison of {} results", c.bench);
            compare::add(&mut page, &inputs[0].file, c)?;
        }
        Doc::Reserve(r) => {
            page.title = "tame report: reserve study".into();
            reserve::add(&mut page, &inputs[0].file, r)?;
        }
    }
    page.choose_lead();
    let html = html::render(&page);
    Ok(Rendered { page, html })
}

/// Write `DIR/index.html` and `DIR/<figure id>.svg`; returns the files written.
pub fn write(r: &Rendered, dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut written = Vec::new();
    let index = dir.join(INDEX);
    std::fs::write(&index, &r.html).map_err(io(&index))?;
    written.push(index);
    for f in r.figures() {
        let path = dir.join(format!("{}.svg", f.id));
        std::fs::write(&path, &f.svg).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}
