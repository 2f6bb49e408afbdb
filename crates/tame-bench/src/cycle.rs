//! `tame bench cycle`: periodic wakeups at absolute deadlines start + k·interval.
//!
//! Unlike cyclictest, a wakeup that lands past later deadlines does not skip
//! them: every intended activation is recorded with the latency it would have
//! had (it could run no earlier than the late wakeup), and counted as missed.
//! That keeps the distribution free of coordinated omission.

use crate::engine::ThreadSetup;
use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_rt::clock::sleep_until;
use tame_rt::Clock;

use crate::engine::{self, RunControl, ThreadSettings};
use crate::error::{invalid, Result};
use crate::measure::{Measured, Sample, SampleBuffer};
use crate::session::{self, Bench, Prepared};
use crate::stats::Recorder;
use crate::timeline::TimelineRecorder;
use tame_rt::duration::{format_ns_as, NsStyle};

pub const MIN_INTERVAL_NS: u64 = 50_000;
pub const MAX_INTERVAL_NS: u64 = 10_000_000_000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleSettings {
    pub cpus: CpuList,
    pub interval_ns: u64,
    /// Intended activations per CPU.
    pub loops: u64,
    pub threads: ThreadSettings,
    /// Spin to each deadline instead of sleeping.
    pub busy_wait: bool,
    /// Value held in /dev/cpu_dma_latency for the run, µs.
    pub dma_latency_us: Option<u32>,
}

impl CycleSettings {
    /// Validated settings: the interval in range; `loops` periods, or as many as fit in
    /// `duration_ns` (default 10 s), at least one.
    pub fn new(
        cpus: CpuList,
        interval_ns: u64,
        duration_ns: Option<u64>,
        loops: Option<u64>,
        threads: ThreadSettings,
        busy_wait: bool,
        dma_latency_us: Option<u32>,
    ) -> Result<Self> {
        Self::validate_interval(interval_ns)?;
        Ok(CycleSettings {
            loops: session::periods(duration_ns, loops, interval_ns)?,
            cpus,
            interval_ns,
            threads,
            busy_wait,
            dma_latency_us,
        })
    }

    pub fn validate_interval(interval_ns: u64) -> Result<()> {
        if !(MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&interval_ns) {
            return Err(invalid(format!(
                "interval {} is out of range — tame bench cycle takes 50µs..10s (e.g. --interval 200us)", tame_rt::duration::format_ns(interval_ns)
            )));
        }
        Ok(())
    }
}

impl Bench for CycleSettings {
    type Output = CycleOutput;
    const NAME: &'static str = "cycle";
    const LABEL_BY_CPU: bool = true;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        Some(&self.cpus)
    }
    fn deadline_period_ns(&self) -> u64 {
        self.interval_ns
    }
    fn expected_ns(&self) -> u64 {
        self.loops * self.interval_ns
    }
    fn thread_count(&self) -> usize {
        self.cpus.len()
    }
    fn per_thread(&self) -> u64 {
        self.loops
    }
    fn dma_latency_us(&self) -> Option<u32> {
        self.dma_latency_us
    }
    fn title(&self) -> String {
        format!(
            "tame bench cycle: {}, interval {}, {} periods each, {}{}",
            self.cpus.named(),
            format_ns_as(self.interval_ns, NsStyle::Fixed),
            self.loops,
            self.threads.label(),
            if self.busy_wait { ", busy-wait" } else { "" }
        )
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<CycleOutput>> {
        run(
            self,
            prepared.setup.clone(),
            prepared.clock,
            control,
            sample_capacity,
            tick,
        )
    }
}

/// What one measuring thread of the cycle bench produced.
pub struct CycleOutput {
    pub cpu: Option<u32>,
    /// Every intended activation (missed ones included): free of coordinated omission.
    pub latency: Recorder,
    /// One value per actual wakeup (wake − the deadline it was for): what cyclictest reports.
    pub wakeup_latency: Recorder,
    /// |actual_k − actual_{k−1} − interval|.
    pub period_deviation: Recorder,
    pub missed: u64,
    pub samples: SampleBuffer,
    /// Latency per window over the run, missed periods included.
    pub timeline: TimelineRecorder,
}

