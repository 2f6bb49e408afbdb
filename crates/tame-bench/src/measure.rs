//! Raw outputs of measuring threads, before they become a result.

/// Per-thread outputs of a run plus how long it took and whether it was cut short.
pub struct Measured<T> {
    pub outputs: Vec<T>,
    pub elapsed_ns: u64,
    pub interrupted: bool,
}

/// One raw measurement: when it was due (CLOCK_MONOTONIC ns) and its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub t_ns: u64,
    pub value_ns: u64,
}

/// A buffer allocated before measuring; pushing never reallocates. Samples
/// beyond its capacity are counted, not kept. A zero-capacity buffer keeps and counts nothing.
#[derive(Debug, Default)]
pub struct SampleBuffer {
    samples: Vec<Sample>,
    dropped: u64,
}

impl SampleBuffer {
    pub fn with_capacity(capacity: usize) -> Self {
        let mut samples = Vec::with_capacity(capacity);
        // Touch the pages now so the first pushes take no page faults.
        samples.resize(capacity, Sample::default());
        samples.clear();
        Self {
            samples,
            dropped: 0,
        }
    }

    #[inline(always)]
    pub fn push(&mut self, sample: Sample) {
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(sample);
        } else if self.samples.capacity() > 0 {
            self.dropped += 1;
        }
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_counts_instead_of_growing() {
        let mut b = SampleBuffer::with_capacity(2);
        let cap = b.samples.capacity();
        for i in 0..(cap as u64 + 3) {
            b.push(Sample {
                t_ns: i,
                value_ns: i,
            });
        }
        assert_eq!(b.len(), cap);
        assert_eq!(b.dropped(), 3);
        assert_eq!(b.samples.capacity(), cap, "never reallocated");
    }

    #[test]
    fn a_disabled_buffer_counts_nothing() {
        let mut b = SampleBuffer::with_capacity(0);
        b.push(Sample::default());
        assert_eq!((b.len(), b.dropped()), (0, 0));
    }
}
