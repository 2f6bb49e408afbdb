//! Journaled writes to the host: every change is recorded with the previous
//! value, and the record is on disk (fsynced) *before* the change is made, so
//! [`revert`] can restore the machine after a failure or a SIGKILL at any point.
//!
//! The journal is a text file of one record per line, fields separated by
//! spaces, each field percent-escaped (see [`escape`]); readable with `cat`,
//! and a line torn by a kill (no final newline) is simply ignored: its change
//! was never made, because a change is only made after its line is synced.
//!
//! Records:
//! - `tame-journal 1 ROOT` — the header, with the root the changes were made under;
//! - `note KEY VALUE` — data the caller wants back (the applied spec);
//! - `write SEQ PATH OLD NEW [RESTORE]` — a file value; OLD is `-` when the file did not exist;
//!   RESTORE is what to write to get OLD back when writing OLD itself would not
//!   (cgroup.subtree_control takes `-cpuset`, not the list it prints);
//! - `mkdir SEQ PATH [MEMBERS PARENT_MEMBERS]` — a created directory; on revert the
//!   tasks listed in MEMBERS (a cgroup's `tasks`) go back to PARENT_MEMBERS first;
//! - `move SEQ TID FROM TO` — a task attached to the cgroup file TO, which was in FROM;
//! - `owner SEQ PATH OLD NEW` — ownership and mode, each `UID:GID:MODE` (mode in octal);
//! - `place SEQ PID TID OLD_AFFINITY OLD_SCHED OLD_CGROUP NEW_AFFINITY NEW_SCHED NEW_CGROUP` —
//!   a thread's placement ([`ThreadPlacement`]); each part `-` when not concerned, the
//!   scheduling attributes as `POLICY:PRIORITY:NICE:RESET_ON_FORK:RUNTIME:DEADLINE:PERIOD`;
//! - `install SEQ PATH MODE =CONTENT` — a configuration file created where none was (mode in
//!   octal); revert removes it while it still holds CONTENT, and leaves it (saying so) when
//!   someone changed it since;
//! - `link SEQ PATH =TARGET` — a symbolic link created where nothing was;
//! - `done SEQ` / `failed SEQ REASON` — the outcome, for status (not synced: revert never needs it).
//!
//! Every change is made through the root's backend, so the journal works the same
//! on the live system and on a test's fixture backend (which does what the kernel would).
//!
//! Hardening, since revert does as root whatever the journal says:
//! - one user at a time: a [`Journal`] and [`revert`] hold the directory's lock
//!   ([`JournalLock`]); a second one is refused, naming the holder;
//! - a line torn by a crash is cut off (and noted as `note torn BYTES`) before the
//!   next record is appended, so the journal stays readable and revertible;
//! - the directory is created 0700 and the file 0600, both opened without following
//!   symbolic links, and refused when someone other than root (or the caller) owns
//!   or may write them;
//! - every path a record names must be a plain path below [`ALLOWED_ROOTS`], and an
//!   ownership record may not hold a setuid, setgid or world-writable mode: such a
//!   record is refused when it would be written and when it is read back;
//! - revert undoes only what was done: a change whose outcome is `failed` is left
//!   alone (a `mkdir` that failed with EEXIST made someone else's directory).

mod allow;
mod dir;
mod lock;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

pub use self::allow::{
    config_path_refusal, mode_refusal, path_refusal, ALLOWED_ROOTS, CONFIG_ROOTS,
};
use self::dir::JournalDir;
pub use self::lock::{Holder, JournalLock, LOCK_FILE};
pub use crate::backend::Ownership;
use crate::placement::{parse_sched_field, sched_field};
pub use crate::placement::{PlaceError, PlaceStep, ThreadPlacement};
use crate::{CpuList, Root};

/// Where journals live unless the caller says otherwise (below the root: see [`journal_dir`]).
pub const DEFAULT_JOURNAL_DIR: &str = "/var/lib/tame";

/// The journal directory: `given` (`--journal-dir`) as it is, else
/// [`DEFAULT_JOURNAL_DIR`] below `root` — the one rule, so apply, revert, status, run -p,
/// the placement journals, the benches, assess, reserve and serve all agree under `--root`.
pub fn journal_dir(root: &Root, given: Option<&Path>) -> PathBuf {
    given
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.path(DEFAULT_JOURNAL_DIR))
}
/// The journal's file name inside its directory.
pub const JOURNAL_FILE: &str = "journal";
/// The note recording the bytes of a torn last line cut off before appending.
pub const TORN_NOTE: &str = "torn";
/// The note recording the boot a journal was begun in ([`crate::kernel::boot_id`]): a
/// reboot undid every change of a journal from an earlier boot, and its thread and
/// process ids name other tasks now, so revert must not act on it.
pub const BOOT_ID_NOTE: &str = "boot_id";
/// The note marking a journal whose changes outlive a reboot (files `tame enable`
/// installs): it is never from a previous boot.
pub const PERSISTS_NOTE: &str = "persists";
const HEADER: &str = "tame-journal";
const FORMAT_VERSION: &str = "1";

/// A failure to use the journal itself (as opposed to a refused host write).
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot {action} journal {path}: {source} — check that the directory is writable (or choose another with --journal-dir)")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}: not a tame journal record ({reason}) — the file was edited or is from another version; restore the listed values by hand, then remove it")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("journal {path} was written for root {journal_root}, not {root} — revert with --root {journal_root}")]
    OtherRoot {
        path: PathBuf,
        journal_root: String,
        root: String,
    },
    #[error("journal {} is in use by {holder} — wait until it has finished, then run again (one apply, revert or placement at a time uses a journal)", .dir.display())]
    Locked { dir: PathBuf, holder: Holder },
    #[error("refusing journal location {}: {reason} — revert acts as root on what the journal says, so it must be a directory owned by root that only root may write (the default is {DEFAULT_JOURNAL_DIR})", .path.display())]
    UnsafeLocation { path: PathBuf, reason: String },
    #[error("{}:{line}: refusing this record: {reason} — tame never writes such a record, so the journal was altered; restore the values you need by hand, then remove it", .path.display())]
    Hostile {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("cannot journal a change of {path}: {reason} — tame only changes kernel settings below {} and installs configuration only in {}", ALLOWED_ROOTS.join(", "), CONFIG_ROOTS.join(", "))]
    NotAllowed { path: String, reason: String },
}

impl JournalError {
    /// True when the caller has to change something before running again (the CLI exits 2):
    /// another run holds the journal, the journal location or file is unsafe, or the
    /// journal is for another root. The [`LayerError`](crate::error::LayerError) impl
    /// answers the same.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            JournalError::Locked { .. }
                | JournalError::UnsafeLocation { .. }
                | JournalError::Hostile { .. }
                | JournalError::OtherRoot { .. }
        )
    }
}

