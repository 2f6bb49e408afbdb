//! A run over time without keeping every sample: the values fall into windows of equal
//! length, and each window keeps its count, extremes, mean and missed periods. The
//! windows are allocated before measuring; when the run outlasts them, neighbours merge
//! in place and the windows double in length, so a peak is never dropped and recording
//! never allocates.

use serde::{Deserialize, Serialize};

/// Windows held while recording; a finished timeline has between half and all of them.
pub const WINDOWS: usize = 1024;
/// The shortest window, as a power of two of ns (2^10 ns ≈ 1 µs).
const MIN_SHIFT: u32 = 10;

/// One window of a timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Values recorded in it (0: none, and `min`/`max`/`mean` are 0).
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: u64,
    /// Periods missed in it (cycle bench), left out of the JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missed: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A metric over a run: window `i` covers `[i × window_ns, (i + 1) × window_ns)` after
/// the run's start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The metric whose values these are (`latency`, `jitter`, `duration`, `gap`).
    pub metric: String,
    pub unit: String,
    pub window_ns: u64,
    pub windows: Vec<Window>,
}

#[derive(Clone, Copy, Debug)]
struct Accumulator {
    count: u64,
    min: u64,
    max: u64,
    sum: u64,
    missed: u64,
}

const EMPTY: Accumulator = Accumulator {
    count: 0,
    min: u64::MAX,
    max: 0,
    sum: 0,
    missed: 0,
};

impl Accumulator {
    fn absorb(&mut self, other: &Accumulator) {
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum = self.sum.saturating_add(other.sum);
        self.missed += other.missed;
    }

    fn window(&self) -> Window {
        if self.count == 0 {
            return Window {
                missed: self.missed,
                ..Window::default()
            };
        }
        Window {
            count: self.count,
            min: self.min,
            max: self.max,
            mean: self.sum / self.count,
            missed: self.missed,
        }
    }
}

/// Records a timeline; `record` and `missed` never allocate.
#[derive(Clone, Debug)]
pub struct TimelineRecorder {
    start_ns: u64,
    shift: u32,
    used: usize,
    windows: Box<[Accumulator; WINDOWS]>,
}

impl TimelineRecorder {
    /// A recorder for a run starting at `start_ns` expected to last about `expected_ns`
    /// (0: unknown); the window length starts at the power of two that fits it in.
    pub fn new(start_ns: u64, expected_ns: u64) -> Self {
        let per_window = expected_ns.div_ceil(WINDOWS as u64).max(1);
        let shift = (64 - (per_window - 1).leading_zeros()).max(MIN_SHIFT);
        TimelineRecorder {
            start_ns,
            shift,
            used: 0,
            windows: Box::new([EMPTY; WINDOWS]),
        }
    }

    /// Restart at `start_ns` (the measuring loop's own start), keeping the memory. Only
    /// the windows used so far are cleared: a fresh recorder restarts in no time.
    pub fn restart(&mut self, start_ns: u64) {
        self.start_ns = start_ns;
        self.windows[..self.used].fill(EMPTY);
        self.used = 0;
    }

    #[inline(always)]
    fn slot(&mut self, t_ns: u64) -> &mut Accumulator {
        let mut i = (t_ns.saturating_sub(self.start_ns) >> self.shift) as usize;
        while i >= WINDOWS {
            self.fold();
            i >>= 1;
        }
        self.used = self.used.max(i + 1);
        &mut self.windows[i]
    }

    /// Count `value` at time `t_ns`.
    #[inline(always)]
    pub fn record(&mut self, t_ns: u64, value: u64) {
        let w = self.slot(t_ns);
        w.count += 1;
        w.min = w.min.min(value);
        w.max = w.max.max(value);
        w.sum = w.sum.saturating_add(value);
    }

    /// Count `n` missed periods at time `t_ns`.
    #[inline(always)]
    pub fn missed(&mut self, t_ns: u64, n: u64) {
        if n > 0 {
            self.slot(t_ns).missed += n;
        }
    }

    /// Merge neighbours: half as many windows, each twice as long.
    #[cold]
    fn fold(&mut self) {
        for j in 0..WINDOWS / 2 {
            let mut merged = self.windows[2 * j];
            merged.absorb(&self.windows[2 * j + 1]);
            self.windows[j] = merged;
        }
        self.windows[WINDOWS / 2..].fill(EMPTY);
        self.shift += 1;
        self.used = self.used.div_ceil(2);
    }

    /// The recorded timeline of `metric` (in `unit`), up to its last used window.
    pub fn timeline(&self, metric: &str, unit: &str) -> Timeline {
        Timeline {
            metric: metric.to_string(),
            unit: unit.to_string(),
            window_ns: 1u64 << self.shift,
            windows: self.windows[..self.used]
                .iter()
                .map(|a| a.window())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_keep_count_extremes_mean_and_missed() {
        let mut r = TimelineRecorder::new(1_000_000, 1 << 20);
        assert_eq!(r.timeline("latency", "ns").window_ns, 1024);
        r.record(1_000_000, 10);
        r.record(1_000_500, 30);
        r.record(1_003_000, 7);
        r.missed(1_003_050, 2);
        let t = r.timeline("latency", "ns");
        assert_eq!(t.windows.len(), 3);
        assert_eq!(
            t.windows[0],
            Window {
                count: 2,
                min: 10,
                max: 30,
                mean: 20,
                missed: 0
            }
        );
        assert_eq!(t.windows[1], Window::default());
        assert_eq!(
            (t.windows[2].count, t.windows[2].max, t.windows[2].missed),
            (1, 7, 2)
        );
    }

    #[test]
    fn a_longer_run_folds_windows_and_keeps_every_peak() {
        // Expected 1 ms, runs 1 s: the windows double until 1 s fits.
        let mut r = TimelineRecorder::new(0, 1_000_000);
        let mut peak_at = Vec::new();
        for k in 0..1_000_000u64 {
            let v = if k % 99_991 == 0 {
                peak_at.push(k * 1000);
                5_000_000 + k
            } else {
                1_000
            };
            r.record(k * 1000, v);
        }
        let t = r.timeline("latency", "ns");
        assert!(
            t.windows.len() > WINDOWS / 2 && t.windows.len() <= WINDOWS,
            "{}",
            t.windows.len()
        );
        assert_eq!(t.windows.iter().map(|w| w.count).sum::<u64>(), 1_000_000);
        for at in peak_at {
            let w = t.windows[(at / t.window_ns) as usize];
            assert_eq!(w.max, 5_000_000 + at / 1000, "peak at {at} kept");
        }
        assert_eq!(t.windows.iter().map(|w| w.min).min(), Some(1_000));
    }

    #[test]
    fn a_restart_forgets_what_was_recorded() {
        let mut r = TimelineRecorder::new(0, 1 << 20);
        r.record(5_000, 9);
        r.missed(700_000, 1);
        r.restart(10_000);
        assert_eq!(r.timeline("x", "ns").windows, Vec::<Window>::new());
        r.record(700_000 + 10_000, 3);
        let t = r.timeline("x", "ns");
        assert_eq!(t.windows.iter().map(|w| w.count).sum::<u64>(), 1);
        assert_eq!(
            t.windows.iter().map(|w| w.missed).sum::<u64>(),
            0,
            "the old miss is gone"
        );
    }

    #[test]
    fn values_before_the_start_land_in_the_first_window() {
        let mut r = TimelineRecorder::new(500, 0);
        r.record(100, 4);
        assert_eq!(r.timeline("x", "ns").windows[0].count, 1);
    }
}
