//! One bench run from start to result: everything is validated before any
//! thread or load starts; the load is stopped before the result is built.
//! A bench built on the engine implements [`Bench`]; [`run`] does the rest.

use serde::Serialize;
use tame_host::environment::RunEnvironment;
use tame_host::{CpuList, Root};
use tame_rt::memory::DmaLatencyGuard;
use tame_rt::Clock;

use crate::engine::{self, RunControl, ThreadSettings, ThreadSetup};
use crate::error::{invalid, Result};
use crate::load::{LoadSpec, RunningLoad};
use crate::measure::Measured;
use crate::placement::{Joined, Placement};
use crate::report::{self, GroupSource};
use crate::result::{unix_now_ns, BenchResult, Calibration};

/// How long a run lasts when neither a duration nor a count is given.
pub const DEFAULT_DURATION_NS: u64 = 10_000_000_000;
/// Raw samples kept over all threads at most (16 bytes each: 1.6 GB).
pub const MAX_SAMPLES_TOTAL: u64 = 100_000_000;

/// Periods of `period_ns` in a run: `loops` if given, else as many as fit in the duration
/// (default 10 s). A run without a single period is refused.
pub fn periods(duration_ns: Option<u64>, loops: Option<u64>, period_ns: u64) -> Result<u64> {
    let n = match (loops, duration_ns) {
        (Some(n), _) => n,
        (None, Some(d)) => d / period_ns,
        (None, None) => DEFAULT_DURATION_NS / period_ns,
    };
    if n == 0 {
        return Err(invalid(
            "the run would have no periods: the duration is shorter than one period — lengthen --duration or give --loops",
        ));
    }
    // The run's length in ns (loops × period) must fit: a wrapped product would plan a short run.
    if n.checked_mul(period_ns).is_none() {
        return Err(invalid(format!(
            "{n} periods of {} would last longer than 584 years — give fewer --loops",
            tame_rt::duration::format_ns(period_ns)
        )));
    }
    Ok(n)
}

/// Samples kept per thread for a raw-samples file: all of them, within a memory bound
/// (0 when none are wanted).
pub fn sample_capacity(wanted: bool, per_thread: u64, threads: usize) -> Result<usize> {
    if !wanted {
        return Ok(0);
    }
    if per_thread.saturating_mul(threads as u64) > MAX_SAMPLES_TOTAL {
        return Err(invalid(format!(
            "raw samples for {per_thread} periods × {threads} threads exceed {MAX_SAMPLES_TOTAL} (1.6 GB) — shorten the run or drop --samples"
        )));
    }
    Ok(per_thread as usize)
}

/// A bench measured by the engine's threads: what [`run`] needs to know of it.
pub trait Bench: Serialize + Sized {
    /// What one measuring thread produces.
    type Output: GroupSource + Send + 'static;
    /// The bench's name in results (`cycle`).
    const NAME: &'static str;
    /// Groups are labelled by CPU (`cpu1`), else by task (`task0`).
    const LABEL_BY_CPU: bool;

    fn threads(&self) -> &ThreadSettings;
    /// The CPUs measured on, when the threads are pinned.
    fn cpus(&self) -> Option<&CpuList>;
    /// The period a SCHED_DEADLINE measuring thread gets.
    fn deadline_period_ns(&self) -> u64;
    /// How long measuring should take.
    fn expected_ns(&self) -> u64;
    /// How long the background load may run at most.
    fn load_runtime_ns(&self) -> u64 {
        self.expected_ns()
    }
    /// Measuring threads (one per CPU or task).
    fn thread_count(&self) -> usize;
    /// What each thread measures: periods, sleeps or samples.
    fn per_thread(&self) -> u64;
    /// Progress units in all: the `tick` of [`run`] counts up to this.
    fn progress_total(&self) -> u64 {
        self.per_thread() * self.thread_count() as u64
    }
    /// Raw samples kept per thread when they are `wanted`, within [`MAX_SAMPLES_TOTAL`].
    fn sample_capacity(&self, wanted: bool) -> Result<usize> {
        sample_capacity(wanted, self.per_thread(), self.thread_count())
    }
    /// The value to hold in /dev/cpu_dma_latency during the run, µs.
    fn dma_latency_us(&self) -> Option<u32> {
        None
    }
    /// The heading of the human view.
    fn title(&self) -> String;
    /// Measure; `sample_capacity` raw samples are kept per thread.
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<Self::Output>>;
    /// Figures derived from the outputs once the result is assembled.
    fn derive(result: &mut BenchResult<Self>, measured: &Measured<Self::Output>) {
        let _ = (result, measured);
    }
    /// The human view of a result: the common table unless the bench has its own.
    fn view(result: &BenchResult<Self>) -> String {
        crate::output::table(result, &result.settings.title())
    }
}

