//! Read a file that someone else may control (a spec file a journal notes, a policy given
//! with `--policy`), as root, without trusting its path: its owner, or whoever may write
//! its directory, can swap in a symbolic link (to `/dev/zero`, to root's files), a FIFO or
//! a huge file at any time. One descriptor is opened without following a final link and
//! without waiting for a FIFO's writer, inspected with fstat and read, at most `max` bytes:
//! what is checked is what is read.

use std::fmt;
use std::fs::Metadata;
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Why a file was not read. Displayed as a phrase that follows its path
/// ("… is a symbolic link (not followed)").
#[derive(Debug)]
pub enum Unreadable {
    Gone,
    /// A symbolic link in the last component: refused, never followed.
    Link,
    /// Not a regular file: "a FIFO", "a directory", "a device", "a special file".
    Special(&'static str),
    TooBig(u64),
    NotText,
    Open(io::Error),
    Examine(io::Error),
    Read(io::Error),
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::Gone => f.write_str("is gone"),
            Unreadable::Link => f.write_str("is a symbolic link (not followed)"),
            Unreadable::Special(what) => write!(f, "is {what}, not a regular file"),
            Unreadable::TooBig(max) => write!(f, "is larger than {} KiB", max / 1024),
            Unreadable::NotText => f.write_str("is not UTF-8 text"),
            Unreadable::Open(e) => write!(f, "cannot be opened ({e})"),
            Unreadable::Examine(e) => write!(f, "cannot be examined ({e})"),
            Unreadable::Read(e) => write!(f, "cannot be read ({e})"),
        }
    }
}

/// The text of the regular file at `path` (at most `max` bytes) and the metadata of the
/// very file read (its owner and mode are the ones to check).
pub fn read(path: &Path, max: u64) -> Result<(String, Metadata), Unreadable> {
    // O_NOFOLLOW: a symlink in the last component is refused (ELOOP), not followed.
    // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ENOENT) => Unreadable::Gone,
            Some(nix::libc::ELOOP) => Unreadable::Link,
            _ => Unreadable::Open(e),
        })?;
    // fstat the file opened, not the path: the path may be swapped in between.
    let meta = file.metadata().map_err(Unreadable::Examine)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(Unreadable::Special(if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a special file"
        }));
    }
    if meta.len() > max {
        return Err(Unreadable::TooBig(max));
    }
    // The size may grow after fstat: never read more than the cap.
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(Unreadable::Read)?;
    if bytes.len() as u64 > max {
        return Err(Unreadable::TooBig(max));
    }
    let text = String::from_utf8(bytes).map_err(|_| Unreadable::NotText)?;
    Ok((text, meta))
}
