//! The periodic task's loop, over an injected clock, sleep and work so that its
//! scheduling can be tested without a machine: release k is due at start + (k + 1) ×
//! period, fixed in advance; the job sleeps until its release only when it is not
//! already past it, runs its work, and is recorded. A job that ends after the next
//! release delays that job, which starts at once: no release is skipped or dropped.

use crate::engine::RunControl;
use crate::measure::Sample;

use super::JobOutput;

/// What the loop runs on: the measuring clock, the sleep and the work.
pub(crate) trait Machine {
    /// Now, CLOCK_MONOTONIC ns.
    fn now(&mut self) -> u64;
    /// Sleep until the absolute time `t_ns`.
    fn sleep_until(&mut self, t_ns: u64);
    /// One activation's work.
    fn work(&mut self);
}

/// The job's timing: period and relative deadline, ns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub start: u64,
    pub period: u64,
    pub deadline: u64,
    pub loops: u64,
}

/// Run `timing.loops` activations (fewer when stopped). No allocation, no system call but
/// the machine's sleep and clock reads.
#[inline(never)]
pub(crate) fn activations(
    out: &mut JobOutput,
    machine: &mut impl Machine,
    timing: Timing,
    control: &RunControl,
    mut progress: impl FnMut(u64),
) {
    let Timing {
        start,
        period,
        deadline,
        loops,
    } = timing;
    // When the previous job completed (the common start before the first).
    let mut previous = start;
    let mut k = 0u64;
    while k < loops && !control.stopped() {
        let release = start + (k + 1) * period;
        if previous < release {
            machine.sleep_until(release);
        }
        let begun = machine.now();
        machine.work();
        let completion = machine.now();
        let response = completion.saturating_sub(release);
        out.response.record(response);
        out.start_delay.record(begun.saturating_sub(release));
        out.run_time.record(completion.saturating_sub(begun));
        out.samples.push(Sample {
            t_ns: release,
            value_ns: response,
        });
        out.timeline.record(release, response);
        if response > deadline {
            out.misses += 1;
            out.timeline.missed(release, 1);
        }
        if response > period {
            out.overruns += 1;
        }
        previous = completion;
        k += 1;
        out.activations = k;
        progress(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose clock moves only by sleeping and working: each wakeup comes
    /// `wake_ns` after the asked time, each job takes `run_ns[k]`.
    struct Fake {
        now: u64,
        wake_ns: u64,
        run_ns: Vec<u64>,
        job: usize,
        sleeps: Vec<u64>,
    }

    impl Machine for Fake {
        fn now(&mut self) -> u64 {
            self.now
        }
        fn sleep_until(&mut self, t_ns: u64) {
            self.sleeps.push(t_ns);
            self.now = self.now.max(t_ns) + self.wake_ns;
        }
        fn work(&mut self) {
            self.now += self.run_ns[self.job];
            self.job += 1;
        }
    }

    fn run(run_ns: Vec<u64>, deadline: u64) -> (JobOutput, Fake) {
        let loops = run_ns.len() as u64;
        let mut out = JobOutput::new(None, loops, 1_000, 100);
        out.timeline.restart(0);
        let mut fake = Fake {
            now: 0,
            wake_ns: 10,
            run_ns,
            job: 0,
            sleeps: Vec::new(),
        };
        let timing = Timing {
            start: 0,
            period: 1_000,
            deadline,
            loops,
        };
        let mut seen = Vec::new();
        activations(&mut out, &mut fake, timing, &RunControl::new(), |k| {
            seen.push(k)
        });
        assert_eq!(seen, (1..=loops).collect::<Vec<_>>(), "progress per job");
        (out, fake)
    }

    fn responses(out: &JobOutput) -> Vec<u64> {
        out.samples.samples().iter().map(|s| s.value_ns).collect()
    }

    #[test]
    fn an_overrun_delays_the_following_jobs_which_start_at_once() {
        // Job 2 (released at 3000) runs 3500 ns: 2.5 periods past its next release.
        let mut run_ns = vec![200; 10];
        run_ns[2] = 3_500;
        let (out, fake) = run(run_ns, 800);
        assert_eq!(out.activations, 10);
        // Every release, in order, none skipped.
        let releases: Vec<u64> = out.samples.samples().iter().map(|s| s.t_ns).collect();
        assert_eq!(releases, (1..=10).map(|k| k * 1_000).collect::<Vec<_>>());
        // Job 2 starts 3010 and completes 6510; jobs 3, 4, 5 and 6 start right after the
        // previous one (no sleep), job 7 sleeps again until its release.
        assert_eq!(fake.sleeps, vec![1_000, 2_000, 3_000, 8_000, 9_000, 10_000]);
        assert_eq!(
            responses(&out),
            vec![210, 210, 3_510, 2_710, 1_910, 1_110, 310, 210, 210, 210]
        );
        // Missed (> 800): jobs 2..=5; completed after the next release: the same four.
        assert_eq!((out.misses, out.overruns), (4, 4));
        // Start delays: the wakeup, then the backlog: 6510 − 4000, 6710 − 5000, …
        assert_eq!(out.start_delay.max(), Some(2_510));
        assert_eq!(out.start_delay.min(), Some(10));
        assert_eq!(
            (out.run_time.min(), out.run_time.max()),
            (Some(200), Some(3_500))
        );
        assert_eq!(out.response.count(), 10);
        let t = out.timeline.timeline("response", "ns");
        assert_eq!(t.windows.iter().map(|w| w.count).sum::<u64>(), 10);
        assert_eq!(t.windows.iter().map(|w| w.missed).sum::<u64>(), 4);
    }

    #[test]
    fn a_job_completing_at_its_deadline_is_no_miss_and_one_past_the_next_release_overruns() {
        // Response 10 + 790 = 800: at the deadline, no miss. Then 10 + 990 = 1000: a miss
        // completing at the next release, which starts at once (no overrun); the last
        // completes 1 ns after the next release: an overrun.
        let (out, fake) = run(vec![790, 990, 200, 991], 800);
        assert_eq!(responses(&out), vec![800, 1_000, 200, 1_001]);
        assert_eq!(fake.sleeps, vec![1_000, 2_000, 4_000]);
        assert_eq!((out.misses, out.overruns), (2, 1));
        let (out, _) = run(vec![991, 200], 1_000);
        assert_eq!(responses(&out), vec![1_001, 201]);
        assert_eq!((out.misses, out.overruns), (1, 1));
    }

    #[test]
    fn a_stop_request_ends_before_the_next_job() {
        let mut out = JobOutput::new(None, 5, 1_000, 0);
        let control = RunControl::new();
        control.request_stop();
        let mut fake = Fake {
            now: 0,
            wake_ns: 0,
            run_ns: vec![1; 5],
            job: 0,
            sleeps: Vec::new(),
        };
        let timing = Timing {
            start: 0,
            period: 1_000,
            deadline: 1_000,
            loops: 5,
        };
        activations(&mut out, &mut fake, timing, &control, |_| {});
        assert_eq!((out.activations, out.response.count()), (0, 0));
        assert!(fake.sleeps.is_empty());
    }
}
