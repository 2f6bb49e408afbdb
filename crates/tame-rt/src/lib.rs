//! In-process helpers for time-critical threads: clocks (CLOCK_MONOTONIC and
//! calibrated invariant TSC), absolute-time sleeping, scheduling policy and
//! affinity, memory locking and prefaulting, /dev/cpu_dma_latency, and durations
//! as people type them.
//!
//! Nothing here reads /proc or /sys: host facts (such as whether the TSC is
//! invariant) come from `tame-host` and are passed in.

pub mod clock;
pub mod duration;
pub mod memory;
pub mod plural;
pub mod sched;
pub mod size;

pub use clock::{Clock, ClockKind, TscCalibration};
pub use sched::{Policy, SchedError};

/// Nanoseconds per second, the one place this constant lives.
pub const NS_PER_SEC: u64 = 1_000_000_000;
