//! A minimal HTTP/1.x responder for GET /metrics, over TCP or a Unix socket.
//!
//! Hand-written rather than a crate (tiny_http, hyper): it answers one request per
//! connection, with one body, and its peer may be hostile while tame serve runs as root —
//! a few hundred lines whose every bound is visible here are easier to trust than a server
//! with keep-alive and chunked bodies it does not need. The bounds: at most
//! [`MAX_CONNECTIONS`] connections served at once, each on its own short-lived thread (one
//! more is closed at once, so idle peers cannot queue a scraper behind them); the request
//! head at most [`MAX_REQUEST`] bytes, read within [`READ_TIME`]; the answer written
//! within [`WRITE_TIME`]; no body is ever read; anything but `GET /metrics` (or HEAD) is
//! answered 404/405/400 and closed.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::writer::CONTENT_TYPE;

/// The largest request head read (a scraper's is ~200 bytes).
pub const MAX_REQUEST: usize = 8 * 1024;
/// The longest a peer may take to send its request head.
pub const READ_TIME: Duration = Duration::from_secs(2);
/// The longest a peer may take to take the answer.
pub const WRITE_TIME: Duration = Duration::from_secs(2);
/// Connections served at once; one more is closed without a word. A scraper needs one:
/// the rest is room for peers that connect and say nothing.
pub const MAX_CONNECTIONS: usize = 8;
/// How often the thread looks at the stop flag while nobody connects.
const POLL: Duration = Duration::from_millis(50);

/// Whether an address is served without `--metrics-remote`: loopback only.
pub fn is_local(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Listen on `addr`; the address really bound (port 0 picks a free one).
pub fn bind(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}

/// Listen on the Unix socket `path`: root's, group `gid` with mode 0660 (None: mode
/// 0600, root only), made so that no link swapped into its directory is ever followed
/// ([`tame_host::socket::bind`]). A stale socket there (nobody listening) is replaced;
/// anything else there is refused.
pub fn bind_unix(path: &Path, gid: Option<u32>) -> io::Result<UnixListener> {
    tame_host::socket::remove_stale(path)?;
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    tame_host::socket::bind(path, gid, mode)
}

/// Where the figures are served: a TCP listener, or a Unix socket (removed when the
/// serving thread ends).
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// A connection on either.
trait Conn: Read + Write + Send + 'static {
    fn timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()>;
    fn blocking(&self) -> io::Result<()>;
    fn close(&self);
}

macro_rules! conn {
    ($t:ty) => {
        impl Conn for $t {
            fn timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
                if read.is_some() {
                    self.set_read_timeout(read)?;
                }
                if write.is_some() {
                    self.set_write_timeout(write)?;
                }
                Ok(())
            }
            fn blocking(&self) -> io::Result<()> {
                self.set_nonblocking(false)
            }
            fn close(&self) {
                let _ = self.shutdown(std::net::Shutdown::Both);
            }
        }
    };
}
conn!(TcpStream);
conn!(UnixStream);

impl Listener {
    fn accept(&self) -> io::Result<Box<dyn Conn>> {
        Ok(match self {
            Self::Tcp(l) => Box::new(l.accept()?.0),
            Self::Unix(l, _) => Box::new(l.accept()?.0),
        })
    }
}

