//! `tame bench sleep`: the relative nanosleep loop of the real-time-vs-real-fast
//! study — t0; nanosleep(d); t1; jitter = (t1 − t0) − d — run by N tasks at once.

use crate::engine::ThreadSetup;
use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_rt::clock::nanosleep_ns;
use tame_rt::Clock;

use crate::engine::{self, RunControl, ThreadSettings};
use crate::error::{invalid, Result};
use crate::measure::{Measured, Sample, SampleBuffer};
use crate::session::{self, Bench, Prepared};
use crate::stats::Recorder;
use crate::timeline::TimelineRecorder;
use tame_rt::duration::{format_ns_as, NsStyle};

pub const MAX_TASKS: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SleepSettings {
    /// CPUs the tasks are spread over round-robin; `None` leaves them unpinned.
    pub cpus: Option<CpuList>,
    pub tasks: usize,
    pub sleep_ns: u64,
    /// Sleeps per task.
    pub loops: u64,
    pub threads: ThreadSettings,
}

impl SleepSettings {
    /// Validated settings: `tasks` and the sleep in range; `loops` sleeps per task, or as
    /// many as fit in `duration_ns` (default 10 s), at least one.
    pub fn new(
        cpus: Option<CpuList>,
        tasks: usize,
        sleep_ns: u64,
        duration_ns: Option<u64>,
        loops: Option<u64>,
        threads: ThreadSettings,
    ) -> Result<Self> {
        Self::validate_shape(tasks, sleep_ns)?;
        Ok(SleepSettings {
            loops: session::periods(duration_ns, loops, sleep_ns)?,
            cpus,
            tasks,
            sleep_ns,
            threads,
        })
    }

    pub fn validate_shape(tasks: usize, sleep_ns: u64) -> Result<()> {
        if tasks == 0 || tasks > MAX_TASKS {
            return Err(invalid(format!(
                "--tasks {tasks} is out of range — run 1..{MAX_TASKS} sleeping tasks"
            )));
        }
        if sleep_ns == 0 || sleep_ns > 10_000_000_000 {
            return Err(invalid(format!(
                "sleep of {} is out of range — use 1ns..10s (e.g. --sleep 1ms)",
                tame_rt::duration::format_ns(sleep_ns)
            )));
        }
        Ok(())
    }
}

impl Bench for SleepSettings {
    type Output = SleepOutput;
    const NAME: &'static str = "sleep";
    const LABEL_BY_CPU: bool = false;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        self.cpus.as_ref()
    }
    fn deadline_period_ns(&self) -> u64 {
        self.sleep_ns.max(1_000_000)
    }
    fn expected_ns(&self) -> u64 {
        self.loops * self.sleep_ns
    }
    fn thread_count(&self) -> usize {
        self.tasks
    }
    fn per_thread(&self) -> u64 {
        self.loops
    }
    fn title(&self) -> String {
        format!(
            "tame bench sleep: {} on {}, nanosleep {}, {} sleeps each, {}",
            tame_rt::plural::count(self.tasks as u64, "task", "tasks"),
            self.cpus
                .as_ref()
                .map_or("any CPU".to_string(), CpuList::named),
            format_ns_as(self.sleep_ns, NsStyle::Fixed),
            self.loops,
            self.threads.label()
        )
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<SleepOutput>> {
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

pub struct SleepOutput {
    pub cpu: Option<u32>,
    pub jitter: Recorder,
    /// Sleeps that returned before d had passed (jitter recorded as 0).
    pub early: u64,
    /// Sleeps cut short by a signal.
    pub interrupted_sleeps: u64,
    pub samples: SampleBuffer,
    /// Jitter per window over the run.
    pub timeline: TimelineRecorder,
}

pub fn run(
    settings: &SleepSettings,
    setup: ThreadSetup,
    clock: Clock,
    control: &RunControl,
    sample_capacity: usize,
    tick: impl FnMut(u64),
) -> Result<Measured<SleepOutput>> {
    let assigned = engine::assign_cpus(settings.tasks, settings.cpus.as_ref());
    let plans = engine::plans(&assigned, &setup, settings.threads.mlock);
    let (d, loops) = (settings.sleep_ns, settings.loops);
    let thread_control = control.clone();
    engine::measure(&plans, control, tick, move |index, gate, progress| {
        let mut out = SleepOutput {
            cpu: assigned[index],
            jitter: Recorder::new(),
            early: 0,
            interrupted_sleeps: 0,
            samples: SampleBuffer::with_capacity(sample_capacity),
            timeline: TimelineRecorder::new(0, loops.saturating_mul(d)),
        };
        if gate.wait().is_none() {
            return out;
        }
        let start_raw = clock.raw();
        let mut i = 0;
        while i < loops && !thread_control.stopped() {
            let t0 = clock.raw();
            let completed = nanosleep_ns(d);
            let t1 = clock.raw();
            let elapsed = clock.raw_delta_ns(t1.wrapping_sub(t0));
            if !completed {
                out.interrupted_sleeps += 1;
            }
            if elapsed < d {
                out.early += 1;
            }
            let jitter = elapsed.saturating_sub(d);
            out.jitter.record(jitter);
            out.samples.push(Sample {
                t_ns: t0,
                value_ns: jitter,
            });
            out.timeline
                .record(clock.raw_delta_ns(t0.wrapping_sub(start_raw)), jitter);
            i += 1;
            progress.set(index, i);
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_rt::{ClockKind, Policy};

    #[test]
    fn more_tasks_than_cpus_all_complete() {
        let s = SleepSettings {
            cpus: Some(CpuList::parse("0").unwrap()),
            tasks: 3,
            sleep_ns: 100_000,
            loops: 50,
            threads: ThreadSettings {
                policy: Policy::Other,
                priority: 0,
                mlock: false,
                clock: ClockKind::Monotonic,
            },
        };
        let m = run(
            &s,
            ThreadSetup::unplaced(tame_rt::sched::SchedSpec::other()),
            Clock::monotonic(),
            &RunControl::new(),
            10,
            |_| {},
        )
        .unwrap();
        assert_eq!(m.outputs.len(), 3);
        for out in &m.outputs {
            assert_eq!(out.jitter.count(), 50);
            assert_eq!(out.cpu, Some(0));
            assert_eq!(
                out.early, 0,
                "nanosleep never returns early without a signal"
            );
            assert_eq!(out.samples.len(), 10);
        }
    }

    #[test]
    fn shape_limits() {
        assert!(SleepSettings::validate_shape(0, 1000).is_err());
        assert!(SleepSettings::validate_shape(1, 0).is_err());
        assert!(SleepSettings::validate_shape(MAX_TASKS, 1000).is_ok());
    }
}
