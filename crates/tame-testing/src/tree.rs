//! Helpers for tests that work on fixture trees, shared by every crate's tests
//! so a fixture path, a scratch directory and a tree snapshot live in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The committed fixture hosts (`fixtures/hosts/` at the workspace root).
pub fn fixture_hosts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts")
}

/// One committed fixture host, e.g. `dev-vm`.
pub fn committed_fixture(name: &str) -> PathBuf {
    fixture_hosts_dir().join(name)
}

/// A temporary directory for generated trees: on tmpfs when there is one,
/// since writing thousands of small files to the VM's disk takes tens of seconds.
pub fn scratch_dir(prefix: &str) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new().prefix(prefix).tempdir_in(shm) {
            return d;
        }
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("a temporary directory can be created")
}

/// Every directory (None) and file (its bytes) below `dir`.
pub type TreeSnapshot = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// Snapshot a tree, to compare before and after a change is made and reverted.
/// A missing `dir` gives an empty snapshot.
///
/// Tests take thousands of these (a journal cut at every byte, a kill at every step),
/// so it spends no system call it does not need: an entry's kind comes from the
/// directory listing (a symbolic link is followed, as `Path::is_dir` does), and a file
/// is read without asking its size first.
pub fn snapshot_tree(dir: &Path) -> TreeSnapshot {
    fn walk(dir: &Path, out: &mut TreeSnapshot, buf: &mut [u8]) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            let is_dir = match entry.file_type() {
                Ok(t) if !t.is_symlink() => t.is_dir(),
                _ => p.is_dir(),
            };
            if is_dir {
                out.insert(p.clone(), None);
                walk(&p, out, buf);
            } else {
                let bytes =
                    read(&p, buf).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
                out.insert(p, Some(bytes));
            }
        }
    }
    /// The file's bytes: open, read until the end, close (`std::fs::read` asks the
    /// file's size first: one more call, for files of a few bytes).
    fn read(path: &Path, chunk: &mut [u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let mut bytes = Vec::new();
        loop {
            match file.read(chunk) {
                Ok(0) => return Ok(bytes),
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    let mut out = TreeSnapshot::new();
    walk(dir, &mut out, &mut [0; 8192]);
    out
}

/// The paths that differ between two snapshots (for readable failures); empty when
/// they are equal, found without comparing every path twice.
pub fn tree_differences(a: &TreeSnapshot, b: &TreeSnapshot) -> Vec<String> {
    if a == b {
        return Vec::new();
    }
    let keys: std::collections::BTreeSet<_> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&Option<Vec<u8>>>| match v {
                None => "(absent)".to_string(),
                Some(None) => "(directory)".to_string(),
                Some(Some(bytes)) => format!("{:?}", String::from_utf8_lossy(bytes)),
            };
            format!("{}: {} → {}", k.display(), show(a.get(k)), show(b.get(k)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_see_every_byte_and_directory() {
        let d = scratch_dir("tame-testing-");
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/f"), "1\n").unwrap();
        let before = snapshot_tree(d.path());
        assert_eq!(before.len(), 3);
        std::fs::write(d.path().join("a/b/f"), "2\n").unwrap();
        let after = snapshot_tree(d.path());
        let diff = tree_differences(&before, &after);
        assert_eq!(diff.len(), 1);
        assert!(diff[0].ends_with("\"1\\n\" → \"2\\n\""), "{diff:?}");
        assert!(committed_fixture("dev-vm").join("proc/cmdline").exists());
        assert!(tree_differences(&after, &snapshot_tree(d.path())).is_empty());
        // A link is followed: to a directory, its entries appear below the link too.
        std::os::unix::fs::symlink("a/b", d.path().join("l")).unwrap();
        std::os::unix::fs::symlink("a/b/f", d.path().join("lf")).unwrap();
        let linked = snapshot_tree(d.path());
        assert_eq!(linked.get(&d.path().join("l")), Some(&None));
        assert_eq!(
            linked.get(&d.path().join("l/f")),
            Some(&Some(b"2\n".to_vec()))
        );
        assert_eq!(
            linked.get(&d.path().join("lf")),
            Some(&Some(b"2\n".to_vec()))
        );
        assert_eq!(linked.len(), 6);
    }
}
