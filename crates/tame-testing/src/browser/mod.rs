//! A real headless browser for tests of what tame draws (`tame report`'s HTML page and
//! SVG figures): open a page in Debian's chromium, and get back what a person looking
//! at it would notice — console errors, uncaught exceptions, every request the page
//! made (a self-contained page fetches nothing but `file:` and `data:`), whether it
//! finished loading — and a full-page screenshot; then screenshots of single elements
//! (each `figure svg`) for the pixel checks of [`crate::ink`].
//!
//! ```no_run
//! use tame_testing::browser::{Browser, Viewport};
//! use tame_testing::require::{have_program, require};
//! if !require(have_program("chromium"), "chromium (scripts/install-test-deps.sh)") {
//!     return;
//! }
//! let mut browser = Browser::launch().unwrap();
//! let load = browser.open("out/index.html".as_ref(), Viewport::default()).unwrap();
//! assert!(load.problems().is_empty(), "{:#?}", load.problems());
//! for shot in browser.screenshot_elements("figure svg").unwrap() {
//!     assert!(shot.ink().unwrap().looks_drawn(), "{} is blank", shot.describe());
//! }
//! ```
//!
//! Chromium is driven through the Chrome DevTools Protocol over a websocket
//! ([`cdp`]); the process and its profile are ended and removed when the
//! [`Browser`] is dropped, a failing test's unwinding included ([`chromium`]).
//! docs/testing.md says how these tests run and which flags chromium gets and why.

mod cdp;
pub mod chromium;
mod events;

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

pub use events::{ConsoleMessage, Level, Request};

use crate::ink::{Image, Ink};

/// Default bound on each wait: chromium's start, each command, the page's load.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// After the load event, how long late console messages and requests may still come in.
const SETTLE: Duration = Duration::from_millis(100);

/// A screenshot wait when the page never finished loading (its renderer may be stuck).
const UNLOADED_SCREENSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the browser could not do what was asked.
pub struct BrowserError {
    message: String,
    timed_out: bool,
}

impl BrowserError {
    fn new(message: impl Into<String>) -> BrowserError {
        BrowserError {
            message: message.into(),
            timed_out: false,
        }
    }

    fn timeout(message: impl Into<String>) -> BrowserError {
        BrowserError {
            message: message.into(),
            timed_out: true,
        }
    }

    /// The same error, naming the step it happened in.
    fn during(self, step: &str) -> BrowserError {
        BrowserError {
            message: format!("{step}: {}", self.message),
            timed_out: self.timed_out,
        }
    }

    /// Whether a wait ran out of time.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }
}

impl fmt::Display for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// As `Display`, so that a test's `unwrap()` prints the message readably.
impl fmt::Debug for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BrowserError {}

/// The size of the browser window in CSS pixels (one screenshot pixel each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

impl Default for Viewport {
    /// A laptop screen.
    fn default() -> Viewport {
        Viewport {
            width: 1280,
            height: 800,
        }
    }
}

/// What loading one page gave.
pub struct PageLoad {
    /// The `file://` URL opened.
    pub url: String,
    /// Every console message, from the page's scripts and from the browser about the
    /// page (a failed load is an error with origin "network").
    pub console: Vec<ConsoleMessage>,
    /// Every uncaught JavaScript exception: its message, stack and place.
    pub exceptions: Vec<String>,
    /// Every request the page made, the page itself first.
    pub requests: Vec<Request>,
    /// Whether the load event fired in time.
    pub loaded: bool,
    /// From the navigation to the load event (or to the timeout).
    pub load_time: Duration,
    /// The whole page, beyond the viewport, as PNG (empty when it could not be taken
    /// from a page that never loaded).
    pub screenshot: Vec<u8>,
}

impl PageLoad {
    /// Console messages of level error.
    pub fn console_errors(&self) -> Vec<&ConsoleMessage> {
        self.console
            .iter()
            .filter(|m| m.level == Level::Error)
            .collect()
    }

    /// Requests for anything but `file:` and `data:`: what an offline reader would miss.
    pub fn remote_requests(&self) -> Vec<&Request> {
        self.requests.iter().filter(|r| !r.is_local()).collect()
    }

