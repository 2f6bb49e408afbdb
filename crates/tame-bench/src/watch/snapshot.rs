//! What one miss looked like: the CPU's time line over the window before the
//! activation ended, each stretch owned by what ran (the watched thread, another
//! thread with its priority, an interrupt, a timer, idle), with the activation's
//! release, start, deadline and end marked. Written as JSON (`miss-N.json`) and drawn
//! as an SVG figure (`miss-N.svg`, and in `tame report`).

use serde::{Deserialize, Serialize};
use tame_trace::attribute::Span;
use tame_trace::NoiseClass;

use super::Cause;

/// The snapshot document's schema tag.
pub const SCHEMA: &str = "tame.watch-snapshot/1";

/// One stretch of the CPU's time line in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotSpan {
    /// From the window's start.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// `None`: the watched thread ran.
    pub class: Option<NoiseClass>,
    /// What ran: `comm/pid`, a handler's or timer's name, `idle`; the watched thread's label.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
}

/// A miss and the time line leading up to it. Times are ns from `window_start_ns`
/// (the trace's time line), negative where before the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub schema: String,
    /// The thread's label in the result.
    pub thread: String,
    pub tid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
    /// The CPU whose time line this is (where the activation ended).
    pub cpu: u32,
    /// The miss's number among the thread's activations (1 = its first).
    pub activation: u64,
    /// What released the activation (a timer, a wakeup); absent in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by: Option<super::ReleasedBy>,
    pub window_start_ns: u64,
    pub window_ns: u64,
    pub release_ns: i64,
    pub start_ns: i64,
    pub deadline_ns: i64,
    pub end_ns: i64,
    pub wake_latency_ns: u64,
    pub response_ns: u64,
    pub run_ns: u64,
    /// What delayed this activation, most time first.
    pub causes: Vec<Cause>,
    pub spans: Vec<SnapshotSpan>,
}

impl Snapshot {
    /// What made the activation late, in words: the cause that took most of the delay
    /// (`thread competitor/812 (real-time 90)`), or the thread's own work where that ran
    /// longer than every delay (an overrun of its own).
    pub fn main_cause(&self) -> Option<String> {
        let top = self.causes.first();
        if self.run_ns > 0 && top.is_none_or(|c| c.total_ns < self.run_ns) {
            return Some(format!(
                "its own run time ({})",
                tame_rt::duration::format_ns_as(self.run_ns, tame_rt::duration::NsStyle::Fixed)
            ));
        }
        top.map(describe)
    }

    pub fn to_json(&self) -> String {
        crate::json::pretty(self).expect("snapshots serialise: all keys are strings")
    }
}

/// A cause in words, with a thread's priority as a user sets it (`real-time 90`,
/// `normal, nice 0`); a source named as its class (`idle`, `unexplained`) once.
pub fn describe(c: &Cause) -> String {
    let what = if c.source == c.class.as_str() {
        c.source.clone()
    } else {
        format!("{} {}", c.class, c.source)
    };
    match c.prio {
        Some(p) => format!("{what} ({})", priority_words(p)),
        None => what,
    }
}

/// A kernel priority as a user would set it: -1 deadline, 0..=98 real-time (FIFO/RR
/// 99..=1), 100..=139 normal (nice -20..=19).
pub fn priority_words(kernel_prio: i32) -> String {
    match kernel_prio {
        -1 => "deadline".into(),
        p @ 0..=98 => format!("real-time {}", 99 - p),
        p @ 100..=139 => format!("normal, nice {}", p - 120),
        p => format!("kernel priority {p}"),
    }
}

/// The spans of a time line window as a snapshot shows them: relative to `from`, the
/// detector's stretches named `watched`.
pub fn spans_from(spans: &[Span], from: u64, watched: &str) -> Vec<SnapshotSpan> {
    spans
        .iter()
        .map(|s| {
            let (class, source) = super::analyze::classify(s.class, &s.source);
            SnapshotSpan {
                start_ns: s.start_ns.saturating_sub(from),
                duration_ns: s.duration_ns,
                class,
                source: if class.is_none() {
                    watched.to_string()
                } else {
                    source.to_string()
                },
                prio: s.prio.filter(|_| class == Some(NoiseClass::Thread)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_read_as_a_user_sets_them() {
        assert_eq!(priority_words(9), "real-time 90");
        assert_eq!(priority_words(120), "normal, nice 0");
        assert_eq!(priority_words(-1), "deadline");
        let c = Cause {
            class: NoiseClass::Thread,
            source: "competitor/812".into(),
            prio: Some(9),
            count: 1,
            total_ns: 5,
            max_ns: 5,
        };
        assert_eq!(describe(&c), "thread competitor/812 (real-time 90)");
        let idle = Cause {
            class: NoiseClass::Idle,
            source: "idle".into(),
            prio: None,
            ..c
        };
        assert_eq!(describe(&idle), "idle");
    }
}