/// A finished run: the result, and the threads' outputs for the views that need raw data
/// (histograms, samples).
pub struct Finished<B: Bench> {
    pub result: BenchResult<B>,
    pub measured: Measured<B::Output>,
}

/// What a bench runs under: background load, and the applied partition it measures in.
#[derive(Clone, Copy, Debug, Default)]
pub struct Conditions<'a> {
    pub load: Option<&'a LoadSpec>,
    pub placement: Option<&'a Placement>,
}

/// Run `settings` from start to result: validate and prepare, hold the DMA latency if asked,
/// start the load, measure, stop the load, assemble. `tick` gets the progress about every
/// 100 ms; `control` stops the run early (the result then says `interrupted`).
pub fn run<B: Bench>(
    root: &Root,
    settings: B,
    conditions: Conditions,
    control: &RunControl,
    sample_capacity: usize,
    tick: impl FnMut(u64),
    command_line: Vec<String>,
) -> Result<Finished<B>> {
    let load = conditions.load;
    let prepared = prepare(
        root,
        settings.threads(),
        settings.cpus(),
        conditions,
        settings.deadline_period_ns(),
    )?;
    let _dma = hold_dma_latency(settings.dma_latency_us())?;
    let running = start_load(load, settings.load_runtime_ns())?;
    let measured = settings.measure(&prepared, control, sample_capacity, tick);
    prepared.leave_partition()?;
    let measured = measured?;
    let mut result = assemble(
        B::NAME,
        &prepared,
        settings,
        &measured,
        running,
        command_line,
        B::LABEL_BY_CPU,
    );
    B::derive(&mut result, &measured);
    Ok(Finished { result, measured })
}

/// Keep deep idle states off for the run, if asked; refused as bad input (it needs root).
fn hold_dma_latency(us: Option<u32>) -> Result<Option<DmaLatencyGuard>> {
    us.map(|us| {
        DmaLatencyGuard::open(us).map_err(|e| {
            invalid(format!(
                "cannot hold /dev/cpu_dma_latency at {us} µs: {e} — it needs root; run as root or drop --dma-latency"
            ))
        })
    })
    .transpose()
}

/// What a validated run needs.
pub struct Prepared {
    pub environment: RunEnvironment,
    /// How the measuring threads are scheduled and placed.
    pub setup: ThreadSetup,
    pub clock: Clock,
    pub calibration: Calibration,
    pub started_unix_ns: u64,
    /// The applied partition measured in, if any.
    pub partition: Option<String>,
    joined: Option<Joined>,
}

impl Prepared {
    /// Once the measuring threads are done: tame leaves the partition it joined (v2).
    pub fn leave_partition(&self) -> Result<()> {
        self.joined.as_ref().map_or(Ok(()), Joined::leave)
    }
}

