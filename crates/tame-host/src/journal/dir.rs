//! The journal directory, held open: its files are opened relative to it (so
//! the directory cannot be swapped under us between a check and a use), never
//! through a symbolic link, and only when the directory and the file belong to
//! root (or the caller) and nobody else may write them. `--journal-dir` takes any
//! path, and revert does as root what the journal says: a journal someone else
//! could write is refused.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{fstat, fstatat, Mode};

use super::JournalError;

/// A journal directory, open and checked.
#[derive(Debug)]
pub(crate) struct JournalDir {
    path: PathBuf,
    fd: OwnedFd,
    id: (u64, u64),
}

/// Who may own a journal directory or file: root, or the caller (a fixture tree).
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

fn unsafe_location(path: &Path, reason: String) -> JournalError {
    JournalError::UnsafeLocation {
        path: path.to_path_buf(),
        reason,
    }
}

/// Refuse a directory or file that someone other than root (or the caller) owns or may write.
fn check_owner_and_mode(
    path: &Path,
    what: &str,
    st: &nix::sys::stat::FileStat,
) -> Result<(), JournalError> {
    let mode = st.st_mode & 0o7777;
    if !trusted_owner(st.st_uid) {
        return Err(unsafe_location(
            path,
            format!("the {what} belongs to uid {}, not to root", st.st_uid),
        ));
    }
    if mode & 0o022 != 0 {
        return Err(unsafe_location(
            path,
            format!("the {what} has mode {mode:o}: group or others may write it"),
        ));
    }
    Ok(())
}

/// Why `path`, which could not be opened as a directory without following a link, is
/// refused: a symbolic link (naming where it leads), or something else.
fn not_a_directory(path: &Path) -> JournalError {
    match std::fs::read_link(path) {
        Ok(target) => unsafe_location(
            path,
            format!(
                "it is a symbolic link to {}, which anyone who may change the link could repoint — give the real directory",
                target.display()
            ),
        ),
        Err(_) => unsafe_location(path, "it is not a directory".into()),
    }
}

/// Refuse a journal directory whose parents someone else may write: they could rename
/// it (and the journal with it) away, so that revert finds nothing while the partition
/// stays applied, or put another in its place. Each parent must be root's (or the
/// caller's) and writable by nobody else — or sticky (/tmp), where others may not rename
/// what is not theirs, holding an entry root (or the caller) owns. Checked as named and
/// as resolved, so a link among the parents is judged by the directories it leads to too.
fn check_parents(path: &Path) -> Result<(), JournalError> {
    let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let resolved = std::fs::canonicalize(&named).unwrap_or_else(|_| named.clone());
    for full in [&named, &resolved] {
        let mut child = full.as_path();
        while let Some(parent) = child.parent() {
            let Ok(p) = nix::sys::stat::stat(parent) else {
                break;
            };
            let mode = p.st_mode & 0o7777;
            let others_write = mode & 0o022 != 0;
            let sticky = mode & nix::libc::S_ISVTX != 0;
            let child_owner = nix::sys::stat::lstat(child).map(|c| c.st_uid).ok();
            let why = if !trusted_owner(p.st_uid) {
                Some(format!("belongs to uid {}, not to root", p.st_uid))
            } else if others_write && !(sticky && child_owner.is_some_and(trusted_owner)) {
                Some(format!("has mode {mode:o}: group or others may write it"))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(unsafe_location(
                    path,
                    format!(
                        "its parent {} {why}, so they could rename the journal away (and revert would find nothing) — give a directory whose parents only root may write, such as the default",
                        parent.display()
                    ),
                ));
            }
            child = parent;
        }
    }
    Ok(())
}

