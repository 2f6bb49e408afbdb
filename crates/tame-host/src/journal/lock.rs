//! One user of a journal at a time: an exclusive `flock` on `lock` in the journal
//! directory, held for a [`super::Journal`]'s life and by [`super::revert`]. Two
//! applies at once would otherwise both write sequence 0, and one's rollback would
//! undo the other's changes. The lock file names its holder (pid, command, since
//! when) for the refusal; the kernel drops the lock when its holder dies, so a
//! killed apply never blocks the next one.
//!
//! The holder removes the file when it is done (still holding the lock); a
//! process that locked a file just removed finds that the name no longer leads to
//! it and tries again, so two holders can never hold two different files.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};

use super::dir::JournalDir;
use super::JournalError;

/// The lock file's name inside a journal directory.
pub const LOCK_FILE: &str = "lock";
/// How often a lock whose file was replaced meanwhile is tried again.
const ATTEMPTS: usize = 16;
/// How long a refused lock's file is read again while its holder has not yet written
/// its name (it does so right after taking the lock).
const NAME_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Who holds a journal: what its lock file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    pub command: String,
    /// Seconds since the epoch.
    pub since: Option<u64>,
}

impl Holder {
    fn me() -> Self {
        Self {
            pid: Some(std::process::id()),
            command: command_of("/proc/self/cmdline"),
            since: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs()),
        }
    }

    /// Who holds the lock on `file`: what the file says, read again for a moment while
    /// it is empty (the holder writes its name just after taking the lock), else the
    /// kernel's word (/proc/locks names the process holding a lock on the file's inode).
    fn of(file: &mut File) -> Self {
        let deadline = std::time::Instant::now() + NAME_WAIT;
        loop {
            let mut text = String::new();
            let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
            let h = Self::parse(&text);
            if h.pid.is_some() {
                return h;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Self::from_kernel(file).unwrap_or_default()
    }

    /// The holder of a `flock` on `file`'s inode, from /proc/locks.
    fn from_kernel(file: &File) -> Option<Self> {
        use std::os::fd::AsRawFd as _;
        let st = nix::sys::stat::fstat(file.as_raw_fd()).ok()?;
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        let pid = locks_holder(
            &locks,
            nix::sys::stat::major(st.st_dev),
            nix::sys::stat::minor(st.st_dev),
            st.st_ino,
        )?;
        Some(Self {
            pid: Some(pid),
            command: command_of(&format!("/proc/{pid}/cmdline")),
            since: None,
        })
    }

    fn to_text(&self) -> String {
        format!(
            "pid {}\nsince {}\ncommand {}\n",
            self.pid.map_or(String::new(), |p| p.to_string()),
            self.since.map_or(String::new(), |s| s.to_string()),
            self.command
        )
    }

    fn parse(text: &str) -> Self {
        let mut h = Self::default();
        for line in text.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "pid" => h.pid = value.parse().ok(),
                "since" => h.since = value.parse().ok(),
                "command" => h.command = value.to_string(),
                _ => {}
            }
        }
        h
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pid {
            Some(pid) if pid == std::process::id() => write!(f, "this process ({pid})")?,
            Some(pid) => write!(f, "process {pid}")?,
            None => write!(f, "a process that has not yet written its name")?,
        }
        if !self.command.is_empty() {
            write!(f, " ({})", self.command)?;
        }
        if let Some(since) = self.since {
            write!(f, " since {}", utc(since))?;
        }
        Ok(())
    }
}

/// A process's command line from its `cmdline` file, one line of at most 200 characters.
fn command_of(cmdline: &str) -> String {
    std::fs::read(cmdline)
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace(['\0', '\n'], " ")
                .trim()
                .chars()
                .take(200)
                .collect()
        })
        .unwrap_or_default()
}

