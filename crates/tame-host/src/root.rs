use std::path::{Path, PathBuf};

use crate::HostError;

/// Where the host's file system starts: `/` on a real machine, a fixture
/// directory in tests. All host paths are written absolute (`/proc/cmdline`)
/// and resolved below the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
}

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
        Self { base: base.into() }
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
        let path = self.path(&host_path);
        std::fs::read_to_string(&path).map_err(|source| HostError::Read { path, source })
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
        let path = self.path(&host_path);
        std::fs::read(&path).map_err(|source| HostError::Read { path, source })
    }

    pub fn exists(&self, host_path: impl AsRef<Path>) -> bool {
        self.path(host_path).exists()
    }

    /// Names of the entries of a directory, sorted, so models are deterministic.
    pub fn list_dir(&self, host_path: impl AsRef<Path>) -> Result<Vec<String>, HostError> {
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
        assert!(err.is_not_found());
        assert!(err.to_string().contains("proc/nothing"), "{err}");
    }
}