/// Refuse, before anything is recorded or changed, a path a journal may not hold.
fn allowed(path: &str) -> Result<(), JournalError> {
    refused(path, path_refusal(path))
}

fn allowed_config(path: &str) -> Result<(), JournalError> {
    refused(path, config_path_refusal(path))
}

fn refused(path: &str, refusal: Option<String>) -> Result<(), JournalError> {
    match refusal {
        Some(reason) => Err(JournalError::NotAllowed {
            path: path.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// One change, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Write {
        path: String,
        old: Option<Vec<u8>>,
        new: Vec<u8>,
        restore_with: Option<Vec<u8>>,
    },
    CreateDir {
        path: String,
        members: Option<(String, String)>,
    },
    MoveTask {
        tid: u32,
        from: String,
        to: String,
    },
    Owner {
        path: String,
        old: Ownership,
        new: Ownership,
    },
    /// Thread `tid` of process `pid` placed: `old` is what revert gives back
    /// (only the parts `old` has).
    Placement {
        pid: u32,
        tid: u32,
        old: ThreadPlacement,
        new: ThreadPlacement,
    },
    /// A configuration file created where none was.
    Install {
        path: String,
        mode: u32,
        content: Vec<u8>,
    },
    /// A symbolic link created where nothing was.
    Link {
        path: String,
        target: String,
    },
}

fn ownership_field(o: &Ownership) -> String {
    format!("{}:{}:{:o}", o.uid, o.gid, o.mode)
}

fn parse_ownership(field: &str) -> Option<Ownership> {
    let mut it = field.split(':');
    let o = Ownership {
        uid: it.next()?.parse().ok()?,
        gid: it.next()?.parse().ok()?,
        mode: u32::from_str_radix(it.next()?, 8).ok()?,
    };
    it.next().is_none().then_some(o)
}

/// What became of a change during apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded, result unknown (the process was killed, or the outcome line was lost).
    Pending,
    Done,
    Failed(String),
}

/// A change with its sequence number and outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub change: Change,
    pub outcome: Outcome,
}

/// A journal read back from disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub root: String,
    pub notes: Vec<(String, Vec<u8>)>,
    pub entries: Vec<Entry>,
}

impl Recorded {
    /// The journal was begun in an earlier boot than the running one: none of its changes
    /// is in effect (unknown — no note, or no boot id to compare — counts as this boot).
    pub fn from_previous_boot(&self, root: &Root) -> bool {
        if self.note(PERSISTS_NOTE).is_some() {
            return false;
        }
        match (self.note(BOOT_ID_NOTE), crate::kernel::boot_id(root)) {
            (Some(then), Some(now)) => then != now.as_bytes(),
            _ => false,
        }
    }

    pub fn note(&self, key: &str) -> Option<&[u8]> {
        self.notes
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }
}

/// Where a test can stop the process: right after a change was journaled
/// (and synced) but before it was made, or right after it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Journaled(u64),
    Made(u64),
}

/// A test hook: an error returned at [`Stage::Journaled`] stands for the kernel
/// refusing the change (it is not made); at [`Stage::Made`] it is ignored.
type StageHook = Box<dyn FnMut(Stage) -> io::Result<()>>;

/// An open journal: changes go through it. It holds the directory's lock for its life.
pub struct Journal {
    root: Root,
    path: PathBuf,
    file: File,
    next_seq: u64,
    hook: Option<StageHook>,
    /// Paths written through this journal (see [`Journal::rewrite`]).
    written: BTreeSet<String>,
    lock: JournalLock,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

/// The journal file inside a journal directory.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

impl Journal {
    /// Open the journal in `dir` for appending, creating it (and `dir`) when absent,
    /// and hold the directory's lock until the journal is dropped (another holder is
    /// [`JournalError::Locked`]). An existing journal must have been written for the same root.
    pub fn open(root: &Root, dir: &Path) -> Result<Self, JournalError> {
        Self::open_locked(root, JournalLock::acquire(dir)?)
    }

