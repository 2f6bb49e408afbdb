//! Per-thread histograms in cyclictest's `-h` text layout.

use std::io::Write;

use crate::report::GroupSource;
use crate::stats::Recorder;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
