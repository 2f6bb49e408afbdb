//! The server's log lines about what its clients caused, rate-limited: a client that can
//! make the server complain must not be able to fill the journal (64 134 panic reports,
//! 7.3 MB in 6 s, before). Also the panic hook of the server's own threads: a panic in a
//! connection thread becomes a refused request and one limited line, never a torrent.

use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// Lines per window; beyond them lines are counted, and the count said once the next
/// window opens.
pub const LINES_PER_WINDOW: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

/// A limit on lines per window.
#[derive(Debug)]
pub struct RateLimit {
    window: Mutex<Window>,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimit {
    pub const fn new() -> Self {
        Self {
            window: Mutex::new(Window {
                start: None,
                lines: 0,
                suppressed: 0,
            }),
        }
    }

    /// The lines to print for `line` at `now`: none when over the limit, else the line,
    /// after a note of how many were left out before it.
    pub fn admit(&self, now: Instant, line: &str) -> Vec<String> {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        if w.start.is_none_or(|s| now.duration_since(s) >= WINDOW) {
            if w.suppressed > 0 {
                out.push(format!(
                    "tame serve: {} more such lines left out in the last {} s",
                    w.suppressed,
                    WINDOW.as_secs()
                ));
            }
            *w = Window {
                start: Some(now),
                lines: 0,
                suppressed: 0,
            };
        }
        if w.lines < LINES_PER_WINDOW {
            w.lines += 1;
            out.push(line.to_string());
        } else {
            w.suppressed += 1;
        }
        out
    }
}

static PANICS: RateLimit = RateLimit::new();
static HOOK: Once = Once::new();

/// Report panics of the server's threads (named `tame-serve-…`) through the limit; other
/// threads keep the hook they had. Once per process.
pub fn limit_server_panics() {
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let server_thread = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("tame-serve"));
            if !server_thread {
                return before(info);
            }
            let line = format!("tame serve: internal error, request refused: {info}");
            for l in PANICS.admit(Instant::now(), &line) {
                eprintln!("{l}");
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_beyond_the_limit_are_counted_and_said_once() {
        let limit = RateLimit::new();
        let t0 = Instant::now();
        let printed: usize = (0..1000)
            .map(|i| limit.admit(t0 + Duration::from_millis(i), "x").len())
            .sum();
        assert_eq!(printed, LINES_PER_WINDOW as usize);
        let next = limit.admit(t0 + WINDOW + Duration::from_secs(1), "y");
        assert_eq!(
            next,
            vec![
                format!(
                    "tame serve: {} more such lines left out in the last 60 s",
                    1000 - LINES_PER_WINDOW
                ),
                "y".to_string()
            ]
        );
    }
}
