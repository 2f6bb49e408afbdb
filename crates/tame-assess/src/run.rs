//! One assessment from start to verdict: validate everything, finish a killed earlier
//! run, check, measure shared under load, apply the partition through the journal and
//! measure the same inside it, revert — always — and decide.
//!
//! The partition is reverted on success, on error and after Ctrl-C (the stop flag ends
//! the measurement early; the revert still runs). After `kill -9` the journal is on
//! disk: the next `tame assess` or `tame bench cost` (they know such a journal by its
//! marker, [`temporary`]) or `tame revert` restores everything from it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tame_bench::cycle::CycleSettings;
use tame_bench::engine::{RunControl, ThreadSettings, MEASURING_PRIORITY};
use tame_bench::load::{LoadKind, LoadSpec};
use tame_bench::noise::{self, NoiseSettings, DETECTOR_PRIORITY};
use tame_bench::placement::Placement;
use tame_bench::session::{self, Bench, Conditions, Finished};
use tame_check::{CheckReport, Severity, Target};
use tame_host::environment::RunEnvironment;
use tame_host::kernel::PreemptModel;
use tame_host::{CpuList, HostModel, Root};
use tame_partition::Applied;
use tame_rt::{ClockKind, Policy};

use crate::error::{invalid, io_failed, AssessError};
use crate::figures::{CycleFigures, NoiseFigures, WorkThroughput};
use crate::layout::{self, Layout, MARKER};
use crate::report::{AssessReport, Phase, Restoration};
use crate::requirement::Requirement;
use crate::temporary::{self, TemporaryPartition};
use crate::verdict::{self, Machine};
use tame_host::Document as _;

/// Each phase measures periodic wakeups for this share of its time, then the busy loop.
const CYCLE_SHARE_PERCENT: u64 = 65;

/// How long each phase's cost probe runs (stress-ng cpu): the whole assessment grows by
/// twice this and stress-ng's start (about 4.1 s; docs/assess.md).
pub const COST_PROBE_SECONDS: u64 = 2;

/// What to assess and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub requirement: Requirement,
    /// How long each configuration (shared, partitioned) is measured.
    pub phase_ns: u64,
    /// Background load; empty for none.
    pub load: Vec<LoadKind>,
    /// A user's own spec (`--spec FILE`): its name and text.
    pub spec: Option<(String, String)>,
    pub journal_dir: PathBuf,
    /// Where the spec, the raw results and the report go.
    pub out_dir: Option<PathBuf>,
    /// Attribute noise with tracefs.
    pub attribute: bool,
    /// Measure ordinary work's throughput for [`COST_PROBE_SECONDS`] at the end of each
    /// phase (needs stress-ng; skipped with a note without it), for the verdict's cost.
    pub cost_probe: bool,
    pub command_line: Vec<String>,
}

/// Told how the assessment goes, for a progress display.
pub trait Observer {
    /// A phase starts; it takes about `expected_ns` (0: quick).
    fn phase(&mut self, title: &str, expected_ns: u64);
    /// Progress of the current phase, 0..=1000.
    fn progress(&mut self, permille: u64);
    /// Something the user should know now.
    fn note(&mut self, text: &str);
}

pub fn assess(
    root: &Root,
    options: &Options,
    control: &RunControl,
    observer: &mut dyn Observer,
) -> Result<AssessReport, AssessError> {
    let started_unix_ns = tame_bench::result::unix_now_ns();
    let may_change = tame_host::privilege::may_change(root);
    observer.phase("reading the machine", 0);
    let (mut layout, mut plan) = prepare(root, options, may_change)?;
    let mut restoration = Restoration::default();
    // Everything is validated: from here on the machine may change.
    if temporary::recover_earlier_run(root, &options.journal_dir, may_change, "tame assess")? {
        restoration.recovered_earlier_run = true;
        observer.note("an earlier tame assess was killed: its partition was reverted first");
        // What was read before described the machine with that partition applied.
        (layout, plan) = prepare(root, options, may_change)?;
    }
    if options.cost_probe && !plan.cost_probe {
        observer.note("stress-ng not found: ordinary work's throughput is not measured, so the verdict states no measured cost of partitioning (apt-get install stress-ng)");
    }
    let spec_file = write_spec(options.out_dir.as_deref(), &layout)?;
    observer.phase("check", 0);
    let model = HostModel::read(root);
    let check = tame_check::check(&model, &Target::asked(&model, layout.isolated.clone()));
    let mut session = Session { control, observer };
    let shared = plan.shared(root, &mut session)?;
    let (partitioned, check_partitioned) = if !may_change {
        (
            Phase::skipped("applying a partition needs root: it changes cgroups, IRQ affinities and kernel settings"),
            None,
        )
    } else if control.stopped() {
        (
            Phase::skipped("interrupted before the partitioned phase"),
            None,
        )
    } else {
        plan.partitioned(root, options, &layout, &mut session, &mut restoration)
    };
    let machine = machine(
        &plan.environment,
        check_partitioned.as_ref().unwrap_or(&check),
        &layout,
        &model,
        spec_file.clone(),
    );
    let verdict = verdict::decide(&options.requirement, &shared, &partitioned, &machine);
    let report = AssessReport {
        schema: AssessReport::SCHEMA.tag.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: options.command_line.clone(),
        started_unix_ns,
        requirement: options.requirement.clone(),
        environment: plan.environment.clone(),
        check,
        check_partitioned,
        layout,
        spec_file,
        shared,
        partitioned,
        machine,
        verdict,
        restoration,
        interrupted: control.stopped(),
    };
    if let Some(dir) = &options.out_dir {
        write_results(dir, &report)?;
    }
    Ok(report)
}

