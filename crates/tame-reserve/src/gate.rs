//! Start a program held at a gate: the child is forked, placed on its CPUs, and then waits
//! (before exec) until the reservation is in place, so not one instruction of the program
//! runs unreserved. Scheduling policy, cgroup membership and affinity survive execve.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::error::{failed, invalid, Result};

pub struct Gated {
    pid: libc::pid_t,
    gate: Option<OwnedFd>,
    reaped: bool,
}

/// The executable `program` names: a path, or the first match on PATH.
fn resolve(program: &OsString) -> Option<PathBuf> {
    let p = Path::new(program);
    let executable = |c: &Path| {
        std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_bytes().contains(&b'/') {
        return executable(p).then(|| p.to_path_buf());
    }
    std::env::var_os("PATH")?
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| Path::new(OsStr::from_bytes(dir)).join(p))
        .find(|c| executable(c))
}

/// Fork `argv` on `cpus`; it stays before exec until [`Gated::open`]. (std's Command would
/// wait for the exec itself, so the fork is done by hand.)
pub fn spawn(argv: &[OsString], cpus: &[u32]) -> Result<Gated> {
    let program = argv
        .first()
        .ok_or_else(|| invalid("no program given — write it after `--`, e.g. tame reserve --share 25% --period 40ms -- ./player"))?;
    let path = resolve(program).ok_or_else(|| {
        invalid(format!(
            "cannot run {}: no such executable program — check the name or give its path",
            program.to_string_lossy()
        ))
    })?;
    let to_c = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| invalid(format!("{s:?} contains a NUL byte")))
    };
    let c_path = to_c(path.as_os_str())?;
    let c_args: Vec<CString> = argv.iter().map(|a| to_c(a)).collect::<Result<_>>()?;
    let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    c_argv.push(std::ptr::null());
    let set = tame_rt::sched::cpu_set(cpus.iter().copied());
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a writable array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(failed(format!(
            "cannot make a pipe: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: fresh descriptors we own.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child makes only async-signal-safe calls on data built above, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(failed(format!(
            "cannot fork: {}",
            io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::close(write_end.as_raw_fd());
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                libc::_exit(126);
            }
            let mut byte = 0u8;
            loop {
                let n = libc::read(read_end.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                // EOF: the parent gave up (reservation refused): never run the program.
                if n == 0 || *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            libc::execv(c_path.as_ptr(), c_argv.as_ptr());
            libc::_exit(127);
        }
    }
    drop(read_end);
    Ok(Gated {
        pid,
        gate: Some(write_end),
        reaped: false,
    })
}

impl Gated {
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Let the program run.
    pub fn open(&mut self) -> Result<()> {
        if let Some(fd) = self.gate.take() {
            // SAFETY: writing one byte from a valid buffer to our pipe.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"g".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(failed(format!(
                    "cannot start the program: {}",
                    io::Error::last_os_error()
                )));
            }
        }
        Ok(())
    }

    /// Never run the program: close the gate (it exits 126) and reap it.
    pub fn abandon(mut self) {
        self.gate.take();
        let _ = self.reap();
    }

    fn reap(&mut self) -> io::Result<ExitStatus> {
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own child.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if rc == self.pid {
                self.reaped = true;
                return Ok(ExitStatus::from_raw(status));
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Wait for the program, passing SIGTERM and SIGHUP sent to us on to it
    /// (a terminal's Ctrl-C reaches it directly: same process group).
    pub fn wait(&mut self) -> Result<ExitStatus> {
        let pid = self.pid;
        let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGHUP])
            .map_err(|e| failed(format!("cannot forward signals: {e}")))?;
        let handle = signals.handle();
        let forwarder = std::thread::spawn(move || {
            for sig in signals.forever() {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, sig) };
            }
        });
        let status = self
            .reap()
            .map_err(|e| failed(format!("cannot wait for the program: {e}")));
        handle.close();
        let _ = forwarder.join();
        status
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if !self.reaped {
            self.gate.take();
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.reap();
        }
    }
}

/// The exit code a shell would show.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_waits_for_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let argv: Vec<OsString> = ["sh", "-c", &format!("touch {}", mark.display())]
            .iter()
            .map(OsString::from)
            .collect();
        let mut g = spawn(&argv, &tame_rt::sched::allowed_cpus()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!mark.exists(), "ran before the gate opened");
        g.open().unwrap();
        assert_eq!(exit_code(g.wait().unwrap()), 0);
        assert!(mark.exists());
        // Abandoned: it never runs.
        std::fs::remove_file(&mark).unwrap();
        let g = spawn(&argv, &tame_rt::sched::allowed_cpus()).unwrap();
        g.abandon();
        assert!(!mark.exists());
    }
}
