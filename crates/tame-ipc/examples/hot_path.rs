//! Hot-path timing of the typed ring and the register: ns per operation, best and
//! median of several rounds. A measurement tool, not a test:
//!
//!     cargo run --release -p tame-ipc --example hot_path
//!
//! On a busy machine compare the best of several runs, pinned (`taskset -c N`); or
//! count instructions, which noise does not change:
//! `HOT_PATH_OPS=20000 valgrind --tool=callgrind target/release/examples/hot_path`.
//!
//! Single-threaded loops measure the instructions of push/pop (the slot copy included)
//! without cross-core cache traffic, so a change to how slots are copied shows here.

use std::hint::black_box;
use std::time::Instant;

use tame_ipc::{ChannelSpec, Pod, Register, Ring};

const ROUNDS: usize = 15;

fn report(what: &str, mut samples: Vec<f64>) {
    samples.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{what:<34} best {:>7.2} ns/op   median {:>7.2} ns/op",
        samples[0],
        samples[samples.len() / 2]
    );
}

fn ring_pair<T: Pod>(what: &str, ops: u64) {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<T>(1024)).unwrap();
    let mut tx = ring.producer::<T>().unwrap();
    let mut rx = ring.consumer::<T>().unwrap();
    let value = T::zeroed();
    let samples = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ops {
                tx.push(black_box(value)).unwrap();
                black_box(rx.pop().unwrap());
            }
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    report(what, samples);
}

fn ring_batch<T: Pod>(what: &str, ops: u64) {
    const BATCH: usize = 32;
    let ring = Ring::create_anonymous(ChannelSpec::ring::<T>(1024)).unwrap();
    let mut tx = ring.producer::<T>().unwrap();
    let mut rx = ring.consumer::<T>().unwrap();
    let input = vec![T::zeroed(); BATCH];
    let mut output = vec![T::zeroed(); BATCH];
    let samples = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ops / BATCH as u64 {
                assert_eq!(tx.push_slice(black_box(&input)), Ok(BATCH));
                assert_eq!(rx.pop_into(black_box(&mut output)), Ok(BATCH));
            }
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    report(what, samples);
}

fn raw_pair(what: &str, size: usize, ops: u64) {
    let ring = Ring::create_anonymous(ChannelSpec::raw(tame_ipc::Kind::Ring, size as u32, 8, 1024))
        .unwrap();
    let mut tx = ring.raw_producer().unwrap();
    let mut rx = ring.raw_consumer().unwrap();
    let input = vec![7u8; size];
    let mut output = vec![0u8; size];
    let samples = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ops {
                tx.push_bytes(black_box(&input)).unwrap();
                rx.pop_bytes(black_box(&mut output)).unwrap();
            }
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    report(what, samples);
}

fn register_pair(what: &str, ops: u64) {
    let register = Register::create_anonymous(ChannelSpec::register::<[u64; 8]>()).unwrap();
    let mut writer = register.writer::<[u64; 8]>().unwrap();
    let mut reader = register.reader::<[u64; 8]>().unwrap();
    let samples = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for i in 0..ops {
                writer.write(black_box(&[i; 8]));
                black_box(reader.read().unwrap());
            }
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    report(what, samples);
}

fn main() {
    // HOT_PATH_OPS: operations per round (default 2 000 000; smaller under valgrind).
    let ops = std::env::var("HOT_PATH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    // An argument selects the cases whose name contains it.
    let only = std::env::args().nth(1).unwrap_or_default();
    let run = |name: &str| name.contains(only.as_str());
    if run("ring push+pop u64") {
        ring_pair::<u64>("ring push+pop u64", ops);
    }
    if run("ring push+pop [u8; 64]") {
        ring_pair::<[u8; 64]>("ring push+pop [u8; 64]", ops);
    }
    if run("ring push+pop [u64; 32] (256 B)") {
        ring_pair::<[u64; 32]>("ring push+pop [u64; 32] (256 B)", ops);
    }
    if run("ring 32-batch u64 (per element)") {
        ring_batch::<u64>("ring 32-batch u64 (per element)", ops);
    }
    if run("ring 32-batch [u8; 64] (per elem)") {
        ring_batch::<[u8; 64]>("ring 32-batch [u8; 64] (per elem)", ops);
    }
    if run("raw push+pop 64 B") {
        raw_pair("raw push+pop 64 B", 64, ops);
    }
    if run("register write+read [u64; 8]") {
        register_pair("register write+read [u64; 8]", ops);
    }
}
