//! The preload library, embedded in the binary and handed to the child as a
//! memfd, so `LD_PRELOAD=/proc/self/fd/N` finds it in the new program without
//! any install path.
//!
//! It reaches only the process that asked: the memfd is sealed (nobody can change
//! the code it holds) and close-on-exec in tame (no other child of tame inherits
//! it); it is made inheritable in that one child between fork and exec
//! ([`Preload::pass_to`]), and stays so through the images the process execs (a
//! wrapper that execs the real program keeps its lock). The library notes the
//! process's pid; loaded into any other process (a child of the program, which
//! inherited the environment and the descriptor) it locks nothing, closes the
//! descriptor and takes itself out of the environment, so nothing further down
//! sees it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::error::{failed, io_failed, LaunchError};

static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtame_preload.so"));

/// The environment variable naming the memfd, for the library to close it.
const FD_ENV: &str = "TAME_PRELOAD_FD";
/// The environment variable in which the library notes the pid of the process it is for.
const PID_ENV: &str = "TAME_PRELOAD_PID";
/// Every seal: no write, no shrinking, no growing, no change to the seals.
const SEALS: libc::c_int =
    libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// The preload library in memory; keep it alive until the child has exec'd.
pub struct Preload {
    fd: OwnedFd,
}

fn os_failed(what: &str) -> LaunchError {
    failed(format!("{what}: {}", std::io::Error::last_os_error()))
}

impl Preload {
    pub fn new() -> Result<Self, LaunchError> {
        let name = CString::new("tame-preload").expect("no NUL in a literal");
        // SAFETY: name is a valid C string; the flags are plain bits.
        let raw = unsafe {
            libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw < 0 {
            return Err(os_failed("cannot create the preload memfd"));
        }
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut file = std::fs::File::from(fd.try_clone().map_err(|e| io_failed("memfd", e))?);
        std::io::Write::write_all(&mut file, LIBRARY)
            .map_err(|e| io_failed("cannot write the preload memfd", e))?;
        drop(file);
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
            return Err(os_failed("cannot seal the preload memfd"));
        }
        Ok(Self { fd })
    }

    /// The LD_PRELOAD entry that names this library in the child.
    pub fn ld_preload_entry(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// Let `cmd`'s child (and only it) inherit the memfd across its exec, and tell the
    /// library which descriptor to close where it is not wanted.
    pub fn pass_to(&self, cmd: &mut Command) {
        let fd = self.fd.as_raw_fd();
        // The library notes the child's pid itself; one inherited from our caller would be wrong.
        cmd.env(FD_ENV, fd.to_string()).env_remove(PID_ENV);
        // SAFETY: the closure makes one async-signal-safe call (fcntl) on an fd that is
        // open in the child (it was inherited at fork, and closes only at exec).
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn the_memfd_is_sealed_and_close_on_exec() {
        let p = Preload::new().unwrap();
        let fd = p.fd.as_raw_fd();
        // SAFETY: fcntl queries on a descriptor we own.
        let (seals, flags) = unsafe {
            (
                libc::fcntl(fd, libc::F_GET_SEALS),
                libc::fcntl(fd, libc::F_GETFD),
            )
        };
        assert_eq!(seals & SEALS, SEALS);
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let mut file = std::fs::File::from(p.fd.try_clone().unwrap());
        let err = std::io::Write::write_all(&mut file, b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        assert_eq!(file.metadata().unwrap().len(), LIBRARY.len() as u64);
        assert!(file.set_len(0).is_err(), "shrinking is sealed");
    }

    /// `tame run --mlock sh -c …`: the shell is locked; a program it starts (its child)
    /// is not, holds no memfd once its library has run, and hands on none of it, so the
    /// grandchild sees neither the library nor the descriptor.
    #[test]
    fn the_library_reaches_the_program_but_not_its_children() {
        let out = tempfile::tempdir().unwrap();
        let o = out.path().display();
        let script = format!(
            r#"grep VmLck /proc/$$/status > {o}/target_lock
sh -c 'grep VmLck /proc/$$/status > {o}/child_lock; ls -l /proc/$$/fd > {o}/child_fds; env > {o}/grandchild_env; ls -l /proc/self/fd > {o}/grandchild_fds; true'
"#
        );
        let mut placement = crate::spawn::Placement::on_cpus(tame_host::CpuList::from_cpus(
            tame_rt::sched::allowed_cpus(),
        ));
        placement.mlock = true;
        let argv: Vec<OsString> = ["sh", "-c", &script].iter().map(OsString::from).collect();
        let mut launched = crate::spawn::spawn(&placement, &argv).unwrap();
        assert!(launched.child.wait().unwrap().success());
        let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap();
        for fds in ["child_fds", "grandchild_fds"] {
            let fds = read(fds);
            assert!(
                !fds.contains("tame-preload"),
                "the memfd was inherited: {fds}"
            );
        }
        let env = read("grandchild_env");
        assert!(
            ![
                "LD_PRELOAD=/proc/self/fd",
                "TAME_MLOCK",
                "TAME_PRELOAD",
                "TAME_PREFAULT"
            ]
            .iter()
            .any(|v| env.contains(v)),
            "the grandchild sees the library: {env}"
        );
        let kb = |text: String| -> u64 {
            text.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no VmLck in {text:?}"))
        };
        assert_eq!(kb(read("child_lock")), 0, "the child was locked too");
        if nix::unistd::geteuid().is_root() {
            assert!(kb(read("target_lock")) > 0, "the program was not locked");
        }
    }
}
