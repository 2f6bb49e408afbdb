//! `tame assess -- CMD`: the user's own program is the work. Each round starts it —
//! shared on the work's CPUs, or inside the partition as `tame run -p` would — under
//! the round's load, watches its threads' activations for the work's share of the round
//! (`tame watch`), ends it, and hands the verdict the activations of the thread it is
//! about: the one `--threads` names (all of them merged), else the one with the most.

use tame_bench::engine::RunControl;
use tame_bench::job::JobSettings;
use tame_bench::session::{self, Conditions};
use tame_bench::watch::analyze::ThreadRecorders;
use tame_bench::watch::run::{self as watching, ThreadFilter, WatchRun, Watched};
use tame_bench::watch::{WatchSettings, DEFAULT_WINDOW_NS};
use tame_host::{CpuList, Root};
use tame_launch::spawn::{self, Placement};
use tame_trace::tracefs::TraceClock;

use crate::error::{invalid, AssessError};
use crate::run::Program;

/// The load outlives the watch by at most this (its start, the program's end).
const LOAD_MARGIN_NS: u64 = 30_000_000_000;

/// What one round of the program gave.
pub struct WatchedRound {
    pub run: WatchRun,
    /// The thread (or threads) the verdict is about, merged.
    pub work: ThreadRecorders,
}

/// The program exists and `--threads` reads, before anything runs.
pub fn validate(p: &Program) -> Result<(), AssessError> {
    let Some(first) = p.argv.first() else {
        return Err(invalid(
            "nothing after -- : give the program to assess and its arguments",
        ));
    };
    if spawn::resolve(first).is_none() {
        return Err(invalid(format!(
            "cannot find the program {:?} to assess — give its path, or a name on PATH",
            first
        )));
    }
    if let Some(t) = &p.threads {
        ThreadFilter::parse(t)?;
    }
    Ok(())
}

/// Start the program under `conditions` and watch it for the work's share of the round.
pub fn watch(
    root: &Root,
    p: &Program,
    job: &JobSettings,
    conditions: Conditions,
    control: &RunControl,
    command_line: Vec<String>,
) -> Result<WatchedRound, AssessError> {
    let duration_ns = job.loops.saturating_mul(job.period_ns);
    let placement = match conditions.placement {
        Some(part) => Placement {
            cgroup_procs: Some(root.path(part.group.members()).display().to_string()),
            ..Placement::on_cpus(part.cpus.clone())
        },
        None => Placement::on_cpus(job.cpus.clone()),
    };
    let filter = match &p.threads {
        Some(t) => ThreadFilter::parse(t)?,
        None => ThreadFilter::All,
    };
    let settings = WatchSettings {
        pids: Vec::new(),
        command: Some(
            p.argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        ),
        threads: p.threads.clone(),
        period_ns: Some(job.period_ns),
        deadline_ns: Some(job.deadline_ns),
        duration_ns: Some(duration_ns),
        window_ns: DEFAULT_WINDOW_NS,
        snapshots: 0,
        cpus: CpuList::default(),
        trace_clock: TraceClock::X86Tsc,
    };
    let load = session::start_load(conditions.load, duration_ns.saturating_add(LOAD_MARGIN_NS))?;
    let held = spawn::spawn_held(&placement, &p.argv)
        .map_err(|e| AssessError::Failed(format!("cannot start the program to assess: {e}")))?;
    let watched = watching::run(
        root,
        settings,
        &filter,
        Watched::Command(held),
        control,
        conditions.placement.map(|p| p.partition.clone()),
        command_line,
    );
    let load = load.map(|l| l.stop());
    let mut run = watched?;
    run.result.result.load = load;
    let work = the_work(&run, p.threads.is_some()).ok_or_else(|| {
        AssessError::Failed(format!(
            "the program had no activation with a known release in {} — it must sleep and wake (a timer, a wakeup) to be assessed as periodic work{}",
            crate::requirement::human(duration_ns),
            run.result
                .watch
                .exit
                .as_ref()
                .map(|e| format!("; it exited with {e}"))
                .unwrap_or_default()
        ))
    })?;
    Ok(WatchedRound { run, work })
}

/// The thread the verdict is about: every admitted one merged when `--threads` chose
/// them, else the one with the most activations of a known release.
fn the_work(run: &WatchRun, chosen: bool) -> Option<ThreadRecorders> {
    let known = |r: &ThreadRecorders| r.response.count();
    if chosen {
        let mut all = run.recorders.iter();
        let mut merged = all.next()?.clone();
        for r in all {
            merged.wake.merge(&r.wake);
            merged.response.merge(&r.response);
            merged.run.merge(&r.run);
            merged.misses += r.misses;
            merged.overruns += r.overruns;
        }
        return (known(&merged) > 0).then_some(merged);
    }
    run.recorders
        .iter()
        .filter(|r| known(r) > 0)
        .max_by_key(|r| known(r))
        .cloned()
}
