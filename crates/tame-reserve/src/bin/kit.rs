//! tame-reserve-kit: hidden helper for tests and bench/reserve.sh.
//!
//! - `work COUNTER_FILE`: the work kernel, forever, counting rounds in the file's mapping;
//! - `serve SOCKET [CAP_PPM] [--policy FILE] [--journal-dir DIR]`: a scheduling server (as
//!   `tame serve`), stopped by SIGTERM/SIGINT; without `--policy` root may reserve any CPU
//!   (the kit serves tests and benchmarks on machines without partitions);
//! - `recover SOCKET`: as `tame serve --recover`;
//! - `call SOCKET JSON`: send one request, print the answer; exit 0, 2 (invalid, refused) or 1;
//! - `threads FILE`: a waiting main thread and a busy second one, which exits once FILE exists;
//! - `spawn-at PID PROGRAM [ARG…]`: run PROGRAM as a process with exactly this PID (a
//!   reused thread id, for tests), and wait for it;
//! - `bench [--quick] [--json FILE] [--md FILE] [--cpu N] [--backends a,b]`: the study.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_reserve::bench::{self, Options};
use tame_reserve::server::daemon::{self, Config};
use tame_reserve::server::policy::{self, Policy};
use tame_reserve::spec::{Backend, DEFAULT_CAP_PPM};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("work") if args.len() == 2 => {
            match tame_reserve::work::Counter::open(args[1].as_ref()) {
                Ok(c) => tame_reserve::work::run_forever(&c),
                Err(e) => {
                    eprintln!("work: {e}");
                    1
                }
            }
        }
        Some("frames") if args.len() == 4 => {
            match (
                tame_reserve::work::Counter::open(args[1].as_ref()),
                args[2].parse::<u64>(),
                args[3].parse::<u64>(),
            ) {
                (Ok(c), Ok(rounds), Ok(frame_ns)) => {
                    tame_reserve::work::run_frames(&c, rounds, frame_ns)
                }
                _ => {
                    eprintln!("frames: FILE ROUNDS FRAME_NS");
                    2
                }
            }
        }
        Some("serve") if args.len() >= 2 => serve(&args[1..]),
        Some("recover") if args.len() == 2 => recover(&args[1]),
        Some("call") if args.len() == 3 => call(&args[1], &args[2]),
        Some("threads") if args.len() == 2 => threads(&args[1]),
        Some("spawn-at") if args.len() >= 3 => spawn_at(&args[1], &args[2..]),
        Some("bench") => run_bench(&args[1..]),
        _ => {
            eprintln!("usage: tame-reserve-kit work FILE | serve SOCKET [CAP_PPM] [--policy FILE] [--journal-dir DIR] | recover SOCKET | call SOCKET JSON | threads FILE | spawn-at PID PROGRAM [ARG…] | bench [--quick] [--json FILE] [--md FILE] [--cpu N] [--backends server,deadline,cgroup]");
            2
        }
    };
    std::process::exit(code);
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
        journal_dir: policy::journal_dir(&root, value("--journal-dir").as_deref().map(Path::new)),
        policy,
        root,
    };
    exit_code("serve", daemon::serve(config, stop).map(|()| 0))
}

fn exit_code(what: &str, r: Result<i32, tame_reserve::ReserveError>) -> i32 {
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

fn recover(socket: &str) -> i32 {
    let r = daemon::recover(&tame_host::Root::system(), socket.as_ref());
    exit_code(
        "recover",
        r.map(|done| {
            println!("{}", daemon::describe(&done));
            0
        }),
    )
}

fn call(socket: &str, json: &str) -> i32 {
    let request = match serde_json::from_str(json) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("call: not a request: {e}");
            return 2;
        }
    };
    let r = tame_reserve::server::client::call(socket.as_ref(), &request);
    exit_code(
        "call",
        r.map(|status| {
            println!("{}", serde_json::to_string(&status).unwrap_or_default());
            0
        }),
    )
}

