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

use tame_bench::engine::{RunControl, ThreadSettings, MEASURING_PRIORITY};
use tame_bench::job::{self, JobSettings, WorkCalibration, WorkKernel};
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

use crate::attribution::{self, RebootFix};
use crate::error::{invalid, io_failed, AssessError};
use crate::figures::{JobTotals, NoiseFigures, WorkThroughput};
use crate::knobs::{self, Knob};
use crate::layout::{self, Layout, MARKER};
use crate::program;
use crate::report::{AssessReport, Phase, PhaseResults, ProgramWork, Restoration, RunLength};
use crate::requirement::Requirement;
use crate::rounds::{self, Configuration, Round};
use crate::stretch::kernel_priority;
use crate::temporary::{self, TemporaryPartition};
use crate::verdict::{self, Machine, SmiCount};
use tame_host::Document as _;

/// The working set the settings are validated with before the default is read from the
/// machine (the calibration sets the real one).
const VALIDATION_WORKING_SET_BYTES: u64 = 256 * 1024;

/// How long each configuration's cost probe runs (stress-ng cpu), after its last round:
/// the whole assessment grows by twice this and stress-ng's start (about 4.1 s;
/// docs/assess.md).
pub const COST_PROBE_SECONDS: u64 = 2;

/// What to assess and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub requirement: Requirement,
    /// How long each configuration (shared, partitioned) is measured over all its rounds.
    pub length: Length,
    /// Rounds of each configuration, interleaved: shared 1, partitioned 1, shared 2, …
    pub rounds: u32,
    /// The working set the work touches (default: [`job::default_working_set`]).
    pub working_set_bytes: Option<u64>,
    /// Background load; empty for none.
    pub load: Vec<LoadKind>,
    /// The user's own load (`--load-cmd`), run with `sh -c` instead of [`Options::load`]
    /// (which must then be empty).
    pub load_cmd: Option<String>,
    /// A user's own spec (`--spec FILE`): its name and text.
    pub spec: Option<(String, String)>,
    /// The generated partition without the knobs beyond CPUs ([`knobs`]) and with SMT
    /// siblings shared: the partition before them, to compare with.
    pub minimal: bool,
    /// Give the SMT siblings of the work's CPUs to the system instead of leaving them
    /// idle in the partition.
    pub share_core: bool,
    pub journal_dir: PathBuf,
    /// Where the spec, the raw results and the report go.
    pub out_dir: Option<PathBuf>,
    /// Attribute noise with tracefs.
    pub attribute: bool,
    /// Measure ordinary work's throughput for [`COST_PROBE_SECONDS`] at the end of each
    /// configuration's last round (needs stress-ng; skipped with a note without it), for
    /// the verdict's cost.
    pub cost_probe: bool,
    pub command_line: Vec<String>,
    /// The user's own program as the work (`tame assess -- CMD`): watched instead of the
    /// calibrated work, shared and partitioned alike.
    pub program: Option<Program>,
}

/// The user's program as the work.
#[derive(Clone, Debug)]
pub struct Program {
    pub argv: Vec<std::ffi::OsString>,
    /// `--threads`: which of its threads the verdict is about (ids or a name pattern);
    /// `None`: the thread with the most activations.
    pub threads: Option<String>,
}
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Length {
    Fixed(u64),
    /// Long enough that no miss would show the miss rate below `target_bound`, at most
    /// `max_ns` per configuration.
    Auto {
        target_bound: f64,
        max_ns: u64,
    },
}

/// How long each CPU's interrupt, timer and steal rates are sampled before choosing.
pub const ACTIVITY_SAMPLE: std::time::Duration = std::time::Duration::from_secs(1);

/// `--rounds` unless given.
pub const DEFAULT_ROUNDS: u32 = 3;
/// The most rounds: each applies and reverts the partition once.
pub const MAX_ROUNDS: u32 = 100;