/// Validate the CPUs, the scheduling policy (by probing it), the clock and
/// the load's tools; lock memory if asked; measure the clock. Nothing runs yet.
/// In a partition, the measured CPUs must be the partition's; tame itself need not
/// be allowed on them (its measuring threads join the partition's cgroup).
pub fn prepare(
    root: &Root,
    threads: &ThreadSettings,
    cpus: Option<&CpuList>,
    conditions: Conditions,
    deadline_period_ns: u64,
) -> Result<Prepared> {
    let environment = RunEnvironment::capture(root);
    let online = &environment.online_cpus;
    let joined = match (conditions.placement, cpus) {
        (Some(placement), cpus) => {
            let cpus = placement.cpus_to_measure(cpus)?;
            check_online(&cpus, online)?;
            Some(Joined::prepare(root, placement)?)
        }
        (None, Some(cpus)) => {
            engine::validate_cpus(cpus, online)?;
            None
        }
        (None, None) => None,
    };
    if let Some(load) = conditions.load {
        engine::validate_cpus(&load.cpus, online)?;
        load.check_tools()?;
    }
    // A thread of tame cannot be pinned to a partition's CPUs before it joins: probe unpinned.
    let probe_cpu = if joined.is_some() {
        None
    } else {
        cpus.and_then(CpuList::first)
    };
    let sched = engine::validate_sched(threads, deadline_period_ns, probe_cpu)?;
    let clock = engine::make_clock(threads.clock, environment.invariant_tsc)?;
    engine::lock_memory(threads)?;
    let calibration = engine::calibrate(&clock);
    Ok(Prepared {
        environment,
        setup: ThreadSetup {
            sched,
            join: joined.as_ref().map(|j| j.join.clone()),
        },
        clock,
        calibration,
        started_unix_ns: unix_now_ns(),
        partition: conditions.placement.map(|p| p.partition.clone()),
        joined,
    })
}

/// Every CPU of a partition must be online (a CPU taken offline after apply is not).
fn check_online(cpus: &CpuList, online: &CpuList) -> Result<()> {
    let offline = cpus.difference(online);
    if offline.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "partition CPU {offline} is not online (online: {online}) — revert and re-apply the partitions"
    )))
}

/// Start the load, if any, bounded to `max_runtime_ns` even if tame dies.
pub fn start_load(load: Option<&LoadSpec>, max_runtime_ns: u64) -> Result<Option<RunningLoad>> {
    load.map(|l| RunningLoad::start(l, std::time::Duration::from_nanos(max_runtime_ns)))
        .transpose()
}

/// Build the result of a finished run.
pub fn assemble<S, T: GroupSource>(
    bench: &str,
    prepared: &Prepared,
    settings: S,
    measured: &Measured<T>,
    load: Option<RunningLoad>,
    command_line: Vec<String>,
    label_by_cpu: bool,
) -> BenchResult<S> {
    let load_description = load.map(RunningLoad::stop);
    let (groups, merged) = report::groups(&measured.outputs, label_by_cpu);
    BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: bench.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns: prepared.started_unix_ns,
        elapsed_ns: measured.elapsed_ns,
        interrupted: measured.interrupted,
        environment: prepared.environment.clone(),
        calibration: prepared.calibration,
        load: load_description,
        partition: prepared.partition.clone(),
        settings,
        groups,
        merged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_come_from_loops_or_the_duration() {
        assert_eq!(periods(None, Some(7), 1_000_000).unwrap(), 7);
        assert_eq!(
            periods(Some(2_000_000_000), None, 1_000_000).unwrap(),
            2_000
        );
        assert_eq!(periods(None, None, 1_000_000).unwrap(), 10_000);
        let e = periods(Some(500_000), None, 1_000_000).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("no periods"),
            "{e}"
        );
        let e = periods(None, Some(u64::MAX / 1_000 + 1), 1_000).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("584 years"),
            "{e}"
        );
        assert_eq!(
            periods(None, Some(u64::MAX / 1_000), 1_000).unwrap(),
            u64::MAX / 1_000
        );
    }

    #[test]
    fn raw_samples_are_bounded() {
        assert_eq!(sample_capacity(false, u64::MAX, 4).unwrap(), 0);
        assert_eq!(sample_capacity(true, 1_000, 4).unwrap(), 1_000);
        let e = sample_capacity(true, MAX_SAMPLES_TOTAL, 2).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains("1.6 GB"), "{e}");
    }
}
