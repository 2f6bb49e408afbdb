//! One bench run from start to result: everything is validated before any
//! thread or load starts; the load is stopped before the result is built.

use tame_host::environment::RunEnvironment;
use tame_host::{CpuList, Root};
use tame_rt::sched::SchedSpec;
use tame_rt::Clock;

use crate::engine::{self, ThreadSettings};
use crate::error::Result;
use crate::load::{LoadSpec, RunningLoad};
use crate::measure::Measured;
use crate::report::{self, GroupSource};
use crate::result::{unix_now_ns, BenchResult, Calibration, SCHEMA_VERSION};

/// What a validated run needs.
pub struct Prepared {
    pub environment: RunEnvironment,
    pub sched: SchedSpec,
    pub clock: Clock,
    pub calibration: Calibration,
    pub started_unix_ns: u64,
}

/// Validate the CPUs, the scheduling policy (by probing it), the clock and
/// the load's tools; lock memory if asked; measure the clock. Nothing runs yet.
pub fn prepare(
    root: &Root,
    threads: &ThreadSettings,
    cpus: Option<&CpuList>,
    load: Option<&LoadSpec>,
    deadline_period_ns: u64,
) -> Result<Prepared> {
    let environment = RunEnvironment::capture(root);
    if let Some(cpus) = cpus {
        engine::validate_cpus(cpus, &environment.online_cpus)?;
    }
    if let Some(load) = load {
        engine::validate_cpus(&load.cpus, &environment.online_cpus)?;
        load.check_tools()?;
    }
    let sched = engine::validate_sched(threads, deadline_period_ns, cpus.and_then(CpuList::first))?;
    let clock = engine::make_clock(threads.clock, environment.invariant_tsc)?;
    engine::lock_memory(threads)?;
    let calibration = engine::calibrate(&clock);
    Ok(Prepared {
        environment,
        sched,
        clock,
        calibration,
        started_unix_ns: unix_now_ns(),
    })
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
    let load_description = load.map(|l| {
        let d = l.description().clone();
        l.stop();
        d
    });
    let (groups, merged) = report::groups(&measured.outputs, label_by_cpu);
    BenchResult {
        schema_version: SCHEMA_VERSION,
        bench: bench.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns: prepared.started_unix_ns,
        elapsed_ns: measured.elapsed_ns,
        interrupted: measured.interrupted,
        environment: prepared.environment.clone(),
        calibration: prepared.calibration,
        load: load_description,
        settings,
        groups,
        merged,
    }
}