impl Length {
    /// Each configuration's measured time for `r`, and how it was chosen.
    pub fn resolve(&self, r: &Requirement, rounds: u32) -> Result<RunLength, AssessError> {
        if !(1..=MAX_ROUNDS).contains(&rounds) {
            return Err(invalid(format!(
                "--rounds {rounds} is out of range — give 1..{MAX_ROUNDS} (3 or more lets round-to-round drift show)"
            )));
        }
        let shortest = shortest_duration_ns(r, rounds);
        let too_short = |flag: &str, ns: u64| {
            invalid(format!(
                "{flag} {} is too short for {}: each round's busy loop gets {}% of the round and needs at least {}, its work at least one period — give {flag} {}ms or more, or fewer --rounds",
                tame_rt::duration::format_ns(ns),
                tame_rt::plural::count(u64::from(rounds), "round", "rounds"),
                100 - verdict::JOB_SHARE_PERCENT,
                tame_rt::duration::format_ns(noise::MIN_DURATION_NS),
                shortest / 1_000_000
            ))
        };
        Ok(match *self {
            Length::Fixed(ns) => {
                if ns < shortest {
                    return Err(too_short("--duration", ns));
                }
                RunLength {
                    per_configuration_ns: ns,
                    rounds,
                    auto_target_bound: None,
                    capped: false,
                }
            }
            Length::Auto {
                target_bound,
                max_ns,
            } => {
                if !(target_bound > 0.0 && target_bound < 1.0) {
                    return Err(invalid(format!(
                        "--target-bound {target_bound} must be above 0 and below 1 — e.g. 0.0001 or 0.01%"
                    )));
                }
                if max_ns < shortest {
                    return Err(too_short("--max-duration", max_ns));
                }
                let needed =
                    tame_bench::confidence::activations_for_bound(target_bound, r.confidence);
                let wanted = verdict::duration_for(needed, r.period_ns).max(shortest);
                RunLength {
                    per_configuration_ns: wanted.min(max_ns),
                    rounds,
                    auto_target_bound: Some(target_bound),
                    capped: wanted > max_ns,
                }
            }
        })
    }
}

/// The shortest `--duration` for `rounds` rounds of `r`, in whole milliseconds: each
/// round's busy loop needs [`noise::MIN_DURATION_NS`] of the share the work leaves it,
/// and its work (`per_round / 100 * JOB_SHARE_PERCENT`, as [`MeasurementPlan`] splits
/// it) one period.
pub fn shortest_duration_ns(r: &Requirement, rounds: u32) -> u64 {
    let job = verdict::JOB_SHARE_PERCENT;
    let busy = (noise::MIN_DURATION_NS * 100).div_ceil(100 - job);
    let work = r.period_ns.div_ceil(job) * 100;
    let per_round = busy.max(work);
    (per_round * u64::from(rounds)).div_ceil(1_000_000) * 1_000_000
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

/// An assessment validated against the machine, nothing written or changed yet: what
/// [`prepare`] gives and [`Prepared::run`] carries out.
pub struct Prepared<'a> {
    root: &'a Root,
    options: &'a Options,
    started_unix_ns: u64,
    may_change: bool,
    run_length: RunLength,
    layout: Layout,
    knobs: Vec<Knob>,
    plan: MeasurementPlan,
}

/// Read the machine and validate everything the assessment needs: the root is this
/// machine, the requirement, the length, the partition it would apply, the tools. Nothing
/// is written, changed or measured (beyond the one-second sample that picks the CPUs), so
/// a caller can open its own outputs after this and before [`Prepared::run`].
pub fn prepare<'a>(root: &'a Root, options: &'a Options) -> Result<Prepared<'a>, AssessError> {
    require_this_machine(root)?;
    let started_unix_ns = tame_bench::result::unix_now_ns();
    let may_change = tame_host::privilege::may_change(root);
    let run_length = options
        .length
        .resolve(&options.requirement, options.rounds)?;
    let (layout, knobs, plan) = prepare_layout(root, options, &run_length, may_change)?;
    Ok(Prepared {
        root,
        options,
        started_unix_ns,
        may_change,
        run_length,
        layout,
        knobs,
        plan,
    })
}

