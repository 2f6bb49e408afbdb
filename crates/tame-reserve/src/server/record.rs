//! The restore record: every client thread the server has changed, with its policy and
//! affinity from before, in a file beside the socket (`/run/tame/serve.record`). It is
//! written before a thread is first changed and rewritten when a client leaves, so it
//! survives whatever kills the server — and its watchdog with it (`systemctl kill -s
//! KILL`, the unit's final SIGKILL to the whole cgroup). `tame serve --recover` (the
//! unit's `ExecStopPost=`, and every server start) gives each thread that is still the
//! one admitted its state back and removes the record.
//!
//! The file is replaced whole (written beside, then renamed), created 0600, and read
//! only when it is a regular file of the server's user that nobody else may write: it
//! names threads that root will change.
//!
//! **The one exception to "every change to another thread goes through the journal"**
//! (`tame_host::journal`, docs/architecture.md). The server pins each client at admission,
//! lowers it to wait, and raises and lowers it again every slice (`scheduler.rs`) — hundreds
//! of changes a second per client, which a journal that fdatasyncs each record before the
//! change cannot follow. Only the state from *before admission* ever needs restoring (every
//! later change is the server's own, between admitted states), so the record holds that
//! alone and is written once per arrival and departure. And restoring must check that a
//! thread is still the one admitted (pid, tid and start time: a client may exit and its
//! ids be reused while the server runs), which the journal's placement records do not.
//! The watchdog restores the same states from memory; this file covers the case where both
//! die.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tame_host::Root;

use super::thread::{SetError, Thread};

const FORMAT: u32 = 1;
/// 1024 threads at ~200 bytes; a larger file is not ours.
const MAX_BYTES: u64 = 4 << 20;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    format: u32,
    threads: Vec<Thread>,
}

/// The record a running server keeps.
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    threads: Mutex<Vec<Thread>>,
}

/// Where the record and the lock of the server on `socket` are.
pub fn record_path(socket: &Path) -> PathBuf {
    socket.with_extension("record")
}

pub fn lock_path(socket: &Path) -> PathBuf {
    socket.with_extension("lock")
}

impl Record {
    /// An empty record at `path` (nothing is written until a thread is added).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            threads: Mutex::new(Vec::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Add threads before any of them is changed. Threads recorded earlier that exited
    /// since (a client that died) are dropped on the way.
    pub fn add(&self, root: &Root, threads: &[Thread]) -> io::Result<()> {
        let mut all = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|t| !threads.iter().any(|n| n.tid == t.tid) && t.is_same(root));
        all.extend(threads.iter().cloned());
        write(&self.path, &all)
    }

    /// Forget process `pid`'s threads (they have been given their state back).
    pub fn remove(&self, pid: u32) -> io::Result<()> {
        let mut all = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        let before = all.len();
        all.retain(|t| t.pid != pid);
        if all.len() == before {
            return Ok(());
        }
        write(&self.path, &all)
    }

    /// Every thread was given its state back: no record.
    pub fn clear(&self) -> io::Result<()> {
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        remove(&self.path)
    }
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn write(path: &Path, threads: &[Thread]) -> io::Result<()> {
    if threads.is_empty() {
        return remove(path);
    }
    let text = serde_json::to_vec(&Contents {
        format: FORMAT,
        threads: threads.to_vec(),
    })
    .map_err(io::Error::other)?;
    let tmp = path.with_extension("record.new");
    remove(&tmp)?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(&text)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Threads given their policy and affinity back.
    pub restored: Vec<u32>,
    /// Threads that exited (or whose id names another thread now): left alone.
    pub gone: Vec<u32>,
    /// Threads the kernel would not change, with why.
    pub failed: Vec<(u32, String)>,
}

/// Read the record at `path` (None when there is none), refusing one another user could
/// have written.
pub fn load(path: &Path) -> io::Result<Option<Vec<Thread>>> {
    let mut f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    trusted(&f, path)?;
    let mut text = Vec::new();
    (&mut f).take(MAX_BYTES + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is larger than {MAX_BYTES} bytes, so tame serve did not write it — remove it",
                path.display()
            ),
        ));
    }
    let c: Contents = serde_json::from_slice(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a restore record: {e}", path.display()),
        )
    })?;
    if c.format != FORMAT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} has format {}, not {FORMAT}: another tame version wrote it — recover with that version, or remove it",
                path.display(),
                c.format
            ),
        ));
    }
    Ok(Some(c.threads))
}

