//! The processes the study starts: work kernels and stress-ng background load (the
//! server is [`tame_reserve::kit::ServerProcess`]). Each is stopped when dropped, and dies
//! with the harness.

use std::path::Path;
use std::process::Stdio;

use tame_host::CpuList;
use tame_launch::spawn::{Launched, Spawn};
use tame_rt::sched::SchedSpec;

use tame_reserve::work::Counter;
use tame_rt::clock::monotonic_ns;

use tame_host::Failure;
use tame_reserve::ReserveError;

use crate::{failed, Options, Result};

/// A kernel process; killed when dropped.
pub(super) struct Worker {
    child: Launched,
    pub(super) counter: Counter,
}

impl Worker {
    pub(super) fn start(o: &Options, name: &str, cpu: Option<u32>) -> Result<Self> {
        Self::start_mode(o, name, cpu, None, "work", &[])
    }

    /// A kernel that runs under `policy` from its first instruction (set at spawn).
    pub(super) fn start_with(
        o: &Options,
        name: &str,
        cpu: Option<u32>,
        policy: SchedSpec,
    ) -> Result<Self> {
        Self::start_mode(o, name, cpu, Some(policy), "work", &[])
    }

    /// `mode` is the kit's mode; the counter file goes after it, then `extra`.
    pub(super) fn start_mode(
        o: &Options,
        name: &str,
        cpu: Option<u32>,
        policy: Option<SchedSpec>,
        mode: &str,
        extra: &[String],
    ) -> Result<Self> {
        let path = o.scratch.join(format!("counter-{name}"));
        let counter = Counter::create(&path).map_err(|e| {
            ReserveError::Failed(Failure::io(format!("cannot create the counter {name}"), e))
        })?;
        let mut spawn = o
            .kit
            .spawn(mode)
            .arg(&path)
            .args(extra)
            .what("the work kernel")
            .stdin(Stdio::null())
            // Ctrl-C reaches the study, which stops its helpers itself.
            .process_group()
            // A kernel never outlives the harness, even if it is killed.
            .die_with_parent(libc::SIGKILL);
        if let Some(c) = cpu {
            spawn = spawn.cpus(&CpuList::from_cpus([c]));
        }
        if let Some(p) = policy {
            spawn = spawn.policy(p).reset_on_fork(true);
        }
        let child = spawn.spawn()?;
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

/// Background load: stress-ng instances in their own process groups, killed when dropped.
pub(super) struct Load {
    groups: Vec<Launched>,
}

impl Load {
    pub(super) fn new() -> Self {
        Self { groups: Vec::new() }
    }

    pub(super) fn add(&mut self, kind: &str, cpu: Option<u32>, scratch: &Path) -> Result<()> {
        let mut spawn = Spawn::program("stress-ng");
        spawn = match kind {
            "cpu" => spawn.args(["--cpu", "1"]),
            _ => spawn
                .args(["--hdd", "1", "--hdd-bytes", "16M", "--temp-path"])
                .arg(scratch),
        };
        if let Some(c) = cpu {
            spawn = spawn.args(["--taskset", &c.to_string()]);
        }
        let child = spawn
            .args(["--timeout", "600s", "--quiet"])
            .what("stress-ng (apt-get install stress-ng)")
            .null_stdio()
            .process_group()
            .spawn()?;
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