/// tame assess measures and partitions the machine it runs on: a `--root` tree that is
/// not this machine (a fixture, a captured host) has nothing to measure. A tree that is
/// this machine's (a container's `/host` mount) shares its boot id.
fn require_this_machine(root: &Root) -> Result<(), AssessError> {
    if root.is_system() {
        return Ok(());
    }
    let here = tame_host::kernel::boot_id(&Root::system());
    if here.is_some() && tame_host::kernel::boot_id(root) == here {
        return Ok(());
    }
    Err(invalid(format!(
        "--root {}: tame assess measures and partitions the machine it runs on, and this tree is not it (its boot id is not this machine's) — run tame assess without --root; `tame --root DIR check` reads a captured tree",
        root.base().display()
    )))
}

/// Validate ([`prepare`]), then run: what the CLI does with its outputs opened between.
pub fn assess(
    root: &Root,
    options: &Options,
    control: &RunControl,
    observer: &mut dyn Observer,
) -> Result<AssessReport, AssessError> {
    observer.phase("reading the machine", 0);
    prepare(root, options)?.run(control, observer)
}

impl Prepared<'_> {
    /// Measure, decide and write the results: the machine changes from here on (and is
    /// restored).
    pub fn run(
        self,
        control: &RunControl,
        observer: &mut dyn Observer,
    ) -> Result<AssessReport, AssessError> {
        let Prepared {
            root,
            options,
            started_unix_ns,
            may_change,
            run_length,
            mut layout,
            mut knobs,
            mut plan,
        } = self;
        let mut restoration = Restoration::default();
        // Everything is validated: from here on the machine may change.
        if temporary::recover_earlier_run(root, &options.journal_dir, may_change, "tame assess")? {
            restoration.recovered_earlier_run = true;
            observer.note("an earlier tame assess was killed: its partition was reverted first");
            // What was read before described the machine with that partition applied.
            (layout, knobs, plan) = prepare_layout(root, options, &run_length, may_change)?;
        }
        if options.cost_probe && !plan.cost_probe {
            observer.note("stress-ng not found: ordinary work's throughput is not measured, so the verdict states no measured cost of partitioning (apt-get install stress-ng)");
        }
        if run_length.capped {
            observer.note(&format!(
                "--duration auto would need more than --max-duration: measuring {} per configuration, which cannot show the target bound with no miss",
                crate::requirement::human(run_length.per_configuration_ns)
            ));
        }
        let spec_file = write_spec(options.out_dir.as_deref(), &layout)?;
        observer.phase("check", 0);
        let model = HostModel::read(root);
        let check = tame_check::check(&model, &Target::asked(&model, layout.isolated.clone()));
        // Bare metal: SMIs are counted over the measurement (a VM's counter is not the host's).
        let smi_cpu = layout.work().first().unwrap_or(0);
        let smis_before = plan
            .environment
            .hypervisor
            .is_none()
            .then(|| tame_host::msr::smi_count(root, smi_cpu));
        let mut session = Session { control, observer };
        session.observer.phase("calibrating the work", 0);
        // Ctrl-C before the work is calibrated: nothing is measured, and that is the report.
        // The user's program is its own work: nothing to calibrate.
        let calibration = match plan.calibrate(&model, &layout, control) {
            _ if plan.program.is_some() => None,
            Ok(c) => Some(c),
            Err(_) if control.stopped() => None,
            Err(e) => return Err(e),
        };
        let mut rounds: Vec<Round> = Vec::new();
        let mut totals = [JobTotals::default(), JobTotals::default()];
        let mut throughput: [Option<WorkThroughput>; 2] = [None, None];
        let mut check_partitioned = None;
        // Once the partition cannot be applied, the partitioned rounds say why.
        let mut no_partition: Option<String> = (!may_change).then(|| {
            "applying a partition needs root: it changes cgroups, IRQ affinities and kernel settings"
                .to_string()
        });
        for index in 1..=run_length.rounds {
            if control.stopped() {
                break;
            }
            let last = index == run_length.rounds;
            let (round, probed) = plan.shared_round(root, index, last, &mut session)?;
            totals[0].add_round(&round, &plan.job);
            rounds.push(round.0);
            throughput[0] = probed.or(throughput[0].take());
            if control.stopped() {
                break;
            }
            if let Some(why) = &no_partition {
                rounds.push(Round::skipped(
                    index,
                    Configuration::Partitioned,
                    why.clone(),
                ));
                continue;
            }
            let (round, check, probed) = plan.partitioned_round(
                root,
                options,
                &layout,
                index,
                last,
                &mut session,
                &mut restoration,
            );
            if check_partitioned.is_none() {
                check_partitioned = check;
            }
            if round.0.job.is_none() {
                no_partition = round.0.not_measured.clone();
            }
            totals[1].add_round(&round, &plan.job);
            rounds.push(round.0);
            throughput[1] = probed.or(throughput[1].take());
        }
        let budget = options.requirement.budget_ns;
        let [shared_totals, part_totals] = totals;
        let [shared_probe, part_probe] = throughput;
        let mut shared = phase(
            &rounds,
            Configuration::Shared,
            &shared_totals,
            budget,
            &plan,
        );
        shared.throughput = shared_probe;
        let mut partitioned = phase(
            &rounds,
            Configuration::Partitioned,
            &part_totals,
            budget,
            &plan,
        );
        partitioned.throughput = part_probe;
        if control.stopped() && !partitioned.measured && partitioned.not_measured.is_none() {
            partitioned.not_measured = Some("interrupted before the partitioned phase".into());
        }
        let mut machine = machine(
            &plan.environment,
            check_partitioned.as_ref().unwrap_or(&check),
            &layout,
            &model,
            spec_file.clone(),
        );
        machine.smis =
            smis_before.map(
                |before| match (before, tame_host::msr::smi_count(root, smi_cpu)) {
                    (Ok(a), Ok(b)) => SmiCount::Counted(b.wrapping_sub(a) & 0xffff_ffff),
                    (Err(why), _) | (_, Err(why)) => SmiCount::Unavailable(why),
                },
            );
        let verdict = verdict::decide(&options.requirement, &shared, &partitioned, &machine);
        knobs::measure_effects(&mut knobs, &rounds, layout.work());
        let reboot_options = knobs::reboot_options(&model, &rounds, layout.work());
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
            run_length,
            calibration,
            program: options.program.as_ref().map(|p| ProgramWork {
                command: p
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                threads: p.threads.clone(),
            }),
            effects: rounds::effects(&rounds),
            knobs,
            reboot_options,
            rounds,
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
}