fn trusted(f: &File, path: &Path) -> io::Result<()> {
    let meta = f.metadata()?;
    // SAFETY: plain query without arguments.
    let euid = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() || meta.uid() != euid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a restore record of this user (uid {}, mode {:o}): refusing to act on it — remove it if it is not tame's",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Give every recorded thread that is still the one admitted its policy and affinity
/// back, then remove the record. Only ordinary policies are restored: the server admits
/// no other, so a record asking for a real-time one is not the server's.
pub fn recover(root: &Root, path: &Path) -> io::Result<Recovered> {
    let Some(threads) = load(path)? else {
        return Ok(Recovered::default());
    };
    let mut done = Recovered::default();
    for t in &threads {
        if !matches!(
            t.sched.policy,
            libc::SCHED_OTHER | libc::SCHED_BATCH | libc::SCHED_IDLE
        ) {
            done.failed.push((
                t.tid,
                format!(
                    "recorded policy {} is not an ordinary one: left alone",
                    t.sched.policy
                ),
            ));
            continue;
        }
        match t.restore(root) {
            Ok(()) => done.restored.push(t.tid),
            Err(SetError::Gone) => done.gone.push(t.tid),
            Err(SetError::Failed(e)) => done.failed.push((t.tid, e.to_string())),
        }
    }
    remove(path)?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;
    use tame_host::CpuList;
    use tame_rt::sched::ThreadSched;
    use tame_testing::fixture::FixtureBackend;

    fn thread(pid: u32, tid: u32, start_time: u64) -> Thread {
        Thread {
            pid,
            tid,
            start_time,
            sched: ThreadSched {
                policy: libc::SCHED_BATCH,
                nice: 3,
                ..ThreadSched::default()
            },
            affinity: CpuList::parse("0-1").unwrap(),
        }
    }

    fn stat(dir: &Path, pid: u32, tid: u32, start: u64) {
        let d = dir.join(format!("root/proc/{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut f: Vec<String> = vec!["S".into()];
        f.extend((4..22).map(|_| "0".to_string()));
        f.push(start.to_string());
        f.extend((23..=52).map(|_| "0".to_string()));
        std::fs::write(d.join("stat"), format!("{tid} (c) {}\n", f.join(" "))).unwrap();
    }

    #[test]
    fn recovery_restores_the_recorded_threads_still_there_and_removes_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(FixtureBackend::new());
        let root = backend.root(dir.path().join("root"));
        let path = dir.path().join("serve.record");
        let record = Record::new(path.clone());
        record
            .add(&root, &[thread(10, 10, 5), thread(10, 11, 6)])
            .unwrap();
        stat(dir.path(), 10, 10, 5);
        stat(dir.path(), 10, 11, 6);
        record.add(&root, &[thread(20, 20, 7)]).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        record.remove(20).unwrap();
        stat(dir.path(), 30, 30, 8);
        record.add(&root, &[thread(30, 30, 8)]).unwrap();
        // An exited client's threads go at the next write.
        stat(dir.path(), 40, 40, 9);
        record.add(&root, &[thread(40, 40, 9)]).unwrap();
        std::fs::remove_dir_all(dir.path().join("root/proc/40")).unwrap();
        record.add(&root, &[thread(30, 30, 8)]).unwrap();
        assert_eq!(load(&path).unwrap().unwrap().len(), 3);
        std::fs::remove_dir_all(dir.path().join("root/proc/30")).unwrap();
        // 10/10 is there and raised, 10/11 exited and its id went elsewhere, 30 is gone.
        stat(dir.path(), 10, 10, 5);
        stat(dir.path(), 10, 11, 99);
        backend.set_thread(
            10,
            tame_testing::fixture::FixtureThread {
                affinity: CpuList::parse("1").unwrap(),
                sched: ThreadSched {
                    policy: libc::SCHED_FIFO,
                    priority: 98,
                    ..ThreadSched::default()
                },
            },
        );
        backend.add_thread(11, CpuList::parse("1").unwrap());
        let done = recover(&root, &path).unwrap();
        assert_eq!(done.restored, vec![10]);
        assert_eq!(done.gone, vec![11, 30]);
        let t = backend.thread(10).unwrap();
        assert_eq!(t.sched, thread(10, 10, 5).sched);
        assert_eq!(t.affinity.to_string(), "0-1");
        assert_eq!(backend.thread(11).unwrap().affinity.to_string(), "1");
        assert!(!path.exists());
        // Nothing to recover is fine.
        assert_eq!(recover(&root, &path).unwrap(), Recovered::default());
        record.clear().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_record_another_user_could_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(FixtureBackend::new()).root(dir.path().join("root"));
        let path = dir.path().join("serve.record");
        Record::new(path.clone())
            .add(&root, &[thread(1, 1, 1)])
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = recover(&root, &path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(
            path.exists(),
            "a refused record is left for a person to look at"
        );
        // A symlink is not followed.
        let link = dir.path().join("link.record");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(recover(&root, &link).is_err());
        // A record asking for a real-time policy is not the server's.
        let evil = dir.path().join("evil.record");
        let mut t = thread(1, 1, 1);
        t.sched.policy = libc::SCHED_FIFO;
        t.sched.priority = 99;
        Record::new(evil.clone()).add(&root, &[t]).unwrap();
        let done = recover(&root, &evil).unwrap();
        assert!(
            done.restored.is_empty() && done.failed.len() == 1,
            "{done:?}"
        );
    }
}
