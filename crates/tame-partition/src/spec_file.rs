//! Read the spec file a journal notes, as root, without trusting it: its owner (often
//! not root) can replace it with a symlink to `/dev/zero` or a FIFO at any time, and
//! `tame status` must neither hang nor fill memory on it.

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

/// A spec is a few KiB; anything bigger is not one.
pub const MAX_SPEC_FILE: u64 = 1 << 20;

/// The text of the regular file at `path`, or why it was not read (a phrase that
/// follows the path: "… is a symbolic link (not followed)").
pub fn read_spec_file(path: &Path) -> Result<String, String> {
    // O_NOFOLLOW: a symlink in the last component is refused (ELOOP), not followed.
    // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => "is gone".to_string(),
            Some(libc::ELOOP) => "is a symbolic link (not followed)".to_string(),
            _ => format!("cannot be opened ({e})"),
        })?;
    // fstat the file opened, not the path: the path may be swapped in between.
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be examined ({e})"))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(format!("is {what}, not a regular file"));
    }
    let too_big = || format!("is larger than {} KiB", MAX_SPEC_FILE / 1024);
    if meta.len() > MAX_SPEC_FILE {
        return Err(too_big());
    }
    // The size may grow after fstat: never read more than the cap.
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({e})"))?;
    if bytes.len() as u64 > MAX_SPEC_FILE {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rt.toml");
        std::fs::write(&p, "[system]\n").unwrap();
        assert_eq!(read_spec_file(&p), Ok("[system]\n".to_string()));
    }

    #[test]
    fn refuses_a_fifo_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rt.toml");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        assert_eq!(
            read_spec_file(&p),
            Err("is a FIFO, not a regular file".to_string())
        );
    }

    #[test]
    fn refuses_a_symlink_even_to_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rt.toml");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        assert_eq!(
            read_spec_file(&p),
            Err("is a symbolic link (not followed)".to_string())
        );
        let real = dir.path().join("real.toml");
        std::fs::write(&real, "[system]\n").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            read_spec_file(&link),
            Err("is a symbolic link (not followed)".to_string())
        );
    }

    #[test]
    fn refuses_an_oversize_file_and_names_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rt.toml");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_SPEC_FILE + 1).unwrap();
        assert_eq!(
            read_spec_file(&p),
            Err("is larger than 1024 KiB".to_string())
        );
        // Exactly the cap is still read.
        f.set_len(MAX_SPEC_FILE).unwrap();
        assert_eq!(
            read_spec_file(&p).map(|t| t.len() as u64),
            Ok(MAX_SPEC_FILE)
        );
    }

    #[test]
    fn says_when_the_file_is_gone_or_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_spec_file(&dir.path().join("nope.toml")),
            Err("is gone".to_string())
        );
        assert_eq!(
            read_spec_file(dir.path()),
            Err("is a directory, not a regular file".to_string())
        );
    }
}