    /// Open the journal of a directory already locked (a caller that locks before it
    /// plans, so that nobody changes the host between the plan and the changes).
    pub fn open_locked(root: &Root, lock: JournalLock) -> Result<Self, JournalError> {
        let dir = lock.dir();
        let path = journal_path(dir.path());
        let io_err = |action, source| JournalError::Io {
            action,
            path: path.clone(),
            source,
        };
        let mut file = dir
            .open_file(
                JOURNAL_FILE,
                OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT,
            )?
            .ok_or_else(|| io_err("create", io::ErrorKind::NotFound.into()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io_err("read", e))?;
        // A journal torn while its header was written holds no change: start it afresh.
        let existing = Some(parse(&path, &bytes)?).filter(|rec| !rec.root.is_empty());
        let next_seq = match &existing {
            Some(rec) => {
                check_root(&path, rec, root)?;
                rec.entries.iter().map(|e| e.seq + 1).max().unwrap_or(0)
            }
            None => 0,
        };
        // Appending after a torn line would glue the next record to it, and the journal
        // would never read again: cut the torn bytes off first.
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let keep = if existing.is_some() { complete } else { 0 };
        let torn = bytes.len() - keep;
        if torn > 0 {
            file.set_len(keep as u64)
                .and_then(|()| file.sync_data())
                .map_err(|e| io_err("cut the torn last line of", e))?;
        }
        let written = existing
            .iter()
            .flat_map(|rec| rec.entries.iter())
            .filter_map(|e| match &e.change {
                Change::Write { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let mut journal = Self {
            root: root.clone(),
            path: path.clone(),
            file,
            next_seq,
            hook: None,
            written,
            lock,
        };
        if existing.is_none() {
            let base = root.base().to_string_lossy().into_owned();
            journal.append_synced(&[format!(
                "{HEADER} {FORMAT_VERSION} {}\n",
                escape(base.as_bytes())
            )])?;
            // The new directory entry must be durable too, or a crash could lose the file.
            journal
                .lock
                .dir()
                .sync()
                .map_err(|e| io_err("sync the directory of", e))?;
            if let Some(id) = crate::kernel::boot_id(root) {
                journal.note(BOOT_ID_NOTE, id.as_bytes())?;
            }
        } else if torn > 0 {
            journal.note(TORN_NOTE, &bytes[keep..])?;
        }
        Ok(journal)
    }

    /// Undo every change in this journal, newest first, under the lock it holds
    /// (see [`revert`]); an apply rolls back with this.
    pub fn revert(self) -> Result<RevertReport, JournalError> {
        let Journal {
            root, file, lock, ..
        } = self;
        drop(file);
        revert_in(&root, lock.dir())
    }

    /// Call `hook` at every stage of every change (tests use it to kill the process
    /// or to make a change fail).
    pub fn set_stage_hook(&mut self, hook: impl FnMut(Stage) -> io::Result<()> + 'static) {
        self.hook = Some(Box::new(hook));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Record data the caller wants back later (synced).
    pub fn note(&mut self, key: &str, value: &[u8]) -> Result<(), JournalError> {
        self.append_synced(&[format!(
            "note {} {}\n",
            escape(key.as_bytes()),
            escape(value)
        )])
    }

    /// Write `new` to `path` (a host path below the root), journaling its previous content first.
    /// A refused write (e.g. EIO on a kernel-managed IRQ) is the inner error; the journal's own
    /// failures are the outer one.
    pub fn write(
        &mut self,
        path: &str,
        new: &[u8],
        restore_with: Option<&[u8]>,
    ) -> Result<io::Result<()>, JournalError> {
        let mut results = self.write_batch(&[WriteRequest {
            path: path.to_string(),
            new: new.to_vec(),
            restore_with: restore_with.map(<[u8]>::to_vec),
        }])?;
        Ok(results.pop().unwrap_or(Ok(())))
    }

    /// Several writes behind one sync of the journal (one fsync, not one per file).
    pub fn write_batch(
        &mut self,
        requests: &[WriteRequest],
    ) -> Result<Vec<io::Result<()>>, JournalError> {
        for req in requests {
            allowed(&req.path)?;
        }
        let mut lines = Vec::with_capacity(requests.len());
        let first = self.next_seq;
        for (i, req) in requests.iter().enumerate() {
            let old = match self.root.read_raw(&req.path) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(source) => {
                    return Err(JournalError::Io {
                        action: "read the previous value for",
                        path: self.root.path(&req.path),
                        source,
                    })
                }
            };
            let change = Change::Write {
                path: req.path.clone(),
                old,
                new: req.new.clone(),
                restore_with: req.restore_with.clone(),
            };
            lines.push(format_change(first + i as u64, &change));
        }
        self.next_seq += requests.len() as u64;
        self.append_synced(&lines)?;
        self.written
            .extend(requests.iter().map(|req| req.path.clone()));
        let mut results = Vec::with_capacity(requests.len());
        let mut outcomes = Vec::with_capacity(requests.len());
        for (i, req) in requests.iter().enumerate() {
            let seq = first + i as u64;
            let result = self
                .stage(Stage::Journaled(seq))
                .and_then(|()| self.root.write(&req.path, &req.new));
            let _ = self.stage(Stage::Made(seq));
            outcomes.push(outcome_line(seq, &result));
            results.push(result);
        }
        self.append(&outcomes)?;
        Ok(results)
    }

    /// Write again a path this journal already recorded (e.g. toggling `tracing_on`):
    /// no new record, since revert restores the value recorded first.
    /// A path never journaled is refused.
    pub fn rewrite(&mut self, path: &str, new: &[u8]) -> io::Result<()> {
        if !self.written.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path} was not journaled: write it with Journal::write first"),
            ));
        }
        self.root.write(path, new)
    }

    /// Create a directory, journaled. `members` names a cgroup's task list and its
    /// parent's, so revert can hand back tasks that arrived after apply before removing it.
    pub fn create_dir(
        &mut self,
        path: &str,
        members: Option<(&str, &str)>,
    ) -> Result<io::Result<()>, JournalError> {
        match members {
            Some((list, parent)) => {
                allowed(path)?;
                allowed(list)?;
                allowed(parent)?;
            }
            // A plain directory may be configuration's; refused as a kernel path.
            None => allowed(path).or_else(|e| allowed_config(path).map_err(|_| e))?,
        }
        let change = Change::CreateDir {
            path: path.to_string(),
            members: members.map(|(a, b)| (a.to_string(), b.to_string())),
        };
        self.make_new(change, path, |root| root.create_dir(path))
    }

    /// Create the configuration file `path` (below [`CONFIG_ROOTS`]) holding `content`
    /// with permission bits `mode`, journaled first. An existing file is refused (the
    /// inner error, EEXIST): tame installs only files nobody else wrote.
    pub fn install_file(
        &mut self,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<io::Result<()>, JournalError> {
        allowed_config(path)?;
        if let Some(reason) = mode_refusal(mode) {
            return Err(JournalError::NotAllowed {
                path: path.to_string(),
                reason,
            });
        }
        let change = Change::Install {
            path: path.to_string(),
            mode,
            content: content.to_vec(),
        };
        self.make_new(change, path, |root| root.create_file(path, content, mode))
    }

    /// Create the symbolic link `path` (below [`CONFIG_ROOTS`]) to `target`, journaled first.
    pub fn link(&mut self, path: &str, target: &str) -> Result<io::Result<()>, JournalError> {
        allowed_config(path)?;
        let change = Change::Link {
            path: path.to_string(),
            target: target.to_string(),
        };
        self.make_new(change, path, |root| root.symlink(target, path))
    }

    /// Record `change` (which makes `path`), then `make` it. Something already at `path` is
    /// someone else's: recorded as failed in the same synced write, so no crash can leave
    /// it looking like ours (revert would remove it), and not made.
    fn make_new(
        &mut self,
        change: Change,
        path: &str,
        make: impl FnOnce(&Root) -> io::Result<()>,
    ) -> Result<io::Result<()>, JournalError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.root.exists(path) || self.root.read_link(path).is_ok() {
            let exists = Err(io::Error::from_raw_os_error(
                nix::errno::Errno::EEXIST as i32,
            ));
            self.append_synced(&[format_change(seq, &change), outcome_line(seq, &exists)])?;
            let _ = self.stage(Stage::Journaled(seq));
            let _ = self.stage(Stage::Made(seq));
            return Ok(exists);
        }
        self.append_synced(&[format_change(seq, &change)])?;
        let result = self
            .stage(Stage::Journaled(seq))
            .and_then(|()| make(&self.root));
        let _ = self.stage(Stage::Made(seq));
        self.append(&[outcome_line(seq, &result)])?;
        Ok(result)
    }