fn busy_until(stop: impl Fn() -> bool) {
    let mut x = 0u64;
    while !stop() {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn threads(file: &str) -> i32 {
    let path = PathBuf::from(file);
    std::thread::spawn(move || busy_until(|| path.exists()));
    // The main thread only waits: on one CPU, threads raised together to the same FIFO
    // priority do not share it, so a spinning main thread could starve the second.
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// clone3 with `set_tid`: the child gets exactly `pid` (root, Linux ≥ 5.5), then execs.
fn spawn_at(pid: &str, command: &[String]) -> i32 {
    use std::ffi::CString;
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        eprintln!("spawn-at: {pid:?} is not a pid");
        return 2;
    };
    let Ok(argv): Result<Vec<CString>, _> =
        command.iter().map(|a| CString::new(a.as_str())).collect()
    else {
        eprintln!("spawn-at: an argument holds a NUL byte");
        return 2;
    };
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let tids = [pid];
    // SAFETY: an all-zero clone_args asks for nothing; the fields set below are plain values.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.exit_signal = libc::SIGCHLD as u64;
    args.set_tid = tids.as_ptr() as u64;
    args.set_tid_size = 1;
    // SAFETY: clone3 without CLONE_VM is a fork: the child has its own copy of this
    // single-threaded process and only execs or exits.
    let child = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if child < 0 {
        eprintln!(
            "spawn-at: clone3 with pid {pid}: {}",
            std::io::Error::last_os_error()
        );
        return 1;
    }
    if child == 0 {
        // SAFETY: argv and its pointers were made before the clone and are NUL-terminated.
        unsafe {
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    println!("{child}");
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(child as libc::pid_t, &mut status, 0) };
    0
}

fn run_bench(args: &[String]) -> i32 {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let scratch = match tempfile_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bench: {e}");
            return 1;
        }
    };
    let backends: Vec<Backend> = value("--backends")
        .unwrap_or_else(|| "server,deadline,cgroup".into())
        .split(',')
        .filter_map(|b| b.parse().ok())
        .collect();
    let o = Options {
        kit: std::env::current_exe().expect("own path"),
        scratch: scratch.clone(),
        state_dir: scratch.join("state"),
        cpu: value("--cpu").and_then(|c| c.parse().ok()).unwrap_or(1),
        backends,
        shares_ppm: if quick {
            vec![200_000, 500_000, 800_000]
        } else {
            (1..=9).map(|i| i * 100_000).collect()
        },
        period_ns: 40_000_000,
        warmup_ns: 500_000_000,
        overhead_window_ns: if quick { 1_000_000_000 } else { 3_000_000_000 },
        stability_share_ppm: 500_000,
        // Five whole periods: a window always holds the same number of slices.
        stability_window_ns: 200_000_000,
        windows_per_step: if quick { 3 } else { 10 },
        unloaded_windows: if quick { 20 } else { 100 },
        max_load: 10,
        frame_ns: 100_000_000,
        frame_cpu_ns: 15_000_000,
        frames: if quick { 10 } else { 30 },
    };
    let command = format!("tame-reserve-kit bench {}", args.join(" "));
    let result = bench::run(&o, |line| eprintln!("{line}"));
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok(report) => {
            let md = bench::markdown(&report, command.trim());
            if let Some(p) = value("--json") {
                let _ =
                    std::fs::write(p, serde_json::to_string_pretty(&report).unwrap_or_default());
            }
            match value("--md") {
                Some(p) => {
                    let _ = std::fs::write(p, &md);
                }
                None => print!("{md}"),
            }
            0
        }
        Err(e) => {
            eprintln!("bench: {e}");
            1
        }
    }
}

/// Scratch space on disk (not tmpfs: the disk-I/O load must reach the disk).
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = PathBuf::from(format!(
        "/var/tmp/tame-reserve-bench-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
