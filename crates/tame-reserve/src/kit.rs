//! The processes the reservation study starts are this program itself in a helper mode:
//! `work FILE` (the work kernel, counting rounds in the file's mapping, forever),
//! `frames FILE ROUNDS FRAME_NS` (the periodic client) and `serve SOCKET [CAP_PPM]
//! [--policy FILE] [--journal-dir DIR]` (a scheduling server, stopped by SIGTERM/SIGINT;
//! without `--policy` root may reserve any CPU). Both `tame` (hidden `tame reserve-kit …`)
//! and the test binary `tame-reserve-kit` run them through [`helper_mode`].

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_launch::spawn::{Launched, Spawn};
use tame_rt::clock::monotonic_ns;

use crate::error::{failed, Result};
use crate::server::daemon::{self, Config};
use crate::server::policy::Policy;
use crate::spec::DEFAULT_CAP_PPM;

/// How to start a helper: the program and the arguments before the mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kit {
    pub program: PathBuf,
    pub prefix: Vec<String>,
}

impl Kit {
    /// The program itself, its helper modes right after `prefix` (`tame reserve-kit work …`).
    pub fn this_program(prefix: &[&str]) -> std::io::Result<Self> {
        Ok(Kit {
            program: std::env::current_exe()?,
            prefix: prefix.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// A program whose first argument is the mode (`tame-reserve-kit work …`).
    pub fn at(program: &Path) -> Self {
        Kit {
            program: program.to_path_buf(),
            prefix: Vec::new(),
        }
    }

    /// The helper `mode` to start (through the one spawner), its arguments still to add.
    pub fn spawn(&self, mode: &str) -> Spawn {
        Spawn::program(&self.program).args(&self.prefix).arg(mode)
    }
}

/// A `tame serve` helper process (the study's server backend, the server's system tests);
/// stopped (SIGTERM) when dropped.
pub struct ServerProcess {
    child: Launched,
    pub socket: PathBuf,
}

impl ServerProcess {
    pub fn start(kit: &Kit, socket: &Path) -> Result<Self> {
        let child = kit
            .spawn("serve")
            .arg(socket)
            .what("the server")
            .stdin(Stdio::null())
            .process_group()
            // A server never outlives its starter.
            .die_with_parent(libc::SIGTERM)
            .spawn()?;
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
        &mut self.child.child
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

/// Run the helper mode `args` names; `None` when `args` names none of them.
pub fn helper_mode(args: &[String]) -> Option<i32> {
    let code = match args.first().map(String::as_str) {
        Some("work") if args.len() == 2 => match crate::work::Counter::open(args[1].as_ref()) {
            Ok(c) => crate::work::run_forever(&c),
            Err(e) => {
                eprintln!("work: {e}");
                1
            }
        },
        Some("frames") if args.len() == 4 => match (
            crate::work::Counter::open(args[1].as_ref()),
            args[2].parse::<u64>(),
            args[3].parse::<u64>(),
        ) {
            (Ok(c), Ok(rounds), Ok(frame_ns)) => crate::work::run_frames(&c, rounds, frame_ns),
            _ => {
                eprintln!("frames: FILE ROUNDS FRAME_NS");
                2
            }
        },
        Some("serve") if args.len() >= 2 => serve(&args[1..]),
        _ => return None,
    };
    Some(code)
}

fn serve(args: &[String]) -> i32 {
    let socket = &args[0];
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let cap = args.get(1).filter(|a| !a.starts_with("--"));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("serve: {e}");
            return 1;
        }
    }
    let root = tame_host::Root::system();
    let cap_ppm = cap.and_then(|c| c.parse().ok()).unwrap_or(DEFAULT_CAP_PPM);
    let mut policy = match value("--policy") {
        Some(p) => match Policy::load(&root, Some(p.as_ref())) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("serve: {e}");
                return 2;
            }
        },
        None => Policy::root_on_every_cpu(cap_ppm),
    };
    if cap.is_some() {
        policy.cap_ppm = cap_ppm;
    }
    let config = Config {
        socket: PathBuf::from(socket),
        journal_dir: tame_host::journal::journal_dir(
            &root,
            value("--journal-dir").as_deref().map(Path::new),
        ),
        policy,
        root,
    };
    exit_code("serve", daemon::serve(config, stop).map(|()| 0))
}

/// The exit code of a helper's outcome: 2 for bad input, 1 for any other failure.
pub fn exit_code(what: &str, r: Result<i32, crate::ReserveError>) -> i32 {
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{what}: {e}");
            if e.is_bad_input() {
                2
            } else {
                1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_is_started_with_its_prefix_then_its_mode() {
        let kit = Kit {
            program: "/usr/bin/tame".into(),
            prefix: vec!["reserve-kit".into()],
        };
        let spawn = kit.spawn("work");
        let (program, args) = spawn.program_and_args();
        assert_eq!(program, "/usr/bin/tame");
        assert_eq!(args, ["reserve-kit", "work"]);
        assert_eq!(
            Kit::at("/k".as_ref())
                .spawn("serve")
                .program_and_args()
                .1
                .len(),
            1
        );
    }

    #[test]
    fn only_the_study_modes_are_helper_modes() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Unknown modes and wrong arities are not run (the caller says how to use it).
        assert_eq!(helper_mode(&args(&["spawn-at", "1", "true"])), None);
        assert_eq!(helper_mode(&args(&["work"])), None);
        assert_eq!(helper_mode(&args(&[])), None);
        // A frames call with arguments that do not parse is bad input.
        assert_eq!(
            helper_mode(&args(&["frames", "/nonexistent/c", "x", "y"])),
            Some(2)
        );
    }
}