/// One configuration over its rounds: the work merged, the busy loop merged, the load's
/// throughput averaged; not measured (with the first reason) when no round was.
fn phase(
    rounds: &[Round],
    configuration: Configuration,
    totals: &JobTotals,
    budget_ns: u64,
    plan: &MeasurementPlan,
) -> Phase {
    let mine: Vec<&Round> = rounds
        .iter()
        .filter(|r| r.configuration == configuration)
        .collect();
    let measured: Vec<&Round> = mine.iter().copied().filter(|r| r.job.is_some()).collect();
    let noise: Vec<&NoiseFigures> = measured.iter().filter_map(|r| r.noise.as_ref()).collect();
    Phase {
        measured: !measured.is_empty(),
        not_measured: if measured.is_empty() {
            mine.iter().find_map(|r| r.not_measured.clone())
        } else {
            None
        },
        job: totals.figures(budget_ns),
        cycle: None,
        noise: NoiseFigures::merge(&noise),
        load: rounds::merged_load(&measured),
        rounds: measured.len() as u32,
        worst_round: rounds::worst(rounds, configuration).map(|r| r.index),
        policy: plan.threads.label(),
        throughput: None,
        results: PhaseResults::default(),
    }
}

/// The layout and the measurements, validated against the machine as it is now.
fn prepare_layout(
    root: &Root,
    options: &Options,
    length: &RunLength,
    may_change: bool,
) -> Result<(Layout, Vec<Knob>, MeasurementPlan), AssessError> {
    let model = HostModel::read(root);
    let (layout, knobs) = match &options.spec {
        // A user's spec is measured as written.
        Some((name, text)) => (layout::from_spec(&model, name, text)?, Vec::new()),
        None => {
            // A second of each CPU's interrupts, timers and steal, to choose the quietest.
            let activity = root.sample_activity(ACTIVITY_SAMPLE);
            let choice = layout::Choice {
                count: options.requirement.cpus,
                // Today's partition shares the core; the best leaves the sibling idle.
                share_core: options.share_core || options.minimal,
                activity: Some(&activity),
            };
            let mut layout = layout::choose(&model, &choice)?;
            let knobs = knobs::strengthen(&model, &mut layout, options.minimal)?;
            (layout, knobs)
        }
    };
    let plan = MeasurementPlan::new(root, options, length, &layout, may_change)?;
    Ok((layout, knobs, plan))
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
        .filter(|f| attribution::bears_on_latency(&f.id))
        .collect();
    serious.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Machine {
        hypervisor: env.hypervisor.clone(),
        preempt_rt: model.kernel.preemption.model == PreemptModel::Rt,
        cpuidle_driver: layout::cpuidle_driver(model),
        online_cpus: model.cpus.online.len(),
        isolated_cpus: model.cpus.online.difference(&layout.system).len(),
        partition: layout.partition.clone(),
        reboot_fixes: RebootFix::from_check(check),
        findings: serious
            .iter()
            .map(|f| format!("{}: {}", f.id, f.found))
            .collect(),
        spec_file,
        smis: None,
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

/// Every round's results in the common schema, each in a file of its own
/// (`shared-1-job.json`, `partitioned-1-noise.json`, …), and the report.
fn write_results(dir: &Path, report: &AssessReport) -> Result<(), AssessError> {
    for round in &report.rounds {
        let name = format!("{}-{}", round.configuration.name(), round.index);
        if let Some(job) = &round.results.job {
            write_file(&dir.join(format!("{name}-job.json")), &job.to_json())?;
        }
        if let Some(noise) = &round.results.noise {
            write_file(&dir.join(format!("{name}-noise.json")), &noise.to_json())?;
        }
        if let Some(watch) = &round.results.watch {
            write_file(&dir.join(format!("{name}-watch.json")), &watch.to_json())?;
        }
    }
    write_file(&dir.join("assess.json"), &report.to_json())
}

fn write_file(path: &Path, text: &str) -> Result<(), AssessError> {
    std::fs::write(path, text).map_err(|e| io_failed(format!("cannot write {}", path.display()), e))
}

/// A round, as [`JobTotals`] takes it.
struct RoundWithRun(Round, Option<RoundWork>);

impl JobTotals {
    fn add_round(&mut self, round: &RoundWithRun, job: &JobSettings) {
        match &round.1 {
            Some(RoundWork::Job(done)) => self.add(done),
            Some(RoundWork::Watched(work)) => self.add_watched(
                work,
                job,
                round.0.job.as_ref().is_some_and(|j| j.interrupted),
            ),
            None => {}
        }
    }
}

/// Everything each round measures, validated before anything runs.
struct MeasurementPlan {
    environment: RunEnvironment,
    threads: ThreadSettings,
    /// The work's settings; its kernel is set once calibrated.
    job: JobSettings,
    noise: NoiseSettings,
    online: CpuList,
    load: Vec<LoadKind>,
    load_cmd: Option<String>,
    requirement: Requirement,
    working_set_bytes: Option<u64>,
    rounds_total: u32,
    /// Measure ordinary work's throughput after the last rounds (stress-ng is there).
    cost_probe: bool,
    command_line: Vec<String>,
    program: Option<Program>,
}

impl MeasurementPlan {
    fn new(
        root: &Root,
        o: &Options,
        length: &RunLength,
        layout: &Layout,
        may_change: bool,
    ) -> Result<Self, AssessError> {
        let environment = RunEnvironment::capture(root);
        let online = environment.online_cpus.clone();
        // Without root: SCHED_OTHER and no memory locking, so the shared rounds still run.
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
        let per_round = length.per_configuration_ns / u64::from(length.rounds.max(1));
        let job_ns = per_round / 100 * verdict::JOB_SHARE_PERCENT;
        let too_short = |e: &dyn std::fmt::Display| {
            invalid(format!(
                "{e} (each of the {} rounds gets {} of --duration {} per configuration, the work {}% of it)",
                length.rounds,
                crate::requirement::human(per_round),
                crate::requirement::human(length.per_configuration_ns),
                verdict::JOB_SHARE_PERCENT
            ))
        };
        let r = &o.requirement;
        let job = JobSettings::new(
            layout.work().clone(),
            r.period_ns,
            r.deadline_ns,
            Some(job_ns),
            None,
            threads,
            WorkKernel {
                working_set_bytes: o.working_set_bytes.unwrap_or(VALIDATION_WORKING_SET_BYTES),
                steps: 0,
            },
        )
        .map_err(|e| too_short(&e))?;
        let detector = ThreadSettings::new(
            Policy::Other,
            None,
            DETECTOR_PRIORITY,
            mlock,
            ClockKind::Monotonic,
        );
        let noise = NoiseSettings::new(
            layout.work().clone(),
            per_round - job_ns,
            None,
            detector,
            o.attribute,
        )
        .map_err(|e| too_short(&e))?;
        let plan = MeasurementPlan {
            environment,
            threads,
            job,
            noise,
            online,
            load: o.load.clone(),
            load_cmd: o.load_cmd.clone(),
            requirement: r.clone(),
            working_set_bytes: o.working_set_bytes,
            rounds_total: length.rounds,
            cost_probe: o.cost_probe
                && tame_bench::cost::check_tools(&[tame_bench::cost::Workload::Cpu]).is_ok(),
            command_line: o.command_line.clone(),
            program: o.program.clone(),
        };
        if let Some(p) = &plan.program {
            program::validate(p)?;
        }
        if let Some(load) = plan.load_on(&plan.online) {
            load.check_tools()?;
        }
        Ok(plan)
    }

    /// Calibrate the work on the first CPU it runs on, undisturbed (no load, nothing
    /// applied), so that one activation's work takes the budget there.
    fn calibrate(
        &mut self,
        model: &HostModel,
        layout: &Layout,
        control: &RunControl,
    ) -> Result<WorkCalibration, AssessError> {
        let cpu = layout.work().first().unwrap_or(0);
        let working_set = self
            .working_set_bytes
            .unwrap_or_else(|| job::default_working_set(model, cpu));
        let calibration = job::calibrate(
            cpu,
            self.requirement.budget_ns,
            working_set,
            &self.threads,
            control,
        )?;
        self.job.work = calibration.work;
        Ok(calibration)
    }

    /// The command line recorded in a round's raw result: assess's, and which part.
    fn command(&self, round: &str, bench: &str) -> Vec<String> {
        let mut c = self.command_line.clone();
        c.push(format!("# {round} {bench}"));
        c
    }

    fn load_on(&self, cpus: &CpuList) -> Option<LoadSpec> {
        (!self.load.is_empty() || self.load_cmd.is_some()).then(|| LoadSpec {
            kinds: self.load.clone(),
            cpus: cpus.clone(),
            command: self.load_cmd.clone(),
        })
    }

    /// The machine as it is: the load on every CPU, the work's CPUs shared with it; after
    /// the last round, ordinary work's throughput on every CPU.
    fn shared_round(
        &self,
        root: &Root,
        index: u32,
        last: bool,
        session: &mut Session,
    ) -> Result<(RoundWithRun, Option<WorkThroughput>), AssessError> {
        let load = self.load_on(&self.online);
        let conditions = Conditions {
            load: load.as_ref(),
            placement: None,
        };
        let round = self.measure(root, index, Configuration::Shared, conditions, session)?;
        let probed = if last {
            self.probe("shared", &self.online, session)
        } else {
            None
        };
        Ok((round, probed))
    }

    /// Ordinary work's throughput on `cpus` (the cost probe), after the last round's
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

    /// Apply, check (the first time) and measure inside the partition with the load on
    /// the system partition, revert. A failure here does not lose the shared rounds: the
    /// round is reported as not measured, with why, and a revert that fails is reported too.
    #[allow(clippy::too_many_arguments)]
    fn partitioned_round(
        &self,
        root: &Root,
        o: &Options,
        layout: &Layout,
        index: u32,
        last: bool,
        session: &mut Session,
        restoration: &mut Restoration,
    ) -> (RoundWithRun, Option<CheckReport>, Option<WorkThroughput>) {
        let of = self.job_rounds_label(index);
        session
            .observer
            .phase(&format!("{of}: applying the partition"), 0);
        let applied = match TemporaryPartition::apply(
            root,
            &layout.spec,
            &layout.spec_text,
            MARKER,
            &o.journal_dir,
        ) {
            Ok(a) => a,
            Err(e) => {
                let why = format!("the partition could not be applied (apply rolled back what it had changed): {e}");
                return (
                    RoundWithRun(Round::skipped(index, Configuration::Partitioned, why), None),
                    None,
                    None,
                );
            }
        };
        let check = (index == 1).then(|| {
            session.observer.phase("check inside the partition", 0);
            let model = HostModel::read(root);
            tame_check::check(&model, &Target::applied(&model, layout.isolated.clone()))
        });
        let measured = self.measure_in_partition(root, layout, index, applied.applied(), session);
        // Still applied: tame and what it starts run in the system partition.
        let probed = if last && measured.is_ok() {
            self.probe("partitioned", &layout.system, session)
        } else {
            None
        };
        session
            .observer
            .phase(&format!("{of}: reverting the partition"), 0);
        match applied.revert() {
            Ok(reverted) => {
                restoration.changes_reverted += reverted.entries;
                restoration.not_restored.extend(reverted.not_restored_lines());
            }
            Err(e) => restoration.not_restored.push(format!(
                "the revert failed: {e} — the partition is still applied; see tame status and run tame revert"
            )),
        }
        let round = measured.unwrap_or_else(|e| {
            RoundWithRun(
                Round::skipped(
                    index,
                    Configuration::Partitioned,
                    format!("measuring inside the partition failed: {e}"),
                ),
                None,
            )
        });
        (round, check, probed)
    }

    fn measure_in_partition(
        &self,
        root: &Root,
        layout: &Layout,
        index: u32,
        applied: &Applied,
        session: &mut Session,
    ) -> Result<RoundWithRun, AssessError> {
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
        self.measure(root, index, Configuration::Partitioned, conditions, session)
    }

    /// `round 2/3`.
    fn job_rounds_label(&self, index: u32) -> String {
        format!("round {index}/{}", self.rounds_total)
    }

    /// The work at every activation, then the busy loop, under `conditions`.
    fn measure(
        &self,
        root: &Root,
        index: u32,
        configuration: Configuration,
        conditions: Conditions,
        session: &mut Session,
    ) -> Result<RoundWithRun, AssessError> {
        let mut round = Round::new(index, configuration);
        let name = format!("{} {}", self.job_rounds_label(index), configuration.name());
        let raw_name = format!("{}-{index}", configuration.name());
        let observer = &mut *session.observer;
        let done = if let Some(p) = &self.program {
            observer.phase(&format!("{name}: the program"), self.job.expected_ns());
            let watched = program::watch(
                root,
                p,
                &self.job,
                conditions,
                session.control,
                self.command(&raw_name, "watch"),
            )?;
            let mut one = JobTotals::default();
            one.add_watched(
                &watched.work,
                &self.job,
                watched.run.result.result.interrupted,
            );
            round.job = one.figures(self.requirement.budget_ns);
            round.load = watched.run.result.result.load.clone();
            round.results.watch = Some(Box::new(watched.run.result));
            RoundWork::Watched(Box::new(watched.work))
        } else {
            observer.phase(&format!("{name}: the work"), self.job.expected_ns());
            let total = self.job.progress_total().max(1);
            let done: Finished<JobSettings> = session::run(
                root,
                self.job.clone(),
                conditions,
                session.control,
                0,
                |n| observer.progress(n * 1000 / total),
                self.command(&raw_name, "job"),
            )?;
            let mut one = JobTotals::default();
            one.add(&done);
            round.job = one.figures(self.requirement.budget_ns);
            round.load = done.result.load.clone();
            round.results.job = Some(done.result.clone());
            RoundWork::Job(Box::new(done))
        };
        if !session.control.stopped() {
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
                    observer.progress(
                        (start.elapsed().as_nanos() as u64).min(duration) * 1000 / duration,
                    )
                },
                self.command(&raw_name, "noise"),
            )?;
            // The stretch is what the work, at its own priority, would lose.
            let work_prio = kernel_priority(self.threads.policy, self.threads.priority);
            round.noise = Some(NoiseFigures::from_run(
                &run,
                self.requirement.budget_ns,
                work_prio,
            ));
            round.results.noise = Some(run.result);
        }
        round.ended_unix_ns = tame_bench::result::unix_now_ns();
        Ok(RoundWithRun(round, Some(done)))
    }
}

