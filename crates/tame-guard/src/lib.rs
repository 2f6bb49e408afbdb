//! `tame guard`: watch every applied partition and report its erosion live.
//!
//! Each pass reads the truth through tame-host and tame-partition's status (drift from what
//! apply wrote, the tasks allowed on isolated CPUs, the IRQs firing there) plus the interrupt
//! rate of each isolated CPU, and reports only what changed since the previous pass
//! ([`observe`]: what is there; [`guard::Guard::settle`]: what appeared or went). Tracepoints
//! (fork, new task, migration to an isolated CPU) only wake it early for the tasks they
//! name ([`waker`]); the periodic pass catches the rest (a `taskset` emits no tracepoint).
//! With `repair`, a stray task is placed back on the system partition and a drifted value
//! written again, always through the apply journal ([`repair`]), and a thing that keeps
//! coming back is left alone for a while ([`backoff`]). Each event is one logfmt line
//! ([`event`]) and a count in [`metrics::Metrics`].

pub mod backoff;
pub mod event;
pub mod guard;
pub mod metrics;
pub mod observe;
pub mod repair;
pub mod waker;

pub use event::{Action, Event, Kind};
pub use guard::{run, Config, Guard};
pub use metrics::Metrics;

/// The default interrupt rate above which an isolated CPU is reported (interrupts per second,
/// every line of /proc/interrupts summed): four times the 250 Hz tick of a busy CPU.
pub const DEFAULT_MAX_IRQ_RATE: u64 = 1000;
