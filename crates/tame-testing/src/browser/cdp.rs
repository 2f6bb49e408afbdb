//! A Chrome DevTools Protocol connection: JSON commands and events over one websocket,
//! every wait bounded by a deadline.
//!
//! One connection to the browser endpoint carries every page ("flat" sessions: a
//! command for a page names its `sessionId`). Events that arrive while a command waits
//! for its answer are queued for [`Cdp::next_event`], so none is lost.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use super::BrowserError;

/// Largest message accepted: a full-page screenshot of a long report, in base64.
const MAX_MESSAGE: usize = 512 << 20;

pub struct Cdp {
    socket: WebSocket<TcpStream>,
    next_id: u64,
    events: VecDeque<Value>,
}

/// An event: its method (`Page.loadEventFired`), its page session and its parameters.
pub struct Event {
    pub method: String,
    pub session: Option<String>,
    pub params: Value,
}

impl Cdp {
    /// Connect to `ws://HOST:PORT/PATH` within `timeout`.
    pub fn connect(url: &str, timeout: Duration) -> Result<Cdp, BrowserError> {
        let fail = |why: String| BrowserError::new(format!("DevTools at {url}: {why}"));
        let authority = url
            .strip_prefix("ws://")
            .and_then(|rest| rest.split('/').next())
            .ok_or_else(|| fail("not a ws:// address".into()))?;
        let address = authority
            .parse()
            .map_err(|e| fail(format!("address {authority}: {e}")))?;
        let stream = TcpStream::connect_timeout(&address, timeout)
            .map_err(|e| fail(format!("connect: {e}")))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| fail(format!("socket timeouts: {e}")))?;
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (socket, _) = tungstenite::client::client_with_config(url, stream, Some(config))
            .map_err(|e| fail(format!("websocket handshake: {e}")))?;
        Ok(Cdp {
            socket,
            next_id: 1,
            events: VecDeque::new(),
        })
    }

    /// Send `method` with `params` (to page `session`, or to the browser) and wait until
    /// `deadline` for its result.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, BrowserError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|e| BrowserError::new(format!("{method}: cannot send: {e}")))?;
        loop {
            let mut reply = self.read(deadline).map_err(|e| e.during(method))?;
            if reply.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = reply.get("error") {
                    return Err(BrowserError::new(format!("{method} failed: {error}")));
                }
                return Ok(reply["result"].take());
            }
            if reply.get("method").is_some() {
                self.events.push_back(reply);
            }
        }
    }

    /// The next event, queued or read, or `None` once `deadline` passes.
    pub fn next_event(&mut self, deadline: Instant) -> Result<Option<Event>, BrowserError> {
        loop {
            let mut raw = match self.events.pop_front() {
                Some(raw) => raw,
                None => match self.read(deadline) {
                    Ok(raw) => raw,
                    Err(e) if e.timed_out => return Ok(None),
                    Err(e) => return Err(e),
                },
            };
            if let Some(method) = raw.get("method").and_then(Value::as_str) {
                return Ok(Some(Event {
                    method: method.to_string(),
                    session: raw
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .map(String::from),
                    params: raw["params"].take(),
                }));
            }
        }
    }

    /// One JSON message, waiting until `deadline`.
    fn read(&mut self, deadline: Instant) -> Result<Value, BrowserError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BrowserError::timeout("no answer from chromium in time"));
            }
            self.socket
                .get_mut()
                .set_read_timeout(Some(left))
                .map_err(|e| BrowserError::new(format!("socket timeout: {e}")))?;
            match self.socket.read() {
                Ok(Message::Text(text)) => {
                    return serde_json::from_str(text.as_str()).map_err(|e| {
                        BrowserError::new(format!("chromium sent bad JSON ({e}): {text}"))
                    });
                }
                Ok(Message::Close(_)) => {
                    return Err(BrowserError::new("chromium closed the DevTools connection"))
                }
                Ok(_) => {}
                // A read timeout; tungstenite keeps a partial message for the next read.
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(BrowserError::new(format!("DevTools connection: {e}"))),
            }
        }
    }
}
