//! The browser harness against pages made to pass and made to fail: each fault a
//! report page could have (a console error, an exception, a fetch off the machine, a
//! blank figure, a page that never loads) must be caught, and a clean page must pass.
//! Needs chromium (scripts/install-test-deps.sh): skipped without it, failed under CI.
//!
//! Starting chromium takes longer than opening a page in it: the tests that need no
//! chromium of their own share one ([`shared`]), each page in a tab of its own; the
//! one that leaves a page stuck and the one that drops its chromium start their own
//! ([`own`]).

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tame_testing::browser::{chromium, Browser, Level, Viewport};
use tame_testing::ink::Ink;
use tame_testing::require::{have_program, require};

/// Where chromium is missing: `false` (skipped; failed under CI).
fn have_chromium() -> bool {
    require(
        have_program(chromium::PROGRAM),
        "chromium (scripts/install-test-deps.sh installs it)",
    )
}

fn launch() -> Browser {
    let start = Instant::now();
    let browser = Browser::launch().unwrap();
    eprintln!("chromium started in {:?}", start.elapsed());
    browser
}

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The chromium the tests share, started by the first that needs it.
static SHARED: Mutex<Option<Browser>> = Mutex::new(None);
/// How many browser tests are running: the last one to end ends the shared chromium,
/// so none is left running when the binary exits, and none is ended while another
/// test may still want it.
static RUNNING: Mutex<usize> = Mutex::new(0);

/// A browser test running, for as long as it lives.
struct Running;

impl Running {
    fn start() -> Running {
        *lock(&RUNNING) += 1;
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = lock(&RUNNING);
        *running -= 1;
        if *running == 0 {
            lock(&SHARED).take();
        }
    }
}

/// The shared browser, one test at a time; `None` (skipped) where chromium is missing.
fn shared() -> Option<SharedBrowser> {
    if !have_chromium() {
        return None;
    }
    let running = Running::start();
    let mut browser = lock(&SHARED);
    browser.get_or_insert_with(launch);
    Some(SharedBrowser {
        browser,
        _running: running,
    })
}

/// The shared browser while a test uses it; a failing test ends it (the next test
/// starts afresh).
struct SharedBrowser {
    // Dropped first: the browser is free again before the test counts as ended.
    browser: MutexGuard<'static, Option<Browser>>,
    _running: Running,
}

impl Deref for SharedBrowser {
    type Target = Browser;
    fn deref(&self) -> &Browser {
        self.browser.as_ref().expect("started in shared()")
    }
}

impl DerefMut for SharedBrowser {
    fn deref_mut(&mut self) -> &mut Browser {
        self.browser.as_mut().expect("started in shared()")
    }
}

impl Drop for SharedBrowser {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.browser.take();
        }
    }
}

/// A chromium of the test's own (it keeps the shared one running meanwhile); `None`
/// (skipped) where chromium is missing.
fn own() -> Option<OwnBrowser> {
    if !have_chromium() {
        return None;
    }
    let running = Running::start();
    Some(OwnBrowser {
        browser: launch(),
        _running: running,
    })
}

struct OwnBrowser {
    browser: Browser,
    _running: Running,
}

impl Deref for OwnBrowser {
    type Target = Browser;
    fn deref(&self) -> &Browser {
        &self.browser
    }
}

impl DerefMut for OwnBrowser {
    fn deref_mut(&mut self) -> &mut Browser {
        &mut self.browser
    }
}

