//! The periodic job bench: a periodic real-time task that runs its work. Each activation
//! is released at an absolute time start + (k + 1) × period, sleeps until its release
//! unless the previous job already ran past it, then executes its budget as real work (a
//! calibrated chase through a working set, [`kernel`]) and is recorded: the response
//! (completion − release), its start delay and the work's own run time. A job that ends
//! after the next release delays the next job as in a real task — it starts at once, and
//! no release is skipped to catch up — and a miss is a completion after the deadline.
//!
//! Unlike `cycle`, which measures wakeups alone, the response includes the work and
//! everything that slows the work down (caches, memory, an SMT sibling, interrupts while
//! it runs), and a late job delays its successors.

mod calibrate;
pub mod kernel;
mod schedule;

pub use calibrate::{calibrate, WorkCalibration};
pub use kernel::{validate_working_set, WorkingSet, MAX_WORKING_SET_BYTES, MIN_WORKING_SET_BYTES};

use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_rt::duration::{format_ns_as, NsStyle};
use tame_rt::{Clock, Policy};

use crate::cycle::{MAX_INTERVAL_NS, MIN_INTERVAL_NS};
use crate::engine::{self, RunControl, ThreadSettings, ThreadSetup};
use crate::error::{failed, invalid, Result};
use crate::measure::{Measured, SampleBuffer};
use crate::mem::sweep::{caches_of, human_size};
use crate::report::GroupSource;
use crate::session::{self, Bench, Prepared};
use crate::stats::Recorder;
use crate::timeline::{Timeline, TimelineRecorder};

/// The working set when the CPU's L2 size is unknown.
pub const FALLBACK_WORKING_SET_BYTES: u64 = 256 * 1024;

/// The work one activation does: `steps` touches of a working set of `working_set_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkKernel {
    pub working_set_bytes: u64,
    pub steps: u64,
}

/// What the job bench runs: one job thread per CPU, each `loops` activations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSettings {
    /// One job thread per CPU.
    pub cpus: CpuList,
    pub period_ns: u64,
    /// Relative to each release; ≤ the period.
    pub deadline_ns: u64,
    /// Activations per CPU.
    pub loops: u64,
    pub threads: ThreadSettings,
    pub work: WorkKernel,
}

impl JobSettings {
    /// Validated settings: the period in 50µs..10s, the deadline in (0, period], the
    /// working set in 4KiB..1GiB, a policy the job can run under; `loops` activations, or
    /// as many as fit in `duration_ns` (default 10 s), at least one.
    pub fn new(
        cpus: CpuList,
        period_ns: u64,
        deadline_ns: u64,
        duration_ns: Option<u64>,
        loops: Option<u64>,
        threads: ThreadSettings,
        work: WorkKernel,
    ) -> Result<Self> {
        validate_period(period_ns)?;
        if deadline_ns == 0 || deadline_ns > period_ns {
            return Err(invalid(format!(
                "deadline {} is not within the period {} — give a deadline above 0 and at most the period",
                format_ns_as(deadline_ns, NsStyle::Fixed),
                format_ns_as(period_ns, NsStyle::Fixed)
            )));
        }
        validate_working_set(work.working_set_bytes)?;
        validate_policy(&threads)?;
        Ok(JobSettings {
            loops: session::periods(duration_ns, loops, period_ns)?,
            cpus,
            period_ns,
            deadline_ns,
            threads,
            work,
        })
    }
}

/// The period range of `cycle` (50µs..10s), in the job's words.
fn validate_period(period_ns: u64) -> Result<()> {
    if !(MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&period_ns) {
        return Err(invalid(format!(
            "period {} is out of range — a periodic job takes 50µs..10s (e.g. a period of 1ms)",
            tame_rt::duration::format_ns(period_ns)
        )));
    }
    Ok(())
}

/// SCHED_DEADLINE would throttle the work at the engine's measuring runtime (a tenth of the
/// period): what it measured would be the throttling.
pub(crate) fn validate_policy(threads: &ThreadSettings) -> Result<()> {
    if threads.policy == Policy::Deadline {
        return Err(invalid(
            "the job bench runs its work at fifo, rr or other: SCHED_DEADLINE would throttle the work at a measuring thread's runtime — use --policy fifo",
        ));
    }
    Ok(())
}

/// The default working set of a job on `cpu`: half its L2 (well inside it), in whole pages,
/// from the host model; 256 KiB when the L2 is unknown.
pub fn default_working_set(model: &tame_host::HostModel, cpu: u32) -> u64 {
    working_set_for(
        caches_of(&model.cpus, cpu)
            .iter()
            .find(|c| c.level == 2)
            .map(|c| c.size_kib * 1024),
    )
}

/// Half of an L2 of `l2_bytes`, in whole pages within 4KiB..1GiB.
fn working_set_for(l2_bytes: Option<u64>) -> u64 {
    match l2_bytes {
        Some(b) if b > 0 => {
            (b / 2 / 4096 * 4096).clamp(MIN_WORKING_SET_BYTES, MAX_WORKING_SET_BYTES)
        }
        _ => FALLBACK_WORKING_SET_BYTES,
    }
}