/// The layout and the measurements, validated against the machine as it is now.
fn prepare(
    root: &Root,
    options: &Options,
    may_change: bool,
) -> Result<(Layout, MeasurementPlan), AssessError> {
    let model = HostModel::read(root);
    let layout = match &options.spec {
        Some((name, text)) => layout::from_spec(&model, name, text)?,
        None => layout::choose(&model, options.requirement.cpus)?,
    };
    let plan = MeasurementPlan::new(root, options, &layout, may_change)?;
    Ok((layout, plan))
}

/// What a measurement reports to.
struct Session<'a> {
    control: &'a RunControl,
    observer: &'a mut dyn Observer,
}

/// What the verdict needs to know of the machine.
fn machine(
    env: &RunEnvironment,
    check: &tame_check::CheckReport,
    layout: &Layout,
    model: &HostModel,
    spec_file: Option<String>,
) -> Machine {
    let mut serious: Vec<_> = check
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        .collect();
    serious.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Machine {
        hypervisor: env.hypervisor.clone(),
        preempt_rt: model.kernel.preemption.model == PreemptModel::Rt,
        cpuidle_driver: layout::cpuidle_driver(model),
        online_cpus: model.cpus.online.len(),
        isolated_cpus: model.cpus.online.difference(&layout.system).len(),
        partition: layout.partition.clone(),
        reboot_fixes: serious
            .iter()
            .filter(|f| f.needs_reboot)
            .filter_map(|f| f.fix.clone())
            .collect(),
        findings: serious
            .iter()
            .map(|f| format!("{}: {}", f.id, f.found))
            .collect(),
        spec_file,
    }
}

fn write_spec(out_dir: Option<&Path>, layout: &Layout) -> Result<Option<String>, AssessError> {
    let Some(dir) = out_dir else { return Ok(None) };
    std::fs::create_dir_all(dir).map_err(|e| {
        invalid(format!(
            "cannot create the output directory {}: {e} — give a writable --out DIR",
            dir.display()
        ))
    })?;
    let path = dir.join("spec.toml");
    write_file(&path, &layout.spec_text)?;
    Ok(Some(path.display().to_string()))
}

/// Every phase's results in the common schema, each in a file of its own, and the report.
fn write_results(dir: &Path, report: &AssessReport) -> Result<(), AssessError> {
    for (name, phase) in [
        ("shared", &report.shared),
        ("partitioned", &report.partitioned),
    ] {
        if let Some(cycle) = &phase.results.cycle {
            write_file(&dir.join(format!("{name}-cycle.json")), &cycle.to_json())?;
        }
        if let Some(noise) = &phase.results.noise {
            write_file(&dir.join(format!("{name}-noise.json")), &noise.to_json())?;
        }
    }
    write_file(&dir.join("assess.json"), &report.to_json())
}

fn write_file(path: &Path, text: &str) -> Result<(), AssessError> {
    std::fs::write(path, text).map_err(|e| io_failed(format!("cannot write {}", path.display()), e))
}

/// Everything both phases measure, validated before anything runs.
struct MeasurementPlan {
    environment: RunEnvironment,
    cycle: CycleSettings,
    noise: NoiseSettings,
    online: CpuList,
    load: Vec<LoadKind>,
    /// The computation whose interruptions the busy loop measures.
    budget_ns: u64,
    /// Measure ordinary work's throughput after each phase (stress-ng is there).
    cost_probe: bool,
    command_line: Vec<String>,
}

