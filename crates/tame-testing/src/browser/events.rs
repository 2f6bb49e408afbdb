//! What a page did, read from its DevTools events: console messages, exceptions,
//! requests, and whether it finished loading.

use serde_json::Value;

/// How serious a console message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

impl Level {
    /// `console.*` call types (`Runtime.consoleAPICalled`) and log levels (`Log.entryAdded`).
    fn parse(name: &str) -> Level {
        match name {
            "error" | "assert" => Level::Error,
            "warning" | "warn" => Level::Warning,
            "debug" | "verbose" | "trace" => Level::Debug,
            _ => Level::Info,
        }
    }
}

/// One console message: from the page's script (`origin` "console") or from the
/// browser about the page (`origin` is the log source: "network" for a failed load,
/// "security", "violation", "intervention", …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleMessage {
    pub level: Level,
    pub text: String,
    pub origin: String,
}

/// One request the page made, and why it failed if it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub url: String,
    /// Chromium's error (`net::ERR_NAME_NOT_RESOLVED`), or `None` when it did not fail.
    pub failure: Option<String>,
    id: String,
}

impl Request {
    /// Whether the URL stays on this machine inside the page: `file:` or `data:`
    /// (a self-contained page fetches nothing else).
    pub fn is_local(&self) -> bool {
        self.url.starts_with("file:") || self.url.starts_with("data:")
    }
}

/// What the events of one page load said.
#[derive(Debug, Default)]
pub struct Collected {
    pub console: Vec<ConsoleMessage>,
    pub exceptions: Vec<String>,
    pub requests: Vec<Request>,
    pub loaded: bool,
}

impl Collected {
    /// Take in one event; events of other domains are ignored.
    pub fn record(&mut self, method: &str, params: &Value) {
        match method {
            "Page.loadEventFired" => self.loaded = true,
            "Runtime.consoleAPICalled" => self.console.push(ConsoleMessage {
                level: Level::parse(str_at(params, "/type")),
                text: console_text(params),
                origin: "console".into(),
            }),
            "Runtime.exceptionThrown" => self.exceptions.push(exception_text(params)),
            "Log.entryAdded" => {
                let entry = &params["entry"];
                let mut text = str_at(entry, "/text").to_string();
                if let Some(url) = entry.get("url").and_then(Value::as_str) {
                    text = format!("{text} ({url})");
                }
                self.console.push(ConsoleMessage {
                    level: Level::parse(str_at(entry, "/level")),
                    text,
                    origin: str_at(entry, "/source").to_string(),
                });
            }
            "Network.requestWillBeSent" => self.requests.push(Request {
                url: str_at(params, "/request/url").to_string(),
                failure: None,
                id: str_at(params, "/requestId").to_string(),
            }),
            "Network.loadingFailed" => {
                let id = str_at(params, "/requestId");
                if let Some(request) = self.requests.iter_mut().rev().find(|r| r.id == id) {
                    request.failure = Some(str_at(params, "/errorText").to_string());
                }
            }
            _ => {}
        }
    }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The arguments of a `console.*` call as the console shows them: strings as they
/// are, other values by their description.
fn console_text(params: &Value) -> String {
    let args = params["args"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    args.iter()
        .map(|arg| match arg.get("value") {
            Some(Value::String(s)) => s.clone(),
            Some(value) => value.to_string(),
            None => arg
                .get("description")
                .or_else(|| arg.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An uncaught exception: its description (message and stack) or the console's text,
/// and where it was thrown.
fn exception_text(params: &Value) -> String {
    let details = &params["exceptionDetails"];
    let what = details
        .pointer("/exception/description")
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(details, "/text"));
    let line = details.get("lineNumber").and_then(Value::as_u64);
    match (details.get("url").and_then(Value::as_str), line) {
        (Some(url), Some(line)) => format!("{what} (at {url}:{})", line + 1),
        _ => what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn console_calls_log_entries_exceptions_and_requests_are_read() {
        let mut c = Collected::default();
        c.record(
            "Runtime.consoleAPICalled",
            &json!({"type": "error", "args": [
                {"type": "string", "value": "boom"}, {"type": "number", "value": 3},
                {"type": "object", "description": "Array(2)"}]}),
        );
        c.record(
            "Log.entryAdded",
            &json!({"entry": {"source": "network", "level": "error",
                "text": "Failed to load resource", "url": "http://x.invalid/a.png"}}),
        );
        c.record(
            "Runtime.exceptionThrown",
            &json!({"exceptionDetails": {"text": "Uncaught", "lineNumber": 4,
                "url": "file:///p.html", "exception": {"description": "Error: bad\n at f"}}}),
        );
        c.record(
            "Network.requestWillBeSent",
            &json!({"requestId": "1", "request": {"url": "file:///p.html"}}),
        );
        c.record(
            "Network.requestWillBeSent",
            &json!({"requestId": "2", "request": {"url": "http://x.invalid/a.png"}}),
        );
        c.record(
            "Network.loadingFailed",
            &json!({"requestId": "2", "errorText": "net::ERR_NAME_NOT_RESOLVED"}),
        );
        assert!(!c.loaded);
        c.record("Page.loadEventFired", &json!({"timestamp": 1.0}));
        assert!(c.loaded);

        assert_eq!(
            c.console,
            [
                ConsoleMessage {
                    level: Level::Error,
                    text: "boom 3 Array(2)".into(),
                    origin: "console".into()
                },
                ConsoleMessage {
                    level: Level::Error,
                    text: "Failed to load resource (http://x.invalid/a.png)".into(),
                    origin: "network".into()
                },
            ]
        );
        assert_eq!(c.exceptions, ["Error: bad\n at f (at file:///p.html:5)"]);
        assert_eq!(c.requests.len(), 2);
        assert!(c.requests[0].is_local() && c.requests[0].failure.is_none());
        assert!(!c.requests[1].is_local());
        assert_eq!(
            c.requests[1].failure.as_deref(),
            Some("net::ERR_NAME_NOT_RESOLVED")
        );
    }

    #[test]
    fn levels_map_console_types_and_log_levels() {
        assert_eq!(Level::parse("warning"), Level::Warning);
        assert_eq!(Level::parse("assert"), Level::Error);
        assert_eq!(Level::parse("verbose"), Level::Debug);
        assert_eq!(Level::parse("log"), Level::Info);
        assert!(Level::Error > Level::Warning);
    }
}
