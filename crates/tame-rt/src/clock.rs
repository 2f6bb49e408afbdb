//! Clocks for measuring loops. Every reading is integer nanoseconds on the
//! CLOCK_MONOTONIC timeline, so deadlines given to `clock_nanosleep` and
//! measured wake times can be subtracted directly.

use std::hint::black_box;

use serde::{Deserialize, Serialize};

use crate::NS_PER_SEC;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// clock_gettime(CLOCK_MONOTONIC) through the vDSO (no system call).
    Monotonic,
    /// The invariant TSC read with RDTSC, converted with a calibrated ratio.
    Tsc,
}

/// Read CLOCK_MONOTONIC in nanoseconds.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, ns (CLOCK_THREAD_CPUTIME_ID): what a piece of
/// work cost this thread, stolen time and preemption left out.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Read a clock that always exists on Linux, in nanoseconds.
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; callers pass only clocks Linux always has.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * NS_PER_SEC + ts.tv_nsec as u64
}

/// Read the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC is available on every x86_64 CPU and has no side effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// True where `rdtsc` reads a hardware counter (x86_64); elsewhere it falls back to the monotonic clock.
pub const TSC_AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// Fixed-point cycles → nanoseconds: ns = cycles * mult >> SHIFT (as the kernel's clocksources do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TscCalibration {
    /// TSC ticks per second, as measured against CLOCK_MONOTONIC.
    pub hz: u64,
    mult: u64,
}

const SHIFT: u32 = 32;

impl TscCalibration {
    pub fn from_hz(hz: u64) -> Self {
        let hz = hz.max(1);
        let mult = ((NS_PER_SEC as u128) << SHIFT) / hz as u128;
        Self {
            hz,
            mult: mult as u64,
        }
    }

    /// Measure the TSC rate against CLOCK_MONOTONIC over `window_ns`.
    /// Each end is the tightest of several back-to-back (monotonic, tsc) pairs,
    /// so the error is a clock read over the window (< 1 ppm for 100 ms).
    pub fn measure(window_ns: u64) -> Self {
        let (m0, t0) = tight_pair();
        let end = m0 + window_ns;
        while monotonic_ns() < end {
            std::hint::spin_loop();
        }
        let (m1, t1) = tight_pair();
        let hz = ((t1 - t0) as u128 * NS_PER_SEC as u128 / (m1 - m0).max(1) as u128) as u64;
        Self::from_hz(hz)
    }

    #[inline(always)]
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        ((cycles as u128 * self.mult as u128) >> SHIFT) as u64
    }

    #[inline(always)]
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        (ns as u128 * self.hz as u128 / NS_PER_SEC as u128) as u64
    }
}

/// A (monotonic ns, tsc) pair read as close together as possible.
fn tight_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = rdtsc();
        let m = monotonic_ns();
        let b = rdtsc();
        if b - a < best.0 {
            best = (b - a, m, a + (b - a) / 2);
        }
    }
    (best.1, best.2)
}

/// A clock that reports CLOCK_MONOTONIC nanoseconds. In TSC mode it reads only
/// the TSC at measurement points and maps it onto the monotonic timeline with
/// an anchor taken off the critical path (see [`Clock::reanchor`]), so
/// calibration error stays proportional to the time since the last anchor.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    kind: ClockKind,
    tsc: TscCalibration,
    anchor_tsc: u64,
    anchor_ns: u64,
}

impl Clock {
    pub fn monotonic() -> Self {
        Self {
            kind: ClockKind::Monotonic,
            tsc: TscCalibration::from_hz(NS_PER_SEC),
            anchor_tsc: 0,
            anchor_ns: 0,
        }
    }

    /// A TSC clock; the caller must have established that the TSC is invariant.
    pub fn tsc(calibration: TscCalibration) -> Self {
        let mut c = Self {
            kind: ClockKind::Tsc,
            tsc: calibration,
            anchor_tsc: 0,
            anchor_ns: 0,
        };
        c.reanchor();
        c
    }

    pub fn kind(&self) -> ClockKind {
        self.kind
    }

    pub fn calibration(&self) -> Option<TscCalibration> {
        (self.kind == ClockKind::Tsc).then_some(self.tsc)
    }

    /// Re-tie the TSC to the monotonic timeline. Call it outside the timed
    /// section (e.g. just before sleeping); a no-op for the monotonic clock.
    #[inline(always)]
    pub fn reanchor(&mut self) {
        if self.kind == ClockKind::Tsc {
            let (m, t) = tight_pair_fast();
            self.anchor_ns = m;
            self.anchor_tsc = t;
        }
    }

