//! Views of a result: the human table, cyclictest's histogram text layout,
//! and the raw samples CSV.

use std::fmt::Write as _;
use std::io::Write;

use crate::measure::SampleBuffer;
use crate::report::GroupSource;
use crate::result::{BenchResult, GroupResult};
use crate::stats::Recorder;

/// Format nanoseconds for people: 850ns, 15.23µs, 3.401ms, 1.200s.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=999_999 => format!("{:.2}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.3}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

fn human_value(v: u64, unit: &str) -> String {
    if unit == "ns" {
        human_ns(v)
    } else {
        v.to_string()
    }
}

/// The summary table: one row per group and metric, then counters and the run's self-characterisation.
pub fn table<S>(result: &BenchResult<S>, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    let header = [
        "group", "metric", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    let show_merged = result.groups.len() > 1;
    let groups = result
        .groups
        .iter()
        .chain(show_merged.then_some(&result.merged));
    for g in groups {
        for m in &g.metrics {
            let s = &m.summary;
            let mut row = vec![
                g.label.clone(),
                m.name.clone(),
                s.count.to_string(),
                human_value(s.min, &m.unit),
            ];
            row.extend(
                s.percentiles()
                    .iter()
                    .map(|(_, v)| human_value(*v, &m.unit)),
            );
            row.push(human_value(s.max, &m.unit));
            rows.push(row);
        }
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = widths[c] - cell.chars().count();
                if c < 2 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    let counters = counters_line(&result.merged);
    if !counters.is_empty() {
        let _ = writeln!(out, "{counters}");
    }
    for g in result
        .groups
        .iter()
        .chain(show_merged.then_some(&result.merged))
    {
        if !g.derived.is_empty() {
            let figures: Vec<String> = g
                .derived
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            let label = if std::ptr::eq(g, &result.merged) {
                "worst"
            } else {
                g.label.as_str()
            };
            let _ = writeln!(out, "{label}: {}", figures.join(", "));
        }
    }
    let c = &result.calibration;
    let env = &result.environment;
    let _ = writeln!(
        out,
        "clock {} (read {} ns, loop floor {} ns){}; kernel {} preempt {}; idle {}; clocksource {}; {}{}",
        c.clock.map_or("-".to_string(), |k| format!("{k:?}").to_lowercase()),
        c.clock_read_cost_ns,
        c.loop_floor_ns,
        c.tsc_hz
            .map_or(String::new(), |hz| format!(", TSC {:.3} GHz", hz as f64 / 1e9)),
        env.kernel_release,
        env.preemption_model,
        env.cpuidle_driver.as_deref().unwrap_or("-"),
        env.clocksource.as_deref().unwrap_or("-"),
        env.hypervisor.as_deref().map_or("bare metal".to_string(), |h| format!(
            "virtualised ({h}): hypervisor noise no guest setting removes"
        )),
        if env.isolation_parameters.is_empty() {
            "; no isolation boot parameters".to_string()
        } else {
            format!("; boot: {}", env.isolation_parameters.join(" "))
        },
    );
    if let Some(load) = &result.load {
        let kinds: Vec<&str> = load.kinds.iter().map(|k| k.name()).collect();
        let _ = writeln!(out, "load: {} on CPUs {}", kinds.join(","), load.cpus);
    }
    if result.interrupted {
        let _ = writeln!(
            out,
            "interrupted: these numbers cover the part of the run measured before Ctrl-C"
        );
    }
    out
}

fn counters_line(g: &GroupResult) -> String {
    g.counters
        .iter()
        .filter(|(k, v)| **v > 0 || k.as_str() == "missed_periods")
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Write per-thread histograms in cyclictest's `-h` text layout: one row per
/// microsecond (`%06d` then a tab-separated `%06lu` per thread), then the
/// `# Total/Min/Avg/Max Latencies/Histogram Overflows` footer, so scripts that
/// plot cyclictest output read it unchanged. Rows cover `0..rows` µs.
pub fn write_cyclictest_histogram(
    w: &mut impl Write,
    recorders: &[&Recorder],
    rows: usize,
) -> std::io::Result<()> {
    let mut table = vec![vec![0u64; rows]; recorders.len()];
    let mut overflows = vec![0u64; recorders.len()];
    for (t, rec) in recorders.iter().enumerate() {
        let hist = rec.histogram();
        for v in hist.iter_recorded() {
            let us = (hist.lowest_equivalent(v.value_iterated_to()) / 1000) as usize;
            let n = v.count_at_value();
            if us < rows {
                table[t][us] += n;
            } else {
                overflows[t] += n;
            }
        }
    }
    writeln!(w, "# Histogram")?;
    for row in 0..rows {
        let cells: Vec<String> = table.iter().map(|t| format!("{:06}", t[row])).collect();
        writeln!(w, "{row:06} {}", cells.join("\t"))?;
    }
    let footer = |label: &str, values: Vec<String>| format!("# {label}: {}", values.join(" "));
    let totals = table
        .iter()
        .map(|t| format!("{:09}", t.iter().sum::<u64>()))
        .collect();
    writeln!(w, "{}", footer("Total", totals))?;
    let us = |v: u64| format!("{:05}", v / 1000);
    writeln!(
        w,
        "{}",
        footer(
            "Min Latencies",
            recorders.iter().map(|r| us(r.min().unwrap_or(0))).collect()
        )
    )?;
    writeln!(
        w,
        "{}",
        footer(
            "Avg Latencies",
            recorders.iter().map(|r| us(r.summary().mean)).collect()
        )
    )?;
    writeln!(
        w,
        "{}",
        footer(
            "Max Latencies",
            recorders.iter().map(|r| us(r.max().unwrap_or(0))).collect()
        )
    )?;
    writeln!(
        w,
        "{}",
        footer(
            "Histogram Overflows",
            overflows.iter().map(|o| format!("{o:05}")).collect()
        )
    )?;
    writeln!(w, "# Histogram Overflow at cycle number:")?;
    for t in 0..recorders.len() {
        writeln!(w, "# Thread {t}:")?;
    }
    Ok(())
}

/// The histogram of each thread's primary metric (a cycle's latency, a sleep's jitter, an
/// fwq's excess) in cyclictest's layout, with rows up to the worst value (100 µs .. 100 ms).
pub fn write_primary_histogram<T: GroupSource>(
    w: &mut impl Write,
    outputs: &[T],
) -> std::io::Result<()> {
    let primary: Vec<&Recorder> = outputs
        .iter()
        .filter_map(|o| o.recorders().first().map(|r| r.2))
        .collect();
    let max_us = primary.iter().filter_map(|r| r.max()).max().unwrap_or(0) / 1000;
    let rows = (max_us as usize + 1).clamp(100, 100_000);
    write_cyclictest_histogram(w, &primary, rows)
}

/// Raw samples of every thread as CSV (see [`write_samples_csv`]).
pub fn write_all_samples_csv<T: GroupSource>(
    w: &mut impl Write,
    outputs: &[T],
) -> std::io::Result<()> {
    write_samples_csv(w, outputs.iter().map(|o| (o.cpu(), o.samples())))
}

/// Raw samples as CSV: timestamp_ns,cpu,value_ns (cpu empty for unpinned tasks).
pub fn write_samples_csv<'a>(
    w: &mut impl Write,
    buffers: impl IntoIterator<Item = (Option<u32>, &'a SampleBuffer)>,
) -> std::io::Result<()> {
    writeln!(w, "timestamp_ns,cpu,value_ns")?;
    for (cpu, buf) in buffers {
        let cpu = cpu.map_or(String::new(), |c| c.to_string());
        for s in buf.samples() {
            writeln!(w, "{},{cpu},{}", s.t_ns, s.value_ns)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Sample;

    #[test]
    fn human_units() {
        assert_eq!(human_ns(850), "850ns");
        assert_eq!(human_ns(15_234), "15.23µs");
        assert_eq!(human_ns(3_401_000), "3.401ms");
        assert_eq!(human_ns(1_200_000_000), "1.200s");
    }

    #[test]
    fn histogram_matches_cyclictest_layout() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for v in [1_500, 1_700, 2_200, 9_000_000] {
            a.record(v);
        }
        b.record(500);
        let mut buf = Vec::new();
        write_cyclictest_histogram(&mut buf, &[&a, &b], 4).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# Histogram");
        assert_eq!(lines[1], "000000 000000\t000001");
        assert_eq!(lines[2], "000001 000002\t000000");
        assert_eq!(lines[3], "000002 000001\t000000");
        assert_eq!(lines[5], "# Total: 000000003 000000001");
        assert_eq!(lines[6], "# Min Latencies: 00001 00000");
        assert_eq!(lines[8], "# Max Latencies: 09000 00000");
        assert_eq!(lines[9], "# Histogram Overflows: 00001 00000");
        assert_eq!(lines[11], "# Thread 0:");
    }

    #[test]
    fn samples_csv_has_header_and_rows() {
        let mut b = SampleBuffer::with_capacity(2);
        b.push(Sample {
            t_ns: 10,
            value_ns: 3,
        });
        let mut out = Vec::new();
        write_samples_csv(&mut out, [(Some(1), &b), (None, &b)]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "timestamp_ns,cpu,value_ns\n10,1,3\n10,,3\n"
        );
    }
}
