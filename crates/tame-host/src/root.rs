use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tame_rt::sched::ThreadSched;

use crate::backend::{HostBackend, Ownership, RealBackend};
use crate::{CpuList, HostError};

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
/// and resolved below the root; every operation goes through its
/// [`HostBackend`] (the real one unless a test gives another).
#[derive(Clone)]
pub struct Root {
    base: PathBuf,
    backend: Arc<dyn HostBackend>,
    recorder: Option<Arc<Mutex<Recorded>>>,
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("base", &self.base)
            .field("backend", &self.backend)
            .finish()
    }
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

    /// Plain files below `base`, through the real backend (`tame --root DIR`).
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Self::with_backend(base, Arc::new(RealBackend))
    }

    /// Files below `base`, every operation made by `backend` (tests: a fixture
    /// backend that does what the kernel would).
    pub fn with_backend(base: impl Into<PathBuf>, backend: Arc<dyn HostBackend>) -> Self {
        Self {
            base: base.into(),
            backend,
            recorder: None,
        }
    }

    /// The same root, additionally remembering every path read or listed through it
    /// (and through its clones); see [`Root::recorded`].
    pub fn recording(&self) -> Self {
        Self {
            base: self.base.clone(),
            backend: self.backend.clone(),
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

    /// True when this root's base is `/`. Only for messages and defaults:
    /// what an operation does is the backend's business.
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
        self.backend
            .read(&path)
            .map_err(|source| HostError::Read { path, source })
    }

    pub fn exists(&self, host_path: impl AsRef<Path>) -> bool {
        self.backend.exists(&self.path(host_path))
    }

    /// True when the path is a directory (following symlinks, as sysfs needs).
    pub fn is_dir(&self, host_path: impl AsRef<Path>) -> bool {
        self.backend.is_dir(&self.path(host_path))
    }

    /// Names of the entries of a directory, sorted, so models are deterministic.
    pub fn list_dir(&self, host_path: impl AsRef<Path>) -> Result<Vec<String>, HostError> {
        self.note(host_path.as_ref(), true);
        let path = self.path(&host_path);
        let mut names = self
            .backend
            .list_dir(&path)
            .map_err(|source| HostError::Read { path, source })?;
        names.sort();
        Ok(names)
    }

    /// Owner, group and mode of a host file.
    pub fn ownership(&self, host_path: impl AsRef<Path>) -> io::Result<Ownership> {
        self.backend.ownership(&self.path(host_path))
    }

    /// The CPUs thread `tid` may run on.
    pub fn affinity(&self, tid: u32) -> io::Result<CpuList> {
        self.backend.affinity(tid)
    }

    /// A descriptor that says when process `pid` exits (see [`HostBackend::pidfd`]).
    pub fn pidfd(&self, pid: u32) -> io::Result<std::os::fd::OwnedFd> {
        self.backend.pidfd(pid)
    }

    /// A descriptor that says when thread `tid` exits (see [`HostBackend::thread_pidfd`]).
    pub fn thread_pidfd(&self, tid: u32) -> io::Result<std::os::fd::OwnedFd> {
        self.backend.thread_pidfd(tid)
    }

    /// CPU time of all threads of process `pid`, ns: its CPU-time clock where the backend
    /// has one (one system call whatever the number of threads), else the sum of its
    /// threads' schedstat.
    pub fn process_cpu_time_ns(&self, pid: u32) -> io::Result<u64> {
        if let Some(t) = self.backend.process_cpu_time_ns(pid) {
            return t;
        }
        let process = self.process(pid);
        let threads = process.threads();
        if threads.is_empty() {
            return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
        }
        Ok(threads
            .into_iter()
            .filter_map(|tid| process.task(tid).schedstat().ok())
            .map(|s| s.run_ns)
            .sum())
    }

    /// Thread `tid`'s scheduling attributes.
    pub fn thread_sched(&self, tid: u32) -> io::Result<ThreadSched> {
        self.backend.thread_sched(tid)
    }

    /// Set thread `tid`'s affinity, unjournaled: a change that must be undone
    /// later goes through [`crate::journal::Journal::place`] instead.
    pub fn set_affinity(&self, tid: u32, cpus: &CpuList) -> io::Result<()> {
        self.backend.set_affinity(tid, cpus)
    }

    /// Set thread `tid`'s scheduling attributes, unjournaled (see [`Root::set_affinity`]).
    pub fn set_thread_sched(&self, tid: u32, sched: &ThreadSched) -> io::Result<()> {
        self.backend.set_thread_sched(tid, sched)
    }

    /// Mount kernel file system `fstype` (tracefs, …) at host path `target`.
    pub fn mount(&self, fstype: &str, target: impl AsRef<Path>) -> io::Result<()> {
        self.backend.mount(fstype, &self.path(target))
    }

    /// Lazily unmount what is mounted at host path `target`.
    pub fn unmount(&self, target: impl AsRef<Path>) -> io::Result<()> {
        self.backend.unmount(&self.path(target))
    }

    // Writes are the journal's: it records the previous value before it calls these.

    pub(crate) fn write(&self, host_path: impl AsRef<Path>, data: &[u8]) -> io::Result<()> {
        self.backend.write(&self.path(host_path), data)
    }

    /// Read without recording (the journal reading a previous value).
    pub(crate) fn read_raw(&self, host_path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        self.backend.read(&self.path(host_path))
    }

    pub(crate) fn create_dir(&self, host_path: impl AsRef<Path>) -> io::Result<()> {
        self.backend.create_dir(&self.path(host_path))
    }

    pub(crate) fn remove_dir(&self, host_path: impl AsRef<Path>) -> io::Result<()> {
        self.backend.remove_dir(&self.path(host_path))
    }

    pub(crate) fn remove_file(&self, host_path: impl AsRef<Path>) -> io::Result<()> {
        self.backend.remove_file(&self.path(host_path))
    }

    pub(crate) fn create_file(
        &self,
        host_path: impl AsRef<Path>,
        data: &[u8],
        mode: u32,
    ) -> io::Result<()> {
        self.backend.create_file(&self.path(host_path), data, mode)
    }

    pub(crate) fn symlink(&self, target: &str, host_path: impl AsRef<Path>) -> io::Result<()> {
        self.backend
            .symlink(Path::new(target), &self.path(host_path))
    }

    /// Where the symbolic link at host path `host_path` points.
    pub fn read_link(&self, host_path: impl AsRef<Path>) -> io::Result<PathBuf> {
        self.backend.read_link(&self.path(host_path))
    }

    pub(crate) fn set_ownership(
        &self,
        host_path: impl AsRef<Path>,
        ownership: Ownership,
    ) -> io::Result<()> {
        self.backend.set_ownership(&self.path(host_path), ownership)
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

    #[test]
    fn a_thread_pidfd_says_when_the_thread_exits() {
        use std::os::fd::AsRawFd;
        let root = Root::system();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no arguments.
            tx.send(unsafe { nix::libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let fd = root
            .thread_pidfd(tid)
            .expect("pidfd_open(PIDFD_THREAD), Linux >= 6.9");
        let readable = |fd: &std::os::fd::OwnedFd| {
            let mut p = nix::libc::pollfd {
                fd: fd.as_raw_fd(),
                events: nix::libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, a bounded wait.
            unsafe { nix::libc::poll(&mut p, 1, 1000) == 1 }
        };
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(
            readable(&fd),
            "the thread exited: its pidfd must be readable"
        );
    }

    #[test]
    fn process_cpu_time_counts_every_thread() {
        let root = Root::system();
        let pid = std::process::id();
        let before = root.process_cpu_time_ns(pid).unwrap();
        let spin = || {
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(30) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        std::thread::spawn(spin).join().unwrap();
        let after = root.process_cpu_time_ns(pid).unwrap();
        assert!(
            after - before >= 20_000_000,
            "a thread's 30 ms of spinning counted {} ns",
            after - before
        );
    }
}