/// The pid holding a FLOCK on inode `ino` of device `major:minor`, from the text of
/// /proc/locks (`1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF`; waiters, marked `->`,
/// hold nothing).
fn locks_holder(locks: &str, major: u64, minor: u64, ino: u64) -> Option<u32> {
    let want = format!("{major:02x}:{minor:02x}:{ino}");
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == want => pid.parse().ok(),
            _ => None,
        }
    })
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch.
fn utc(secs: u64) -> String {
    let (year, month, day, h, m, s) = crate::utc::civil(secs);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

/// Journal directories locked by this process, and the thread that holds each: a
/// revert from that thread (an apply rolling back) works under the lock it holds.
fn held() -> MutexGuard<'static, BTreeMap<(u64, u64), ThreadId>> {
    static HELD: Mutex<BTreeMap<(u64, u64), ThreadId>> = Mutex::new(BTreeMap::new());
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// True when the calling thread holds the lock of the directory `id`.
pub(crate) fn held_by_this_thread(id: (u64, u64)) -> bool {
    held().get(&id) == Some(&std::thread::current().id())
}

/// Exclusive use of a journal directory, until dropped.
#[derive(Debug)]
pub struct JournalLock {
    dir: JournalDir,
    file: Option<Flock<File>>,
    /// The directory was made for this lock: it goes again if nothing was put in it
    /// (an apply refused before its first change leaves no trace).
    created: bool,
}

impl JournalLock {
    /// Lock the journal directory `dir`, creating it (mode 0700) when absent. Another
    /// holder is [`JournalError::Locked`], naming it; this never waits.
    pub fn acquire(dir: &std::path::Path) -> Result<Self, JournalError> {
        let created = std::fs::symlink_metadata(dir).is_err();
        let dir = JournalDir::open(dir, true)?.ok_or_else(|| JournalError::Io {
            action: "create the directory of",
            path: dir.to_path_buf(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        let mut lock = Self::acquire_in(dir)?;
        lock.created = created;
        Ok(lock)
    }

    pub(crate) fn acquire_in(dir: JournalDir) -> Result<Self, JournalError> {
        let lock_path = dir.path().join(LOCK_FILE);
        let io_err = |action, source| JournalError::Io {
            action,
            path: lock_path.clone(),
            source,
        };
        for _ in 0..ATTEMPTS {
            let Some(file) = dir.open_file(LOCK_FILE, OFlag::O_RDWR | OFlag::O_CREAT)? else {
                return Err(io_err(
                    "create",
                    std::io::Error::other(
                        "the journal directory was removed meanwhile — run again",
                    ),
                ));
            };
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut locked) => {
                    // Removed (its holder finished) between our open and our lock: it guards nothing.
                    if !dir.names(LOCK_FILE, &locked) {
                        continue;
                    }
                    let text = Holder::me().to_text();
                    locked
                        .set_len(0)
                        .and_then(|()| locked.write_all(text.as_bytes()))
                        .map_err(|e| io_err("write the holder into", e))?;
                    held().insert(dir.id(), std::thread::current().id());
                    return Ok(Self {
                        dir,
                        file: Some(locked),
                        created: false,
                    });
                }
                Err((mut file, Errno::EWOULDBLOCK)) => {
                    return Err(JournalError::Locked {
                        dir: dir.path().to_path_buf(),
                        holder: Holder::of(&mut file),
                    });
                }
                Err((_, e)) => return Err(io_err("lock", e.into())),
            }
        }
        Err(io_err(
            "lock",
            std::io::Error::other(
                "the lock file was replaced under every try (another tame process removing its journal?) — run the command again",
            ),
        ))
    }

    pub(crate) fn dir(&self) -> &JournalDir {
        &self.dir
    }

    /// The locked directory.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for JournalLock {
    fn drop(&mut self) {
        held().remove(&self.dir.id());
        // Removed while still held, so nobody can lock this file and think it guards the journal.
        let _ = self.dir.remove(LOCK_FILE);
        // Closing the file drops the lock.
        self.file = None;
        if self.created {
            // Refused unless empty: a journal written meanwhile keeps it.
            let _ = std::fs::remove_dir(self.dir.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_735_689_599), "2024-12-31 23:59:59 UTC");
    }

    #[test]
    fn holders_round_trip_through_the_lock_file() {
        let h = Holder {
            pid: Some(42),
            command: "tame apply x.toml".into(),
            since: Some(0),
        };
        assert_eq!(Holder::parse(&h.to_text()), h);
        assert_eq!(
            h.to_string(),
            "process 42 (tame apply x.toml) since 1970-01-01 00:00:00 UTC"
        );
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_first_and_free_once_it_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("j");
        let first = JournalLock::acquire(&dir).unwrap();
        assert!(dir.join(LOCK_FILE).exists());
        let err = JournalLock::acquire(&dir).unwrap_err();
        let JournalError::Locked { holder, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(holder.pid, Some(std::process::id()));
        assert!(err.to_string().contains("this process"), "{err}");
        drop(first);
        assert!(!dir.join(LOCK_FILE).exists(), "the holder removes it");
        JournalLock::acquire(&dir).unwrap();
    }

    #[test]
    fn the_kernels_lock_table_names_a_holder() {
        let locks = "1: FLOCK  ADVISORY  WRITE 77 fd:01:99 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 78 fd:01:1234 0 EOF\n2: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n3: POSIX  ADVISORY  WRITE 5 fd:01:7 0 EOF\n";
        assert_eq!(locks_holder(locks, 0xfd, 1, 1234), Some(4242));
        assert_eq!(
            locks_holder(locks, 0xfd, 1, 7),
            None,
            "POSIX locks are not ours"
        );
        assert_eq!(locks_holder(locks, 0xfd, 2, 1234), None);
    }

    /// Issue 34: a second apply that found the lock taken but its file still empty (the
    /// holder between its lock and its write, or one that never writes) named nobody.
    #[test]
    fn a_holder_that_has_not_written_its_name_is_named_all_the_same() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("j");
        std::fs::create_dir(&dir).unwrap();
        let file = File::create(dir.join(LOCK_FILE)).unwrap();
        // A lock on its own open file: the kernel counts it as another holder's.
        let _held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        let err = JournalLock::acquire(&dir).unwrap_err();
        let JournalError::Locked { holder, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(holder.pid, Some(std::process::id()), "{err}");
        assert!(!holder.command.is_empty(), "{err}");
        assert!(!err.to_string().contains("not yet written"), "{err}");
    }
}
