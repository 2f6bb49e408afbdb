//! tame-reserve-kit: hidden helper for tests and bench/reserve.sh.
//!
//! - `work COUNTER_FILE`: the work kernel, forever, counting rounds in the file's mapping;
//! - `serve SOCKET [CAP_PPM]`: a scheduling server (as `tame serve`), stopped by SIGTERM/SIGINT;
//! - `bench [--quick] [--json FILE] [--md FILE] [--cpu N] [--backends a,b]`: the study.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_reserve::bench::{self, Options};
use tame_reserve::server::daemon::{self, Config};
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
        Some("serve") if args.len() >= 2 => serve(&args[1], args.get(2)),
        Some("bench") => run_bench(&args[1..]),
        _ => {
            eprintln!("usage: tame-reserve-kit work FILE | serve SOCKET [CAP_PPM] | bench [--quick] [--json FILE] [--md FILE] [--cpu N] [--backends server,deadline,cgroup]");
            2
        }
    };
    std::process::exit(code);
}

fn serve(socket: &str, cap: Option<&String>) -> i32 {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("serve: {e}");
            return 1;
        }
    }
    let config = Config {
        socket: PathBuf::from(socket),
        cap_ppm: cap.and_then(|c| c.parse().ok()).unwrap_or(DEFAULT_CAP_PPM),
        root: tame_host::Root::system(),
    };
    match daemon::serve(config, stop) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("serve: {e}");
            if e.is_bad_input() {
                2
            } else {
                1
            }
        }
    }
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
