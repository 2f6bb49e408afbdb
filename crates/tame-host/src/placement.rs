//! Where a thread runs, as far as tame changes it: its CPU affinity, its
//! scheduling attributes and the cgroup task list it is in. The journal records
//! a thread's placement before changing it ([`crate::journal::Journal::place`]).

use std::io;

use tame_rt::sched::ThreadSched;

use crate::CpuList;

/// A thread's placement; each part is `None` when it is not concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadPlacement {
    pub affinity: Option<CpuList>,
    pub sched: Option<ThreadSched>,
    /// The cgroup task list the thread is in (host path, such as
    /// `/sys/fs/cgroup/cpuset/tame-rt/tasks`); joining it is writing the id there.
    pub cgroup: Option<String>,
}

impl ThreadPlacement {
    pub fn is_empty(&self) -> bool {
        self.affinity.is_none() && self.sched.is_none() && self.cgroup.is_none()
    }
}

/// Which part of a placement could not be read or made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceStep {
    /// Reading the previous placement (before anything was changed).
    Read,
    Cgroup,
    Affinity,
    Sched,
}

/// A placement the kernel refused (the journal itself worked).
#[derive(Debug, thiserror::Error)]
#[error("cannot {} thread {tid}: {source}", step_text(*.step))]
pub struct PlaceError {
    pub tid: u32,
    pub step: PlaceStep,
    #[source]
    pub source: io::Error,
}

impl PlaceError {
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

fn step_text(step: PlaceStep) -> &'static str {
    match step {
        PlaceStep::Read => "read the placement of",
        PlaceStep::Cgroup => "move into its cgroup",
        PlaceStep::Affinity => "set the affinity of",
        PlaceStep::Sched => "set the policy of",
    }
}

/// `POLICY:PRIORITY:NICE:RESET_ON_FORK:RUNTIME:DEADLINE:PERIOD`, one journal field.
pub(crate) fn sched_field(s: &ThreadSched) -> String {
    format!(
        "{}:{}:{}:{}:{}:{}:{}",
        s.policy,
        s.priority,
        s.nice,
        u8::from(s.reset_on_fork),
        s.dl_runtime_ns,
        s.dl_deadline_ns,
        s.dl_period_ns
    )
}

pub(crate) fn parse_sched_field(field: &str) -> Option<ThreadSched> {
    let f: Vec<&str> = field.split(':').collect();
    if f.len() != 7 {
        return None;
    }
    Some(ThreadSched {
        policy: f[0].parse().ok()?,
        priority: f[1].parse().ok()?,
        nice: f[2].parse().ok()?,
        reset_on_fork: match f[3] {
            "0" => false,
            "1" => true,
            _ => return None,
        },
        dl_runtime_ns: f[4].parse().ok()?,
        dl_deadline_ns: f[5].parse().ok()?,
        dl_period_ns: f[6].parse().ok()?,
    })
}

/// Short text for reports: `affinity 0-3, policy 0 priority 0, cgroup /…/tasks`.
pub fn describe(p: &ThreadPlacement) -> String {
    let mut parts = Vec::new();
    if let Some(a) = &p.affinity {
        parts.push(format!("affinity {a}"));
    }
    if let Some(s) = &p.sched {
        parts.push(format!("policy {} priority {}", s.policy, s.priority));
    }
    if let Some(c) = &p.cgroup {
        parts.push(format!("cgroup {c}"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_field_round_trips() {
        let s = ThreadSched {
            policy: 6,
            priority: 0,
            nice: -5,
            reset_on_fork: true,
            dl_runtime_ns: 1,
            dl_deadline_ns: 2,
            dl_period_ns: 3,
        };
        assert_eq!(parse_sched_field(&sched_field(&s)), Some(s));
        assert_eq!(parse_sched_field("1:2:3"), None);
        assert_eq!(parse_sched_field("1:2:3:x:0:0:0"), None);
    }
}
