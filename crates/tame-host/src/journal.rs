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
//! - `done SEQ` / `failed SEQ REASON` — the outcome, for status (not synced: revert never needs it).
//!
//! Under a fixture root (not `/`) the files are plain files, so attaching a task
//! is done the way the kernel shows it: its id moves from one `tasks` list to another.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::Root;

/// Where journals live unless the caller says otherwise.
pub const DEFAULT_JOURNAL_DIR: &str = "/var/lib/tame";
/// The journal's file name inside its directory.
pub const JOURNAL_FILE: &str = "journal";
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
}

/// Owner, group and permission bits of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
}

impl Ownership {
    pub fn of(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(path)?;
        Ok(Self {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
        })
    }

    fn apply(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(self.uid)),
            Some(nix::unistd::Gid::from_raw(self.gid)),
        )
        .map_err(io::Error::from)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(self.mode))
    }

    fn field(&self) -> String {
        format!("{}:{}:{:o}", self.uid, self.gid, self.mode)
    }

    fn parse(field: &str) -> Option<Self> {
        let mut it = field.split(':');
        let o = Self {
            uid: it.next()?.parse().ok()?,
            gid: it.next()?.parse().ok()?,
            mode: u32::from_str_radix(it.next()?, 8).ok()?,
        };
        it.next().is_none().then_some(o)
    }
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