/// Serve `render()` at GET /metrics on `listener` until `stop` is set: its text with 200,
/// or its error with 500 (a scraper then records the scrape as failed, `up` 0, instead of
/// taking a body without the series for a good scrape). Each connection is answered on a
/// thread of its own, at most [`MAX_CONNECTIONS`] at once; `render` is called by one at a
/// time. The returned thread ends once `stop` is set and its connections are done.
pub fn spawn(
    listener: impl Into<Listener>,
    stop: Arc<AtomicBool>,
    render: impl FnMut() -> Result<String, String> + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    let listener: Listener = listener.into();
    let render: Arc<Render> = Arc::new(Mutex::new(render));
    std::thread::Builder::new()
        .name("tame-metrics".into())
        .spawn(move || {
            let busy = Arc::new(AtomicUsize::new(0));
            let mut handlers: Vec<std::thread::JoinHandle<()>> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok(conn) => {
                        handlers.retain(|h| !h.is_finished());
                        if busy.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                            // Beyond the bound: closed at once, never queued.
                            conn.close();
                            continue;
                        }
                        busy.fetch_add(1, Ordering::Relaxed);
                        let (busy_h, render) = (busy.clone(), render.clone());
                        let spawned = std::thread::Builder::new()
                            .name("tame-metrics-conn".into())
                            .spawn(move || {
                                answer(conn, &render);
                                busy_h.fetch_sub(1, Ordering::Relaxed);
                            });
                        match spawned {
                            Ok(h) => handlers.push(h),
                            // Out of threads: this one goes unanswered (closed on drop).
                            Err(_) => {
                                busy.fetch_sub(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
                    // Out of descriptors and the like: wait, never spin.
                    Err(_) => std::thread::sleep(POLL),
                }
            }
            // Each ends within READ_TIME + WRITE_TIME.
            for h in handlers {
                let _ = h.join();
            }
            if let Listener::Unix(_, path) = &listener {
                let _ = std::fs::remove_file(path);
            }
        })
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Self::Tcp(l)
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    Metrics { head_only: bool },
    NotFound,
    NotAllowed,
    Bad,
}

/// Read the request line of `head` (the bytes up to the blank line).
pub fn parse(head: &[u8]) -> Asked {
    let Ok(text) = std::str::from_utf8(head) else {
        return Asked::Bad;
    };
    let line = text.split("\r\n").next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Asked::Bad;
    }
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => Asked::Metrics { head_only: false },
        ("HEAD", "/metrics") => Asked::Metrics { head_only: true },
        ("GET" | "HEAD", _) => Asked::NotFound,
        _ => Asked::NotAllowed,
    }
}

/// Read the head within the limits: `None` when the peer is too slow, too long or gone.
fn read_head(stream: &mut dyn Conn) -> Option<Vec<u8>> {
    let deadline = Instant::now() + READ_TIME;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .timeouts(Some(left.max(Duration::from_millis(1))), None)
            .ok()?;
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Some(head);
        }
        if head.len() > MAX_REQUEST {
            return Some(Vec::new());
        }
    }
}

type Render = Mutex<dyn FnMut() -> Result<String, String> + Send>;

