//! tame-reserve-kit: hidden helper for tests.
//!
//! - `work FILE`, `frames FILE ROUNDS FRAME_NS`, `serve SOCKET …`: the study's helpers
//!   ([`tame_reserve::kit`]; `tame bench reserve` runs them as `tame reserve-kit …`);
//! - `recover SOCKET`: as `tame serve --recover`;
//! - `call SOCKET JSON`: send one request, print the answer; exit 0, 2 (invalid, refused) or 1;
//! - `threads FILE`: a waiting main thread and a busy second one, which exits once FILE exists;
//! - `idle-threads N`: a waiting main thread and N more that only sleep (a client with many
//!   threads, for the server's cost per thread);
//! - `spawn-at PID PROGRAM [ARG…]`: run PROGRAM as a process with exactly this PID (a
//!   reused thread id, for tests), and wait for it.

use std::path::PathBuf;

use tame_reserve::kit::exit_code;
use tame_reserve::server::daemon;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match tame_reserve::kit::helper_mode(&args) {
        Some(code) => code,
        None => match args.first().map(String::as_str) {
            Some("recover") if args.len() == 2 => recover(&args[1]),
            Some("call") if args.len() == 3 => call(&args[1], &args[2]),
            Some("threads") if args.len() == 2 => threads(&args[1]),
            Some("idle-threads") if args.len() == 2 => idle_threads(&args[1]),
            Some("spawn-at") if args.len() >= 3 => spawn_at(&args[1], &args[2..]),
            _ => {
                eprintln!("usage: tame-reserve-kit work FILE | frames FILE ROUNDS FRAME_NS | serve SOCKET [CAP_PPM] [--policy FILE] [--journal-dir DIR] | recover SOCKET | call SOCKET JSON | threads FILE | idle-threads N | spawn-at PID PROGRAM [ARG…] (the study is `tame bench reserve`)");
                2
            }
        },
    };
    std::process::exit(code);
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

fn idle_threads(count: &str) -> i32 {
    let Ok(count) = count.parse::<usize>() else {
        eprintln!("idle-threads: {count:?} is not a number");
        return 2;
    };
    for _ in 0..count {
        let made = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| loop {
                std::thread::park();
            });
        if let Err(e) = made {
            eprintln!("idle-threads: {e}");
            return 1;
        }
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
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
