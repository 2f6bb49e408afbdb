//! The human view of an IPC run: one-way latency percentiles, throughput, the ratios
//! between transports and the run's circumstances.

use std::fmt::Write as _;

use super::run::IpcRun;
use super::{IpcSettings, Ratio, Side, BLOCK};
use crate::result::{BenchResult, GroupResult};
use crate::stats::PercentileCells;
use tame_rt::duration::{format_ns_as, NsStyle};

/// The human view: one-way latency percentiles, throughput, ratios and the run's
/// circumstances.
pub fn summary_text(run: &IpcRun) -> String {
    let result = &run.result;
    let mut out = String::new();
    write_latency_table(&mut out, result);
    write_throughput_table(&mut out, &result.groups);
    write_ratios(&mut out, &run.ratios);
    let _ = writeln!(out, "\n{}", circumstances_line(result));
    if let Some(load) = &result.load {
        let kinds: Vec<&str> = load.kinds.iter().map(|k| k.name()).collect();
        let rates: Vec<String> = load
            .throughput
            .iter()
            .map(|t| format!("{} {:.0}", t.stressor, t.bogo_ops_per_s))
            .collect();
        let _ = write!(out, "load: {} on CPUs {}", kinds.join(","), load.cpus);
        if !rates.is_empty() {
            let _ = write!(out, " (bogo-ops/s: {})", rates.join(", "));
        }
        let _ = writeln!(out);
    }
    if result.interrupted {
        let unreached = result.groups.iter().filter(|g| g.not_measured.is_some());
        let _ = writeln!(
            out,
            "interrupted: the numbers cover the segments measured before Ctrl-C{}",
            match unreached.count() {
                0 => String::new(),
                n => format!(
                    " ({n} transport/size pairs it never reached are marked {NOT_MEASURED_CELL})"
                ),
            }
        );
    }
    out
}

/// The cell that stands where an unreached transport and size would have figures.
const NOT_MEASURED_CELL: &str = "not measured";

/// `CPU 3`, and where it ran when the run was placed in a partition.
fn side_text(side: Side, partition: Option<&str>) -> String {
    match partition {
        Some(p) if side.in_partition => format!("CPU {} (partition {p})", side.cpu),
        Some(_) => format!("CPU {} (outside the partition)", side.cpu),
        None => format!("CPU {}", side.cpu),
    }
}

/// The title, then a row of one-way latency percentiles per transport and size.
fn write_latency_table(out: &mut String, result: &BenchResult<IpcSettings>) {
    let sides = &result.settings.sides;
    let partition = result.partition.as_deref();
    let _ = writeln!(
        out,
        "tame bench ipc — one-way latency (round trip / 2), {} ⇄ {}",
        side_text(sides.timing, partition),
        side_text(sides.echo, partition)
    );
    let mut rows = vec![[
        "transport",
        "count",
        "min",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "p99.999",
        "max",
    ]
    .map(String::from)
    .to_vec()];
    let mut cells = PercentileCells::default();
    for group in &result.groups {
        if group.not_measured.is_some() {
            let mut row = vec![group.label.clone(), NOT_MEASURED_CELL.to_string()];
            row.resize(rows[0].len(), String::new());
            rows.push(row);
            continue;
        }
        if let Some(m) = group.metric("one_way_latency") {
            let s = &m.summary;
            let mut row = vec![
                group.label.clone(),
                s.count.to_string(),
                format_ns_as(s.min, NsStyle::Fixed),
            ];
            row.extend(
                s.quantiles()
                    .iter()
                    .map(|&(q, v)| cells.cell(s.count, q, v, |v| format_ns_as(v, NsStyle::Fixed))),
            );
            row.push(format_ns_as(s.max, NsStyle::Fixed));
            rows.push(row);
        }
    }
    out.push_str(&crate::compare::aligned(&rows, &[0]));
    if let Some(note) = cells.footnote() {
        let _ = writeln!(out, "{note}");
    }
}

/// A row per queue that streamed messages: their number, the rate and the time per message.
fn write_throughput_table(out: &mut String, groups: &[GroupResult]) {
    let fixed = |v| format_ns_as(v, NsStyle::Fixed);
    let _ = writeln!(
        out,
        "\nthroughput (receiver side; ns per message in blocks of {BLOCK})\n{:<22} {:>12} {:>14} {:>8} {:>8} {:>8}",
        "transport", "messages", "msgs/s", "p50", "p99", "max"
    );
    let mut cells = PercentileCells::default();
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
                cells.cell(m.summary.count, 0.50, m.summary.p50, fixed),
                cells.cell(m.summary.count, 0.99, m.summary.p99, fixed),
                format_ns_as(m.summary.max, NsStyle::Fixed)
            );
        }
    }
    if let Some(note) = cells.footnote() {
        let _ = writeln!(out, "{note}");
    }
}