impl Bench for JobSettings {
    type Output = JobOutput;
    const NAME: &'static str = "job";
    const LABEL_BY_CPU: bool = true;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        Some(&self.cpus)
    }
    fn deadline_period_ns(&self) -> u64 {
        self.period_ns
    }
    fn expected_ns(&self) -> u64 {
        self.loops * self.period_ns
    }
    /// Building a large working set (mapping, touching, shuffling) precedes the first job.
    fn load_runtime_ns(&self) -> u64 {
        self.expected_ns().saturating_add(2_000_000_000)
    }
    fn thread_count(&self) -> usize {
        self.cpus.len()
    }
    fn per_thread(&self) -> u64 {
        self.loops
    }
    fn title(&self) -> String {
        format!(
            "tame bench job: {}, period {}, deadline {}, {} activations each, work {} steps over {}, {}",
            self.cpus.named(),
            format_ns_as(self.period_ns, NsStyle::Fixed),
            format_ns_as(self.deadline_ns, NsStyle::Fixed),
            self.loops,
            self.work.steps,
            human_size(self.work.working_set_bytes),
            self.threads.label()
        )
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<JobOutput>> {
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

/// What one job thread produced.
pub struct JobOutput {
    pub cpu: Option<u32>,
    /// Completion − release, every activation (ns).
    pub response: Recorder,
    /// Start − release: the wakeup's latency, or the backlog of an overrun before it.
    pub start_delay: Recorder,
    /// Completion − start: the work's own run time.
    pub run_time: Recorder,
    pub activations: u64,
    /// Completions after release + deadline.
    pub misses: u64,
    /// Completions after the next release: the next job starts late because of this one.
    pub overruns: u64,
    /// The response per activation (`t_ns` = its release).
    pub samples: SampleBuffer,
    /// The response over the run; a window's `missed` counts its deadline misses.
    pub timeline: TimelineRecorder,
}

impl JobOutput {
    /// Empty recorders, `sample_capacity` samples and a timeline for `loops` periods of
    /// `period_ns`, all allocated now.
    pub fn new(cpu: Option<u32>, loops: u64, period_ns: u64, sample_capacity: usize) -> Self {
        JobOutput {
            cpu,
            response: Recorder::new(),
            start_delay: Recorder::new(),
            run_time: Recorder::new(),
            activations: 0,
            misses: 0,
            overruns: 0,
            samples: SampleBuffer::with_capacity(sample_capacity),
            timeline: TimelineRecorder::new(0, loops.saturating_mul(period_ns)),
        }
    }
}

impl GroupSource for JobOutput {
    fn cpu(&self) -> Option<u32> {
        self.cpu
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![
            ("response", "ns", &self.response),
            ("start_delay", "ns", &self.start_delay),
            ("run_time", "ns", &self.run_time),
        ]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("activations", self.activations),
            ("misses", self.misses),
            ("overruns", self.overruns),
            ("samples_dropped", self.samples.dropped()),
        ]
    }
    fn samples(&self) -> &SampleBuffer {
        &self.samples
    }
    fn timeline(&self) -> Option<Timeline> {
        Some(self.timeline.timeline("response", "ns"))
    }
}

/// The job threads' machine: the measuring clock, an absolute sleep, the chase.
struct Real {
    clock: Clock,
    set: WorkingSet,
    steps: u64,
}

impl schedule::Machine for Real {
    #[inline(always)]
    fn now(&mut self) -> u64 {
        self.clock.now()
    }
    #[inline(always)]
    fn sleep_until(&mut self, t_ns: u64) {
        // Re-tie the TSC before the sleep, off the timed path (as cycle does).
        self.clock.reanchor();
        tame_rt::clock::sleep_until(t_ns);
    }
    #[inline(always)]
    fn work(&mut self) {
        self.set.run(self.steps);
    }
}

/// Run the job bench. `settings` must be validated; `sample_capacity` > 0 keeps that many
/// raw samples per CPU. Each thread builds and warms its working set on its own CPU (so
/// its pages are local) before the common start.
pub fn run(
    settings: &JobSettings,
    setup: ThreadSetup,
    clock: Clock,
    control: &RunControl,
    sample_capacity: usize,
    tick: impl FnMut(u64),
) -> Result<Measured<JobOutput>> {
    let plans = thread_plans(settings, &setup);
    let cpus: Vec<u32> = settings.cpus.iter().collect();
    let s = settings.clone();
    let thread_control = control.clone();
    let measured = engine::measure(&plans, control, tick, move |index, gate, progress| {
        let mut out = JobOutput::new(Some(cpus[index]), s.loops, s.period_ns, sample_capacity);
        let set = WorkingSet::new(s.work.working_set_bytes, s.threads.mlock).map(|mut set| {
            set.warm_up();
            set
        });
        let Some(start) = gate.wait() else {
            return Ok(out);
        };
        let mut machine = Real {
            clock,
            set: set?,
            steps: s.work.steps,
        };
        out.timeline.restart(start);
        let timing = schedule::Timing {
            start,
            period: s.period_ns,
            deadline: s.deadline_ns,
            loops: s.loops,
        };
        schedule::activations(&mut out, &mut machine, timing, &thread_control, |done| {
            progress.set(index, done)
        });
        Ok(out)
    })?;
    let mut outputs = Vec::with_capacity(measured.outputs.len());
    for out in measured.outputs {
        outputs.push(out.map_err(|e: String| failed(format!("bench job: working set: {e}")))?);
    }
    Ok(Measured {
        outputs,
        elapsed_ns: measured.elapsed_ns,
        interrupted: measured.interrupted,
    })
}

/// One thread per CPU, each sleeping with the least timer slack (as cycle's: a SCHED_OTHER
/// thread's inherited 50 µs would delay every release).
fn thread_plans(settings: &JobSettings, setup: &ThreadSetup) -> Vec<engine::ThreadPlan> {
    let cpus: Vec<Option<u32>> = settings.cpus.iter().map(Some).collect();
    let mut plans = engine::plans(&cpus, setup, settings.threads.mlock);
    for plan in &mut plans {
        plan.timer_slack_ns = Some(tame_rt::clock::MIN_TIMER_SLACK_NS);
    }
    plans
}

#[cfg(test)]
mod tests;