    /// Attach tasks to the cgroup task list `to` (they are in `from` now), behind one sync.
    pub fn move_tasks(
        &mut self,
        tids: &[u32],
        from: &str,
        to: &str,
    ) -> Result<Vec<io::Result<()>>, JournalError> {
        allowed(from)?;
        allowed(to)?;
        let first = self.next_seq;
        self.next_seq += tids.len() as u64;
        let lines: Vec<String> = tids
            .iter()
            .enumerate()
            .map(|(i, &tid)| {
                format_change(
                    first + i as u64,
                    &Change::MoveTask {
                        tid,
                        from: from.to_string(),
                        to: to.to_string(),
                    },
                )
            })
            .collect();
        self.append_synced(&lines)?;
        let mut results = Vec::with_capacity(tids.len());
        let mut outcomes = Vec::with_capacity(tids.len());
        for (i, &tid) in tids.iter().enumerate() {
            let seq = first + i as u64;
            let result = self
                .stage(Stage::Journaled(seq))
                .and_then(|()| attach_task(&self.root, tid, to));
            let _ = self.stage(Stage::Made(seq));
            outcomes.push(outcome_line(seq, &result));
            results.push(result);
        }
        self.append(&outcomes)?;
        Ok(results)
    }

    /// Give `path` a new owner, group and mode, journaling the old ones first.
    pub fn set_owner(
        &mut self,
        path: &str,
        new: Ownership,
    ) -> Result<io::Result<()>, JournalError> {
        allowed(path)?;
        let old = self
            .root
            .ownership(path)
            .map_err(|source| JournalError::Io {
                action: "read the previous owner for",
                path: self.root.path(path),
                source,
            })?;
        // Revert would set the old mode back and apply sets the new one, both as root.
        for mode in [new.mode, old.mode] {
            if let Some(reason) = mode_refusal(mode) {
                return Err(JournalError::NotAllowed {
                    path: path.to_string(),
                    reason,
                });
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let change = Change::Owner {
            path: path.to_string(),
            old,
            new,
        };
        self.append_synced(&[format_change(seq, &change)])?;
        let result = self
            .stage(Stage::Journaled(seq))
            .and_then(|()| self.root.set_ownership(path, new));
        let _ = self.stage(Stage::Made(seq));
        self.append(&[outcome_line(seq, &result)])?;
        Ok(result)
    }

    /// Place thread `tid` of process `pid`: join the cgroup task list `new.cgroup`,
    /// then set `new.affinity`, then `new.sched` (joining a cpuset resets the
    /// affinity, so it comes first). The parts of the previous placement that
    /// `new` changes are read and journaled first; `cgroup_from` names the task
    /// list the thread is in now (needed when `new.cgroup` is given).
    /// A refused placement is the inner error, the journal's own failures the outer one.
    pub fn place(
        &mut self,
        pid: u32,
        tid: u32,
        new: &ThreadPlacement,
        cgroup_from: Option<&str>,
    ) -> Result<Result<(), PlaceError>, JournalError> {
        for list in new
            .cgroup
            .iter()
            .chain(cgroup_from.map(str::to_string).iter())
        {
            allowed(list)?;
        }
        let read_err = |source| PlaceError {
            tid,
            step: PlaceStep::Read,
            source,
        };
        let old = ThreadPlacement {
            affinity: match &new.affinity {
                Some(_) => match self.root.affinity(tid) {
                    Ok(a) => Some(a),
                    Err(e) => return Ok(Err(read_err(e))),
                },
                None => None,
            },
            sched: match &new.sched {
                Some(_) => match self.root.thread_sched(tid) {
                    Ok(s) => Some(s),
                    Err(e) => return Ok(Err(read_err(e))),
                },
                None => None,
            },
            cgroup: new.cgroup.as_ref().and(cgroup_from.map(str::to_string)),
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let change = Change::Placement {
            pid,
            tid,
            old,
            new: new.clone(),
        };
        self.append_synced(&[format_change(seq, &change)])?;
        let result = match self.stage(Stage::Journaled(seq)) {
            Ok(()) => make_placement(&self.root, tid, new),
            Err(source) => Err(PlaceError {
                tid,
                step: first_step(new),
                source,
            }),
        };
        let _ = self.stage(Stage::Made(seq));
        let line = outcome_line(
            seq,
            &result
                .as_ref()
                .map(|_| ())
                .map_err(|e| io::Error::other(e.to_string())),
        );
        self.append(&[line])?;
        Ok(result)
    }

    /// Record that thread `tid` of process `pid` has a placement it inherited
    /// (it was created by a placed thread) and that revert should give it `old`.
    /// Nothing is changed now.
    pub fn adopt(&mut self, pid: u32, tid: u32, old: &ThreadPlacement) -> Result<(), JournalError> {
        if let Some(list) = &old.cgroup {
            allowed(list)?;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let change = Change::Placement {
            pid,
            tid,
            old: old.clone(),
            new: ThreadPlacement::default(),
        };
        self.append_synced(&[format_change(seq, &change), format!("done {seq}\n")])
    }

    fn stage(&mut self, stage: Stage) -> io::Result<()> {
        match self.hook.as_mut() {
            Some(hook) => hook(stage),
            None => Ok(()),
        }
    }

    fn append(&mut self, lines: &[String]) -> Result<(), JournalError> {
        // One write() per batch: a kill leaves at most one torn line, at the end.
        let text: String = lines.concat();
        self.file
            .write_all(text.as_bytes())
            .map_err(|source| JournalError::Io {
                action: "append to",
                path: self.path.clone(),
                source,
            })
    }

    fn append_synced(&mut self, lines: &[String]) -> Result<(), JournalError> {
        self.append(lines)?;
        self.file.sync_data().map_err(|source| JournalError::Io {
            action: "sync",
            path: self.path.clone(),
            source,
        })
    }
}

/// A write for [`Journal::write_batch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRequest {
    pub path: String,
    pub new: Vec<u8>,
    pub restore_with: Option<Vec<u8>>,
}

impl WriteRequest {
    pub fn new(path: impl Into<String>, new: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            new: new.into(),
            restore_with: None,
        }
    }
}

fn outcome_line(seq: u64, result: &io::Result<()>) -> String {
    match result {
        Ok(()) => format!("done {seq}\n"),
        Err(e) => format!("failed {seq} {}\n", escape(e.to_string().as_bytes())),
    }
}

fn opt_field(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(b) => format!("={}", escape(b)),
        None => "-".to_string(),
    }
}

fn format_change(seq: u64, change: &Change) -> String {
    match change {
        Change::Write {
            path,
            old,
            new,
            restore_with,
        } => {
            let mut line = format!(
                "write {seq} {} {} ={}",
                escape(path.as_bytes()),
                opt_field(old),
                escape(new)
            );
            if let Some(r) = restore_with {
                line.push_str(&format!(" ={}", escape(r)));
            }
            line + "\n"
        }
        Change::CreateDir { path, members } => match members {
            Some((m, p)) => format!(
                "mkdir {seq} {} {} {}\n",
                escape(path.as_bytes()),
                escape(m.as_bytes()),
                escape(p.as_bytes())
            ),
            None => format!("mkdir {seq} {}\n", escape(path.as_bytes())),
        },
        Change::MoveTask { tid, from, to } => format!(
            "move {seq} {tid} {} {}\n",
            escape(from.as_bytes()),
            escape(to.as_bytes())
        ),
        Change::Owner { path, old, new } => format!(
            "owner {seq} {} {} {}\n",
            escape(path.as_bytes()),
            ownership_field(old),
            ownership_field(new)
        ),
        Change::Placement { pid, tid, old, new } => format!(
            "place {seq} {pid} {tid} {} {}\n",
            placement_fields(old),
            placement_fields(new)
        ),
        Change::Install {
            path,
            mode,
            content,
        } => format!(
            "install {seq} {} {mode:o} ={}\n",
            escape(path.as_bytes()),
            escape(content)
        ),
        Change::Link { path, target } => format!(
            "link {seq} {} ={}\n",
            escape(path.as_bytes()),
            escape(target.as_bytes())
        ),
    }
}

/// Three fields: affinity, scheduling, cgroup; `-` for a part not concerned.
fn placement_fields(p: &ThreadPlacement) -> String {
    let part = |v: Option<String>| match v {
        Some(v) => format!("={}", escape(v.as_bytes())),
        None => "-".to_string(),
    };
    format!(
        "{} {} {}",
        part(p.affinity.as_ref().map(CpuList::to_string)),
        part(p.sched.as_ref().map(sched_field)),
        part(p.cgroup.clone())
    )
}

/// Percent-escape everything that is not printable ASCII, plus space and `%`,
/// so a field never contains a separator and any bytes round-trip.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn unescape(field: &str) -> Option<Vec<u8>> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = field.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Read the journal in `dir`; `Ok(None)` when there is none.
/// The directory and the file must be safe (see the module documentation); the
/// lock is not taken, so a journal being written reads as far as it is complete.
pub fn load(dir: &Path) -> Result<Option<Recorded>, JournalError> {
    match JournalDir::open(dir, false)? {
        Some(dir) => load_in(&dir),
        None => Ok(None),
    }
}

fn load_in(dir: &JournalDir) -> Result<Option<Recorded>, JournalError> {
    let path = journal_path(dir.path());
    let Some(mut file) = dir.open_file(JOURNAL_FILE, OFlag::O_RDONLY)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|source| JournalError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
    parse(&path, &bytes).map(Some)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Recorded, JournalError> {
    let text = String::from_utf8_lossy(bytes);
    let mut rec = Recorded::default();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    for (n, line) in complete.lines().enumerate() {
        let corrupt = |reason: &str| JournalError::Corrupt {
            path: path.to_path_buf(),
            line: n + 1,
            reason: reason.to_string(),
        };
        let hostile = |reason: String| JournalError::Hostile {
            path: path.to_path_buf(),
            line: n + 1,
            reason,
        };
        // Every host path a record names, checked against what tame may change.
        let host_path = |p: String| -> Result<String, JournalError> {
            match path_refusal(&p) {
                Some(reason) => Err(hostile(reason)),
                None => Ok(p),
            }
        };
        let config_path = |p: String| -> Result<String, JournalError> {
            match config_path_refusal(&p) {
                Some(reason) => Err(hostile(reason)),
                None => Ok(p),
            }
        };
        let fields: Vec<&str> = line.split(' ').collect();
        let text_field = |i: usize| -> Result<String, JournalError> {
            let raw = fields.get(i).ok_or_else(|| corrupt("missing field"))?;
            let b = unescape(raw).ok_or_else(|| corrupt("bad escape"))?;
            String::from_utf8(b).map_err(|_| corrupt("path is not UTF-8"))
        };
        let value = |i: usize| -> Result<Option<Vec<u8>>, JournalError> {
            match fields.get(i) {
                None => Ok(None),
                Some(&"-") => Ok(None),
                Some(f) => match f.strip_prefix('=') {
                    Some(v) => unescape(v).map(Some).ok_or_else(|| corrupt("bad escape")),
                    None => Err(corrupt("value must start with '=' or be '-'")),
                },
            }
        };
        let seq = || -> Result<u64, JournalError> {
            fields
                .get(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| corrupt("bad sequence number"))
        };
        if n == 0 {
            if fields.first() != Some(&HEADER) || fields.get(1) != Some(&FORMAT_VERSION) {
                return Err(corrupt("missing header"));
            }
            rec.root = text_field(2)?;
            continue;
        }
        let change = match fields[0] {
            "note" => {
                let key = text_field(1)?;
                let v = unescape(fields.get(2).ok_or_else(|| corrupt("missing field"))?)
                    .ok_or_else(|| corrupt("bad escape"))?;
                rec.notes.push((key, v));
                continue;
            }
            "done" | "failed" => {
                let s = seq()?;
                let outcome = if fields[0] == "done" {
                    Outcome::Done
                } else {
                    Outcome::Failed(text_field(2).unwrap_or_default())
                };
                if let Some(e) = rec.entries.iter_mut().rev().find(|e| e.seq == s) {
                    e.outcome = outcome;
                }
                continue;
            }
            "write" => Change::Write {
                path: host_path(text_field(2)?)?,
                old: value(3)?,
                new: value(4)?.ok_or_else(|| corrupt("missing new value"))?,
                restore_with: value(5)?,
            },
            "mkdir" => Change::CreateDir {
                path: match fields.len() {
                    // A plain directory may be configuration's; refused as a kernel path.
                    3 => host_path(text_field(2)?)
                        .or_else(|e| config_path(text_field(2)?).map_err(|_| e))?,
                    _ => host_path(text_field(2)?)?,
                },
                members: match fields.len() {
                    3 => None,
                    5 => Some((host_path(text_field(3)?)?, host_path(text_field(4)?)?)),
                    _ => return Err(corrupt("mkdir takes a path and optionally two task lists")),
                },
            },
            "move" => Change::MoveTask {
                tid: fields
                    .get(2)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| corrupt("bad task id"))?,
                from: host_path(text_field(3)?)?,
                to: host_path(text_field(4)?)?,
            },
            "owner" => {
                let own = |i: usize| {
                    let o = fields
                        .get(i)
                        .and_then(|f| parse_ownership(f))
                        .ok_or_else(|| corrupt("ownership must be UID:GID:MODE"))?;
                    match mode_refusal(o.mode) {
                        Some(reason) => Err(hostile(reason)),
                        None => Ok(o),
                    }
                };
                Change::Owner {
                    path: host_path(text_field(2)?)?,
                    old: own(3)?,
                    new: own(4)?,
                }
            }
            "place" => {
                let id = |i: usize| {
                    fields
                        .get(i)
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| corrupt("bad process or thread id"))
                };
                let text = |i: usize| -> Result<Option<String>, JournalError> {
                    value(i)?
                        .map(|b| {
                            String::from_utf8(b).map_err(|_| corrupt("placement is not UTF-8"))
                        })
                        .transpose()
                };
                let placement = |at: usize| -> Result<ThreadPlacement, JournalError> {
                    Ok(ThreadPlacement {
                        affinity: text(at)?
                            .map(|t| CpuList::parse(&t).map_err(|_| corrupt("bad affinity")))
                            .transpose()?,
                        sched: text(at + 1)?
                            .map(|t| {
                                parse_sched_field(&t)
                                    .ok_or_else(|| corrupt("bad scheduling attributes"))
                            })
                            .transpose()?,
                        cgroup: text(at + 2)?.map(host_path).transpose()?,
                    })
                };
                if fields.len() != 10 {
                    return Err(corrupt("place takes a pid, a tid and two placements"));
                }
                Change::Placement {
                    pid: id(2)?,
                    tid: id(3)?,
                    old: placement(4)?,
                    new: placement(7)?,
                }
            }
            "install" => {
                if fields.len() != 5 {
                    return Err(corrupt("install takes a path, a mode and the content"));
                }
                let mode = fields
                    .get(3)
                    .and_then(|m| u32::from_str_radix(m, 8).ok())
                    .ok_or_else(|| corrupt("bad mode"))?;
                if let Some(reason) = mode_refusal(mode) {
                    return Err(hostile(reason));
                }
                Change::Install {
                    path: config_path(text_field(2)?)?,
                    mode,
                    content: value(4)?.ok_or_else(|| corrupt("missing content"))?,
                }
            }
            "link" => {
                if fields.len() != 4 {
                    return Err(corrupt("link takes a path and its target"));
                }
                let target = value(3)?.ok_or_else(|| corrupt("missing target"))?;
                Change::Link {
                    path: config_path(text_field(2)?)?,
                    target: String::from_utf8(target)
                        .map_err(|_| corrupt("target is not UTF-8"))?,
                }
            }
            _ => return Err(corrupt("unknown record")),
        };
        rec.entries.push(Entry {
            seq: seq()?,
            change,
            outcome: Outcome::Pending,
        });
    }
    if complete.is_empty() && !bytes.is_empty() {
        // Killed while writing the header: nothing was changed yet.
        return Ok(Recorded::default());
    }
    Ok(rec)
}

fn check_root(path: &Path, rec: &Recorded, root: &Root) -> Result<(), JournalError> {
    let base = root.base().to_string_lossy();
    if !rec.root.is_empty() && rec.root != base {
        return Err(JournalError::OtherRoot {
            path: path.to_path_buf(),
            journal_root: rec.root.clone(),
            root: base.into_owned(),
        });
    }
    Ok(())
}

/// A change revert could not undo, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotRestored {
    /// The change's sequence number in the journal.
    pub seq: u64,
    pub what: String,
    pub reason: String,
}

