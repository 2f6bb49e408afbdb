//! A Unix socket made where others may write: `tame serve --socket` and `--metrics
//! unix:PATH` take any path, and run as root. Binding there and then setting owner and
//! mode by path lets whoever may write the directory swap a symbolic link in between:
//! the chown and chmod then land on the link's target (a root file made group-readable).
//! Here the socket is made in a private directory of root's (mode 0700, in the same
//! directory so a rename can move it), reached through its descriptor; its group and
//! mode are set there, where nobody else can swap anything; then it is moved to its
//! name in one rename that never replaces what is there.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{fstat, Mode};

/// Bind a listening Unix socket at `path`, owned by root (the caller) and group `gid`
/// (None: the caller's group), with `mode`; it is never reachable under a looser mode,
/// and nothing but the new socket has its owner or mode changed, whatever is swapped
/// into `path`'s directory meanwhile. Fails (EEXIST) when `path` exists: the caller
/// removes a stale socket first.
pub fn bind(path: &Path, gid: Option<u32>, mode: u32) -> io::Result<UnixListener> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pdir = open_dir(None, &parent)?;
    let (private, pname) = make_private_dir(&pdir)?;
    let made = bind_in(&private, gid, mode).and_then(|listener| {
        // NOREPLACE: whatever appeared at the name meanwhile stays, and we fail.
        match nix::fcntl::renameat2(
            Some(private.as_raw_fd()),
            SOCKET,
            Some(pdir.as_raw_fd()),
            name,
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => Ok(listener),
            // A file system without RENAME_NOREPLACE: a hard link never replaces either.
            Err(Errno::EINVAL) => nix::unistd::linkat(
                Some(private.as_raw_fd()),
                Path::new(SOCKET),
                Some(pdir.as_raw_fd()),
                Path::new(name),
                AtFlags::empty(),
            )
            .map(|()| listener)
            .map_err(io::Error::from),
            Err(e) => Err(e.into()),
        }
    });
    let _ = nix::unistd::unlinkat(
        Some(private.as_raw_fd()),
        SOCKET,
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
    // By name in the parent: at worst an empty directory someone swapped in goes.
    let _ = nix::unistd::unlinkat(
        Some(pdir.as_raw_fd()),
        pname.as_str(),
        nix::unistd::UnlinkatFlags::RemoveDir,
    );
    let listener = made?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Make way for a new socket at `path`: a socket nobody listens on (left by a process
/// that died) is removed; one something listens on is AddrInUse; anything else there
/// (a file, a link someone planted) is AlreadyExists and stays.
pub fn remove_stale(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "something already listens there",
                ));
            }
            std::fs::remove_file(path)
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "it exists and is not a socket",
        )),
        Err(_) => Ok(()),
    }
}

/// The socket's name inside the private directory.
const SOCKET: &str = "s";

fn open_dir(at: Option<RawFd>, path: &Path) -> io::Result<OwnedFd> {
    let fd = nix::fcntl::openat(
        at,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )?;
    // SAFETY: openat just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new directory in `pdir` that only the caller may use, open; and its name.
fn make_private_dir(pdir: &OwnedFd) -> io::Result<(OwnedFd, String)> {
    let me = nix::unistd::geteuid().as_raw();
    for attempt in 0u32..100 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(".tame-{}-{:x}", std::process::id(), nanos ^ attempt);
        match nix::sys::stat::mkdirat(
            Some(pdir.as_raw_fd()),
            name.as_str(),
            Mode::from_bits_truncate(0o700),
        ) {
            Ok(()) => {}
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
        // Opened without following a link, then checked: a directory someone else
        // renamed into the name meanwhile is not ours, and is left alone.
        let dir = open_dir(Some(pdir.as_raw_fd()), Path::new(&name))?;
        let st = fstat(dir.as_raw_fd())?;
        if st.st_uid != me || st.st_mode & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the private directory {name} was replaced meanwhile by someone else's"),
            ));
        }
        return Ok((dir, name));
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name for a private directory",
    ))
}

/// Bind in the private directory, through its descriptor (not its name, which others
/// may rename), and set group and mode there.
fn bind_in(private: &OwnedFd, gid: Option<u32>, mode: u32) -> io::Result<UnixListener> {
    let at = format!("/proc/self/fd/{}/{SOCKET}", private.as_raw_fd());
    // SAFETY: umask takes and returns a plain mode. Under 0177 the socket is born 0600:
    // only root may connect until its mode is set below.
    let old = unsafe { nix::libc::umask(0o177) };
    let bound = UnixListener::bind(&at);
    // SAFETY: as above.
    unsafe { nix::libc::umask(old) };
    let listener = bound?;
    nix::unistd::fchownat(
        Some(private.as_raw_fd()),
        SOCKET,
        None,
        gid.map(nix::unistd::Gid::from_raw),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    nix::sys::stat::fchmodat(
        Some(private.as_raw_fd()),
        SOCKET,
        Mode::from_bits_truncate(mode),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )?;
    // What was set is on a socket: nothing else can be at SOCKET in a directory of ours.
    let st = nix::sys::stat::fstatat(
        Some(private.as_raw_fd()),
        SOCKET,
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFSOCK {
        return Err(io::Error::other("the bound socket is not a socket"));
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_a_socket_nobody_listens_on_makes_way() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let listening = UnixListener::bind(&path).unwrap();
        let e = remove_stale(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        drop(listening);
        remove_stale(&path).unwrap();
        assert!(
            std::fs::symlink_metadata(&path).is_err(),
            "the stale socket is gone"
        );
        remove_stale(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        let e = remove_stale(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert!(
            std::fs::symlink_metadata(&path).unwrap().is_symlink(),
            "a link stays"
        );
    }
    use super::*;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    use std::os::unix::net::UnixStream;

    #[test]
    fn the_socket_gets_its_group_and_mode_and_nothing_else_is_left() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("serve.sock");
        let listener = bind(&path, Some(65534), 0o660).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o7777, 0o660);
        assert_eq!(m.gid(), 65534);
        assert_eq!(m.uid(), nix::unistd::geteuid().as_raw());
        UnixStream::connect(&path).unwrap();
        drop(listener);
        // The private directory is gone; only the socket is there.
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("serve.sock")]);
        // Something at the name (the caller removes a stale socket) is never replaced.
        let err = bind(&path, None, 0o660).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        std::fs::remove_file(&path).unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(bind(&path, None, 0o660).is_err());
        assert_eq!(std::fs::read_link(&path).unwrap(), target);
    }

    /// Issue 34: in a directory others may write, a socket renamed away right after
    /// bind and replaced by a link to a root file made that file 0660 group nogroup.
    /// Here a hostile thread does exactly that, as fast as it can, while sockets are
    /// made: the root file's mode and group never change.
    #[test]
    fn a_link_swapped_in_after_bind_never_has_its_target_changed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = std::fs::metadata(&victim).unwrap();
        let path = d.path().join("serve.sock");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let attacker = {
            let (stop, path, victim) = (stop.clone(), path.clone(), victim.clone());
            let aside = d.path().join("aside");
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if std::fs::rename(&path, &aside).is_ok() {
                        let _ = std::os::unix::fs::symlink(&victim, &path);
                    }
                }
            })
        };
        for _ in 0..300 {
            let _ = std::fs::remove_file(&path);
            let _ = bind(&path, Some(65534), 0o660);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        attacker.join().unwrap();
        let after = std::fs::metadata(&victim).unwrap();
        assert_eq!(
            after.mode() & 0o7777,
            0o600,
            "the link's target was chmodded"
        );
        assert_eq!(after.gid(), before.gid(), "the link's target was chowned");
    }
}
