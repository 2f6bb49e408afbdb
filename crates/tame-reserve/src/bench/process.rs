//! The processes the study starts: work kernels, a `tame serve` server and stress-ng
//! background load. Each is stopped when dropped, and dies with the harness.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::kit::Kit;

use tame_rt::clock::monotonic_ns;

use super::Options;
use crate::error::{failed, io_failed, Result};
use crate::work::Counter;

/// A kernel process; killed when dropped.
pub(super) struct Worker {
    child: Child,
    pub(super) counter: Counter,
}

impl Worker {
    pub(super) fn start(o: &Options, name: &str, cpu: Option<u32>) -> Result<Self> {
        Self::start_mode(o, name, cpu, "work", &[])
    }

    /// `mode` is the kit's mode; the counter file goes after it, then `extra`.
    pub(super) fn start_mode(
        o: &Options,
        name: &str,
        cpu: Option<u32>,
        mode: &str,
        extra: &[String],
    ) -> Result<Self> {
        let path = o.scratch.join(format!("counter-{name}"));
        let counter = Counter::create(&path).map_err(|e| failed(format!("counter {name}: {e}")))?;
        let mut cmd = o.kit.command(mode);
        cmd.arg(&path)
            .args(extra)
            .stdin(Stdio::null())
            // Ctrl-C reaches the study, which stops its helpers itself.
            .process_group(0);
        let set = cpu.map(|c| tame_rt::sched::cpu_set([c]));
        // SAFETY: only async-signal-safe calls on pre-built data between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // A kernel never outlives the harness, even if it is killed.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(set) = &set {
                    if libc::sched_setaffinity(0, set.size_bytes(), set.as_ptr()) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| io_failed("cannot start the work kernel", e))?;
        let w = Self { child, counter };
        let deadline = monotonic_ns() + 5_000_000_000;
        while w.counter.get() == 0 {
            if monotonic_ns() > deadline {
                return Err(failed("the work kernel did not start counting within 5 s"));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(w)
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `tame serve` process for the server backend; stopped (SIGTERM) when dropped.
pub struct ServerProcess {
    child: Child,
    pub socket: PathBuf,
}

impl ServerProcess {
    pub fn start(kit: &Kit, socket: &Path) -> Result<Self> {
        let mut cmd = kit.command("serve");
        cmd.arg(socket).stdin(Stdio::null()).process_group(0);
        // SAFETY: prctl only, between fork and exec: a server never outlives its starter.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| io_failed("cannot start the server", e))?;
        let s = Self {
            child,
            socket: socket.to_path_buf(),
        };
        let deadline = monotonic_ns() + 10_000_000_000;
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            if monotonic_ns() > deadline {
                return Err(failed("the server did not listen within 10 s"));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(s)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child handle (tests SIGKILL it).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = monotonic_ns() + 5_000_000_000;
        while monotonic_ns() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Background load: stress-ng instances in their own process groups, killed when dropped.
pub(super) struct Load {
    groups: Vec<Child>,
}

impl Load {
    pub(super) fn new() -> Self {
        Self { groups: Vec::new() }
    }

    pub(super) fn add(&mut self, kind: &str, cpu: Option<u32>, scratch: &Path) -> Result<()> {
        let mut cmd = Command::new("stress-ng");
        match kind {
            "cpu" => cmd.args(["--cpu", "1"]),
            _ => cmd
                .args(["--hdd", "1", "--hdd-bytes", "16M", "--temp-path"])
                .arg(scratch),
        };
        if let Some(c) = cpu {
            cmd.args(["--taskset", &c.to_string()]);
        }
        cmd.args(["--timeout", "600s", "--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| io_failed("cannot start stress-ng (apt-get install stress-ng)", e))?;
        self.groups.push(child);
        Ok(())
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.groups {
            // SAFETY: signalling the process group we created for our own child.
            unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}
