//! The human report of a watch: the common table (one row per thread and metric),
//! then per thread its period, misses, what delayed it and the snapshots taken.

use std::fmt::Write as _;

use tame_rt::duration::{format_ns_as, NsStyle};

use super::snapshot::{describe, priority_words};
use super::{ThreadFindings, WatchResult};
use crate::output::table;

/// Causes listed per thread.
const TOP_CAUSES: usize = 6;

pub fn report(result: &WatchResult, title: &str) -> String {
    let mut out = table(&result.result, title);
    let w = &result.watch;
    if w.threads.is_empty() {
        let _ = writeln!(out, "no watched thread ran an activation");
    }
    for t in &w.threads {
        thread_report(&mut out, t);
    }
    if !w.snapshots.is_empty() {
        let _ = writeln!(out, "\nsnapshots of misses:");
        for (i, s) in w.snapshots.iter().enumerate() {
            let file = w
                .snapshot_dir
                .as_ref()
                .map(|d| format!(" → {d}/miss-{}.json, .svg", i + 1))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}: activation {} on CPU {}, response {} (wake latency {}); mostly {}{file}",
                s.thread,
                s.activation,
                s.cpu,
                ns(s.response_ns),
                ns(s.wake_latency_ns),
                s.main_cause().unwrap_or_else(|| "nothing traced".into()),
            );
        }
    }
    let lost: u64 = w.trace.lost.values().sum();
    let _ = writeln!(
        out,
        "\ntrace: {} events read{}, {}",
        w.trace.events_read,
        if lost > 0 {
            format!(", {lost} dropped by the kernel")
        } else {
            String::new()
        },
        w.trace.tracefs_dir
    );
    if !w.trace.events_missing.is_empty() {
        let _ = writeln!(
            out,
            "  not in this kernel: {}",
            w.trace.events_missing.join(", ")
        );
    }
    for p in &w.trace.restore_problems {
        let _ = writeln!(out, "warning: {p}");
    }
    for n in w.trace.recovered.iter().chain(&w.notes) {
        let _ = writeln!(out, "note: {n}");
    }
    if let Some(exit) = &w.exit {
        let _ = writeln!(out, "the program exited with {exit}");
    }
    out
}

fn ns(v: u64) -> String {
    format_ns_as(v, NsStyle::Fixed)
}

fn thread_report(out: &mut String, t: &ThreadFindings) {
    let prio = t.prio.map(priority_words).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "\n{} (thread {} of process {}, {prio}): {} activations ({} released by a timer, {} by a wakeup, {} unknown)",
        t.label,
        t.tid,
        t.pid,
        t.activations,
        t.releases.timer,
        t.releases.wakeup,
        t.releases.unknown
    );
    let period = match (t.period_ns, t.period_inferred) {
        (Some(p), true) => format!(
            "period {} (inferred: median distance between releases)",
            ns(p)
        ),
        (Some(p), false) => format!("period {}", ns(p)),
        (None, _) => "period unknown (too few releases)".into(),
    };
    let deadline = t
        .deadline_ns
        .map(|d| format!("deadline {}", ns(d)))
        .unwrap_or_else(|| "no deadline".into());
    let _ = writeln!(
        out,
        "  {period}, {deadline}: {}, {}",
        tame_rt::plural::count(t.misses, "miss", "misses"),
        tame_rt::plural::count(t.missed_periods, "missed period", "missed periods")
    );
    let _ = writeln!(
        out,
        "  {} page faults, {} migrations, {} involuntary switches",
        t.page_faults, t.migrations, t.involuntary_switches
    );
    if t.causes.is_empty() {
        return;
    }
    let _ = writeln!(out, "  what delayed it (total, activations, worst):");
    for c in t.causes.iter().take(TOP_CAUSES) {
        let _ = writeln!(
            out,
            "    {:<48} {:>12} {:>8} {:>12}",
            describe(c),
            ns(c.total_ns),
            c.count,
            ns(c.max_ns)
        );
    }
    if t.causes.len() > TOP_CAUSES {
        let _ = writeln!(
            out,
            "    … {} more in the JSON",
            t.causes.len() - TOP_CAUSES
        );
    }
}