impl MeasurementPlan {
    fn new(
        root: &Root,
        o: &Options,
        layout: &Layout,
        may_change: bool,
    ) -> Result<Self, AssessError> {
        let environment = RunEnvironment::capture(root);
        let online = environment.online_cpus.clone();
        // Without root: SCHED_OTHER and no memory locking, so the shared phase still runs.
        let (policy, mlock) = if may_change {
            (Policy::Fifo, true)
        } else {
            (Policy::Other, false)
        };
        let threads = ThreadSettings::new(
            policy,
            None,
            MEASURING_PRIORITY,
            mlock,
            ClockKind::Monotonic,
        );
        let cycle_ns = o.phase_ns / 100 * CYCLE_SHARE_PERCENT;
        let cycle = CycleSettings::new(
            layout.isolated.clone(),
            o.requirement.period_ns,
            Some(cycle_ns),
            None,
            threads,
            false,
            None,
        )
        .map_err(|e| {
            invalid(format!(
                "{e} (from --duration {} per phase)",
                crate::requirement::human(o.phase_ns)
            ))
        })?;
        let detector = ThreadSettings::new(
            Policy::Other,
            None,
            DETECTOR_PRIORITY,
            mlock,
            ClockKind::Monotonic,
        );
        let noise = NoiseSettings::new(
            layout.isolated.clone(),
            o.phase_ns - cycle_ns,
            None,
            detector,
            o.attribute,
        )
        .map_err(|e| {
            invalid(format!(
                "{e} (the busy loop gets {}% of --duration: give a longer --duration)",
                100 - CYCLE_SHARE_PERCENT
            ))
        })?;
        if !o.load.is_empty() {
            LoadSpec {
                kinds: o.load.clone(),
                cpus: online.clone(),
            }
            .check_tools()?;
        }
        Ok(MeasurementPlan {
            environment,
            cycle,
            noise,
            online,
            load: o.load.clone(),
            budget_ns: o.requirement.budget_ns,
            cost_probe: o.cost_probe
                && tame_bench::cost::check_tools(&[tame_bench::cost::Workload::Cpu]).is_ok(),
            command_line: o.command_line.clone(),
        })
    }

    /// The command line recorded in a phase's raw result: assess's, and which part.
    fn command(&self, phase: &str, bench: &str) -> Vec<String> {
        let mut c = self.command_line.clone();
        c.push(format!("# {phase} {bench}"));
        c
    }

    fn load_on(&self, cpus: &CpuList) -> Option<LoadSpec> {
        (!self.load.is_empty()).then(|| LoadSpec {
            kinds: self.load.clone(),
            cpus: cpus.clone(),
        })
    }

    /// The machine as it is: the load on every CPU, the work's CPUs shared with it.
    fn shared(&self, root: &Root, session: &mut Session) -> Result<Phase, AssessError> {
        let load = self.load_on(&self.online);
        let conditions = Conditions {
            load: load.as_ref(),
            placement: None,
        };
        let mut phase = self.measure(root, "shared", conditions, session)?;
        phase.throughput = self.probe("shared", &self.online, session);
        Ok(phase)
    }

    /// Ordinary work's throughput on `cpus` (the cost probe), after the phase's
    /// measurements; `None` when not asked, interrupted, or it failed (with a note).
    fn probe(&self, name: &str, cpus: &CpuList, session: &mut Session) -> Option<WorkThroughput> {
        if !self.cost_probe || session.control.stopped() {
            return None;
        }
        session.observer.phase(
            &format!("{name}: ordinary work's throughput"),
            COST_PROBE_SECONDS * 1_000_000_000,
        );
        let measured = tempfile::tempdir()
            .map_err(|e| e.to_string())
            .and_then(|dir| {
                tame_bench::cost::stress::run(
                    "cpu",
                    cpus,
                    std::time::Duration::from_secs(COST_PROBE_SECONDS),
                    dir.path(),
                    session.control,
                )
                .map_err(|e| e.to_string())
            });
        match measured {
            Ok(run) => run.map(|r| WorkThroughput {
                workload: "stress-ng cpu".into(),
                unit: "bogo-ops/s".into(),
                cpus: cpus.clone(),
                throughput: r.throughput,
            }),
            Err(e) => {
                session.observer.note(&format!(
                    "{name}: ordinary work's throughput not measured: {e}"
                ));
                None
            }
        }
    }

