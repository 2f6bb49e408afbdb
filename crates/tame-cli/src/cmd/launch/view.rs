//! The human views of `tame detach` and `tame ps`: text made from what the launch
//! library reports (nothing is read or changed here).

use std::fmt::Write as _;

use tame_launch::detach::PlacementRecord;
use tame_launch::ps::{policy_name, Gone, PsRow};
use tame_rt::sched::SchedSpec;

/// Add a line to the text (writing to a `String` cannot fail).
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What detach changed per thread, and how to undo it; `sched` is the policy it set.
pub fn detached(record: &PlacementRecord, sched: Option<SchedSpec>) -> String {
    let placed = &record.placed;
    let mut o = String::new();
    line!(
        o,
        "detached process {} ({}) onto CPUs {}:",
        placed.pid,
        placed.comm,
        placed.cpus
    );
    for t in &record.threads {
        line!(
            o,
            "  thread {}: affinity {} → {}{}{}",
            t.tid,
            t.affinity,
            placed.cpus,
            sched
                .map(|s| format!(
                    ", policy {} → {} {}",
                    policy_name(t.sched.policy),
                    s.policy,
                    s.priority
                ))
                .unwrap_or_default(),
            match (&t.cpuset, &placed.cpuset) {
                (Some(old), Some(new)) => format!(", cpuset {old} → {new}"),
                _ => String::new(),
            }
        );
    }
    line!(
        o,
        "`tame attach {}` puts every thread back as it was.",
        placed.pid
    );
    o
}

/// One line per placed thread, with its counters since placement.
pub fn ps(rows: &[PsRow]) -> String {
    let mut o = String::new();
    if rows.is_empty() {
        line!(
            o,
            "nothing placed by tame is running (tame run / tame detach)"
        );
        return o;
    }
    line!(
        o,
        "{:<8} {:<7} {:>7} {:>7} {:<16} {:<9} {:>3}  {:>8} {:>8} {:>8} {:>8} {:>8}",
        "cpus",
        "how",
        "pid",
        "tid",
        "command",
        "policy",
        "cpu",
        "vol-cs",
        "invol-cs",
        "minflt",
        "majflt",
        "ticks"
    );
    for r in rows {
        line!(
            o,
            "{:<8} {:<7} {:>7} {:>7} {:<16} {:<9} {:>3}  {:>8} {:>8} {:>8} {:>8} {:>8}",
            r.partition_cpus,
            r.kind,
            r.pid,
            r.tid,
            r.comm,
            format!("{} {}", r.policy, r.priority),
            r.cpu.map_or("-".into(), |c| c.to_string()),
            r.voluntary_switches,
            r.involuntary_switches,
            r.minor_faults,
            r.major_faults,
            r.cpu_ticks
        );
    }
    line!(
        o,
        "counters since placement: a real-time thread in its time-critical phase should add no switches or faults"
    );
    o
}

/// A placed process that is gone, and what became of its record.
pub fn gone(g: &Gone) -> String {
    let what = format!(
        "{} ({}, placed by tame {} on CPUs {})",
        g.pid, g.comm, g.kind, g.cpus
    );
    let fate = match &g.now {
        None => format!("tame ps: process {what} has exited"),
        Some(now) => format!(
            "tame ps: process {what} is gone: pid {} is another program now ({now}), which tame leaves alone",
            g.pid
        ),
    };
    match &g.kept {
        None => format!("{fate}; its placement record was removed"),
        Some(why) => format!("{fate}; its placement record stays: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_gone_is_named_with_what_became_of_its_record() {
        let g = Gone {
            pid: 4242,
            kind: "run".into(),
            comm: "worker".into(),
            cpus: "3".into(),
            now: None,
            kept: None,
        };
        assert_eq!(
            gone(&g),
            "tame ps: process 4242 (worker, placed by tame run on CPUs 3) has exited; its placement record was removed"
        );
        let reused = Gone {
            kind: "detach".into(),
            now: Some("bash".into()),
            kept: Some("cannot remove /var/lib/tame/placed/4242: Permission denied".into()),
            ..g
        };
        assert_eq!(
            gone(&reused),
            "tame ps: process 4242 (worker, placed by tame detach on CPUs 3) is gone: pid 4242 is another program now (bash), which tame leaves alone; its placement record stays: cannot remove /var/lib/tame/placed/4242: Permission denied"
        );
    }

    #[test]
    fn ps_is_a_table_with_counters_since_placement() {
        assert_eq!(
            ps(&[]),
            "nothing placed by tame is running (tame run / tame detach)\n"
        );
        let row = PsRow {
            partition_cpus: "2-3".into(),
            kind: "run".into(),
            pid: 40,
            tid: 41,
            comm: "worker".into(),
            policy: "fifo".into(),
            priority: 80,
            cpu: None,
            voluntary_switches: 1,
            involuntary_switches: 2,
            minor_faults: 3,
            major_faults: 4,
            cpu_ticks: 5,
        };
        let text = ps(&[row]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[0],
            "cpus     how         pid     tid command          policy    cpu    vol-cs invol-cs   minflt   majflt    ticks"
        );
        assert_eq!(
            lines[1],
            "2-3      run          40      41 worker           fifo 80     -         1        2        3        4        5"
        );
        assert!(lines[2].starts_with("counters since placement: "));
    }
}
