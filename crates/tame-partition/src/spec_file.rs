//! Read the spec file a journal notes, as root, without trusting it: its owner (often
//! not root) can replace it with a symlink to `/dev/zero` or a FIFO at any time, and
//! `tame status` must neither hang nor fill memory on it.

use std::path::Path;

/// A spec is a few KiB; anything bigger is not one.
pub const MAX_SPEC_FILE: u64 = 1 << 20;

/// The text of the regular file at `path`, or why it was not read (a phrase that
/// follows the path: "… is a symbolic link (not followed)").
pub fn read_spec_file(path: &Path) -> Result<String, String> {
    tame_host::regular_file::read(path, MAX_SPEC_FILE)
        .map(|(text, _)| text)
        .map_err(|why| why.to_string())
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