    /// Apply, check and measure inside the partition with the load on the system
    /// partition, revert. A failure here does not lose the shared phase: the phase is
    /// reported as not measured, with why, and a revert that fails is reported too.
    fn partitioned(
        &self,
        root: &Root,
        o: &Options,
        layout: &Layout,
        session: &mut Session,
        restoration: &mut Restoration,
    ) -> (Phase, Option<CheckReport>) {
        session.observer.phase("applying the partition", 0);
        let applied = match TemporaryPartition::apply(
            root,
            &layout.spec,
            &layout.spec_text,
            MARKER,
            &o.journal_dir,
        ) {
            Ok(a) => a,
            Err(e) => {
                return (
                    Phase::skipped(format!("the partition could not be applied (apply rolled back what it had changed): {e}")),
                    None,
                )
            }
        };
        session.observer.phase("check inside the partition", 0);
        let model = HostModel::read(root);
        let check = tame_check::check(&model, &Target::applied(&model, layout.isolated.clone()));
        let measured = self.measure_in_partition(root, layout, applied.applied(), session);
        session.observer.phase("reverting the partition", 0);
        match applied.revert() {
            Ok(reverted) => {
                restoration.changes_reverted = reverted.entries;
                restoration.not_restored = reverted.not_restored_lines();
            }
            Err(e) => restoration.not_restored.push(format!(
                "the revert failed: {e} — the partition is still applied; see tame status and run tame revert"
            )),
        }
        let phase = measured.unwrap_or_else(|e| {
            Phase::skipped(format!("measuring inside the partition failed: {e}"))
        });
        (phase, Some(check))
    }

    fn measure_in_partition(
        &self,
        root: &Root,
        layout: &Layout,
        applied: &Applied,
        session: &mut Session,
    ) -> Result<Phase, AssessError> {
        // The partitions apply returned: its CPUs go to the measuring threads as they are
        // (applied by this process as root: no access rule to check).
        let joined = applied
            .partition(&layout.partition)
            .and_then(|p| Some((p.cpus.clone(), p.cgroup.as_ref()?.group())))
            .ok_or_else(|| {
                AssessError::Failed(format!(
                    "partition {:?}, just applied, cannot be joined: no cpuset controller is mounted (cgroup v1 cpuset or v2 with cpuset)",
                    layout.partition
                ))
            })?;
        let placement = Placement {
            partition: layout.partition.clone(),
            cpus: joined.0,
            group: joined.1,
        };
        let load = self.load_on(&layout.system);
        let conditions = Conditions {
            load: load.as_ref(),
            placement: Some(&placement),
        };
        let mut phase = self.measure(root, "partitioned", conditions, session)?;
        // Still applied: tame and what it starts run in the system partition.
        phase.throughput = self.probe("partitioned", &layout.system, session);
        Ok(phase)
    }

    /// Periodic wakeups, then the busy loop, under `conditions`.
    fn measure(
        &self,
        root: &Root,
        name: &str,
        conditions: Conditions,
        session: &mut Session,
    ) -> Result<Phase, AssessError> {
        let mut phase = Phase {
            measured: true,
            policy: self.cycle.threads.label(),
            ..Phase::default()
        };
        let observer = &mut *session.observer;
        observer.phase(
            &format!("{name}: periodic wakeups"),
            self.cycle.expected_ns(),
        );
        let total = self.cycle.progress_total().max(1);
        let done: Finished<CycleSettings> = session::run(
            root,
            self.cycle.clone(),
            conditions,
            session.control,
            0,
            |n| observer.progress(n * 1000 / total),
            self.command(name, "cycle"),
        )?;
        phase.cycle = Some(CycleFigures::from_run(&done));
        phase.load = done.result.load.clone();
        phase.results.cycle = Some(done.result);
        if session.control.stopped() {
            return Ok(phase);
        }
        let observer = &mut *session.observer;
        observer.phase(&format!("{name}: busy-loop noise"), self.noise.duration_ns);
        let start = Instant::now();
        let duration = self.noise.duration_ns.max(1);
        let run = noise::run(
            root,
            self.noise.clone(),
            conditions,
            session.control,
            |_| {
                observer
                    .progress((start.elapsed().as_nanos() as u64).min(duration) * 1000 / duration)
            },
            self.command(name, "noise"),
        )?;
        phase.noise = Some(NoiseFigures::from_run(&run, self.budget_ns));
        phase.results.noise = Some(run.result);
        Ok(phase)
    }
}
