//! The human view of an IPC run: one-way latency percentiles, throughput, goal
//! verdicts and the run's circumstances.

use std::fmt::Write as _;

use super::run::IpcRun;
use super::{GoalCheck, IpcSettings, BLOCK};
use crate::output::human_ns;
use crate::result::{BenchResult, GroupResult};

/// The human view: one-way latency percentiles, throughput, goal verdicts and the
/// run's circumstances.
pub fn summary_text(run: &IpcRun) -> String {
    let result = &run.result;
    let mut out = String::new();
    write_latency_table(&mut out, result);
    write_throughput_table(&mut out, &result.groups);
    write_goals(&mut out, &run.goals);
    let _ = writeln!(out, "\n{}", circumstances_line(result));
    if result.interrupted {
        let _ = writeln!(
            out,
            "interrupted: the numbers cover the segments measured before Ctrl-C"
        );
    }
    out
}

/// The title, then a row of one-way latency percentiles per transport and size.
fn write_latency_table(out: &mut String, result: &BenchResult<IpcSettings>) {
    let _ = writeln!(
        out,
        "tame bench ipc — one-way latency (round trip / 2), CPU {} ⇄ CPU {}",
        result.settings.cpus[0], result.settings.cpus[1]
    );
    let _ = writeln!(
        out,
        "{:<22} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "transport", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max"
    );
    for group in &result.groups {
        if let Some(m) = group.metric("one_way_latency") {
            let s = &m.summary;
            let _ = writeln!(
                out,
                "{:<22} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
                group.label,
                s.count,
                human_ns(s.min),
                human_ns(s.p50),
                human_ns(s.p90),
                human_ns(s.p99),
                human_ns(s.p99_9),
                human_ns(s.p99_99),
                human_ns(s.p99_999),
                human_ns(s.max)
            );
        }
    }
}

/// A row per queue that streamed messages: their number, the rate and the time per message.
fn write_throughput_table(out: &mut String, groups: &[GroupResult]) {
    let _ = writeln!(
        out,
        "\nthroughput (receiver side; ns per message in blocks of {BLOCK})\n{:<22} {:>12} {:>14} {:>8} {:>8} {:>8}",
        "transport", "messages", "msgs/s", "p50", "p99", "max"
    );
    for group in groups {
        if let (Some(rate), Some(m)) = (
            group.derived.get("throughput_msgs_per_s"),
            group.metric("throughput_ns_per_msg"),
        ) {
            let _ = writeln!(
                out,
                "{:<22} {:>12} {:>14.0} {:>8} {:>8} {:>8}",
                group.label,
                group
                    .counters
                    .get("throughput_messages")
                    .copied()
                    .unwrap_or(0),
                rate,
                human_ns(m.summary.p50),
                human_ns(m.summary.p99),
                human_ns(m.summary.max)
            );
        }
    }
}

/// Each goal's measured ratio against its threshold, and the verdict (nothing when no
/// goal could be checked).
fn write_goals(out: &mut String, goals: &[GoalCheck]) {
    if goals.is_empty() {
        return;
    }
    let _ = writeln!(out, "\ngoals");
    for goal in goals {
        // Latency goals are upper bounds, the others (speedups, throughput) lower bounds.
        let relation = if goal.name.starts_with("latency") {
            "≤"
        } else {
            "≥"
        };
        let _ = writeln!(
            out,
            "  {:<44} {:>9.2}  (goal {relation} {})  {}",
            goal.name,
            goal.value,
            goal.threshold,
            if goal.met { "met" } else { "NOT met" }
        );
    }
}