    /// Everything wrong with this load, one line each: not loaded, console errors,
    /// exceptions, remote requests, failed requests. Empty for a clean page.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.loaded {
            problems.push(format!("{} did not finish loading", self.url));
        }
        problems.extend(
            self.console_errors()
                .iter()
                .map(|m| format!("console error ({}): {}", m.origin, m.text)),
        );
        problems.extend(self.exceptions.iter().map(|e| format!("exception: {e}")));
        problems.extend(
            self.remote_requests()
                .iter()
                .map(|r| format!("request off this machine: {}", r.url)),
        );
        problems.extend(self.requests.iter().filter_map(|r| {
            let failure = r.failure.as_ref()?;
            Some(format!("request failed: {} ({failure})", r.url))
        }));
        problems
    }

    /// The full-page screenshot, decoded.
    pub fn screenshot_image(&self) -> Result<Image, String> {
        Image::decode(&self.screenshot)
    }
}

/// Everything but the screenshot's bytes, which only their count stands for.
impl fmt::Debug for PageLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageLoad")
            .field("url", &self.url)
            .field("console", &self.console)
            .field("exceptions", &self.exceptions)
            .field("requests", &self.requests)
            .field("loaded", &self.loaded)
            .field("load_time", &self.load_time)
            .field(
                "screenshot",
                &format_args!("{} bytes of PNG", self.screenshot.len()),
            )
            .finish()
    }
}

/// Where an element lies on the page, in CSS pixels from the document's top left.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// A screenshot of one element.
pub struct Shot {
    pub selector: String,
    /// Which match of the selector, in document order.
    pub index: usize,
    pub rect: Rect,
    /// PNG; empty when the element has no area (nothing to capture, and nothing drawn).
    pub png: Vec<u8>,
}

impl Shot {
    /// The ink of the element's pixels; none for an element without area.
    pub fn ink(&self) -> Result<Ink, String> {
        if self.png.is_empty() {
            return Ok(Ink::NONE);
        }
        Ok(Image::decode(&self.png)?.ink())
    }

    /// "`figure svg` #2 at 10,20 300×200", for assertion messages.
    pub fn describe(&self) -> String {
        let r = self.rect;
        format!(
            "`{}` #{} at {},{} {}×{}",
            self.selector, self.index, r.x, r.y, r.width, r.height
        )
    }
}

impl fmt::Debug for Shot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes of PNG)", self.describe(), self.png.len())
    }
}

/// A headless chromium with one page open at a time.
pub struct Browser {
    // Dropped first: the connection closes before chromium is killed.
    cdp: cdp::Cdp,
    chromium: chromium::Chromium,
    /// The DevTools session and target of the open page.
    page: Option<(String, String)>,
    timeout: Duration,
}

