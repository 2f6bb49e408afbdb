//! Raw samples as CSV.

use std::io::Write;

use crate::measure::SampleBuffer;
use crate::report::GroupSource;

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