/// An open journal: changes go through it.
pub struct Journal {
    root: Root,
    path: PathBuf,
    file: File,
    next_seq: u64,
    hook: Option<StageHook>,
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
    /// Open the journal in `dir` for appending, creating it (and `dir`) when absent.
    /// An existing journal must have been written for the same root.
    pub fn open(root: &Root, dir: &Path) -> Result<Self, JournalError> {
        let path = journal_path(dir);
        let io_err = |action, source| JournalError::Io {
            action,
            path: path.clone(),
            source,
        };
        // A journal torn while its header was written holds no change: start it afresh.
        let existing = load(dir)?.filter(|rec| !rec.root.is_empty());
        let next_seq = match &existing {
            Some(rec) => {
                check_root(&path, rec, root)?;
                rec.entries.iter().map(|e| e.seq + 1).max().unwrap_or(0)
            }
            None => 0,
        };
        std::fs::create_dir_all(dir).map_err(|e| io_err("create the directory of", e))?;
        if existing.is_none() {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err("replace", e)),
                _ => {}
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_err("open", e))?;
        let mut journal = Self {
            root: root.clone(),
            path: path.clone(),
            file,
            next_seq,
            hook: None,
        };
        if existing.is_none() {
            let base = root.base().to_string_lossy().into_owned();
            journal.append_synced(&[format!(
                "{HEADER} {FORMAT_VERSION} {}\n",
                escape(base.as_bytes())
            )])?;
            // The new directory entry must be durable too, or a crash could lose the file.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("sync the directory of", e))?;
        }
        Ok(journal)
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
        let mut lines = Vec::with_capacity(requests.len());
        let first = self.next_seq;
        for (i, req) in requests.iter().enumerate() {
            let old = match std::fs::read(self.root.path(&req.path)) {
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
        let mut results = Vec::with_capacity(requests.len());
        let mut outcomes = Vec::with_capacity(requests.len());
        for (i, req) in requests.iter().enumerate() {
            let seq = first + i as u64;
            let result = self
                .stage(Stage::Journaled(seq))
                .and_then(|()| std::fs::write(self.root.path(&req.path), &req.new));
            let _ = self.stage(Stage::Made(seq));
            outcomes.push(outcome_line(seq, &result));
            results.push(result);
        }
        self.append(&outcomes)?;
        Ok(results)
    }

    /// Create a directory, journaled. `members` names a cgroup's task list and its
    /// parent's, so revert can hand back tasks that arrived after apply before removing it.
    pub fn create_dir(
        &mut self,
        path: &str,
        members: Option<(&str, &str)>,
    ) -> Result<io::Result<()>, JournalError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let change = Change::CreateDir {
            path: path.to_string(),
            members: members.map(|(a, b)| (a.to_string(), b.to_string())),
        };
        self.append_synced(&[format_change(seq, &change)])?;
        let result = self
            .stage(Stage::Journaled(seq))
            .and_then(|()| std::fs::create_dir(self.root.path(path)))
            .and_then(|()| match members {
                // A new cgroup comes with its (empty) task list; a fixture's must be made.
                Some((list, _)) if !self.root.is_system() => {
                    std::fs::write(self.root.path(list), "")
                }
                _ => Ok(()),
            });
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
                .and_then(|()| attach_task(&self.root, tid, from, to));
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
        let full = self.root.path(path);
        let old = Ownership::of(&full).map_err(|source| JournalError::Io {
            action: "read the previous owner for",
            path: full.clone(),
            source,
        })?;
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
            .and_then(|()| new.apply(&full));
        let _ = self.stage(Stage::Made(seq));
        self.append(&[outcome_line(seq, &result)])?;
        Ok(result)
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
            old.field(),
            new.field()
        ),
    }
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
pub fn load(dir: &Path) -> Result<Option<Recorded>, JournalError> {
    let path = journal_path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(JournalError::Io {
                action: "read",
                path,
                source,
            })
        }
    };
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
                path: text_field(2)?,
                old: value(3)?,
                new: value(4)?.ok_or_else(|| corrupt("missing new value"))?,
                restore_with: value(5)?,
            },
            "mkdir" => Change::CreateDir {
                path: text_field(2)?,
                members: match fields.len() {
                    3 => None,
                    5 => Some((text_field(3)?, text_field(4)?)),
                    _ => return Err(corrupt("mkdir takes a path and optionally two task lists")),
                },
            },
            "move" => Change::MoveTask {
                tid: fields
                    .get(2)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| corrupt("bad task id"))?,
                from: text_field(3)?,
                to: text_field(4)?,
            },
            "owner" => {
                let own = |i: usize| {
                    fields
                        .get(i)
                        .and_then(|f| Ownership::parse(f))
                        .ok_or_else(|| corrupt("ownership must be UID:GID:MODE"))
                };
                Change::Owner {
                    path: text_field(2)?,
                    old: own(3)?,
                    new: own(4)?,
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
}

/// Undo every change in the journal in `dir`, newest first. The journal is removed
/// only when every change is undone; otherwise it stays, and revert can be run again.
pub fn revert(root: &Root, dir: &Path) -> Result<RevertReport, JournalError> {
    let path = journal_path(dir);
    let Some(rec) = load(dir)? else {
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
    let created: Vec<&str> = rec
        .entries
        .iter()
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
        match undo(root, &entry.change, &inside_created) {
            Ok(true) => report.restored += 1,
            Ok(false) => {}
            Err(reason) => report.not_restored.push(NotRestored {
                what: describe(&entry.change),
                reason,
            }),
        }
    }
    if report.not_restored.is_empty() {
        std::fs::remove_file(&path).map_err(|source| JournalError::Io {
            action: "remove",
            path: path.clone(),
            source,
        })?;
        report.journal_removed = true;
    }
    Ok(report)
}

fn describe(change: &Change) -> String {
    match change {
        Change::Write { path, old, .. } => match old {
            Some(old) => format!("{path} (to {:?})", String::from_utf8_lossy(old)),
            None => format!("{path} (to be removed; it did not exist)"),
        },
        Change::CreateDir { path, .. } => format!("{path} (directory to be removed)"),
        Change::MoveTask { tid, from, .. } => format!("task {tid} (back to {from})"),
        Change::Owner { path, old, .. } => format!("{path} (owner back to {})", old.field()),
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
        } => {
            let full = root.path(path);
            match old {
                None => match std::fs::remove_file(&full) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                    Err(e) => Err(format!("cannot remove: {e}")),
                },
                // The directory goes away as a whole; its kernel files cannot be emptied one by one.
                Some(_) if inside_created(path) => Ok(false),
                Some(old) => {
                    let current = std::fs::read(&full).map_err(|e| format!("cannot read: {e}"))?;
                    if &current == old {
                        return Ok(false);
                    }
                    // A fixture's files are plain: the old bytes themselves restore them.
                    let value = match restore_with {
                        Some(r) if root.is_system() => r,
                        _ => old,
                    };
                    std::fs::write(&full, value).map_err(|e| format!("cannot write: {e}"))?;
                    let back = std::fs::read(&full).map_err(|e| format!("cannot read: {e}"))?;
                    if &back != old {
                        return Err(format!(
                            "wrote it, but it reads back {:?}",
                            String::from_utf8_lossy(&back)
                        ));
                    }
                    Ok(true)
                }
            }
        }
        Change::MoveTask { tid, from, to } => {
            if !task_listed(root, *tid, to) {
                // Never attached, already back, or gone.
                return Ok(false);
            }
            match attach_task(root, *tid, to, from) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(libc_esrch()) => Ok(false),
                Err(e) => Err(format!("cannot attach to {from}: {e}")),
            }
        }
        Change::CreateDir { path, members } => remove_dir(root, path, members.as_ref()),
        // The directory goes away as a whole.
        Change::Owner { path, .. } if inside_created(path) => Ok(false),
        Change::Owner { path, old, .. } => {
            let full = root.path(path);
            match Ownership::of(&full) {
                Ok(now) if now == *old => Ok(false),
                Ok(_) => old
                    .apply(&full)
                    .map(|()| true)
                    .map_err(|e| format!("cannot restore owner and mode: {e}")),
                Err(e) => Err(format!("cannot read owner and mode: {e}")),
            }
        }
    }
}