/// Open `path` relative to `dir` (or as given when `dir` is `None`) without following a
/// final symbolic link, close-on-exec (a child must not inherit the journal, nor its lock).
fn open_at(dir: Option<RawFd>, path: &Path, flags: OFlag, mode: u32) -> nix::Result<OwnedFd> {
    let raw = nix::fcntl::openat(
        dir,
        path,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )?;
    // SAFETY: openat just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

impl JournalDir {
    /// Open the journal directory `path`, creating it when `create` (mode 0700; missing
    /// parents get the usual mode, since others may share them: `/run/tame` holds the
    /// `tame serve` socket); `Ok(None)` when it is absent and not to be created.
    pub(crate) fn open(path: &Path, create: bool) -> Result<Option<Self>, JournalError> {
        // `dir/` would follow a symbolic link `dir` despite O_NOFOLLOW: drop the slash.
        let path: &Path = &path.components().collect::<PathBuf>();
        let io_err = |action, source| JournalError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        if create {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| io_err("create the parent directories of", e))?;
            }
            // 0711: others may not list it nor read the journal (0600), but may open a
            // file published on purpose, such as the applied spec `tame run -p` reads.
            match std::fs::DirBuilder::new().mode(0o711).create(path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(io_err("create the directory of", e))
                }
                _ => {}
            }
        }
        let fd = match open_at(None, path, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if !create => return Ok(None),
            // O_DIRECTORY with O_NOFOLLOW answers ENOTDIR for a link: tell the two apart,
            // so the user learns which directory to give.
            Err(Errno::ELOOP | Errno::ENOTDIR) => return Err(not_a_directory(path)),
            Err(e) => return Err(io_err("open the directory of", e.into())),
        };
        let st = fstat(fd.as_raw_fd()).map_err(|e| io_err("inspect the directory of", e.into()))?;
        check_owner_and_mode(path, "directory", &st)?;
        check_parents(path)?;
        Ok(Some(Self {
            path: path.to_path_buf(),
            fd,
            id: (st.st_dev, st.st_ino),
        }))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Device and inode: which directory this is, however it was named.
    pub(crate) fn id(&self) -> (u64, u64) {
        self.id
    }

    /// Open the file `name` in this directory with `flags` (creating it with mode 0600
    /// when `O_CREAT` is among them); `Ok(None)` when it is absent. A symbolic link, a
    /// file that is not regular, or one someone else owns or may write, is refused.
    pub(crate) fn open_file(&self, name: &str, flags: OFlag) -> Result<Option<File>, JournalError> {
        let path = self.path.join(name);
        let fd = match open_at(Some(self.fd.as_raw_fd()), Path::new(name), flags, 0o600) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ELOOP) => {
                return Err(unsafe_location(
                    &path,
                    "it is a symbolic link, which tame never makes".into(),
                ))
            }
            Err(e) => {
                return Err(JournalError::Io {
                    action: "open",
                    path,
                    source: e.into(),
                })
            }
        };
        let st = fstat(fd.as_raw_fd()).map_err(|e| JournalError::Io {
            action: "inspect",
            path: path.clone(),
            source: e.into(),
        })?;
        if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
            return Err(unsafe_location(&path, "it is not a regular file".into()));
        }
        check_owner_and_mode(&path, "file", &st)?;
        Ok(Some(File::from(fd)))
    }

    /// True while `name` in this directory is the very file `file` (not removed, not replaced).
    pub(crate) fn names(&self, name: &str, file: &File) -> bool {
        let (Ok(now), Ok(held)) = (
            fstatat(
                Some(self.fd.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ),
            fstat(file.as_raw_fd()),
        ) else {
            return false;
        };
        (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
    }

    /// Remove the file `name` from this directory.
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        nix::unistd::unlinkat(
            Some(self.fd.as_raw_fd()),
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(io::Error::from)
    }

    /// Make the directory's entries durable (a new or removed journal file).
    pub(crate) fn sync(&self) -> io::Result<()> {
        nix::unistd::fsync(self.fd.as_raw_fd()).map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34: a symbolic link given as the journal directory was refused as "not a
    /// directory"; the refusal now says what it is and where it leads.
    #[test]
    fn a_linked_journal_directory_is_refused_naming_the_link_and_its_target() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        for given in [link.clone(), link.join("")] {
            let err = JournalDir::open(&given, false).unwrap_err().to_string();
            assert!(
                err.contains(&format!("it is a symbolic link to {}", real.display())),
                "{err}"
            );
            assert!(err.contains("give the real directory"), "{err}");
        }
        let file = d.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = JournalDir::open(&file, false).unwrap_err().to_string();
        assert!(err.contains("it is not a directory"), "{err}");
    }

    /// Issue 34: a journal directory in a directory others may write could be renamed
    /// away, and `tame revert` then said "Nothing to revert" with the partition applied.
    #[test]
    fn a_journal_directory_whose_parent_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let journal = open.join("journal");
        let err = JournalDir::open(&journal, true).unwrap_err().to_string();
        assert!(
            err.contains(&format!("its parent {} has mode 777", open.display()))
                && err.contains("rename the journal away"),
            "{err}"
        );
        // Sticky (as /tmp): others may not rename an entry that is not theirs.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        JournalDir::open(&journal, true).unwrap().unwrap();
        // Through a link whose target's parent others may write: refused as well.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let safe = d.path().join("safe");
        std::fs::create_dir(&safe).unwrap();
        std::os::unix::fs::symlink(&open, safe.join("via")).unwrap();
        let err = JournalDir::open(&safe.join("via/journal"), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("has mode 777"), "{err}");
    }
}