fn answer(mut stream: Box<dyn Conn>, render: &Render) {
    if stream.blocking().is_err() {
        return;
    }
    let Some(head) = read_head(&mut *stream) else {
        return;
    };
    let rendered = || (render.lock().unwrap_or_else(|p| p.into_inner()))();
    let (status, body, content_type, head_only) = match parse(&head) {
        Asked::Metrics { head_only } => match rendered() {
            Ok(text) => ("200 OK", text, CONTENT_TYPE, head_only),
            Err(e) => (
                "500 Internal Server Error",
                format!("tame serve could not write its figures: {e}\n"),
                "text/plain; charset=utf-8",
                head_only,
            ),
        },
        Asked::NotFound => (
            "404 Not Found",
            "tame serve answers GET /metrics only\n".to_string(),
            "text/plain; charset=utf-8",
            false,
        ),
        Asked::NotAllowed => (
            "405 Method Not Allowed",
            "tame serve answers GET /metrics only\n".to_string(),
            "text/plain; charset=utf-8",
            false,
        ),
        Asked::Bad => (
            "400 Bad Request",
            "not an HTTP/1.x request within 8 KiB\n".to_string(),
            "text/plain; charset=utf-8",
            false,
        ),
    };
    let allow = if status.starts_with("405") {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    // Each write may block only for what is left of WRITE_TIME: a peer taking a byte a
    // second must not stretch the bound write by write.
    let deadline = Instant::now() + WRITE_TIME;
    let mut sent = 0;
    while sent < out.len() {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        if stream
            .timeouts(None, Some(left.max(Duration::from_millis(1))))
            .is_err()
        {
            break;
        }
        match stream.write(&out[sent..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    stream.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\nHost: x"),
            Asked::Metrics { head_only: false }
        );
        assert_eq!(
            parse(b"GET /metrics?x=1 HTTP/1.0"),
            Asked::Metrics { head_only: false }
        );
        assert_eq!(
            parse(b"HEAD /metrics HTTP/1.1"),
            Asked::Metrics { head_only: true }
        );
        assert_eq!(parse(b"GET / HTTP/1.1"), Asked::NotFound);
        assert_eq!(parse(b"POST /metrics HTTP/1.1"), Asked::NotAllowed);
        assert_eq!(parse(b"GET /metrics"), Asked::Bad);
        assert_eq!(parse(b"GET /metrics SPDY/3"), Asked::Bad);
        assert_eq!(parse(b"GET  /metrics HTTP/1.1"), Asked::Bad);
        assert_eq!(parse(&[0xff, 0xfe]), Asked::Bad);
        assert_eq!(parse(b""), Asked::Bad);
    }

    #[test]
    fn loopback_only_by_default() {
        assert!(is_local(&"127.0.0.1:9100".parse().unwrap()));
        assert!(is_local(&"[::1]:9100".parse().unwrap()));
        assert!(!is_local(&"0.0.0.0:9100".parse().unwrap()));
        assert!(!is_local(&"192.168.1.4:9100".parse().unwrap()));
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn a_real_exchange_is_bounded_and_answers() {
        let (listener, addr) = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut scrapes = 0;
        let h = spawn(listener, stop.clone(), move || {
            scrapes += 1;
            match scrapes {
                2 => Err("the writer refused a name".to_string()),
                _ => Ok("tame_x 1\n".to_string()),
            }
        })
        .unwrap();
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.ends_with("\r\n\r\ntame_x 1\n"), "{ok}");
        // A render that fails is a failed scrape (500), not a 200 without series.
        let failed = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(
            failed.starts_with("HTTP/1.1 500") && failed.ends_with("the writer refused a name\n"),
            "{failed}"
        );
        let nf = exchange(addr, b"GET /admin HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        let na = exchange(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n");
        assert!(
            na.starts_with("HTTP/1.1 405") && na.contains("Allow: GET, HEAD"),
            "{na}"
        );
        // A head past the limit is answered 400 without reading it all.
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        long.extend(vec![b'a'; MAX_REQUEST + 10]);
        let big = exchange(addr, &long);
        assert!(big.starts_with("HTTP/1.1 400"), "{big}");
        // A peer that sends nothing is dropped after READ_TIME, and the next one is served.
        let silent = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        let after = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(after.starts_with("HTTP/1.1 200"), "{after}");
        assert!(
            t.elapsed() < READ_TIME + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        drop(silent);
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }

    /// Issue 34: one connection at a time, 2 s each — three idle connections from any
    /// local user made a scrape take 5.6 s. Now the scrape is answered at once beside
    /// them, and peers beyond the bound are closed at once rather than queued.
    #[test]
    fn idle_connections_neither_delay_a_scrape_nor_queue_beyond_the_bound() {
        let (listener, addr) = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let h = spawn(listener, stop.clone(), || Ok("tame_x 1\n".to_string())).unwrap();
        let idle: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "a scrape beside 3 idle connections took {:?}",
            t.elapsed()
        );
        // Fill the bound: the next peer is closed at once (read ends, no answer).
        let more: Vec<TcpStream> = (3..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let refused = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(refused, "", "beyond the bound there is no answer");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        drop((idle, more));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }

    #[test]
    fn a_unix_socket_serves_the_same_and_is_removed_at_the_end() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("metrics.sock");
        let listener = bind_unix(&path, None).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o7777, 0o600, "root only without a group");
        // Listened on: a second one is refused.
        let err = bind_unix(&path, None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
        let stop = Arc::new(AtomicBool::new(false));
        let h = spawn(Listener::Unix(listener, path.clone()), stop.clone(), || {
            Ok("tame_x 1\n".to_string())
        })
        .unwrap();
        let mut s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.ends_with("\r\n\r\ntame_x 1\n"), "{out}");
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert!(!path.exists(), "the socket is removed when serving ends");
        // Not a socket at the path: refused, left alone.
        std::fs::write(&path, "keep").unwrap();
        let err = bind_unix(&path, Some(0)).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
    }
}