impl Browser {
    /// Start chromium (headless, fresh profile) and connect to it.
    pub fn launch() -> Result<Browser, BrowserError> {
        let chromium = chromium::Chromium::launch(DEFAULT_TIMEOUT)?;
        let cdp = cdp::Cdp::connect(&chromium.websocket_url, DEFAULT_TIMEOUT).map_err(|e| {
            BrowserError::new(format!(
                "{e}; chromium's stderr ends:\n{}",
                chromium.stderr_tail()
            ))
        })?;
        Ok(Browser {
            cdp,
            chromium,
            page: None,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// Bound each later wait (each command, the page's load) by `timeout`.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Chromium's process and directory, e.g. to check that dropping ends them.
    pub fn chromium(&self) -> &chromium::Chromium {
        &self.chromium
    }

    /// Open `page` (a local file) in a new tab of `viewport`'s size, closing the previous
    /// tab; wait for its load event and take a full-page screenshot.
    pub fn open(&mut self, page: &Path, viewport: Viewport) -> Result<PageLoad, BrowserError> {
        let path = page
            .canonicalize()
            .map_err(|e| BrowserError::new(format!("cannot open {}: {e}", page.display())))?;
        let url = file_url(&path);
        let session = self.new_tab(viewport)?;
        let mut collected = events::Collected::default();

        let started = Instant::now();
        let navigated = self.call(&session, "Page.navigate", json!({ "url": url }))?;
        if let Some(error) = navigated.get("errorText").and_then(Value::as_str) {
            return Err(BrowserError::new(format!("cannot load {url}: {error}")));
        }
        let load_deadline = started + self.timeout;
        while !collected.loaded {
            match self.cdp.next_event(load_deadline)? {
                Some(event) if event.session.as_deref() == Some(&session) => {
                    collected.record(&event.method, &event.params)
                }
                Some(_) => {}
                None => break,
            }
        }
        let load_time = started.elapsed();

        let screenshot = if collected.loaded {
            self.settle(&session, &mut collected)?;
            self.full_page_screenshot(&session, self.deadline())?
        } else {
            // A page stuck in a script may never paint: try briefly, report what we have.
            let deadline = Instant::now() + UNLOADED_SCREENSHOT_TIMEOUT.min(self.timeout);
            self.full_page_screenshot(&session, deadline)
                .unwrap_or_default()
        };
        Ok(PageLoad {
            url,
            console: collected.console,
            exceptions: collected.exceptions,
            requests: collected.requests,
            loaded: collected.loaded,
            load_time,
            screenshot,
        })
    }

    /// Screenshots of every element of the open page that matches the CSS `selector`,
    /// each clipped to the element's box (the whole box, also below the viewport).
    pub fn screenshot_elements(&mut self, selector: &str) -> Result<Vec<Shot>, BrowserError> {
        let (session, _) = self
            .page
            .clone()
            .ok_or_else(|| BrowserError::new("no page open: call Browser::open first"))?;
        // The selector as a JSON string is a valid JavaScript string literal.
        let expression = format!(
            "JSON.stringify(Array.from(document.querySelectorAll({}), e => {{ \
               const r = e.getBoundingClientRect(); \
               return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; }}))",
            json!(selector)
        );
        let rects: Vec<[f64; 4]> = {
            let value = self.evaluate(&session, &expression, false)?;
            let text = value.as_str().unwrap_or("[]");
            serde_json::from_str(text).map_err(|e| {
                BrowserError::new(format!("element boxes of `{selector}`: {e}: {text}"))
            })?
        };
        let mut shots = Vec::with_capacity(rects.len());
        for (index, [x, y, width, height]) in rects.into_iter().enumerate() {
            let rect = Rect {
                x,
                y,
                width,
                height,
            };
            let png = if width >= 1.0 && height >= 1.0 {
                self.capture(&session, rect, self.deadline())?
            } else {
                Vec::new()
            };
            shots.push(Shot {
                selector: selector.to_string(),
                index,
                rect,
                png,
            });
        }
        Ok(shots)
    }

    /// Open a standalone SVG file and screenshot its root element: the figure as a
    /// paper or a ticket would show it.
    pub fn open_svg(
        &mut self,
        svg: &Path,
        viewport: Viewport,
    ) -> Result<(PageLoad, Shot), BrowserError> {
        let load = self.open(svg, viewport)?;
        let shot = self
            .screenshot_elements(":root")?
            .pop()
            .ok_or_else(|| BrowserError::new(format!("{} has no root element", svg.display())))?;
        Ok((load, shot))
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    fn call(&mut self, session: &str, method: &str, params: Value) -> Result<Value, BrowserError> {
        let deadline = self.deadline();
        self.cdp.call(Some(session), method, params, deadline)
    }

    /// A new tab sized to `viewport`, reporting to us, in place of the previous one.
    fn new_tab(&mut self, viewport: Viewport) -> Result<String, BrowserError> {
        if let Some((_, target)) = self.page.take() {
            let deadline = self.deadline();
            self.cdp.call(
                None,
                "Target.closeTarget",
                json!({ "targetId": target }),
                deadline,
            )?;
        }
        let deadline = self.deadline();
        let created = self.cdp.call(
            None,
            "Target.createTarget",
            json!({ "url": "about:blank" }),
            deadline,
        )?;
        let target = created["targetId"].as_str().unwrap_or("").to_string();
        let attached = self.cdp.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
            deadline,
        )?;
        let session = attached["sessionId"].as_str().unwrap_or("").to_string();
        self.page = Some((session.clone(), target));
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.call(&session, &format!("{domain}.enable"), json!({}))?;
        }
        self.call(
            &session,
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": viewport.width, "height": viewport.height,
                    "deviceScaleFactor": 1, "mobile": false }),
        )?;
        Ok(session)
    }

