//! The one door to the host: every file operation tame makes on host files and
//! every thread-placement system call goes through a [`HostBackend`].
//!
//! [`RealBackend`] performs them (plain files below the root's base, the
//! kernel's sched_* calls). Tests use the fixture backend of the `tame-testing`
//! crate, which does on a fixture tree what the kernel would do on a write
//! (moving a task between cgroup task lists, enabling a controller) and keeps
//! thread placement in memory. So production code needs no "is this a fixture?"
//! branch: it calls the backend and the backend behaves like a kernel.
//!
//! Paths handed to a backend are already resolved below the root's base.

use std::fmt;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::Path;

use tame_rt::sched::ThreadSched;

use crate::CpuList;

/// Owner, group and permission bits of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
}

impl Ownership {
    /// Read a real file's ownership (what [`RealBackend`] does).
    pub fn of(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(path)?;
        Ok(Self {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
        })
    }

    /// Give a real file this ownership.
    pub fn apply(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(self.uid)),
            Some(nix::unistd::Gid::from_raw(self.gid)),
        )
        .map_err(io::Error::from)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(self.mode))
    }
}

/// Everything tame does to the host, one method per operation.
pub trait HostBackend: Send + Sync + fmt::Debug {
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Write a file (one write, as `echo value > file`).
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Names of a directory's entries, in any order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// True for a directory (following symlinks, as sysfs needs).
    fn is_dir(&self, path: &Path) -> bool;
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn ownership(&self, path: &Path) -> io::Result<Ownership>;
    fn set_ownership(&self, path: &Path, ownership: Ownership) -> io::Result<()>;
    /// Mount a kernel file system (no device, no options) at `target`.
    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()>;
    /// Detach the mount at `target` (lazily: users keep what they opened).
    fn unmount(&self, target: &Path) -> io::Result<()>;
    /// The CPUs thread `tid` may run on.
    fn affinity(&self, tid: u32) -> io::Result<CpuList>;
    fn set_affinity(&self, tid: u32, cpus: &CpuList) -> io::Result<()>;
    /// Thread `tid`'s scheduling attributes, exactly enough to restore them.
    fn thread_sched(&self, tid: u32) -> io::Result<ThreadSched>;
    fn set_thread_sched(&self, tid: u32, sched: &ThreadSched) -> io::Result<()>;
    /// A descriptor that becomes readable when process `pid` exits, even after its pid
    /// is reused (pidfd_open). A fixture has no processes to watch: unsupported.
    fn pidfd(&self, pid: u32) -> io::Result<OwnedFd> {
        let _ = pid;
        Err(io::ErrorKind::Unsupported.into())
    }
    /// A descriptor that becomes readable when thread `tid` exits (pidfd_open with
    /// PIDFD_THREAD, Linux ≥ 6.9): watching a thread costs nothing until it exits.
    /// Unsupported on a fixture (and an older kernel): callers look at `/proc` instead.
    fn thread_pidfd(&self, tid: u32) -> io::Result<OwnedFd> {
        let _ = tid;
        Err(io::ErrorKind::Unsupported.into())
    }
    /// CPU time of all threads of process `pid` together, ns, in one system call
    /// (its CPU-time clock). None: the backend has no such clock (a fixture), read the
    /// threads' schedstat instead.
    fn process_cpu_time_ns(&self, pid: u32) -> Option<io::Result<u64>> {
        let _ = pid;
        None
    }

    // Configuration files (`tame enable`): plain files on the machine and on a fixture
    // tree alike, so one implementation serves both.

    /// Create the regular file `path` holding `data` with permission bits `mode` (not the
    /// umask's), complete or not at all: written beside it, synced, then linked into place,
    /// which fails when `path` exists (never replaces, never follows a link).
    fn create_file(&self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        create_file(path, data, mode)
    }

    /// Make the symbolic link `path` pointing at `target` (fails when `path` exists).
    fn symlink(&self, target: &Path, path: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, path)
    }

    /// Where the symbolic link `path` points (an error when it is not one).
    fn read_link(&self, path: &Path) -> io::Result<std::path::PathBuf> {
        std::fs::read_link(path)
    }
}

fn create_file(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut staged = name.to_os_string();
    staged.push(format!(".tame-{}", std::process::id()));
    let staged = path.with_file_name(staged);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&staged)?;
        file.write_all(data)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        std::fs::hard_link(&staged, path)
    })();
    let _ = std::fs::remove_file(&staged);
    result?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The machine itself: plain file operations and the kernel's system calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealBackend;

impl HostBackend for RealBackend {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        read_file(path)
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        // Kernel files exist or the write is wrong: never create one (O_CREAT on a bare
        // mount point — an unmounted cgroup hierarchy — would make a plain file that
        // "took" the value), never truncate, and hand the kernel the value in one write.
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
        let written = file.write(data)?;
        if written != data.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("the kernel took {written} of {} bytes", data.len()),
            ));
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn ownership(&self, path: &Path) -> io::Result<Ownership> {
        Ownership::of(path)
    }

    fn set_ownership(&self, path: &Path, ownership: Ownership) -> io::Result<()> {
        ownership.apply(path)
    }

    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        nix::mount::mount(
            Some(fstype),
            target,
            Some(fstype),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(io::Error::from)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH).map_err(io::Error::from)
    }

    fn affinity(&self, tid: u32) -> io::Result<CpuList> {
        tame_rt::sched::get_affinity(tid as i32).map(CpuList::from_cpus)
    }

    fn set_affinity(&self, tid: u32, cpus: &CpuList) -> io::Result<()> {
        tame_rt::sched::set_affinity(tid as i32, cpus.iter())
    }

    fn thread_sched(&self, tid: u32) -> io::Result<ThreadSched> {
        tame_rt::sched::get_thread_sched(tid as i32)
    }

    fn set_thread_sched(&self, tid: u32, sched: &ThreadSched) -> io::Result<()> {
        tame_rt::sched::set_thread_sched(tid as i32, sched)
    }

    fn pidfd(&self, pid: u32) -> io::Result<OwnedFd> {
        use nix::libc;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative return is a fresh descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    fn thread_pidfd(&self, tid: u32) -> io::Result<OwnedFd> {
        use nix::libc;
        // PIDFD_THREAD (include/uapi/linux/pidfd.h) is O_EXCL; the libc crate lacks it.
        const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative return is a fresh descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    fn process_cpu_time_ns(&self, pid: u32) -> Option<io::Result<u64>> {
        use nix::libc;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: clock_getcpuclockid writes one clockid_t we own.
        let e = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
        if e != 0 {
            return Some(Err(io::Error::from_raw_os_error(e)));
        }
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
            return Some(Err(io::Error::last_os_error()));
        }
        Some(Ok(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64))
    }
}

/// open, read until EOF, close: unlike `std::fs::read` no stat for a size hint,
/// which for sysfs and procfs is meaningless (4096 or 0) and costs a system call
/// per file — a fifth of the time of reading a large machine.
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