/// What a revert did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevertReport {
    /// Entries found in the journal.
    pub entries: usize,
    /// Changes undone by writing (the rest already had their old value).
    pub restored: usize,
    pub not_restored: Vec<NotRestored>,
    /// The journal was removed (everything is back).
    pub journal_removed: bool,
    /// There was no journal: nothing to revert.
    pub nothing_to_revert: bool,
    /// Changes the journal records as failed, left alone: they were not made (a
    /// `mkdir` refused with EEXIST names someone else's directory).
    pub not_made: usize,
    /// The journal was from an earlier boot: the reboot had undone its changes, so it
    /// was removed without acting on it.
    pub previous_boot: bool,
}

impl RevertReport {
    /// What could not be put back, one `what: reason` line each.
    pub fn not_restored_lines(&self) -> Vec<String> {
        self.not_restored
            .iter()
            .map(|n| format!("{}: {}", n.what, n.reason))
            .collect()
    }
}

/// `tame revert --json`: what a revert did. Its fields in the order they were first
/// written (by name).
#[derive(serde::Serialize)]
pub struct RevertDoc {
    entries: usize,
    journal_removed: bool,
    not_restored: Vec<NotRestoredView>,
    nothing_to_revert: bool,
    /// The journal was from an earlier boot and was removed without acting on it (only
    /// then present: the document is otherwise as it always was).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    previous_boot: bool,
    restored: usize,
    schema: crate::Schema,
}