fn libc_esrch() -> i32 {
    nix::errno::Errno::ESRCH as i32
}

fn task_listed(root: &Root, tid: u32, list: &str) -> bool {
    read_ids(root, list).contains(&tid)
}

fn read_ids(root: &Root, list: &str) -> BTreeSet<u32> {
    std::fs::read_to_string(root.path(list))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Attach task `tid` to the cgroup task list `to`. On the live system that is one write;
/// in a fixture tree the id moves from the list `from` to `to`, as the kernel would show it.
fn attach_task(root: &Root, tid: u32, from: &str, to: &str) -> io::Result<()> {
    if root.is_system() {
        return std::fs::write(root.path(to), tid.to_string());
    }
    let mut src = read_ids(root, from);
    if !src.remove(&tid) {
        return Err(io::Error::from_raw_os_error(libc_esrch()));
    }
    let mut dst = read_ids(root, to);
    dst.insert(tid);
    write_ids(root, from, &src)?;
    write_ids(root, to, &dst)
}

fn write_ids(root: &Root, list: &str, ids: &BTreeSet<u32>) -> io::Result<()> {
    let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
    std::fs::write(root.path(list), text)
}

fn remove_dir(root: &Root, path: &str, members: Option<&(String, String)>) -> Result<bool, String> {
    let full = root.path(path);
    if !full.exists() {
        return Ok(false);
    }
    // Tasks forked inside the cgroup since apply keep it busy; hand them to the parent,
    // a few times over, since they may keep forking while we do.
    for _ in 0..5 {
        if let Some((list, parent)) = members {
            for tid in read_ids(root, list) {
                match attach_task(root, tid, list, parent) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc_esrch()) => {}
                    Err(e) => return Err(format!("cannot hand task {tid} to {parent}: {e}")),
                }
            }
            if !root.is_system() {
                // A fixture's task list is a plain file that apply created.
                let _ = std::fs::remove_file(root.path(list));
            }
        }
        match std::fs::remove_dir(&full) {
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

    fn fixture() -> (tempfile::TempDir, Root, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().join("root"));
        let w = |p: &str, s: &str| {
            let path = root.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w("/proc/irq/24/smp_affinity_list", "0-1\n");
        w("/sys/fs/cgroup/cpuset/tasks", "1\n2\n30\n");
        w("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n");
        let jdir = dir.path().join("journal");
        (dir, root, jdir)
    }

    fn snapshot(root: &Root) -> crate::testing::TreeSnapshot {
        crate::testing::snapshot_tree(root.base())
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
    fn journal_records_old_and_new_and_revert_restores_bytes() {
        let (_d, root, jdir) = fixture();
        let before = snapshot(&root);
        let mut j = Journal::open(&root, &jdir).unwrap();
        j.note("spec", b"[[partition]]\nname = \"x\"\n").unwrap();
        j.create_dir(
            "/sys/fs/cgroup/cpuset/tame-sys",
            Some((
                "/sys/fs/cgroup/cpuset/tame-sys/tasks",
                "/sys/fs/cgroup/cpuset/tasks",
            )),
        )
        .unwrap()
        .unwrap();
        let results = j
            .write_batch(&[
                WriteRequest::new("/proc/irq/24/smp_affinity_list", "0"),
                WriteRequest::new("/sys/fs/cgroup/cpuset/tame-sys/cpuset.cpus", "0"),
                WriteRequest::new("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "0"),
            ])
            .unwrap();
        assert!(results.iter().all(|r| r.is_ok()));
        let moved = j
            .move_tasks(
                &[2, 30],
                "/sys/fs/cgroup/cpuset/tasks",
                "/sys/fs/cgroup/cpuset/tame-sys/tasks",
            )
            .unwrap();
        assert!(moved.iter().all(|r| r.is_ok()));
        assert_eq!(
            root.read("/sys/fs/cgroup/cpuset/tasks").unwrap(),
            "1\n",
            "fixture attach moves the id"
        );

        let rec = load(&jdir).unwrap().unwrap();
        assert_eq!(rec.entries.len(), 6);
        assert!(rec.entries.iter().all(|e| e.outcome == Outcome::Done));
        assert_eq!(rec.note("spec").unwrap(), b"[[partition]]\nname = \"x\"\n");
        assert_eq!(
            rec.entries[1].change,
            Change::Write {
                path: "/proc/irq/24/smp_affinity_list".into(),
                old: Some(b"0-1\n".to_vec()),
                new: b"0".to_vec(),
                restore_with: None
            }
        );
        assert!(matches!(
            &rec.entries[2].change,
            Change::Write { old: None, .. }
        ));

        let report = revert(&root, &jdir).unwrap();
        assert!(report.not_restored.is_empty(), "{report:?}");
        assert!(report.journal_removed);
        assert!(!journal_path(&jdir).exists());
        assert_eq!(snapshot(&root), before);
        // A second revert finds nothing to do.
        assert!(revert(&root, &jdir).unwrap().nothing_to_revert);
    }

    #[test]
    fn a_pending_entry_whose_write_never_happened_reverts_cleanly() {
        let (_d, root, jdir) = fixture();
        let before = snapshot(&root);
        let mut j = Journal::open(&root, &jdir).unwrap();
        j.write(
            "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
            b"0",
            None,
        )
        .unwrap()
        .unwrap();
        drop(j);
        // Simulate a kill right after the sync: a journaled write line with no outcome and
        // no change made, followed by a torn line.
        let mut text = std::fs::read_to_string(journal_path(&jdir)).unwrap();
        text.push_str("write 1 /proc/irq/24/smp_affinity_list =0-1%0A =0\nwrite 2 /proc/irq");
        std::fs::write(journal_path(&jdir), text).unwrap();
        let rec = load(&jdir).unwrap().unwrap();
        assert_eq!(rec.entries.len(), 2);
        assert_eq!(rec.entries[1].outcome, Outcome::Pending);
        let report = revert(&root, &jdir).unwrap();
        assert!(report.journal_removed, "{report:?}");
        assert_eq!(report.restored, 1);
        assert_eq!(snapshot(&root), before);
    }

    #[test]
    fn revert_keeps_the_journal_and_says_why_when_a_value_cannot_be_restored() {
        let (_d, root, jdir) = fixture();
        let mut j = Journal::open(&root, &jdir).unwrap();
        j.write("/proc/irq/24/smp_affinity_list", b"0", None)
            .unwrap()
            .unwrap();
        drop(j);
        // The file's directory became a file: writing it back fails.
        std::fs::remove_dir_all(root.path("/proc/irq/24")).unwrap();
        std::fs::write(root.path("/proc/irq/24"), "").unwrap();
        let report = revert(&root, &jdir).unwrap();
        assert_eq!(report.not_restored.len(), 1);
        assert!(report.not_restored[0]
            .what
            .contains("/proc/irq/24/smp_affinity_list"));
        assert!(report.not_restored[0].reason.contains("cannot"));
        assert!(!report.journal_removed);
        assert!(journal_path(&jdir).exists());
    }

    #[test]
    fn a_journal_for_another_root_is_refused() {
        let (_d, root, jdir) = fixture();
        Journal::open(&root, &jdir).unwrap();
        let other = Root::new("/elsewhere");
        assert!(matches!(
            Journal::open(&other, &jdir),
            Err(JournalError::OtherRoot { .. })
        ));
        assert!(matches!(
            revert(&other, &jdir),
            Err(JournalError::OtherRoot { .. })
        ));
    }

    #[test]
    fn stage_hook_sees_every_change_before_and_after() {
        let (_d, root, jdir) = fixture();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut j = Journal::open(&root, &jdir).unwrap();
        let s = seen.clone();
        j.set_stage_hook(move |st| {
            s.borrow_mut().push(st);
            match st {
                Stage::Journaled(1) => {
                    Err(io::Error::from_raw_os_error(nix::errno::Errno::EIO as i32))
                }
                _ => Ok(()),
            }
        });
        j.write("/proc/irq/24/smp_affinity_list", b"1", None)
            .unwrap()
            .unwrap();
        let refused = j
            .write("/proc/irq/24/smp_affinity_list", b"0", None)
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(nix::errno::Errno::EIO as i32));
        assert_eq!(root.read("/proc/irq/24/smp_affinity_list").unwrap(), "1");
        assert_eq!(
            *seen.borrow(),
            vec![
                Stage::Journaled(0),
                Stage::Made(0),
                Stage::Journaled(1),
                Stage::Made(1)
            ]
        );
        let rec = load(&jdir).unwrap().unwrap();
        assert!(matches!(rec.entries[1].outcome, Outcome::Failed(_)));
    }

    #[test]
    fn ownership_is_journaled_and_restored() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_d, root, jdir) = fixture();
        let path = "/sys/fs/cgroup/cpuset/tasks";
        let full = root.path(path);
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o644)).unwrap();
        let before = Ownership::of(&full).unwrap();
        let mut j = Journal::open(&root, &jdir).unwrap();
        // Our own uid and gid: allowed without privileges.
        let new = Ownership {
            mode: 0o664,
            ..before
        };
        j.set_owner(path, new).unwrap().unwrap();
        assert_eq!(Ownership::of(&full).unwrap().mode, 0o664);
        let rec = load(&jdir).unwrap().unwrap();
        assert_eq!(
            rec.entries[0].change,
            Change::Owner {
                path: path.into(),
                old: before,
                new
            }
        );
        let report = revert(&root, &jdir).unwrap();
        assert!(report.journal_removed, "{report:?}");
        assert_eq!(Ownership::of(&full).unwrap(), before);
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
}
