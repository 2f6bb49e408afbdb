//! The work of one activation: a pointer chase through a working set, one cache line a
//! step. The lines are linked in one random cycle (Sattolo's shuffle, as `tame bench mem`
//! chases them), so each load waits for the one before it and no prefetcher can guess the
//! next line; each step also updates a word of its line (a control loop writes its state),
//! so the lines turn dirty and evicting them costs a write-back. The chase resumes where
//! the previous activation stopped: the working set stays as warm as a real task's state.

use std::hint::black_box;

use crate::error::{invalid, Result};
use crate::mem::{link_cycle, Buffer, HugePages, Line, LINE_BYTES};

/// The smallest working set: one page (64 lines).
pub const MIN_WORKING_SET_BYTES: u64 = 4096;
/// The largest working set: 1 GiB.
pub const MAX_WORKING_SET_BYTES: u64 = 1 << 30;
/// The shuffle's seed: fixed, so every run chases the same cycle.
const SEED: u64 = 0x70B5_5EED;
const PAGE: u64 = 4096;

/// Refuse a working set outside 4 KiB..1 GiB.
pub fn validate_working_set(bytes: u64) -> Result<()> {
    if !(MIN_WORKING_SET_BYTES..=MAX_WORKING_SET_BYTES).contains(&bytes) {
        return Err(invalid(format!(
            "working set {bytes} bytes is out of range — the work touches 4KiB..1GiB (e.g. --working-set 256KiB)"
        )));
    }
    Ok(())
}

/// A working set ready to be chased: mapped, touched (and locked when asked), linked.
pub struct WorkingSet {
    buffer: Buffer,
    base: *mut Line,
    at: *mut Line,
    lines: usize,
    acc: u64,
}

// SAFETY: `base` and `at` point into `buffer`, which the set owns; nothing else aliases it.
unsafe impl Send for WorkingSet {}

impl WorkingSet {
    /// Map `bytes` (validated; rounded up to whole pages) on base pages, touch every page,
    /// lock them when `lock`, and link the lines into one cycle. Errors name the step.
    pub fn new(bytes: u64, lock: bool) -> std::result::Result<Self, String> {
        let len = bytes.div_ceil(PAGE) * PAGE;
        let mut buffer = Buffer::new(len as usize, HugePages::None, None, lock)?;
        let lines = (bytes / LINE_BYTES as u64) as usize;
        // SAFETY: the mapping is page-aligned (so line-aligned), `lines` lines long at
        // most, and zero-filled: every `Line` value is valid.
        let slice =
            unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<Line>(), lines) };
        link_cycle(slice, SEED);
        let base = slice.as_mut_ptr();
        Ok(WorkingSet {
            buffer,
            base,
            at: base,
            lines,
            acc: 0,
        })
    }

    /// Cache lines in the set.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Bytes mapped.
    pub fn mapped_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Run `steps` steps of the chase from where the last call stopped.
    #[inline(never)]
    pub fn run(&mut self, steps: u64) {
        let mut p = self.at;
        let mut acc = self.acc;
        for _ in 0..steps {
            // SAFETY: every link points at a line of `buffer` (link_cycle), which lives
            // as long as `self`; `&mut self` makes this the only access.
            unsafe {
                let line = &mut (*p).0;
                acc = acc.rotate_left(7) ^ line[1];
                line[1] = line[1].wrapping_add(acc | 1);
                p = line[0] as *mut Line;
            }
        }
        self.at = p;
        self.acc = black_box(acc);
    }

    /// Once around the whole cycle: every line in the cache (as far as it fits).
    pub fn warm_up(&mut self) {
        self.run(self.lines as u64);
    }

    /// The line the next step reads, as an index.
    pub fn position(&self) -> usize {
        (self.at as usize - self.base as usize) / LINE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_outside_4kib_to_1gib_are_refused_with_a_remedy() {
        for bad in [0, 63, 64, 4095, MAX_WORKING_SET_BYTES + 1] {
            let e = validate_working_set(bad).unwrap_err();
            assert!(
                e.is_bad_input() && e.to_string().contains("4KiB..1GiB"),
                "{bad}: {e}"
            );
        }
        assert!(validate_working_set(4096).is_ok());
        assert!(validate_working_set(MAX_WORKING_SET_BYTES).is_ok());
    }

    #[test]
    fn the_chase_visits_every_line_once_per_lap_and_resumes_where_it_stopped() {
        // 4 KiB + 100 bytes: a partial page is mapped, only whole lines are chased.
        let mut set = WorkingSet::new(4096 + 100, false).unwrap();
        assert_eq!((set.lines(), set.mapped_bytes()), (65, 8192));
        let mut seen = vec![false; set.lines()];
        for _ in 0..set.lines() {
            let i = set.position();
            assert!(!seen[i], "line {i} visited twice in one lap");
            seen[i] = true;
            set.run(1);
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(set.position(), 0, "a lap ends where it began");
        // Two calls of 30 steps end where one of 60 does.
        let mut other = WorkingSet::new(4096 + 100, false).unwrap();
        set.run(30);
        set.run(30);
        other.run(60);
        assert_eq!(set.position(), other.position());
        let before = set.position();
        set.run(0);
        assert_eq!(set.position(), before, "no steps, no move");
    }
}