/// Each ratio between two transports' figures (nothing when none could be computed).
fn write_ratios(out: &mut String, ratios: &[Ratio]) {
    if ratios.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nratios");
    let lines: Vec<(String, f64)> = ratios
        .iter()
        .map(|r| {
            let what = format!(
                "{} {} ÷ {}",
                r.quantity.describe(),
                r.numerator,
                r.denominator
            );
            (what, r.value)
        })
        .collect();
    let width = lines
        .iter()
        .map(|(w, _)| w.chars().count())
        .max()
        .unwrap_or(0);
    for (what, value) in lines {
        let _ = writeln!(out, "  {what:<width$} {value:>9.2}");
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

    use super::super::run::{build_groups, Samples, Tally};
    use super::super::{ratios, Sides, Transport, SCHEMA};
    use super::*;

    /// A run assembled from hand-filled tallies: one-way latencies `base`..`base`×21 ns per
    /// transport (the floor 100 ns, the kernel transports in µs) and, for queues, a throughput
    /// of `base`/4 ns per message.
    fn recorded_run(transports: &[Transport], interrupted: bool, virtualised: bool) -> IpcRun {
        recorded_run_reaching(transports, interrupted, virtualised, &[8, 64])
    }

    /// As [`recorded_run`], the run having reached only the sizes in `reached` (Ctrl-C came
    /// before the others' first segment).
    fn recorded_run_reaching(
        transports: &[Transport],
        interrupted: bool,
        virtualised: bool,
        reached: &[usize],
    ) -> IpcRun {
        let settings = IpcSettings {
            sides: Sides::unplaced([2, 3]),
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
                        Transport::Iceoryx2 => 160,
                    };
                let mut tally = Tally::new(0);
                if !reached.contains(&size) {
                    tallies.insert((size, transport), tally);
                    continue;
                }
                tally.rounds = 1;
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
        let ratios = ratios::ratios(&groups, &settings.sizes);
        let mut environment = RunEnvironment {
            kernel_release: "6.1.0-rt".into(),
            preemption_model: "full".into(),
            ..RunEnvironment::default()
        };
        if virtualised {
            environment.hypervisor = Some("KVM".into());
        }
        let result = BenchResult {
            schema_version: SCHEMA.version,
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
        IpcRun {
            result,
            ratios,
            samples: Samples {
                cpu: 2,
                groups: Vec::new(),
            },
        }
    }

    /// The expected text was produced by `summary_text` before it was split into pieces (the
    /// iceoryx2 rows and the p99.9 and iceoryx2 ratios added since).
    #[test]
    fn summary_of_every_transport_is_unchanged() {
        let run = recorded_run(&Transport::ALL, false, true);
        let expected = concat!(
            "tame bench ipc — one-way latency (round trip / 2), CPU 2 ⇄ CPU 3\n",
            "transport          count       min       p50       p90       p99  p99.9  p99.99  p99.999       max\n",
            "floor/8B            1000     100ns    1098ns    1898ns    2079ns    n/a     n/a      n/a    2098ns\n",
            "tame-ring/8B        1000     140ns    1537ns    2657ns    2909ns    n/a     n/a      n/a    2937ns\n",
            "tame-register/8B    1000     180ns    1976ns    3417ns    3741ns    n/a     n/a      n/a    3776ns\n",
            "rtrb/8B             1000     150ns    1647ns    2847ns    3117ns    n/a     n/a      n/a    3147ns\n",
            "pipe/8B             1000    2000ns   21.97µs   37.98µs   41.57µs    n/a     n/a      n/a   41.96µs\n",
            "unix-socket/8B      1000    1500ns   16.48µs   28.48µs   31.18µs    n/a     n/a      n/a   31.47µs\n",
            "mq/8B               1000   30.00µs  329.47µs  569.86µs  623.62µs    n/a     n/a      n/a  629.40µs\n",
            "iceoryx2/8B         1000     160ns    1756ns    3037ns    3325ns    n/a     n/a      n/a    3356ns\n",
            "floor/64B           1000     800ns    8791ns   15.19µs   16.64µs    n/a     n/a      n/a   16.78µs\n",
            "tame-ring/64B       1000    1120ns   12.30µs   21.26µs   23.28µs    n/a     n/a      n/a   23.50µs\n",
            "tame-register/64B   1000    1440ns   15.81µs   27.34µs   29.93µs    n/a     n/a      n/a   30.21µs\n",
            "rtrb/64B            1000    1200ns   13.18µs   22.78µs   24.94µs    n/a     n/a      n/a   25.18µs\n",
            "pipe/64B            1000   16.00µs  175.74µs  303.87µs  332.54µs    n/a     n/a      n/a  335.68µs\n",
            "unix-socket/64B     1000   12.00µs  131.84µs  227.84µs  249.47µs    n/a     n/a      n/a  251.76µs\n",
            "mq/64B              1000  240.00µs   2.636ms   4.559ms   4.989ms    n/a     n/a      n/a   5.035ms\n",
            "iceoryx2/64B        1000    1280ns   14.05µs   24.30µs   26.61µs    n/a     n/a      n/a   26.85µs\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p99.9 needs ≥ 10 000 samples, p99.99 needs ≥ 100 000 samples, p99.999 needs ≥ 1 000 000 samples\n",
            "\n",
            "throughput (receiver side; ns per message in blocks of 1024)\n",
            "transport                  messages         msgs/s      p50      p99      max\n",
            "tame-ring/8B                   8192       28571429      n/a      n/a     42ns\n",
            "rtrb/8B                        8192       26666667      n/a      n/a     44ns\n",
            "pipe/8B                        8192        2000000      n/a      n/a    507ns\n",
            "unix-socket/8B                 8192        2666667      n/a      n/a    382ns\n",
            "mq/8B                          8192         133333      n/a      n/a   7507ns\n",
            "iceoryx2/8B                    8192       25000000      n/a      n/a     47ns\n",
            "tame-ring/64B                  8192        3571429      n/a      n/a    287ns\n",
            "rtrb/64B                       8192        3333333      n/a      n/a    307ns\n",
            "pipe/64B                       8192         250000      n/a      n/a   4007ns\n",
            "unix-socket/64B                8192         333333      n/a      n/a   3007ns\n",
            "mq/64B                         8192          16667      n/a      n/a  60.01µs\n",
            "iceoryx2/64B                   8192        3125000      n/a      n/a    327ns\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p50 needs ≥ 20 samples, p99 needs ≥ 1 000 samples\n",
            "\n",
            "ratios\n",
            "  median latency tame-ring/8B ÷ floor/8B                  1.40\n",
            "  median latency pipe/8B ÷ tame-ring/8B                  14.29\n",
            "  median latency unix-socket/8B ÷ tame-ring/8B           10.72\n",
            "  median latency mq/8B ÷ tame-ring/8B                   214.36\n",
            "  median latency tame-register/8B ÷ floor/8B              1.80\n",
            "  median latency pipe/8B ÷ tame-register/8B              11.12\n",
            "  median latency unix-socket/8B ÷ tame-register/8B        8.34\n",
            "  median latency mq/8B ÷ tame-register/8B               166.74\n",
            "  median latency tame-ring/8B ÷ iceoryx2/8B               0.88\n",
            "  msgs/s tame-ring/8B ÷ rtrb/8B                           1.07\n",
            "  msgs/s tame-ring/8B ÷ iceoryx2/8B                       1.14\n",
            "  median latency tame-ring/64B ÷ floor/64B                1.40\n",
            "  median latency pipe/64B ÷ tame-ring/64B                14.28\n",
            "  median latency unix-socket/64B ÷ tame-ring/64B         10.72\n",
            "  median latency mq/64B ÷ tame-ring/64B                 214.24\n",
            "  median latency tame-register/64B ÷ floor/64B            1.80\n",
            "  median latency pipe/64B ÷ tame-register/64B            11.11\n",
            "  median latency unix-socket/64B ÷ tame-register/64B      8.34\n",
            "  median latency mq/64B ÷ tame-register/64B             166.66\n",
            "  median latency tame-ring/64B ÷ iceoryx2/64B             0.88\n",
            "  msgs/s tame-ring/64B ÷ rtrb/64B                         1.07\n",
            "  msgs/s tame-ring/64B ÷ iceoryx2/64B                     1.14\n",
            "\n",
            "clock monotonic (read 25 ns); kernel 6.1.0-rt (full); virtualised (KVM): hypervisor noise no guest setting removes\n",
        );
        assert_eq!(summary_text(&run), expected);
    }

    /// No ratio with the pipe alone; an interrupted run on bare metal.
    #[test]
    fn summary_without_ratios_is_unchanged() {
        let run = recorded_run(&[Transport::Pipe], true, false);
        assert!(run.ratios.is_empty());
        let expected = concat!(
            "tame bench ipc — one-way latency (round trip / 2), CPU 2 ⇄ CPU 3\n",
            "transport  count      min       p50       p90       p99  p99.9  p99.99  p99.999       max\n",
            "pipe/8B     1000   2000ns   21.97µs   37.98µs   41.57µs    n/a     n/a      n/a   41.96µs\n",
            "pipe/64B    1000  16.00µs  175.74µs  303.87µs  332.54µs    n/a     n/a      n/a  335.68µs\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p99.9 needs ≥ 10 000 samples, p99.99 needs ≥ 100 000 samples, p99.999 needs ≥ 1 000 000 samples\n",
            "\n",
            "throughput (receiver side; ns per message in blocks of 1024)\n",
            "transport                  messages         msgs/s      p50      p99      max\n",
            "pipe/8B                        8192        2000000      n/a      n/a    507ns\n",
            "pipe/64B                       8192         250000      n/a      n/a   4007ns\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p50 needs ≥ 20 samples, p99 needs ≥ 1 000 samples\n",
            "\n",
            "clock - (read 25 ns); kernel 6.1.0-rt (full); bare metal\n",
            "interrupted: the numbers cover the segments measured before Ctrl-C\n",
        );
        assert_eq!(summary_text(&run), expected);
    }

    /// A run placed in a partition says where each side ran, and what load ran beside it.
    #[test]
    fn summary_of_a_placed_and_loaded_run_names_the_sides_and_the_load() {
        let mut run = recorded_run(&[Transport::Floor], false, false);
        run.result.partition = Some("rt".into());
        run.result.settings.sides = Sides {
            timing: Side {
                cpu: 3,
                in_partition: true,
            },
            echo: Side {
                cpu: 0,
                in_partition: false,
            },
        };
        run.result.load = Some(crate::load::LoadDescription {
            kinds: vec![crate::load::LoadKind::Cpu],
            cpus: tame_host::CpuList::parse("1-2").unwrap(),
            commands: Vec::new(),
            command: None,
            throughput: vec![crate::load::Throughput {
                stressor: "cpu".into(),
                bogo_ops_per_s: 1287.7,
            }],
        });
        let text = summary_text(&run);
        assert!(
            text.starts_with("tame bench ipc — one-way latency (round trip / 2), CPU 3 (partition rt) ⇄ CPU 0 (outside the partition)\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\nload: cpu on CPUs 1-2 (bogo-ops/s: cpu 1288)\n"),
            "{text}"
        );
    }

    /// Ctrl-C before the 64-byte segments: their groups say `not_measured` and hold no
    /// figure (no zeros), the table marks them, and compare leaves them out rather than
    /// dividing by zero-count figures (a 0.000 ratio before).
    #[test]
    fn an_interrupted_run_marks_what_it_never_measured() {
        let transports = [Transport::Floor, Transport::TameRing, Transport::Pipe];
        let cut = recorded_run_reaching(&transports, true, false, &[8]);
        for g in &cut.result.groups {
            let reached = g.label.ends_with("/8B");
            assert_eq!(g.not_measured.is_none(), reached, "{}", g.label);
            if !reached {
                assert!(g.metrics.is_empty() && g.counters.is_empty() && g.derived.is_empty());
            }
        }
        let json: serde_json::Value = serde_json::from_str(&cut.result.to_json()).unwrap();
        assert_eq!(json["groups"][3]["label"], "floor/64B");
        assert_eq!(
            json["groups"][3]["not_measured"],
            super::super::NOT_MEASURED
        );
        assert!(json["groups"][0].get("not_measured").is_none());
        // No ratio from the unreached size.
        assert!(
            cut.ratios.iter().all(|r| !r.name.contains("64B")),
            "{:?}",
            cut.ratios
        );
        let text = summary_text(&cut);
        let pipe_64 = text.lines().find(|l| l.starts_with("pipe/64B")).unwrap();
        assert_eq!(
            pipe_64.split_whitespace().collect::<Vec<_>>(),
            ["pipe/64B", "not", "measured"]
        );
        assert!(
            text.contains("3 transport/size pairs it never reached are marked not measured"),
            "{text}"
        );
        // Compared with a full run: the unreached groups are left out and said so.
        let full = recorded_run(&transports, false, false);
        let as_compared = |r: &IpcRun| crate::compare::Compared {
            result: serde_json::from_str(&r.result.to_json()).unwrap(),
            noise: None,
            watch: None,
        };
        let c = crate::compare::Comparison::new(
            "full.json",
            &as_compared(&full),
            "cut.json",
            &as_compared(&cut),
        )
        .unwrap();
        assert!(
            c.rows.iter().all(|r| !r.group.ends_with("/64B")),
            "{:#?}",
            c.rows
        );
        assert!(c.rows.iter().all(|r| r.ratio != Some(0.0)), "{:#?}", c.rows);
        assert!(c.rows.iter().any(|r| r.group == "pipe/8B"));
        assert!(
            c.notes.contains(&"not measured in B (its run was stopped before it reached them), so not compared: floor/64B, pipe/64B, tame-ring/64B".to_string()),
            "{:?}",
            c.notes
        );
    }
}