    /// Wait for two animation frames (layout and paint are done), then take in the
    /// events that still come within [`SETTLE`].
    fn settle(
        &mut self,
        session: &str,
        collected: &mut events::Collected,
    ) -> Result<(), BrowserError> {
        self.evaluate(
            session,
            "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))",
            true,
        )?;
        let deadline = Instant::now() + SETTLE;
        while let Some(event) = self.cdp.next_event(deadline)? {
            if event.session.as_deref() == Some(session) {
                collected.record(&event.method, &event.params);
            }
        }
        Ok(())
    }

    /// The value of a JavaScript expression in the page.
    fn evaluate(
        &mut self,
        session: &str,
        expression: &str,
        await_promise: bool,
    ) -> Result<Value, BrowserError> {
        let mut reply = self.call(
            session,
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true,
                    "awaitPromise": await_promise }),
        )?;
        if let Some(details) = reply.get("exceptionDetails") {
            return Err(BrowserError::new(format!(
                "script `{expression}` threw: {details}"
            )));
        }
        Ok(reply["result"]["value"].take())
    }

    fn full_page_screenshot(
        &mut self,
        session: &str,
        deadline: Instant,
    ) -> Result<Vec<u8>, BrowserError> {
        let metrics = self
            .cdp
            .call(Some(session), "Page.getLayoutMetrics", json!({}), deadline)?;
        let size = &metrics["cssContentSize"];
        let rect = Rect {
            x: 0.0,
            y: 0.0,
            width: size["width"].as_f64().unwrap_or(0.0).ceil().max(1.0),
            height: size["height"].as_f64().unwrap_or(0.0).ceil().max(1.0),
        };
        self.capture(session, rect, deadline)
    }

    /// A PNG of `rect` of the page, beyond the viewport where it reaches further.
    fn capture(
        &mut self,
        session: &str,
        rect: Rect,
        deadline: Instant,
    ) -> Result<Vec<u8>, BrowserError> {
        let shot = self.cdp.call(
            Some(session),
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true,
                    "clip": { "x": rect.x, "y": rect.y, "width": rect.width,
                              "height": rect.height, "scale": 1 } }),
            deadline,
        )?;
        let data = shot["data"].as_str().unwrap_or("");
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| BrowserError::new(format!("screenshot is not base64: {e}")))
    }
}

/// Open `page` in a fresh headless chromium (see [`Browser::open`]); chromium ends
/// before this returns.
pub fn open(page: &Path, viewport: Viewport) -> Result<PageLoad, BrowserError> {
    Browser::launch()?.open(page, viewport)
}

/// `file://` URL of an absolute path, bytes outside the unreserved set percent-encoded.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            url.push(byte as char);
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_encode_what_a_url_cannot_hold() {
        assert_eq!(
            file_url(Path::new("/tmp/a b/r%é.html")),
            "file:///tmp/a%20b/r%25%C3%A9.html"
        );
    }

    #[test]
    fn a_clean_load_has_no_problems_and_each_fault_is_one_line() {
        let mut load = PageLoad {
            url: "file:///p.html".into(),
            console: vec![ConsoleMessage {
                level: Level::Warning,
                text: "meh".into(),
                origin: "console".into(),
            }],
            exceptions: vec![],
            requests: vec![],
            loaded: true,
            load_time: Duration::ZERO,
            screenshot: vec![],
        };
        assert!(load.problems().is_empty(), "a warning is no problem");
        load.loaded = false;
        load.exceptions.push("Error: x".into());
        assert_eq!(
            load.problems(),
            [
                "file:///p.html did not finish loading",
                "exception: Error: x"
            ]
        );
    }
}
