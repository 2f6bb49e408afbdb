//! A metric's whole distribution in a compact, self-describing form: the bins of a
//! logarithmic histogram (16 per power of two, each at most 1/16 of its value wide),
//! with their bounds written out, so a reader needs no knowledge of the binning to plot
//! a histogram or the tail curve (latency against 1 − quantile).

use serde::{Deserialize, Serialize};

use crate::stats::Recorder;

/// Bins per power of two: each bin is 1/16 of an octave, about 4–6 % of its value.
pub const BINS_PER_OCTAVE: u32 = 16;
const SUB_BITS: u32 = BINS_PER_OCTAVE.trailing_zeros();

/// The non-empty bins of a metric's histogram, in increasing order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Distribution {
    /// Bins per power of two (16): values below 16 have a bin each.
    pub per_octave: u32,
    /// `[low, high, count]`: `count` values `v` with `low <= v < high`, in the metric's unit.
    /// Values beyond the histogram's ceiling (one hour) are counted in its last bin.
    pub bins: Vec<[u64; 3]>,
}

/// The bin holding `value`: `[low, high)`.
pub fn bin_of(value: u64) -> (u64, u64) {
    if value < BINS_PER_OCTAVE as u64 {
        return (value, value + 1);
    }
    let octave = 63 - value.leading_zeros();
    let step = 1u64 << (octave - SUB_BITS);
    let low = value & !(step - 1);
    (low, low.saturating_add(step))
}

impl Distribution {
    /// The recorder's histogram in log bins. Its buckets are finer than a bin and nest in
    /// them (both are aligned to powers of two), so no count lands in the wrong bin.
    pub fn of(recorder: &Recorder) -> Self {
        let hist = recorder.histogram();
        let mut bins: Vec<[u64; 3]> = Vec::new();
        for v in hist.iter_recorded() {
            let (low, high) = bin_of(hist.lowest_equivalent(v.value_iterated_to()));
            match bins.last_mut() {
                Some(last) if last[0] == low => last[2] += v.count_at_value(),
                _ => bins.push([low, high, v.count_at_value()]),
            }
        }
        Distribution {
            per_octave: BINS_PER_OCTAVE,
            bins,
        }
    }

    /// Number of values counted.
    pub fn count(&self) -> u64 {
        self.bins.iter().map(|b| b[2]).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_a_sixteenth_of_their_octave_and_tile_the_line() {
        assert_eq!(bin_of(0), (0, 1));
        assert_eq!(bin_of(15), (15, 16));
        assert_eq!(bin_of(16), (16, 17));
        assert_eq!(bin_of(1000), (992, 1024));
        assert_eq!(bin_of(1024), (1024, 1088));
        assert_eq!(bin_of(u64::MAX).1, u64::MAX);
        // Each bin's high is the next bin's low.
        let mut v = 0u64;
        while v < 1 << 40 {
            let (low, high) = bin_of(v);
            assert_eq!(low, v);
            assert!(high > low && (high - low) * 16 <= low.max(16));
            v = high;
        }
    }

    #[test]
    fn counts_land_in_the_bins_of_their_values() {
        let mut r = Recorder::new();
        for v in [3u64, 3, 1000, 1010, 1023, 1024, 5_000_000] {
            r.record(v);
        }
        let d = Distribution::of(&r);
        assert_eq!(d.count(), 7);
        let find = |v: u64| d.bins.iter().find(|b| b[0] <= v && v < b[1]).map(|b| b[2]);
        assert_eq!(find(3), Some(2));
        assert_eq!(find(1000), Some(3), "{d:?}");
        assert_eq!(find(1024), Some(1));
        assert_eq!(find(5_000_000), Some(1));
        assert!(d.bins.windows(2).all(|w| w[0][1] <= w[1][0]), "ordered");
    }

    #[test]
    fn an_empty_recorder_has_no_bins() {
        assert_eq!(
            Distribution::of(&Recorder::new()).bins,
            Vec::<[u64; 3]>::new()
        );
    }
}
