//! `tame watch`: every activation of an unmodified program's threads, from the
//! scheduler's, interrupts' and timers' tracepoints (a private tracefs instance, as
//! the noise bench uses), with what delayed each one and, on a miss, a snapshot of
//! the CPU's time line leading up to it.
//!
//! - [`track`]: the activations, from events in time order;
//! - [`analyze`]: the stream of events turned into figures per thread: the
//!   activations attributed against each CPU's time line, the period inferred, misses
//!   counted, snapshots taken;
//! - [`snapshot`]: what one miss looked like;
//! - [`run`]: the session: targets, tracing, reading, stopping;
//! - [`view`]: the human report.
//!
//! The result is the common one (one group per thread; metrics `wake_latency`,
//! `response`, `run_time`), with the findings beside it under `watch`, so compare,
//! report, the gate and the Prometheus export read it as any bench result.

pub mod analyze;
pub mod run;
pub mod snapshot;
pub mod track;
pub mod view;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_trace::tracefs::TraceClock;
use tame_trace::NoiseClass;

use crate::result::BenchResult;
pub use snapshot::Snapshot;
pub use track::ReleasedBy;

/// The bench name in the common schema.
pub const BENCH: &str = "watch";
/// Snapshots written at most unless `--snapshots` says otherwise.
pub const DEFAULT_SNAPSHOTS: u32 = 10;
/// What a snapshot shows before the miss unless `--window` says otherwise.
pub const DEFAULT_WINDOW_NS: u64 = 20_000_000;
/// Activations with a known release the period is inferred from.
pub const INFER_ACTIVATIONS: usize = 64;

/// What was watched and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchSettings {
    /// The processes watched (their threads, filtered by `threads`).
    pub pids: Vec<u32>,
    /// The command tame started and watched (`-- CMD`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// `--threads`: thread ids, or a regular expression on the thread's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<String>,
    /// The period asked for; `None`: inferred per thread.
    pub period_ns: Option<u64>,
    /// A response beyond it is a miss; `None`: the period (given or inferred).
    pub deadline_ns: Option<u64>,
    /// `None`: until the program ends or Ctrl-C.
    pub duration_ns: Option<u64>,
    /// How much of the CPU's time line a snapshot shows before the miss.
    pub window_ns: u64,
    /// Snapshots taken at most.
    pub snapshots: u32,
    /// The CPUs traced (every online one) and the trace clock: recorded by
    /// [`run::run`], whatever the caller put there.
    pub cpus: CpuList,
    pub trace_clock: TraceClock,
}

/// One cause of delay over a thread's activations (or in one activation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub class: NoiseClass,
    /// `comm/pid` for a thread, the handler's or timer's name otherwise, `idle` for a
    /// CPU that had to wake up.
    pub source: String,
    /// A thread's kernel priority (lower preempts: -1 deadline, 0..=98 real-time, 100..=139 normal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
    /// Activations it delayed.
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// How the activations of one thread were released.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Releases {
    pub timer: u64,
    pub wakeup: u64,
    /// Switched in without a wakeup seen: not in the distributions.
    pub unknown: u64,
}

/// What watching one thread found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadFindings {
    /// The group's label in the common result (the thread's name, `#2`… for namesakes).
    pub label: String,
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    /// Kernel priority as last switched in (lower preempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
    pub activations: u64,
    pub releases: Releases,
    /// The period used: given, or the median distance between releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
    pub period_inferred: bool,
    /// The deadline misses were judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// Activations whose response exceeded the deadline.
    pub misses: u64,
    /// Periods with no release at all (the program was still busy with an earlier one).
    pub missed_periods: u64,
    pub page_faults: u64,
    pub migrations: u64,
    pub involuntary_switches: u64,
    /// What delayed its activations (waiting to be switched in, preempted, interrupted
    /// while running), most total time first.
    pub causes: Vec<Cause>,
    /// Snapshots of its misses (indexes into [`WatchFindings::snapshots`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshot_ids: Vec<usize>,
}

/// How tracing went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStatus {
    pub tracefs_dir: String,
    pub events_enabled: Vec<String>,
    pub events_missing: Vec<String>,
    /// Events the kernel dropped before they were read, per CPU.
    pub lost: BTreeMap<u32, u64>,
    pub events_read: u64,
    /// Switches out of idle the trace lacked, inferred from the next task's first event
    /// (`tame_trace::idle`), per CPU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub idle_exits_inferred: BTreeMap<u32, u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recovered: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restore_problems: Vec<String>,
}

/// The watch's own findings, beside the common result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchFindings {
    pub threads: Vec<ThreadFindings>,
    pub trace: TraceStatus,
    /// The misses drawn (at most `settings.snapshots`), in the order they happened.
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    /// Where the snapshots were written (`--snapshot-on-miss DIR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_dir: Option<String>,
    /// The watched program's exit (`-- CMD`): its code, or the signal that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The common result with the watch findings beside it (`watch` at the top level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchResult {
    #[serde(flatten)]
    pub result: BenchResult<WatchSettings>,
    pub watch: WatchFindings,
}

impl WatchResult {
    pub fn to_json(&self) -> String {
        crate::json::pretty(self).expect("results serialise: all keys are strings")
    }
}
