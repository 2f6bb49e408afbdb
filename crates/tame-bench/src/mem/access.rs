//! The two access patterns over a buffer of cache-line nodes:
//! - chase: each load reads the address of the next node, the nodes linked in one random
//!   cycle through all of them (Sattolo's shuffle), so no load can start before the one
//!   before it ends and no prefetcher can guess the next line;
//! - stream: the lines read in address order, every word of each line, wrapping at the end.
//!
//! Both are timed per batch of a fixed number of accesses; one access is one cache line.

use std::hint::black_box;

/// The unit of both patterns: one cache line.
pub const LINE_BYTES: usize = 64;

/// One node: a cache line whose first word links to the next node (chase).
#[repr(C, align(64))]
pub struct Line(pub [u64; 8]);

/// SplitMix64: a small seeded generator, enough to shuffle (no crate needed for that).
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (bound > 0), by the multiply-shift reduction.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }
}

/// Link `lines` into one random cycle through all of them: line i's first word becomes
/// the address of its successor. Sattolo's variant of the Fisher–Yates shuffle yields a
/// permutation with exactly one cycle; it runs in place (the indices live in the lines).
pub fn link_cycle(lines: &mut [Line], seed: u64) {
    let n = lines.len();
    for (i, line) in lines.iter_mut().enumerate() {
        line.0[0] = i as u64;
    }
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64) as usize;
        let (a, b) = (lines[i].0[0], lines[j].0[0]);
        lines[i].0[0] = b;
        lines[j].0[0] = a;
    }
    let base = lines.as_ptr() as u64;
    for line in lines.iter_mut() {
        line.0[0] = base + line.0[0] * LINE_BYTES as u64;
    }
}

/// Follow `accesses` links from `from`; returns where it stopped (the next batch's start).
///
/// # Safety
/// `from` must be a node of a buffer linked by [`link_cycle`] that is still mapped.
#[inline(never)]
pub unsafe fn chase(from: *const Line, accesses: u32) -> *const Line {
    let mut p = from;
    for _ in 0..black_box(accesses) {
        // SAFETY: every link points at a node of the same buffer (the caller's promise).
        p = unsafe { (*p).0[0] } as *const Line;
    }
    p
}

/// Read `accesses` lines in order from line `*at` (wrapping at the end), every word of
/// each; `*at` is left at the next line. Returns a sum so the loads cannot be dropped.
#[inline(never)]
pub fn stream(lines: &[Line], at: &mut usize, accesses: u32) -> u64 {
    let mut sum = 0u64;
    let mut i = *at;
    for _ in 0..black_box(accesses) {
        let l = &lines[i].0;
        sum = sum.wrapping_add(l[0] ^ l[1] ^ l[2] ^ l[3] ^ l[4] ^ l[5] ^ l[6] ^ l[7]);
        i += 1;
        if i == lines.len() {
            i = 0;
        }
    }
    *at = i;
    black_box(sum)
}

/// Per-access time in picoseconds of a batch of `accesses` that took `batch_ns`
/// (rounded to the nearest ps).
pub fn per_access_ps(batch_ns: u64, accesses: u32) -> u64 {
    let a = u64::from(accesses.max(1));
    (batch_ns.saturating_mul(1000) + a / 2) / a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<Line> {
        (0..n).map(|_| Line([0; 8])).collect()
    }

    #[test]
    fn the_permutation_is_one_cycle_through_every_node() {
        for n in [1usize, 2, 3, 17, 1024, 4099] {
            let mut v = lines(n);
            link_cycle(&mut v, 42);
            let base = v.as_ptr() as u64;
            let mut seen = vec![false; n];
            let mut p = v.as_ptr();
            for step in 0..n {
                let i = (p as u64 - base) as usize / LINE_BYTES;
                assert!(!seen[i], "n={n}: node {i} visited twice by step {step}");
                seen[i] = true;
                // SAFETY: linked above, still alive.
                p = unsafe { chase(p, 1) };
            }
            assert!(seen.iter().all(|s| *s), "n={n}: some node never visited");
            assert_eq!(p, v.as_ptr(), "n={n}: n steps return to the start");
        }
    }

    #[test]
    fn the_shuffle_depends_on_the_seed_and_is_not_the_identity_order() {
        let (mut a, mut b) = (lines(256), lines(256));
        link_cycle(&mut a, 1);
        link_cycle(&mut b, 2);
        let offsets = |v: &[Line]| -> Vec<u64> {
            let base = v.as_ptr() as u64;
            v.iter()
                .map(|l| (l.0[0] - base) / LINE_BYTES as u64)
                .collect()
        };
        assert_ne!(offsets(&a), offsets(&b));
        // Few successors are the next line: sequential order would be 255 of 256.
        let sequential = offsets(&a)
            .iter()
            .enumerate()
            .filter(|(i, &s)| s == *i as u64 + 1)
            .count();
        assert!(sequential < 8, "{sequential} of 256 links are sequential");
    }

    #[test]
    fn stream_wraps_and_reads_every_word() {
        let mut v = lines(3);
        v[1].0[7] = 5;
        let mut at = 2;
        let sum = stream(&v, &mut at, 4);
        // Lines 2, 0, 1, 2: line 1 contributes 5.
        assert_eq!((sum, at), (5, 0));
        let below: Vec<u64> = {
            let mut r = SplitMix64::new(7);
            (0..1000).map(|_| r.below(10)).collect()
        };
        assert!(below.iter().all(|&x| x < 10) && below.contains(&0) && below.contains(&9));
    }

    #[test]
    fn per_access_time_is_the_batch_over_its_accesses_in_ps() {
        // 1024 loads in 1 536 ns: 1.5 ns each.
        assert_eq!(per_access_ps(1_536, 1024), 1_500);
        // 100 ns in 3 accesses: 33 333.3 ps, rounded.
        assert_eq!(per_access_ps(100, 3), 33_333);
        assert_eq!(per_access_ps(0, 1024), 0);
        assert_eq!(per_access_ps(7, 0), 7_000);
    }
}