/// `body` as the file `name` in `dir`.
fn page(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// A bar chart as `tame report` draws them: inline SVG with axes, labels and bars.
const CHART: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="400" height="240" viewBox="0 0 400 240">
  <rect width="400" height="240" fill="#ffffff"/>
  <line x1="40" y1="200" x2="390" y2="200" stroke="#222" stroke-width="2"/>
  <line x1="40" y1="10" x2="40" y2="200" stroke="#222" stroke-width="2"/>
  <rect x="60" y="80" width="40" height="120" fill="#1f77b4"/>
  <rect x="120" y="40" width="40" height="160" fill="#ff7f0e"/>
  <rect x="180" y="150" width="40" height="50" fill="#2ca02c"/>
  <text x="200" y="230" font-size="14" text-anchor="middle">latency (µs)</text>
</svg>"##;

fn html(head: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>t</title>\
         <style>body{{font-family:sans-serif;background:#fff}}</style>{head}</head>\
         <body>{body}</body></html>"
    )
}

#[test]
fn a_clean_page_with_an_inline_chart_passes_every_check() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let body = format!("<h1>Report</h1><figure>{CHART}<figcaption>bars</figcaption></figure>");
    let path = page(dir.path(), "clean.html", &html("", &body));

    let start = Instant::now();
    let load = browser.open(&path, Viewport::default()).unwrap();
    eprintln!(
        "page loaded in {:?}, opened with its screenshot in {:?}",
        load.load_time,
        start.elapsed()
    );
    assert!(load.loaded);
    assert!(load.problems().is_empty(), "{:#?}", load.problems());
    let urls: Vec<&str> = load.requests.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(urls, [load.url.as_str()], "the page fetched only itself");
    assert!(load.url.starts_with("file:///"));

    let screenshot = load.screenshot_image().unwrap();
    assert_eq!(screenshot.width, 1280);
    assert!(screenshot.height >= 240, "{}", screenshot.height);
    assert!(screenshot.ink().looks_drawn(), "{:?}", screenshot.ink());

    let shots = browser.screenshot_elements("figure svg").unwrap();
    assert_eq!(shots.len(), 1);
    let shot = &shots[0];
    assert_eq!((shot.rect.width, shot.rect.height), (400.0, 240.0));
    let ink = shot.ink().unwrap();
    assert!(ink.looks_drawn(), "{} is blank: {ink:?}", shot.describe());
    // The bars alone cover 6800 of 96000 pixels: the measure sees them.
    assert!(ink.fraction_non_background > 0.07, "{ink:?}");
    assert!(browser
        .screenshot_elements("figure table")
        .unwrap()
        .is_empty());
}

#[test]
fn a_console_error_is_reported() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = "<script>console.log('fine'); console.error('boom', 42)</script>";
    let path = page(dir.path(), "error.html", &html(script, "<p>x</p>"));

    let load = browser.open(&path, Viewport::default()).unwrap();
    assert!(load.loaded);
    let errors = load.console_errors();
    assert_eq!(errors.len(), 1, "{:#?}", load.console);
    assert_eq!(
        (errors[0].text.as_str(), errors[0].origin.as_str()),
        ("boom 42", "console")
    );
    assert!(load
        .console
        .iter()
        .any(|m| m.level == Level::Info && m.text == "fine"));
    assert_eq!(load.problems(), ["console error (console): boom 42"]);
}

#[test]
fn a_request_off_the_machine_is_reported_with_its_failed_load() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    // `.invalid` never resolves (RFC 2606): the load fails without reaching any host.
    let remote = "http://example.invalid/x.png";
    let body = format!("<img src=\"{remote}\" width=\"10\" height=\"10\">");
    let path = page(dir.path(), "remote.html", &html("", &body));

    let load = browser.open(&path, Viewport::default()).unwrap();
    assert!(load.loaded);
    let remote_requests = load.remote_requests();
    assert_eq!(remote_requests.len(), 1, "{:#?}", load.requests);
    assert_eq!(remote_requests[0].url, remote);
    assert!(remote_requests[0].failure.is_some(), "{:#?}", load.requests);
    assert!(
        load.console_errors()
            .iter()
            .any(|m| m.origin == "network" && m.text.contains(remote)),
        "the failed load is a console error: {:#?}",
        load.console
    );
    let problems = load.problems();
    assert!(
        problems.contains(&format!("request off this machine: {remote}")),
        "{problems:#?}"
    );
}

#[test]
fn an_exception_is_reported() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = "<script>function draw() { throw new Error('kaput') }\ndraw()</script>";
    let path = page(dir.path(), "throw.html", &html(script, "<p>x</p>"));

    let load = browser.open(&path, Viewport::default()).unwrap();
    assert!(load.loaded);
    assert_eq!(load.exceptions.len(), 1, "{:#?}", load.exceptions);
    let exception = &load.exceptions[0];
    assert!(exception.starts_with("Error: kaput"), "{exception}");
    assert!(exception.contains("throw.html:"), "{exception}");
    assert!(load
        .problems()
        .iter()
        .any(|p| p.starts_with("exception: Error: kaput")));
}