/// Run the cycle bench. `settings` must be validated; `sample_capacity` > 0
/// keeps that many raw samples per CPU.
pub fn run(
    settings: &CycleSettings,
    setup: ThreadSetup,
    clock: Clock,
    control: &RunControl,
    sample_capacity: usize,
    tick: impl FnMut(u64),
) -> Result<Measured<CycleOutput>> {
    let plans = thread_plans(settings, &setup);
    let cpus: Vec<u32> = settings.cpus.iter().collect();
    let (interval, loops, busy) = (settings.interval_ns, settings.loops, settings.busy_wait);
    let thread_control = control.clone();
    engine::measure(&plans, control, tick, move |index, gate, progress| {
        let mut out = CycleOutput {
            cpu: Some(cpus[index]),
            latency: Recorder::new(),
            wakeup_latency: Recorder::new(),
            period_deviation: Recorder::new(),
            missed: 0,
            samples: SampleBuffer::with_capacity(sample_capacity),
            timeline: TimelineRecorder::new(0, loops.saturating_mul(interval)),
        };
        let mut clock = clock;
        let Some(start) = gate.wait() else { return out };
        out.timeline.restart(start);
        measure_loop(
            &mut out,
            &mut clock,
            start,
            interval,
            loops,
            busy,
            &thread_control,
            |done| progress.set(index, done),
        );
        out
    })
}

/// One thread per CPU. Each sleeps with the least timer slack: a SCHED_OTHER thread would
/// otherwise inherit 50 µs, and its wakeups would be late by the slack, not by the system.
fn thread_plans(settings: &CycleSettings, setup: &ThreadSetup) -> Vec<engine::ThreadPlan> {
    let cpus: Vec<Option<u32>> = settings.cpus.iter().map(Some).collect();
    let mut plans = engine::plans(&cpus, setup, settings.threads.mlock);
    for plan in &mut plans {
        plan.timer_slack_ns = Some(tame_rt::clock::MIN_TIMER_SLACK_NS);
    }
    plans
}

