//! `tame bench ipc --samples FILE`: every measured round trip as CSV, in the layout of the
//! other benches' raw samples plus the group it belongs to.

use std::io::Write;

use super::run::Samples;

/// `timestamp_ns,cpu,value_ns,group`: when the message was sent (CLOCK_MONOTONIC ns), the
/// timing CPU, the whole round trip (ns, not halved) and the group (`tame-ring/8B`); group
/// after group, each in time order.
pub fn write_samples_csv(w: &mut impl Write, samples: &Samples) -> std::io::Result<()> {
    writeln!(w, "timestamp_ns,cpu,value_ns,group")?;
    for (label, buffer) in &samples.groups {
        for s in buffer.samples() {
            writeln!(w, "{},{},{},{label}", s.t_ns, samples.cpu, s.value_ns)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Sample, SampleBuffer};

    #[test]
    fn one_row_per_round_trip_with_its_group() {
        let buffer = |values: &[(u64, u64)]| {
            let mut b = SampleBuffer::with_capacity(values.len());
            for &(t_ns, value_ns) in values {
                b.push(Sample { t_ns, value_ns });
            }
            b
        };
        let samples = Samples {
            cpu: 3,
            groups: vec![
                ("floor/8B".into(), buffer(&[(100, 80), (200, 90)])),
                ("pipe/8B".into(), buffer(&[(300, 20_000)])),
            ],
        };
        let mut out = Vec::new();
        write_samples_csv(&mut out, &samples).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "timestamp_ns,cpu,value_ns,group\n100,3,80,floor/8B\n200,3,90,floor/8B\n300,3,20000,pipe/8B\n"
        );
    }
}