#[test]
fn a_blank_figure_fails_the_drawn_check_and_a_drawn_one_passes() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let blank = r#"<svg xmlns="http://www.w3.org/2000/svg" width="400" height="240"></svg>"#;
    let body =
        format!("<figure>{blank}</figure><figure>{CHART}</figure><figure><svg></svg></figure>");
    let path = page(dir.path(), "blank.html", &html("", &body));

    let load = browser.open(&path, Viewport::default()).unwrap();
    assert!(load.problems().is_empty(), "{:#?}", load.problems());
    let shots = browser.screenshot_elements("figure svg").unwrap();
    let inks: Vec<Ink> = shots.iter().map(|s| s.ink().unwrap()).collect();
    assert_eq!(inks.len(), 3);
    assert_eq!(inks[0].fraction_non_background, 0.0, "{:?}", inks[0]);
    assert_eq!(inks[0].distinct_colours, 1);
    assert!(!inks[0].looks_drawn());
    assert!(inks[1].looks_drawn(), "{:?}", inks[1]);
    // An <svg> without size is laid out 300×150 by CSS, blank all the same.
    assert!(
        !inks[2].looks_drawn(),
        "{:?} {}",
        inks[2],
        shots[2].describe()
    );

    // The same figures as standalone files, as papers and tickets get them.
    let svg = page(dir.path(), "chart.svg", CHART);
    let (load, shot) = browser.open_svg(&svg, Viewport::default()).unwrap();
    assert!(load.problems().is_empty(), "{:#?}", load.problems());
    assert_eq!((shot.rect.width, shot.rect.height), (400.0, 240.0));
    assert!(shot.ink().unwrap().looks_drawn());
    let svg = page(dir.path(), "blank.svg", blank);
    let (_, shot) = browser.open_svg(&svg, Viewport::default()).unwrap();
    assert!(!shot.ink().unwrap().looks_drawn(), "{:?}", shot.ink());
}

#[test]
fn a_page_that_never_loads_is_reported_in_bounded_time() {
    let Some(mut browser) = own() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = "<script>while (true) {}</script>";
    let path = page(dir.path(), "stuck.html", &html(script, ""));
    // Short: the test waits it out, twice (the load, then the screenshot's try).
    let timeout = Duration::from_millis(1500);
    browser.set_timeout(timeout);

    let start = Instant::now();
    let result = browser.open(&path, Viewport::default());
    let took = start.elapsed();
    eprintln!("{result:#?} after {took:?}");
    match result {
        Ok(load) => {
            assert!(!load.loaded);
            assert!(load.problems()[0].ends_with("stuck.html did not finish loading"));
        }
        Err(e) => assert!(e.timed_out(), "{e}"),
    }
    // The load wait, then at most the screenshot's shorter one.
    assert!(took < timeout * 3, "took {took:?}");
}

#[test]
fn a_missing_page_is_a_clear_error() {
    let Some(mut browser) = shared() else { return };
    let err = browser
        .open(Path::new("/nonexistent/report.html"), Viewport::default())
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot open /nonexistent/report.html: "),
        "{err}"
    );
}

/// Chromium and every process it started end, and its directory goes, when the
/// browser is dropped — also while a failing test unwinds.
#[test]
fn chromium_leaves_nothing_behind_even_when_a_test_fails() {
    let Some(browser) = own() else { return };
    let dir = browser.chromium().dir().to_path_buf();
    let running = chromium::processes_naming(&dir);
    assert!(
        running.len() >= 2,
        "chromium runs several processes: {running:?}"
    );
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _browser = browser;
        panic!("a failing test");
    }));
    assert!(unwound.is_err());
    assert_eq!(chromium::processes_naming(&dir), []);
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// A report is longer than a screen: the screenshot holds all of it, and a figure far
/// below the first screen is captured where it is, not where the viewport ends.
#[test]
fn a_long_page_is_captured_whole_down_to_its_last_figure() {
    let Some(mut browser) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let body = format!("<div style=\"height:2500px\">top</div><figure>{CHART}</figure>");
    let path = page(dir.path(), "long.html", &html("", &body));

    let load = browser.open(&path, Viewport::default()).unwrap();
    assert!(load.problems().is_empty(), "{:#?}", load.problems());
    let screenshot = load.screenshot_image().unwrap();
    assert!(screenshot.height > 2500 + 240, "{}", screenshot.height);
    let shots = browser.screenshot_elements("figure svg").unwrap();
    assert_eq!(shots.len(), 1);
    assert!(shots[0].rect.y > 2500.0, "{}", shots[0].describe());
    let ink = shots[0].ink().unwrap();
    assert!(
        ink.looks_drawn(),
        "{} is blank: {ink:?}",
        shots[0].describe()
    );
    // The same pixels as the figure's region of the full-page screenshot.
    let r = shots[0].rect;
    let region = tame_testing::ink::Region {
        x: r.x as u32,
        y: r.y as u32,
        width: r.width as u32,
        height: r.height as u32,
    };
    assert_eq!(screenshot.ink_in(region), ink);
}