/// The clock, the kernel and whether a hypervisor sits below.
fn circumstances_line(result: &BenchResult<IpcSettings>) -> String {
    let c = &result.calibration;
    let env = &result.environment;
    format!(
        "clock {} (read {} ns); kernel {} ({}); {}",
        c.clock
            .map_or("-".to_string(), |k| format!("{k:?}").to_lowercase()),
        c.clock_read_cost_ns,
        env.kernel_release,
        env.preemption_model,
        env.hypervisor
            .as_deref()
            .map_or("bare metal".to_string(), |h| format!(
                "virtualised ({h}): hypervisor noise no guest setting removes"
            )),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tame_host::environment::RunEnvironment;
    use tame_rt::ClockKind;

    use super::super::run::{build_groups, Tally};
    use super::super::{goals, Transport};
    use super::*;
    use crate::result::SCHEMA_VERSION;

    /// A run assembled from hand-filled tallies: one-way latencies `base`..`base`×21 ns per
    /// transport (the floor 100 ns, the kernel transports in µs) and, for queues, a throughput
    /// of `base`/4 ns per message.
    fn recorded_run(transports: &[Transport], interrupted: bool, virtualised: bool) -> IpcRun {
        let settings = IpcSettings {
            cpus: [2, 3],
            sizes: vec![8, 64],
            transports: transports.to_vec(),
            round_trips: 1_000,
            warmup_round_trips: 10,
            throughput_messages: 8 * BLOCK,
            rounds: 1,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        };
        let mut tallies = BTreeMap::new();
        for &size in &settings.sizes {
            for &transport in &settings.transports {
                let base = size as u64 / 8
                    * match transport {
                        Transport::Floor => 100,
                        Transport::TameRing => 140,
                        Transport::TameRegister => 180,
                        Transport::Rtrb => 150,
                        Transport::Pipe => 2_000,
                        Transport::UnixSocket => 1_500,
                        Transport::Mq => 30_000,
                    };
                let mut tally = Tally::new();
                for k in 0..1_000 {
                    tally.latency.record(base + k * base / 50);
                }
                if transport.is_queue() {
                    for k in 0..8 {
                        tally.throughput.record(base / 4 + k);
                    }
                    tally.messages = 8 * BLOCK;
                    tally.throughput_ns = 8 * BLOCK * base / 4;
                }
                tallies.insert((size, transport), tally);
            }
        }
        let groups = build_groups(&settings, &tallies);
        let goals = goals::evaluate(&groups, &settings.sizes);
        let mut environment = RunEnvironment {
            kernel_release: "6.1.0-rt".into(),
            preemption_model: "full".into(),
            ..RunEnvironment::default()
        };
        if virtualised {
            environment.hypervisor = Some("KVM".into());
        }
        let result = BenchResult {
            schema_version: SCHEMA_VERSION,
            bench: "ipc".into(),
            tool_version: "0.1.0".into(),
            command_line: vec!["tame".into()],
            started_unix_ns: 1,
            elapsed_ns: 2,
            interrupted,
            environment,
            calibration: crate::result::Calibration {
                clock: virtualised.then_some(ClockKind::Monotonic),
                clock_read_cost_ns: 25,
                loop_floor_ns: 20,
                tsc_hz: None,
            },
            load: None,
            partition: None,
            settings,
            groups,
            merged: GroupResult::default(),
        };
        IpcRun { result, goals }
    }

    /// The expected text was produced by `summary_text` before it was split into pieces.
    #[test]
    fn summary_of_every_transport_is_unchanged() {
        let run = recorded_run(&Transport::ALL, false, true);
        let expected = concat!(
            "tame bench ipc — one-way latency (round trip / 2), CPU 2 ⇄ CPU 3\n",
            "transport                  count      min      p50      p90      p99    p99.9   p99.99  p99.999       max\n",
            "floor/8B                    1000    100ns   1098ns   1898ns   2079ns   2097ns   2098ns   2098ns    2098ns\n",
            "tame-ring/8B                1000    140ns   1537ns   2657ns   2909ns   2935ns   2937ns   2937ns    2937ns\n",
            "tame-register/8B            1000    180ns   1976ns   3417ns   3741ns   3773ns   3776ns   3776ns    3776ns\n",
            "rtrb/8B                     1000    150ns   1647ns   2847ns   3117ns   3145ns   3147ns   3147ns    3147ns\n",
            "pipe/8B                     1000   2000ns  21.97µs  37.98µs  41.57µs  41.95µs  41.96µs  41.96µs   41.96µs\n",
            "unix-socket/8B              1000   1500ns  16.48µs  28.48µs  31.18µs  31.45µs  31.47µs  31.47µs   31.47µs\n",
            "mq/8B                       1000  30.00µs 329.47µs 569.86µs 623.62µs 629.25µs 629.40µs 629.40µs  629.40µs\n",
            "floor/64B                   1000    800ns   8791ns  15.19µs  16.64µs  16.78µs  16.78µs  16.78µs   16.78µs\n",
            "tame-ring/64B               1000   1120ns  12.30µs  21.26µs  23.28µs  23.49µs  23.50µs  23.50µs   23.50µs\n",
            "tame-register/64B           1000   1440ns  15.81µs  27.34µs  29.93µs  30.19µs  30.21µs  30.21µs   30.21µs\n",
            "rtrb/64B                    1000   1200ns  13.18µs  22.78µs  24.94µs  25.17µs  25.18µs  25.18µs   25.18µs\n",
            "pipe/64B                    1000  16.00µs 175.74µs 303.87µs 332.54µs 335.62µs 335.68µs 335.68µs  335.68µs\n",
            "unix-socket/64B             1000  12.00µs 131.84µs 227.84µs 249.47µs 251.65µs 251.76µs 251.76µs  251.76µs\n",
            "mq/64B                      1000 240.00µs  2.636ms  4.559ms  4.989ms  5.034ms  5.035ms  5.035ms   5.035ms\n",
            "\n",
            "throughput (receiver side; ns per message in blocks of 1024)\n",
            "transport                  messages         msgs/s      p50      p99      max\n",
            "tame-ring/8B                   8192       28571429     38ns     42ns     42ns\n",
            "rtrb/8B                        8192       26666667     40ns     44ns     44ns\n",
            "pipe/8B                        8192        2000000    503ns    507ns    507ns\n",
            "unix-socket/8B                 8192        2666667    378ns    382ns    382ns\n",
            "mq/8B                          8192         133333   7503ns   7507ns   7507ns\n",
            "tame-ring/64B                  8192        3571429    283ns    287ns    287ns\n",
            "rtrb/64B                       8192        3333333    303ns    307ns    307ns\n",
            "pipe/64B                       8192         250000   4003ns   4007ns   4007ns\n",
            "unix-socket/64B                8192         333333   3003ns   3007ns   3007ns\n",
            "mq/64B                         8192          16667  60.01µs  60.01µs  60.01µs\n",
            "\n",
            "goals\n",
            "  latency_tame-ring_8B_over_floor                   1.40  (goal ≤ 1.5)  met\n",
            "  speedup_tame-ring_8B_vs_pipe                     14.29  (goal ≥ 10)  met\n",
            "  speedup_tame-ring_8B_vs_unix-socket              10.72  (goal ≥ 10)  met\n",
            "  speedup_tame-ring_8B_vs_mq                      214.36  (goal ≥ 10)  met\n",
            "  latency_tame-register_8B_over_floor               1.80  (goal ≤ 1.5)  NOT met\n",
            "  speedup_tame-register_8B_vs_pipe                 11.12  (goal ≥ 10)  met\n",
            "  speedup_tame-register_8B_vs_unix-socket           8.34  (goal ≥ 10)  NOT met\n",
            "  speedup_tame-register_8B_vs_mq                  166.74  (goal ≥ 10)  met\n",
            "  throughput_tame-ring_8B_over_rtrb                 1.07  (goal ≥ 1)  met\n",
            "  latency_tame-ring_64B_over_floor                  1.40  (goal ≤ 1.5)  met\n",
            "  speedup_tame-ring_64B_vs_pipe                    14.28  (goal ≥ 10)  met\n",
            "  speedup_tame-ring_64B_vs_unix-socket             10.72  (goal ≥ 10)  met\n",
            "  speedup_tame-ring_64B_vs_mq                     214.24  (goal ≥ 10)  met\n",
            "  latency_tame-register_64B_over_floor              1.80  (goal ≤ 1.5)  NOT met\n",
            "  speedup_tame-register_64B_vs_pipe                11.11  (goal ≥ 10)  met\n",
            "  speedup_tame-register_64B_vs_unix-socket          8.34  (goal ≥ 10)  NOT met\n",
            "  speedup_tame-register_64B_vs_mq                 166.66  (goal ≥ 10)  met\n",
            "  throughput_tame-ring_64B_over_rtrb                1.07  (goal ≥ 1)  met\n",
            "\n",
            "clock monotonic (read 25 ns); kernel 6.1.0-rt (full); virtualised (KVM): hypervisor noise no guest setting removes\n",
        );
        assert_eq!(summary_text(&run), expected);
    }

    /// No goal can be checked with the pipe alone; an interrupted run on bare metal.
    #[test]
    fn summary_without_goals_is_unchanged() {
        let run = recorded_run(&[Transport::Pipe], true, false);
        assert!(run.goals.is_empty());
        let expected = concat!(
            "tame bench ipc — one-way latency (round trip / 2), CPU 2 ⇄ CPU 3\n",
            "transport                  count      min      p50      p90      p99    p99.9   p99.99  p99.999       max\n",
            "pipe/8B                     1000   2000ns  21.97µs  37.98µs  41.57µs  41.95µs  41.96µs  41.96µs   41.96µs\n",
            "pipe/64B                    1000  16.00µs 175.74µs 303.87µs 332.54µs 335.62µs 335.68µs 335.68µs  335.68µs\n",
            "\n",
            "throughput (receiver side; ns per message in blocks of 1024)\n",
            "transport                  messages         msgs/s      p50      p99      max\n",
            "pipe/8B                        8192        2000000    503ns    507ns    507ns\n",
            "pipe/64B                       8192         250000   4003ns   4007ns   4007ns\n",
            "\n",
            "clock - (read 25 ns); kernel 6.1.0-rt (full); bare metal\n",
            "interrupted: the numbers cover the segments measured before Ctrl-C\n",
        );
        assert_eq!(summary_text(&run), expected);
    }
}
