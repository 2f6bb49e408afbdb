//! One connection: who is on the other end (`SO_PEERCRED`; a connection whose peer cannot
//! be told is refused), its request read within a size and a time limit, and a bound on
//! how many connections are served at once, in all and per uid. Each connection is served
//! on its own thread, so a client that sends slowly delays only itself.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::policy::Asker;

/// One request is one JSON line; the largest real one is ~100 bytes.
pub const MAX_REQUEST_BYTES: usize = 4096;
/// From accepting a connection to its request's newline.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// Connections served at once, in all and per uid (root has its own, larger share so
/// other users holding theirs never lock root out).
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_PER_UID: usize = 4;
pub const MAX_FOR_ROOT: usize = 16;

/// `SO_PEERGROUPS` (asm-generic socket.h); the libc crate does not name it.
const SO_PEERGROUPS: libc::c_int = 59;

/// The peer's uid and groups. An error means the peer cannot be told: refuse it.
pub fn peer(stream: &UnixStream) -> io::Result<Asker> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are live and writable for the call; len holds cred's size.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short SO_PEERCRED answer",
        ));
    }
    let mut gids = vec![cred.gid];
    // Supplementary groups widen what a rule may grant; without them only the primary
    // group counts (narrower, never wider).
    let mut groups = [0 as libc::gid_t; 256];
    let mut len = std::mem::size_of_val(&groups) as libc::socklen_t;
    // SAFETY: groups and len are live and writable; len holds the buffer's size in bytes.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERGROUPS,
            groups.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc == 0 {
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        gids.extend(groups.iter().take(n));
    }
    gids.sort_unstable();
    gids.dedup();
    Ok(Asker {
        uid: cred.uid,
        gids,
    })
}

/// Why no request came.
#[derive(Debug)]
pub enum ReadError {
    TooLong,
    TimedOut,
    /// The peer closed without sending anything.
    Closed,
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::TooLong => write!(
                f,
                "the request is longer than {MAX_REQUEST_BYTES} bytes without a newline"
            ),
            ReadError::TimedOut => write!(
                f,
                "no complete request within {} ms",
                REQUEST_TIME.as_millis()
            ),
            ReadError::Closed => write!(f, "the connection closed before a request"),
            ReadError::Io(e) => write!(f, "cannot read the request: {e}"),
        }
    }
}

/// Read one line (without its newline) by `deadline`, at most [`MAX_REQUEST_BYTES`].
/// A request that ends with the connection instead of a newline counts too.
pub fn read_request(mut stream: &UnixStream, deadline: Instant) -> Result<Vec<u8>, ReadError> {
    let mut request = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::TimedOut);
        }
        stream.set_read_timeout(Some(left)).map_err(ReadError::Io)?;
        let n = match stream.read(&mut buf) {
            Ok(0) if request.is_empty() => return Err(ReadError::Closed),
            Ok(0) => return Ok(request),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadError::TimedOut)
            }
            Err(e) => return Err(ReadError::Io(e)),
        };
        if let Some(end) = buf[..n].iter().position(|&b| b == b'\n') {
            if request.len() + end > MAX_REQUEST_BYTES {
                return Err(ReadError::TooLong);
            }
            request.extend_from_slice(&buf[..end]);
            return Ok(request);
        }
        if request.len() + n > MAX_REQUEST_BYTES {
            return Err(ReadError::TooLong);
        }
        request.extend_from_slice(&buf[..n]);
    }
}

/// How many connections each uid has open now.
#[derive(Clone, Default)]
pub struct Slots {
    open: Arc<Mutex<BTreeMap<u32, usize>>>,
}

/// A connection's place; given back when dropped.
pub struct Slot {
    slots: Slots,
    uid: u32,
}

impl Slots {
    /// A place for a connection of `uid`, or None when it or everyone holds too many.
    pub fn take(&self, uid: u32) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(&uid).copied().unwrap_or(0);
        let (limit, total_limit) = if uid == 0 {
            (MAX_FOR_ROOT, MAX_CONNECTIONS + MAX_FOR_ROOT)
        } else {
            (MAX_PER_UID, MAX_CONNECTIONS)
        };
        let others_total = total - open.get(&0).copied().unwrap_or(0);
        let counted = if uid == 0 { total } else { others_total };
        if mine >= limit || counted >= total_limit {
            return None;
        }
        *open.entry(uid).or_insert(0) += 1;
        Some(Slot {
            slots: self.clone(),
            uid,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_request_is_one_bounded_line_read_by_a_deadline() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"{\"op\":\"list\"}\nrest").unwrap();
        let soon = Instant::now() + Duration::from_secs(1);
        assert_eq!(read_request(&b, soon).unwrap(), b"{\"op\":\"list\"}");

        // Dribbled bytes do not extend the deadline.
        let (a, b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            for _ in 0..20 {
                if (&a).write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        let start = Instant::now();
        let r = read_request(&b, start + Duration::from_millis(200));
        assert!(matches!(r, Err(ReadError::TimedOut)), "{r:?}");
        assert!(start.elapsed() < Duration::from_millis(400));
        drop(b);
        writer.join().unwrap();

        // Too long: refused as soon as the limit is passed, not buffered on.
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&[b'x'; MAX_REQUEST_BYTES + 1]).unwrap();
        assert!(matches!(read_request(&b, soon), Err(ReadError::TooLong)));
        let (a, b) = UnixStream::pair().unwrap();
        drop(a);
        assert!(matches!(read_request(&b, soon), Err(ReadError::Closed)));
    }

    #[test]
    fn the_peer_is_told_by_its_credentials() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = peer(&a).unwrap();
        // SAFETY: plain queries.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        assert_eq!(me.uid, uid);
        assert!(me.gids.contains(&gid));
    }

    #[test]
    fn connections_are_bounded_per_uid_and_root_keeps_its_own() {
        let slots = Slots::default();
        let mine: Vec<Slot> = (0..MAX_PER_UID)
            .map(|_| slots.take(1000).unwrap())
            .collect();
        assert!(slots.take(1000).is_none());
        assert!(slots.take(1001).is_some());
        drop(mine);
        assert!(slots.take(1000).is_some());
        let many: Vec<Slot> = (0..MAX_CONNECTIONS as u32 / MAX_PER_UID as u32)
            .flat_map(|u| (0..MAX_PER_UID).map(move |_| u + 2000))
            .filter_map(|u| slots.take(u))
            .collect();
        assert_eq!(many.len(), MAX_CONNECTIONS);
        assert!(slots.take(5000).is_none(), "everyone's limit");
        assert!(
            slots.take(0).is_some(),
            "root is never locked out by others"
        );
        assert_eq!(slots.open(), MAX_CONNECTIONS);
    }
}