    /// Now, in CLOCK_MONOTONIC nanoseconds.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.kind {
            ClockKind::Monotonic => monotonic_ns(),
            ClockKind::Tsc => {
                let t = rdtsc();
                // The TSC may be read a few cycles before the anchor on another
                // path; treat that as zero elapsed rather than wrapping.
                self.anchor_ns + self.tsc.cycles_to_ns(t.saturating_sub(self.anchor_tsc))
            }
        }
    }

    /// A raw reading in the clock's own unit (cycles for TSC, ns otherwise):
    /// for measuring intervals with the least overhead.
    #[inline(always)]
    pub fn raw(&self) -> u64 {
        match self.kind {
            ClockKind::Monotonic => monotonic_ns(),
            ClockKind::Tsc => rdtsc(),
        }
    }

    /// Convert a difference of two `raw` readings to nanoseconds.
    #[inline(always)]
    pub fn raw_delta_ns(&self, delta: u64) -> u64 {
        match self.kind {
            ClockKind::Monotonic => delta,
            ClockKind::Tsc => self.tsc.cycles_to_ns(delta),
        }
    }

    /// Measure the cost of one clock read: (median, minimum) nanoseconds between
    /// back-to-back reads over `reads` reads. The minimum is the loop floor of a
    /// tight clock-reading loop.
    pub fn read_cost(&self, reads: usize) -> ReadCost {
        let reads = reads.max(3);
        let mut deltas = vec![0u64; reads];
        let mut prev = self.raw();
        for d in deltas.iter_mut() {
            let now = black_box(self.raw());
            *d = now.wrapping_sub(prev);
            prev = now;
        }
        deltas.sort_unstable();
        ReadCost {
            median_ns: self.raw_delta_ns(deltas[reads / 2]),
            min_ns: self.raw_delta_ns(deltas[0]),
        }
    }
}

/// One (monotonic, tsc) pair with a single read of each: cheap enough to do every period.
#[inline(always)]
fn tight_pair_fast() -> (u64, u64) {
    let a = rdtsc();
    let m = monotonic_ns();
    let b = rdtsc();
    (m, a + (b - a) / 2)
}

/// What reading a clock costs on this machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCost {
    pub median_ns: u64,
    pub min_ns: u64,
}

/// Sleep until an absolute CLOCK_MONOTONIC time, resuming after signals that were handled.
#[inline]
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / NS_PER_SEC) as libc::time_t,
        tv_nsec: (deadline_ns % NS_PER_SEC) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a live timespec the kernel only reads; the remainder may be
        // NULL (and is unused with TIMER_ABSTIME).
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// The least timer slack a thread can ask for: 1 ns (0 would mean "back to the default").
pub const MIN_TIMER_SLACK_NS: u64 = 1;

/// Set the calling thread's timer slack (PR_SET_TIMERSLACK): how much later than asked the
/// kernel may end its sleeps, to batch wakeups. A SCHED_OTHER thread inherits 50 µs, which a
/// wakeup-latency measurement would report as latency; SCHED_FIFO/RR/DEADLINE threads sleep
/// with none (kernels ≥ 6.11 ignore this call for them and report 0).
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes a value only and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling thread's timer slack in ns (PR_GET_TIMERSLACK).
pub fn timer_slack_ns() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer; it returns the slack (never fails).
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

/// Relative nanosleep, as the real-time-vs-real-fast test does it. Returns false if interrupted.
#[inline]
pub fn nanosleep_ns(duration_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (duration_ns / NS_PER_SEC) as libc::time_t,
        tv_nsec: (duration_ns % NS_PER_SEC) as libc::c_long,
    };
    // SAFETY: `ts` is a live timespec the kernel only reads; the remainder may be NULL
    // (an interrupted sleep then just reports false).
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_conversion_is_exact_enough() {
        let c = TscCalibration::from_hz(2_445_432_000);
        // One second of cycles is one second, to within a nanosecond.
        let ns = c.cycles_to_ns(2_445_432_000);
        assert!(ns.abs_diff(NS_PER_SEC) <= 1, "{ns}");
        assert_eq!(c.ns_to_cycles(NS_PER_SEC), 2_445_432_000);
        assert_eq!(
            TscCalibration::from_hz(NS_PER_SEC).cycles_to_ns(12345),
            12345
        );
    }

    #[test]
    fn monotonic_clock_advances_across_a_sleep() {
        let c = Clock::monotonic();
        let t0 = c.now();
        sleep_until(t0 + 2_000_000);
        let t1 = c.now();
        assert!(
            t1 >= t0 + 2_000_000,
            "woke {} ns early",
            t0 + 2_000_000 - t1
        );
    }

    #[test]
    // Not counted as a pass where there is no TSC to test.
    #[cfg_attr(not(target_arch = "x86_64"), ignore = "the TSC is x86_64's")]
    fn tsc_clock_tracks_monotonic() {
        let mut c = Clock::tsc(TscCalibration::measure(50_000_000));
        c.reanchor();
        let m0 = monotonic_ns();
        let t0 = c.now();
        sleep_until(m0 + 5_000_000);
        let t1 = c.now();
        let m1 = monotonic_ns();
        // Both clocks measure the same 5 ms; they may differ by clock-read costs and
        // calibration error, far below 50 µs.
        let d_tsc = t1 as i64 - t0 as i64;
        let d_mono = m1 as i64 - m0 as i64;
        assert!(
            (d_tsc - d_mono).abs() < 50_000,
            "tsc {d_tsc} ns vs monotonic {d_mono} ns"
        );
    }

    #[test]
    fn timer_slack_is_set_per_thread() {
        std::thread::spawn(|| {
            let inherited = timer_slack_ns();
            set_timer_slack_ns(MIN_TIMER_SLACK_NS).unwrap();
            assert_eq!(
                timer_slack_ns(),
                MIN_TIMER_SLACK_NS,
                "inherited {inherited} ns"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn read_cost_is_positive_and_small() {
        let cost = Clock::monotonic().read_cost(10_000);
        assert!(cost.median_ns > 0 && cost.median_ns < 100_000, "{cost:?}");
        assert!(cost.min_ns <= cost.median_ns);
    }
}
