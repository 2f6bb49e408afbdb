//! Cross-core ping-pong and streaming of the typed ring at several message sizes, beside
//! the hardware floor (one cache line each way). A development tool for A/B runs of the
//! ring protocol (build it on two revisions and run them alternately); the benchmark of
//! record is `tame bench ipc`.
//!
//!     cargo run --release -p tame-ipc --example ping_pong [ROUND_TRIPS] [MESSAGES]
//!
//! Threads are pinned to CPUs 0 and 1 (sched_setaffinity); prints one-way latency
//! percentiles (round trip / 2) and streaming throughput per size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tame_ipc::{ChannelSpec, PopError, PushError, Ring};

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the call only
    // reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn percentiles(what: &str, mut ns: Vec<u64>) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize] as f64 / 2.0;
    println!(
        "{what:<14} one-way p50 {:>7.1} ns  p90 {:>7.1}  p99 {:>7.1}  p99.9 {:>8.1}",
        at(0.5),
        at(0.9),
        at(0.99),
        at(0.999)
    );
}

#[repr(align(128))]
struct Line(AtomicU64);

fn floor(round_trips: usize) {
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let (ping2, pong2) = (ping.clone(), pong.clone());
    let echo = std::thread::spawn(move || {
        pin(1);
        for i in 1..=(round_trips as u64 + 1000) {
            while ping2.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            pong2.0.store(i, Ordering::Release);
        }
    });
    pin(0);
    let mut samples = Vec::with_capacity(round_trips);
    for i in 1..=(round_trips as u64 + 1000) {
        let start = Instant::now();
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        if i > 1000 {
            samples.push(start.elapsed().as_nanos() as u64);
        }
    }
    echo.join().unwrap();
    percentiles("floor", samples);
}

fn ring<const N: usize>(round_trips: usize, messages: u64) {
    let spec = ChannelSpec::ring::<[u64; N]>(4096);
    let (there, back) = (
        Ring::create_anonymous(spec).unwrap(),
        Ring::create_anonymous(spec).unwrap(),
    );
    let (mut tx, mut rx_back) = (
        there.producer::<[u64; N]>().unwrap(),
        back.consumer::<[u64; N]>().unwrap(),
    );
    let (mut rx, mut tx_back) = (
        there.consumer::<[u64; N]>().unwrap(),
        back.producer::<[u64; N]>().unwrap(),
    );
    let total = round_trips + 1000;
    let echo = std::thread::spawn(move || {
        pin(1);
        for _ in 0..total {
            let value = loop {
                match rx.pop() {
                    Ok(v) => break v,
                    Err(PopError::Empty) => std::hint::spin_loop(),
                    Err(e) => panic!("{e:?}"),
                }
            };
            while tx_back.push(value) == Err(PushError::Full) {}
        }
        (rx, tx_back)
    });
    pin(0);
    let mut samples = Vec::with_capacity(round_trips);
    for i in 0..total {
        let start = Instant::now();
        while tx.push([i as u64; N]) == Err(PushError::Full) {}
        loop {
            match rx_back.pop() {
                Ok(_) => break,
                Err(PopError::Empty) => std::hint::spin_loop(),
                Err(e) => panic!("{e:?}"),
            }
        }
        if i >= 1000 {
            samples.push(start.elapsed().as_nanos() as u64);
        }
    }
    let (mut rx, _) = echo.join().unwrap();
    percentiles(&format!("ring {} B", N * 8), samples);

    // Streaming: the consumer pops one at a time, as a real-time reader would.
    let receiver = std::thread::spawn(move || {
        pin(1);
        let mut got = 0u64;
        while got < messages {
            match rx.pop() {
                Ok(_) => got += 1,
                Err(PopError::Empty) => std::hint::spin_loop(),
                Err(e) => panic!("{e:?}"),
            }
        }
    });
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < messages {
        if tx.push([sent; N]).is_ok() {
            sent += 1;
        }
    }
    receiver.join().unwrap();
    let rate = messages as f64 / start.elapsed().as_secs_f64();
    println!("ring {:>5} B   stream {:>6.2} M msgs/s", N * 8, rate / 1e6);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let round_trips = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let messages = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    floor(round_trips);
    ring::<1>(round_trips, messages);
    ring::<7>(round_trips, messages);
    ring::<8>(round_trips, messages);
    ring::<32>(round_trips, messages);
    ring::<128>(round_trips, messages);
    floor(round_trips);
}