#[derive(serde::Serialize)]
struct NotRestoredView {
    reason: String,
    what: String,
}

impl crate::Document for RevertDoc {
    const SCHEMA: crate::Schema = crate::schema!(Number "tame.revert", 1);
}

impl From<&RevertReport> for RevertDoc {
    fn from(r: &RevertReport) -> Self {
        RevertDoc {
            entries: r.entries,
            journal_removed: r.journal_removed,
            not_restored: r
                .not_restored
                .iter()
                .map(|n| NotRestoredView {
                    reason: n.reason.clone(),
                    what: n.what.clone(),
                })
                .collect(),
            nothing_to_revert: r.nothing_to_revert,
            previous_boot: r.previous_boot,
            restored: r.restored,
            schema: <Self as crate::Document>::SCHEMA,
        }
    }
}

/// Undo every change in the journal in `dir`, newest first. The journal is removed
/// only when every change is undone; otherwise it stays, and revert can be run again.
/// Revert holds the directory's lock (another holder is [`JournalError::Locked`]),
/// except when the calling thread holds it already through an open [`Journal`].
pub fn revert(root: &Root, dir: &Path) -> Result<RevertReport, JournalError> {
    let Some(jdir) = JournalDir::open(dir, false)? else {
        return Ok(RevertReport {
            nothing_to_revert: true,
            ..Default::default()
        });
    };
    if lock::held_by_this_thread(jdir.id()) {
        return revert_in(root, &jdir);
    }
    let lock = JournalLock::acquire_in(jdir)?;
    revert_in(root, lock.dir())
}

/// Revert the journal of `dir`, whose lock the caller holds.
fn revert_in(root: &Root, dir: &JournalDir) -> Result<RevertReport, JournalError> {
    let path = journal_path(dir.path());
    let Some(rec) = load_in(dir)? else {
        return Ok(RevertReport {
            nothing_to_revert: true,
            ..Default::default()
        });
    };
    check_root(&path, &rec, root)?;
    let mut report = RevertReport {
        entries: rec.entries.len(),
        ..Default::default()
    };
    // A reboot undid it, and its task ids name other tasks now: removed, nothing undone.
    report.previous_boot = rec.from_previous_boot(root);
    if !report.previous_boot {
        undo_all(root, &rec, &mut report);
    }
    if report.not_restored.is_empty() {
        dir.remove(JOURNAL_FILE)
            .and_then(|()| dir.sync())
            .map_err(|source| JournalError::Io {
                action: "remove",
                path: path.clone(),
                source,
            })?;
        report.journal_removed = true;
    }
    Ok(report)
}

