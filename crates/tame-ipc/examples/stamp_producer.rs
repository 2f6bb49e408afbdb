//! A periodic real-time-style producer for cross-process tests and the Python latency
//! bench (`crates/tame-ipc-py/tests`, `bench/python-ipc.sh`): every PERIOD it stamps
//! CLOCK_MONOTONIC into a message and pushes it without waiting; a full ring counts
//! the attempt as refused (reported in the next stamp, see `stamp/mod.rs`).
//!
//!     cargo run --release -p tame-ipc --example stamp_producer -- \
//!         (--name NAME | --fd N) [--capacity 1024] [--count 1000] [--period-us 1000] \
//!         [--wait-consumer]
//!
//! It opens an existing ring (the other side creates it), prints `READY` once it holds
//! the producer role (after the consumer attached, with --wait-consumer), sleeps to
//! absolute deadlines (clock_nanosleep, no busy loop), and prints
//! `sent S full F max_push_ns P max_late_ns L elapsed_ns E` at the end. The loop
//! allocates nothing and makes no system call besides the sleep and the clock.

mod stamp;

use std::io::Write;
use std::time::{Duration, Instant};

use stamp::{monotonic_ns, Args, Stamp};
use tame_ipc::PeerState;

const USAGE: &str = "stamp_producer (--name NAME | --fd N) [--capacity 1024] [--count 1000] [--period-us 1000] [--wait-consumer]";

fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid absolute time; the remainder pointer may be null with
    // TIMER_ABSTIME. An EINTR wake is harmless: the next deadline is absolute.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

fn main() {
    let args = Args::parse(USAGE, &["wait-consumer"]);
    let count = args.number("count", 1000);
    let period_ns = args.number("period-us", 1000) * 1000;
    let ring = args.ring();
    let mut tx = ring.producer::<Stamp>().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    if args.flag("wait-consumer") {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(tx.consumer_state(), PeerState::Alive { .. }) {
            if Instant::now() > deadline {
                eprintln!("error: no consumer attached within 10 s");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    println!("READY");
    let _ = std::io::stdout().flush();

    let (mut sent, mut full, mut max_push, mut max_late) = (0u64, 0u64, 0u64, 0u64);
    let start = monotonic_ns() + period_ns;
    for seq in 0..count {
        let deadline = start + seq * period_ns;
        sleep_until(deadline);
        let now = monotonic_ns();
        max_late = max_late.max(now.saturating_sub(deadline));
        match tx.push(Stamp::new(seq, now, full)) {
            Ok(()) => sent += 1,
            Err(tame_ipc::PushError::Full) => full += 1,
            Err(e) => {
                eprintln!("error: push failed at seq {seq}: {e:?}");
                std::process::exit(1);
            }
        }
        max_push = max_push.max(monotonic_ns() - now);
    }
    println!(
        "sent {sent} full {full} max_push_ns {max_push} max_late_ns {max_late} elapsed_ns {}",
        monotonic_ns() - start
    );
}
