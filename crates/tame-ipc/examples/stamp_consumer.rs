//! The Rust consumer of `stamp_producer`'s stamps (or of a Python producer's:
//! `crates/tame-ipc-py/examples/stamp_producer.py`): checks every message (intact, in
//! order, a gap only where the producer reported the ring full), measures one-way
//! latency, and watches the producer's liveness.
//!
//!     cargo run --release -p tame-ipc --example stamp_consumer -- \
//!         (--name NAME | --fd N) [--capacity 1024] [--count N] [--timeout-s 30] \
//!         [--until-dead] [--sleep-us 0] [--latency-out FILE]
//!
//! It opens an existing ring, prints `READY` once it holds the consumer role, then
//! pops until COUNT attempts are accounted for, or — with --until-dead — until the
//! producer, seen alive before, is gone: `Dead` (tame-ipc's liveness check, made
//! whenever the ring is empty for 10 ms), or `Absent` (it let the role go on exit). Between empty polls it spins, or sleeps SLEEP_US. Prints `received R
//! reported_full F producer STATE` and, with --latency-out, writes each latency (ns)
//! on a line of FILE. Exit 0 on success, 1 on a check that failed or a timeout.

mod stamp;

use std::io::Write;
use std::time::{Duration, Instant};

use stamp::{monotonic_ns, Args, Stamp, Tracker};
use tame_ipc::{PeerState, PopError};

const USAGE: &str = "stamp_consumer (--name NAME | --fd N) [--capacity 1024] [--count N] [--timeout-s 30] [--until-dead] [--sleep-us 0] [--latency-out FILE]";

fn main() {
    let args = Args::parse(USAGE, &["until-dead"]);
    let count = args.value("count").map(|_| args.number("count", 0));
    let until_dead = args.flag("until-dead");
    if count.is_none() && !until_dead {
        stamp::fail(USAGE, "give --count N, --until-dead, or both");
    }
    let timeout = Duration::from_secs(args.number("timeout-s", 30));
    let sleep = Duration::from_micros(args.number("sleep-us", 0));
    let ring = args.ring();
    let mut rx = ring.consumer::<Stamp>().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    println!("READY");
    let _ = std::io::stdout().flush();

    let mut tracker = Tracker::default();
    let mut latencies = Vec::with_capacity(count.unwrap_or(1 << 16) as usize);
    let deadline = Instant::now() + timeout;
    // When the ring last gave a message, in the clock the latencies use: one clock read per
    // message, not two.
    let mut empty_since_ns = monotonic_ns();
    let mut seen_alive = false;
    let state = loop {
        if count.is_some_and(|n| tracker.accounted() >= n) {
            break rx.producer_state();
        }
        match rx.pop() {
            Ok(stamp) => {
                let now = monotonic_ns();
                latencies.push(now.saturating_sub(stamp.sent_ns));
                if let Err(why) = tracker.accept(&stamp) {
                    eprintln!("error: {why}");
                    std::process::exit(1);
                }
                empty_since_ns = now;
                continue;
            }
            Err(PopError::Empty) => {}
            Err(e) => {
                eprintln!("error: pop failed: {e:?}");
                std::process::exit(1);
            }
        }
        if Instant::now() > deadline {
            eprintln!(
                "error: timed out after {timeout:?}: received {}, producer {:?}",
                tracker.received,
                rx.producer_state()
            );
            std::process::exit(1);
        }
        if until_dead && monotonic_ns().saturating_sub(empty_since_ns) > 10_000_000 {
            // Empty for a while: a live producer may be slow; ask whether it is gone.
            match rx.producer_state() {
                PeerState::Dead { pid } if seen_alive => {
                    println!("producer {pid} dead");
                    break PeerState::Dead { pid };
                }
                PeerState::Absent if seen_alive => break PeerState::Absent,
                PeerState::Alive { .. } => seen_alive = true,
                _ => {}
            }
            empty_since_ns = monotonic_ns();
        }
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        } else {
            std::hint::spin_loop();
        }
        if until_dead && !seen_alive {
            seen_alive = matches!(rx.producer_state(), PeerState::Alive { .. });
        }
    };
    let state = match state {
        PeerState::Absent => "absent".to_string(),
        PeerState::Alive { pid } => format!("alive {pid}"),
        PeerState::Dead { pid } => format!("dead {pid}"),
        PeerState::Unknown { pid } => format!("unknown {pid}"),
    };
    println!(
        "received {} reported_full {} producer {state}",
        tracker.received, tracker.reported_full
    );
    if let Some(path) = args.value("latency-out") {
        let text: String = latencies.iter().map(|ns| format!("{ns}\n")).collect();
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: cannot write {path}: {e}");
            std::process::exit(1);
        }
    }
}
