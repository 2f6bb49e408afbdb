use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::HostError;

/// The host paths a recording [`Root`] was asked for, so `tame host capture`
/// copies exactly what the host layer reads (no second list to keep in step).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Files read (whether or not the read succeeded).
    pub files: BTreeSet<PathBuf>,
    /// Directories listed.
    pub dirs: BTreeSet<PathBuf>,
}

/// Where the host's file system starts: `/` on a real machine, a fixture
/// directory in tests. All host paths are written absolute (`/proc/cmdline`)
/// and resolved below the root.
#[derive(Clone, Debug)]
pub struct Root {
    base: PathBuf,
    recorder: Option<Arc<Mutex<Recorded>>>,
}

/// Two roots are equal when they resolve paths the same way; recording is not identity.
impl PartialEq for Root {
    fn eq(&self, other: &Self) -> bool {
        self.base == other.base
    }
}

impl Eq for Root {}

impl Default for Root {
    fn default() -> Self {
        Self::system()
    }
}

impl Root {
    /// The live system.
    pub fn system() -> Self {
        Self::new("/")
    }

    pub fn new(base: impl Into<PathBuf>) -> Self {
        Self {
            base: base.into(),
            recorder: None,
        }
    }

    /// The same root, additionally remembering every path read or listed through it
    /// (and through its clones); see [`Root::recorded`].
    pub fn recording(&self) -> Self {
        Self {
            base: self.base.clone(),
            recorder: Some(Arc::new(Mutex::new(Recorded::default()))),
        }
    }

    /// What a recording root was asked for so far; empty for a plain root.
    pub fn recorded(&self) -> Recorded {
        self.recorder
            .as_ref()
            .and_then(|r| r.lock().ok().map(|g| g.clone()))
            .unwrap_or_default()
    }

    fn note(&self, host_path: &Path, dir: bool) {
        if let Some(rec) = &self.recorder {
            if let Ok(mut g) = rec.lock() {
                let set = if dir { &mut g.dirs } else { &mut g.files };
                set.insert(host_path.to_path_buf());
            }
        }
    }

    /// True when this root is the live system rather than a fixture.
    pub fn is_system(&self) -> bool {
        self.base == Path::new("/")
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Resolve an absolute host path (e.g. `/proc/cmdline`) below the root.
    pub fn path(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let p = host_path.as_ref();
        let rel = p.strip_prefix("/").unwrap_or(p);
        self.base.join(rel)
    }

    /// Read a whole text file.
    pub fn read(&self, host_path: impl AsRef<Path>) -> Result<String, HostError> {
        let bytes = self.read_bytes(host_path)?;
        Ok(String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// Read a text file and trim surrounding whitespace (the usual sysfs value).
    pub fn read_trimmed(&self, host_path: impl AsRef<Path>) -> Result<String, HostError> {
        self.read(host_path).map(|s| s.trim().to_string())
    }

    /// Read a file that may legitimately be absent: `Ok(None)` when it does not exist.
    pub fn read_optional(&self, host_path: impl AsRef<Path>) -> Result<Option<String>, HostError> {
        match self.read(host_path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read raw bytes (for binary files such as /proc/config.gz).
    pub fn read_bytes(&self, host_path: impl AsRef<Path>) -> Result<Vec<u8>, HostError> {
        self.note(host_path.as_ref(), false);
        let path = self.path(&host_path);
        read_file(&path).map_err(|source| HostError::Read { path, source })
    }

    pub fn exists(&self, host_path: impl AsRef<Path>) -> bool {
        self.path(host_path).exists()
    }

    /// True when the path is a directory (following symlinks, as sysfs needs).
    pub fn is_dir(&self, host_path: impl AsRef<Path>) -> bool {
        self.path(host_path).is_dir()
    }

    /// Names of the entries of a directory, sorted, so models are deterministic.
    pub fn list_dir(&self, host_path: impl AsRef<Path>) -> Result<Vec<String>, HostError> {
        self.note(host_path.as_ref(), true);
        let path = self.path(&host_path);
        let rd = std::fs::read_dir(&path).map_err(|source| HostError::Read {
            path: path.clone(),
            source,
        })?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|source| HostError::Read {
                path: path.clone(),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

/// open, read until EOF, close: unlike `std::fs::read` no stat for a size hint,
/// which for sysfs and procfs is meaningless (4096 or 0) and costs a system call
/// per file — a fifth of the time of reading a large machine.
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_absolute_paths_below_the_base() {
        let r = Root::new("/tmp/fx");
        assert_eq!(
            r.path("/proc/cmdline"),
            PathBuf::from("/tmp/fx/proc/cmdline")
        );
        assert_eq!(
            Root::system().path("/proc/cmdline"),
            PathBuf::from("/proc/cmdline")
        );
    }

    #[test]
    fn optional_read_distinguishes_missing_from_present() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/cmdline"), "quiet\n").unwrap();
        let r = Root::new(dir.path());
        assert_eq!(
            r.read_optional("/proc/cmdline").unwrap().as_deref(),
            Some("quiet\n")
        );
        assert_eq!(r.read_optional("/proc/nothing").unwrap(), None);
        let err = r.read("/proc/nothing").unwrap_err();
        assert!(
            r.recorded().files.is_empty(),
            "a plain root records nothing"
        );
        assert!(err.is_not_found());
        assert!(err.to_string().contains("proc/nothing"), "{err}");
    }

    #[test]
    fn recording_root_remembers_reads_and_listings_across_clones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/irq")).unwrap();
        std::fs::write(dir.path().join("proc/cmdline"), "quiet\n").unwrap();
        let r = Root::new(dir.path()).recording();
        let clone = r.clone();
        clone.read("/proc/cmdline").unwrap();
        let _ = r.read("/proc/missing");
        r.list_dir("/proc/irq").unwrap();
        let rec = r.recorded();
        assert_eq!(
            rec.files.iter().collect::<Vec<_>>(),
            vec![Path::new("/proc/cmdline"), Path::new("/proc/missing")]
        );
        assert_eq!(
            rec.dirs.iter().collect::<Vec<_>>(),
            vec![Path::new("/proc/irq")]
        );
        assert_eq!(r, Root::new(dir.path()));
    }
}