/// What a round's work gave: the calibrated work's run, or the watched program's thread.
enum RoundWork {
    Job(Box<Finished<JobSettings>>),
    Watched(Box<tame_bench::watch::analyze::ThreadRecorders>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The busy loop's and the work's share of `total`, split as [`MeasurementPlan::new`] does.
    fn split(total: u64, rounds: u32) -> (u64, u64) {
        let per_round = total / u64::from(rounds);
        let job = per_round / 100 * verdict::JOB_SHARE_PERCENT;
        (per_round - job, job)
    }

    #[test]
    fn the_shortest_duration_named_is_one_that_runs() {
        for (period, rounds) in [
            (1_000_000, 3),
            (2_000_000, 1),
            (10_000_000_000, 3),
            (50_000, 100),
        ] {
            let r = Requirement::new(period, period / 10, None, 0.0, 1).unwrap();
            let shortest = shortest_duration_ns(&r, rounds);
            let (busy, job) = split(shortest, rounds);
            assert!(
                busy >= noise::MIN_DURATION_NS && job >= period,
                "{period} {rounds}"
            );
            assert!(Length::Fixed(shortest).resolve(&r, rounds).is_ok());
            // A millisecond less is refused, and the message names the shortest.
            let e = Length::Fixed(shortest - 1_000_000)
                .resolve(&r, rounds)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!(
                    "give --duration {}ms or more",
                    shortest / 1_000_000
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_too_short_duration_is_refused_in_the_units_it_was_given() {
        let r = Requirement::new(1_000_000, 100_000, None, 0.0, 1).unwrap();
        let e = Length::Fixed(10_000_000).resolve(&r, 3).unwrap_err();
        assert!(e.is_bad_input());
        assert_eq!(
            e.to_string(),
            "--duration 10 ms is too short for 3 rounds: each round's busy loop gets 35% of the round and needs at least 10 ms, its work at least one period — give --duration 86ms or more, or fewer --rounds"
        );
        let capped = Length::Auto {
            target_bound: 0.0001,
            max_ns: 10_000_000,
        };
        assert!(capped
            .resolve(&r, 3)
            .unwrap_err()
            .to_string()
            .starts_with("--max-duration 10 ms is too short for 3 rounds"));
    }
}