/// Undo every change of `rec`, newest first, into `report`.
fn undo_all(root: &Root, rec: &Recorded, report: &mut RevertReport) {
    let created: Vec<&str> = rec
        .entries
        .iter()
        .filter(|e| !matches!(e.outcome, Outcome::Failed(_)))
        .filter_map(|e| match &e.change {
            Change::CreateDir { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let inside_created = |p: &str| {
        created
            .iter()
            .any(|d| Path::new(p).starts_with(d) && Path::new(p) != Path::new(d))
    };
    let mut order: Vec<&Entry> = rec.entries.iter().collect();
    order.sort_by_key(|e| std::cmp::Reverse(e.seq));
    for entry in order {
        if !was_made(root, entry) {
            report.not_made += 1;
            continue;
        }
        match undo(root, &entry.change, &inside_created) {
            Ok(true) => report.restored += 1,
            Ok(false) => {}
            Err(reason) => report.not_restored.push(NotRestored {
                seq: entry.seq,
                what: describe(&entry.change),
                reason,
            }),
        }
    }
}

/// Whether revert should undo `entry`: what was done (`done`), or may have been
/// (`pending`: killed between the record and its outcome; undoing a change never
/// made finds the old value in place), never what failed. Two changes are made in
/// steps and may fail half-way: a placement (cgroup, affinity, policy — undone
/// part by part, each only where it differs from the old value) and an ownership
/// (chown, then chmod — undone when the chown took).
fn was_made(root: &Root, entry: &Entry) -> bool {
    match (&entry.outcome, &entry.change) {
        (Outcome::Done | Outcome::Pending, _) => true,
        (Outcome::Failed(_), Change::Placement { .. }) => true,
        (Outcome::Failed(_), Change::Owner { path, new, .. }) => root
            .ownership(path)
            .is_ok_and(|now| (now.uid, now.gid) == (new.uid, new.gid)),
        (Outcome::Failed(_), _) => false,
    }
}

fn describe(change: &Change) -> String {
    match change {
        Change::Write { path, old, .. } => match old {
            Some(old) => format!("{path} (to {:?})", String::from_utf8_lossy(old)),
            None => format!("{path} (to be removed; it did not exist)"),
        },
        Change::CreateDir { path, .. } => format!("{path} (directory to be removed)"),
        Change::MoveTask { tid, from, .. } => format!("task {tid} (back to {from})"),
        Change::Owner { path, old, .. } => {
            format!("{path} (owner back to {})", ownership_field(old))
        }
        Change::Placement { pid, tid, old, .. } => format!(
            "thread {tid} of process {pid} (back to {})",
            crate::placement::describe(old)
        ),
        Change::Install { path, .. } => format!("{path} (installed file to be removed)"),
        Change::Link { path, .. } => format!("{path} (link to be removed)"),
    }
}

/// Undo one change. Ok(true): something was written; Ok(false): it already was as before.
fn undo(
    root: &Root,
    change: &Change,
    inside_created: &dyn Fn(&str) -> bool,
) -> Result<bool, String> {
    match change {
        Change::Write {
            path,
            old,
            restore_with,
            ..
        } => match old {
            None => match root.remove_file(path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(format!("cannot remove: {e}")),
            },
            // The directory goes away as a whole; its kernel files cannot be emptied one by one.
            Some(_) if inside_created(path) => Ok(false),
            Some(old) => {
                let current = root
                    .read_raw(path)
                    .map_err(|e| format!("cannot read: {e}"))?;
                if &current == old {
                    return Ok(false);
                }
                // Some kernel files print one thing and take another (cgroup.subtree_control).
                let value = restore_with.as_ref().unwrap_or(old);
                root.write(path, value)
                    .map_err(|e| format!("cannot write: {e}"))?;
                let back = root
                    .read_raw(path)
                    .map_err(|e| format!("cannot read: {e}"))?;
                if &back != old {
                    return Err(format!(
                        "wrote it, but it reads back {:?}",
                        String::from_utf8_lossy(&back)
                    ));
                }
                Ok(true)
            }
        },
        Change::MoveTask { tid, from, to } => {
            if !task_listed(root, *tid, to) {
                // Never attached, already back, or gone.
                return Ok(false);
            }
            match attach_task(root, *tid, from) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(libc_esrch()) => Ok(false),
                Err(e) => Err(format!("cannot attach to {from}: {e}")),
            }
        }
        Change::CreateDir { path, members } => remove_dir(root, path, members.as_ref()),
        // The directory goes away as a whole.
        Change::Owner { path, .. } if inside_created(path) => Ok(false),
        Change::Owner { path, old, .. } => match root.ownership(path) {
            Ok(now) if now == *old => Ok(false),
            Ok(_) => root
                .set_ownership(path, *old)
                .map(|()| true)
                .map_err(|e| format!("cannot restore owner and mode: {e}")),
            Err(e) => Err(format!("cannot read owner and mode: {e}")),
        },
        Change::Placement { pid, tid, old, .. } => undo_placement(root, *pid, *tid, old),
        Change::Install { path, content, .. } => remove_installed(root, path, content),
        Change::Link { path, target } => match root.read_link(path) {
            Ok(now) if now.as_os_str().as_encoded_bytes() == target.as_bytes() => root
                .remove_file(path)
                .map(|()| true)
                .map_err(|e| format!("cannot remove: {e}")),
            Ok(now) => Err(format!(
                "it points at {} now, not at {target}: left in place",
                now.display()
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(_) => Err("it is no longer a symbolic link: left in place".to_string()),
        },
    }
}

/// Remove a file tame installed, only while it holds what tame wrote: a file someone
/// changed since is theirs now.
fn remove_installed(root: &Root, path: &str, content: &[u8]) -> Result<bool, String> {
    if root.read_link(path).is_ok() {
        return Err("it is a symbolic link now, not the file tame wrote: left in place".into());
    }
    match root.read_raw(path) {
        Ok(now) if now == content => root
            .remove_file(path)
            .map(|()| true)
            .map_err(|e| format!("cannot remove: {e}")),
        Ok(_) => Err(
            "it was changed since tame wrote it: left in place (remove it yourself if the change is not wanted)"
                .into(),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("cannot read: {e}")),
    }
}

fn first_step(p: &ThreadPlacement) -> PlaceStep {
    if p.cgroup.is_some() {
        PlaceStep::Cgroup
    } else if p.affinity.is_some() {
        PlaceStep::Affinity
    } else {
        PlaceStep::Sched
    }
}

/// Make a placement: cgroup first (joining a cpuset resets the affinity), then
/// affinity, then policy.
fn make_placement(root: &Root, tid: u32, new: &ThreadPlacement) -> Result<(), PlaceError> {
    let err = |step| move |source| PlaceError { tid, step, source };
    if let Some(list) = &new.cgroup {
        attach_task(root, tid, list).map_err(err(PlaceStep::Cgroup))?;
    }
    if let Some(cpus) = &new.affinity {
        root.set_affinity(tid, cpus)
            .map_err(err(PlaceStep::Affinity))?;
    }
    if let Some(sched) = &new.sched {
        root.set_thread_sched(tid, sched)
            .map_err(err(PlaceStep::Sched))?;
    }
    Ok(())
}

/// Give a thread its old placement back: policy first (so a real-time thread never
/// runs on the system CPUs at its real-time priority), then cgroup, then affinity.
/// A thread that is gone needs nothing.
fn undo_placement(root: &Root, pid: u32, tid: u32, old: &ThreadPlacement) -> Result<bool, String> {
    if !root.process(pid).task(tid).exists() {
        return Ok(false);
    }
    let gone = |e: &io::Error| e.raw_os_error() == Some(libc_esrch());
    let mut wrote = false;
    let mut problems = Vec::new();
    if let Some(sched) = &old.sched {
        if root.thread_sched(tid).ok().as_ref() != Some(sched) {
            match root.set_thread_sched(tid, sched) {
                Ok(()) => wrote = true,
                Err(e) if gone(&e) => return Ok(wrote),
                Err(e) => problems.push(format!("policy: {e}")),
            }
        }
    }
    if let Some(list) = &old.cgroup {
        if !task_listed(root, tid, list) {
            match attach_task(root, tid, list) {
                Ok(()) => wrote = true,
                Err(e) if gone(&e) => return Ok(wrote),
                Err(e) => problems.push(format!("cgroup {list}: {e}")),
            }
        }
    }
    if let Some(cpus) = &old.affinity {
        if root.affinity(tid).ok().as_ref() != Some(cpus) {
            match root.set_affinity(tid, cpus) {
                Ok(()) => wrote = true,
                Err(e) if gone(&e) => return Ok(wrote),
                Err(e) => problems.push(format!("affinity {cpus}: {e}")),
            }
        }
    }
    if problems.is_empty() {
        Ok(wrote)
    } else {
        Err(problems.join("; "))
    }
}

fn libc_esrch() -> i32 {
    nix::errno::Errno::ESRCH as i32
}

fn task_listed(root: &Root, tid: u32, list: &str) -> bool {
    read_ids(root, list).contains(&tid)
}

fn read_ids(root: &Root, list: &str) -> BTreeSet<u32> {
    root.read_raw(list)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Attach task `tid` to the cgroup task list `to`: one write, which the kernel
/// (or a fixture backend) turns into a move out of the list that had it.
fn attach_task(root: &Root, tid: u32, to: &str) -> io::Result<()> {
    root.write(to, tid.to_string().as_bytes())
}

fn remove_dir(root: &Root, path: &str, members: Option<&(String, String)>) -> Result<bool, String> {
    if !root.exists(path) {
        return Ok(false);
    }
    // Tasks forked inside the cgroup since apply keep it busy; hand them to the parent,
    // a few times over, since they may keep forking while we do.
    for _ in 0..5 {
        if let Some((list, parent)) = members {
            for tid in read_ids(root, list) {
                match attach_task(root, tid, parent) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc_esrch()) => {}
                    Err(e) => return Err(format!("cannot hand task {tid} to {parent}: {e}")),
                }
            }
        }
        match root.remove_dir(path) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EBUSY as i32) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(format!("cannot remove the directory: {e}")),
        }
    }
    Err("cannot remove the directory: still busy (tasks keep arriving)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_revert_document_is_written_as_before() {
        // As the CLI wrote it with `json!` (keys in name order), byte for byte.
        let report = RevertReport {
            entries: 3,
            restored: 2,
            not_restored: vec![NotRestored {
                seq: 2,
                what: "/proc/irq/24/smp_affinity_list".into(),
                reason: "EIO".into(),
            }],
            ..Default::default()
        };
        let before = serde_json::json!({
            "schema": 1,
            "entries": 3,
            "restored": 2,
            "not_restored": [{"what": "/proc/irq/24/smp_affinity_list", "reason": "EIO"}],
            "journal_removed": false,
            "nothing_to_revert": false,
        });
        assert_eq!(
            serde_json::to_string_pretty(&RevertDoc::from(&report)).unwrap(),
            serde_json::to_string_pretty(&before).unwrap()
        );
    }

    #[test]
    fn escape_round_trips_any_bytes() {
        for bytes in [&b""[..], b"0-1\n", b"a b%c", &[0, 255, 10, 32]] {
            assert_eq!(unescape(&escape(bytes)).unwrap(), bytes);
            assert!(!escape(bytes).contains(' '));
        }
        assert_eq!(escape(b"0-1\n"), "0-1%0A");
        assert!(unescape("%G1").is_none());
    }

    #[test]
    fn corrupt_lines_are_reported_with_their_line_number() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            journal_path(dir.path()),
            "tame-journal 1 /\nwrite x /a =1 =2\n",
        )
        .unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(err.to_string().contains(":2:"), "{err}");
    }

    #[test]
    fn placement_records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let sched = tame_rt::sched::ThreadSched {
            policy: 1,
            priority: 5,
            nice: 0,
            reset_on_fork: false,
            dl_runtime_ns: 0,
            dl_deadline_ns: 0,
            dl_period_ns: 0,
        };
        let change = Change::Placement {
            pid: 7,
            tid: 8,
            old: ThreadPlacement {
                affinity: Some(CpuList::parse("0-3").unwrap()),
                sched: Some(sched),
                cgroup: Some("/sys/fs/cgroup/cpuset/a b/tasks".into()),
            },
            new: ThreadPlacement {
                affinity: Some(CpuList::parse("3").unwrap()),
                ..Default::default()
            },
        };
        let text = format!("tame-journal 1 /\n{}", format_change(0, &change));
        std::fs::write(journal_path(dir.path()), text).unwrap();
        let rec = load(dir.path()).unwrap().unwrap();
        assert_eq!(rec.entries[0].change, change);
        std::fs::write(
            journal_path(dir.path()),
            "tame-journal 1 /\nplace 0 7 8 =x - - - - -\n",
        )
        .unwrap();
        assert!(load(dir.path())
            .unwrap_err()
            .to_string()
            .contains("bad affinity"));
    }
}