/// The measuring loop: no allocation, no system call but the sleep and clock reads.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn measure_loop(
    out: &mut CycleOutput,
    clock: &mut Clock,
    start: u64,
    interval: u64,
    loops: u64,
    busy_wait: bool,
    control: &RunControl,
    mut progress: impl FnMut(u64),
) {
    let mut k = 0u64;
    let mut previous_wake = start;
    while k < loops && !control.stopped() {
        let intended = start + (k + 1) * interval;
        if busy_wait {
            while clock.now() < intended {
                std::hint::spin_loop();
            }
        } else {
            clock.reanchor();
            sleep_until(intended);
        }
        let wake = clock.now();
        // Deadlines strictly before the wakeup, after this one, were missed.
        let late = wake.saturating_sub(intended);
        out.wakeup_latency.record(late);
        let activations = (late.saturating_sub(1) / interval + 1).min(loops - k);
        for j in 0..activations {
            let due = intended + j * interval;
            let latency = wake.saturating_sub(due);
            out.latency.record(latency);
            out.period_deviation
                .record((wake as i64 - previous_wake as i64 - interval as i64).unsigned_abs());
            previous_wake = wake;
            out.samples.push(Sample {
                t_ns: due,
                value_ns: latency,
            });
            out.timeline.record(due, latency);
        }
        out.missed += activations - 1;
        out.timeline.missed(intended, activations - 1);
        k += activations;
        progress(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_rt::{ClockKind, Policy};

    fn settings(loops: u64, interval_ns: u64) -> CycleSettings {
        CycleSettings {
            cpus: CpuList::parse("0").unwrap(),
            interval_ns,
            loops,
            threads: ThreadSettings {
                policy: Policy::Other,
                priority: 0,
                mlock: false,
                clock: ClockKind::Monotonic,
            },
            busy_wait: false,
            dma_latency_us: None,
        }
    }

    #[test]
    fn interval_bounds() {
        assert!(CycleSettings::validate_interval(50_000).is_ok());
        assert!(CycleSettings::validate_interval(10_000_000_000).is_ok());
        let err = CycleSettings::validate_interval(49_999)
            .unwrap_err()
            .to_string();
        assert!(err.contains("50µs..10s"), "{err}");
        assert!(CycleSettings::validate_interval(10_000_000_001).is_err());
    }

    #[test]
    fn measuring_threads_sleep_without_timer_slack() {
        let plans = thread_plans(
            &settings(1, 1_000_000),
            &ThreadSetup::unplaced(tame_rt::sched::SchedSpec::other()),
        );
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].timer_slack_ns, Some(1));
    }

    #[test]
    fn counts_every_intended_activation() {
        let m = run(
            &settings(200, 200_000),
            ThreadSetup::unplaced(tame_rt::sched::SchedSpec::other()),
            Clock::monotonic(),
            &RunControl::new(),
            0,
            |_| {},
        )
        .unwrap();
        let out = &m.outputs[0];
        assert_eq!(out.latency.count(), 200);
        assert_eq!(out.period_deviation.count(), 200);
        assert!(
            out.latency.min().unwrap() > 0,
            "a wakeup cannot precede its deadline"
        );
        assert!(!m.interrupted);
    }

    #[test]
    fn overslept_deadlines_are_missed_and_still_recorded() {
        // A fake sleep: the loop's own clock makes every 10th wakeup 3.5 intervals late.
        let mut out = CycleOutput {
            cpu: None,
            latency: Recorder::new(),
            wakeup_latency: Recorder::new(),
            period_deviation: Recorder::new(),
            missed: 0,
            samples: SampleBuffer::with_capacity(1000),
            timeline: TimelineRecorder::new(0, 20_000_000),
        };
        let interval = 1_000_000;
        let mut clock = Clock::monotonic();
        let start = tame_rt::clock::monotonic_ns();
        out.timeline.restart(start);
        let control = RunControl::new();
        // Block the thread for 3.5 intervals once, mid-run, from a progress callback.
        measure_loop(
            &mut out,
            &mut clock,
            start,
            interval,
            20,
            false,
            &control,
            |k| {
                if k == 5 {
                    std::thread::sleep(std::time::Duration::from_micros(3_500));
                }
            },
        );
        assert_eq!(
            out.latency.count(),
            20,
            "every intended activation is recorded"
        );
        // Blocked 3.5 intervals after deadline 5: the wakeup for deadline 6 comes after 7 and 8 passed.
        assert!(
            out.missed >= 2,
            "deadlines 7 and 8 were missed: {}",
            out.missed
        );
        assert!(
            out.latency.max().unwrap() >= 2_500_000,
            "the first overslept deadline waited ≥ 2.5 intervals"
        );
        assert_eq!(out.samples.len(), 20);
        // The timeline holds every activation, its peak and the missed periods.
        let t = out.timeline.timeline("latency", "ns");
        assert_eq!(t.windows.iter().map(|w| w.count).sum::<u64>(), 20);
        assert_eq!(t.windows.iter().map(|w| w.missed).sum::<u64>(), out.missed);
        assert_eq!(t.windows.iter().map(|w| w.max).max(), out.latency.max());
    }

    #[test]
    fn stop_request_ends_the_run_early() {
        let control = RunControl::new();
        control.request_stop();
        let m = run(
            &settings(1_000_000, 1_000_000),
            ThreadSetup::unplaced(tame_rt::sched::SchedSpec::other()),
            Clock::monotonic(),
            &control,
            0,
            |_| {},
        )
        .unwrap();
        assert_eq!(m.outputs[0].latency.count(), 0);
        assert!(m.interrupted);
    }
}
