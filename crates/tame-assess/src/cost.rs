//! `tame bench cost` with a partition: the shared round on the machine as it is, then the
//! spec applied through the journal, the partitioned round on the system partition's CPUs
//! (optionally with a real-time load in the isolated partition), and the spec reverted —
//! every round. The workloads and their figures are `tame_bench::cost`'s; this is the part
//! that changes the machine, and it always puts it back ([`temporary`]: reverted after each
//! partitioned round, on error, on Ctrl-C after the current workload, and by the next run
//! or `tame revert` after `kill -9`).
//!
//! tame runs in the system partition while the spec is applied (apply moves every movable
//! task there: on cgroup v1 into the system cpuset, on v2 the root cgroup keeps only the
//! system CPUs), so the workloads it starts are confined to it by their cgroup; they are
//! also given its CPUs explicitly (`stress-ng --taskset`, the compilers' affinity).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tame_bench::cost::{
    self, ConfigKind, Configuration, CostSettings, NoPartition, PartitionSetup, Partitioning, Step,
    Workload,
};
use tame_bench::engine::RunControl;
use tame_bench::error::{BenchError, Failure};
use tame_bench::result::BenchResult;
use tame_host::{CpuList, HostModel, Root};
use tame_launch::spawn::{self, Launched};
use tame_launch::target::{self, Caller};
use tame_partition::Applied;

use crate::error::{invalid, AssessError};
use crate::layout::{self, Layout};
use crate::temporary::{self, TemporaryPartition, COST_MARKER};

/// Where the partitioned configuration comes from.
#[derive(Clone, Debug)]
pub enum CostPartition {
    /// Only the machine as it is.
    None,
    /// Apply this spec (its name and text) for each partitioned round.
    Spec(String, String),
    /// Apply a layout isolating this many CPUs, chosen as `tame assess` chooses.
    Isolate(u32),
    /// Measure in the system partition of the spec applied now, beside this isolated
    /// partition: only the partitioned configuration (the machine as it was is not there).
    Applied(String),
}

#[derive(Clone, Debug)]
pub struct CostOptions {
    pub workloads: Vec<Workload>,
    pub duration_ns: u64,
    pub rounds: u32,
    pub partition: CostPartition,
    /// A real-time load in the isolated partition during the partitioned rounds.
    pub rt_load: bool,
    pub journal_dir: PathBuf,
    /// Who runs it: the partition access rule looks at it.
    pub caller: Caller,
    pub command_line: Vec<String>,
}

/// The real-time load: stress-ng's cyclic stressor, one SCHED_FIFO thread per isolated CPU
/// waking every 100 µs (a periodic real-time task, as the work a partition is made for).
/// `setpriv --pdeathsig TERM` (util-linux) ends it with tame even after `kill -9`; its own
/// `--timeout` bounds it besides.
fn rt_load_argv(cpus: &CpuList, seconds: u64) -> Vec<String> {
    let mut argv: Vec<String> = ["setpriv", "--pdeathsig", "TERM", "stress-ng"]
        .map(String::from)
        .to_vec();
    // The same competitor as assess's `rt` load.
    argv.extend(tame_bench::load::LoadKind::Rt.stress_ng_args(cpus.len()));
    argv.extend([
        "--taskset".to_string(),
        cpus.to_string(),
        "--timeout".to_string(),
        format!("{seconds}s"),
        // Its latency report would interleave with tame's output; tame measures its own.
        "--quiet".to_string(),
    ]);
    argv
}

/// Run `tame bench cost` as `options` say.
pub fn bench_cost(
    root: &Root,
    options: &CostOptions,
    control: &RunControl,
    step: &mut dyn FnMut(Step),
) -> Result<BenchResult<CostSettings>, AssessError> {
    let model = HostModel::read(root);
    let online = model.cpus.online.clone();
    let shared = Configuration {
        kind: ConfigKind::Shared,
        cpus: online.clone(),
    };
    let settings = |configs, setup| {
        CostSettings::new(
            options.workloads.clone(),
            options.duration_ns,
            options.rounds,
            configs,
            setup,
        )
        .map_err(AssessError::from)
    };
    let rt_seconds = |s: &CostSettings| {
        // The whole partitioned round, and a margin: the load is stopped after it anyway.
        s.duration_ns / 1_000_000_000 * s.workloads.len() as u64 + 10
    };
    if options.rt_load && matches!(options.partition, CostPartition::None) {
        return Err(invalid(
            "--rt-load runs a real-time load in the isolated partition during the partitioned rounds — give a partition (--spec FILE, --isolate N or -p NAME), or leave out --rt-load",
        ));
    }
    if options.rt_load {
        cost::check_tools(&[Workload::Cpu]).map_err(|_| {
            invalid("stress-ng not found in PATH — --rt-load runs stress-ng's cyclic stressor; install it with `apt-get install stress-ng`")
        })?;
        if tame_launch::spawn::resolve("setpriv").is_none() {
            return Err(invalid("setpriv not found in PATH — --rt-load starts its load through it (so the load ends with tame); install it with `apt-get install util-linux`"));
        }
    }
    match &options.partition {
        CostPartition::None => {
            let s = settings(vec![shared], None)?;
            Ok(cost::run(
                root,
                s,
                &mut NoPartition,
                control,
                step,
                options.command_line.clone(),
            )?)
        }
        CostPartition::Applied(name) => {
            // Read once: the rounds place the real-time load with these.
            let partitions = target::applied(&options.journal_dir, root)?;
            let applied = target::partition_target(root, &partitions, name, &options.caller)?;
            if !applied.isolated {
                return Err(invalid(format!(
                    "-p {name} is the system partition — name the isolated partition (where the real-time work runs); the workloads run in the system partition"
                )));
            }
            let system = partitions.system().map(|p| p.cpus.clone()).ok_or_else(|| {
                invalid("the applied spec has no system partition to run the workloads in")
            })?;
            let configs = vec![Configuration {
                kind: ConfigKind::Partitioned,
                cpus: system,
            }];
            let mut s = settings(configs, None)?;
            let argv = options
                .rt_load
                .then(|| rt_load_argv(&applied.cpus, rt_seconds(&s)));
            s.partition = Some(PartitionSetup {
                isolated: name.clone(),
                isolated_cpus: applied.cpus.clone(),
                applied_per_round: None,
                rt_load: argv.as_ref().map(|a| a.join(" ")),
            });
            let mut p = AlreadyApplied {
                rt: RtLoad::new(root, options, name, argv),
                applied: partitions,
            };
            Ok(cost::run(
                root,
                s,
                &mut p,
                control,
                step,
                options.command_line.clone(),
            )?)
        }
        CostPartition::Spec(..) | CostPartition::Isolate(_) => {
            let may_change = tame_host::privilege::may_change(root);
            if !may_change {
                return Err(invalid(
                    "the partitioned rounds apply a partition, which changes cgroups, IRQ affinities and kernel settings and needs root — run as root, or leave out --spec/--isolate to measure the machine as it is",
                ));
            }
            let layout = layout_of(&model, &options.partition)?;
            let partitioned = Configuration {
                kind: ConfigKind::Partitioned,
                cpus: layout.system.clone(),
            };
            let mut s = settings(vec![shared, partitioned], None)?;
            // Everything is validated: from here on the machine may change.
            temporary::recover_earlier_run(root, &options.journal_dir, true, "tame bench cost")?;
            let argv = options
                .rt_load
                .then(|| rt_load_argv(&layout.isolated, rt_seconds(&s)));
            s.partition = Some(PartitionSetup {
                isolated: layout.partition.clone(),
                isolated_cpus: layout.isolated.clone(),
                applied_per_round: Some(origin(&options.partition)),
                rt_load: argv.as_ref().map(|a| a.join(" ")),
            });
            let mut p = PerRound {
                root,
                layout: &layout,
                journal_dir: &options.journal_dir,
                applied: None,
                rt: RtLoad::new(root, options, &layout.partition, argv),
            };
            let result = cost::run(root, s, &mut p, control, step, options.command_line.clone());
            // Reverted by `leave` already; this covers an error between enter and leave.
            p.leave_quietly();
            Ok(result?)
        }
    }
}

fn layout_of(model: &HostModel, partition: &CostPartition) -> Result<Layout, AssessError> {
    match partition {
        CostPartition::Spec(name, text) => layout::from_spec(model, name, text),
        CostPartition::Isolate(n) => layout::choose(
            model,
            &layout::Choice {
                count: *n,
                share_core: false,
                activity: None,
            },
        ),
        _ => Err(invalid("no partition to apply")),
    }
}

fn origin(partition: &CostPartition) -> String {
    match partition {
        CostPartition::Spec(name, _) => name.clone(),
        CostPartition::Isolate(n) => format!("the layout tame assess chooses for --cpus {n}"),
        _ => String::new(),
    }
}

fn failure(text: String) -> BenchError {
    BenchError::Failed(Failure::Message(text))
}

/// The real-time load, started in the isolated partition for each partitioned round.
struct RtLoad<'a> {
    root: &'a Root,
    caller: &'a Caller,
    partition: String,
    argv: Option<Vec<String>>,
    running: Option<Launched>,
}

impl<'a> RtLoad<'a> {
    fn new(
        root: &'a Root,
        options: &'a CostOptions,
        partition: &str,
        argv: Option<Vec<String>>,
    ) -> Self {
        RtLoad {
            root,
            caller: &options.caller,
            partition: partition.to_string(),
            argv,
            running: None,
        }
    }

    /// Start it in the partition's cgroup, on its CPUs (the partition must be applied:
    /// `applied` holds it).
    fn start(&mut self, applied: &Applied) -> Result<(), BenchError> {
        let Some(argv) = &self.argv else {
            return Ok(());
        };
        let applied = target::partition_target(self.root, applied, &self.partition, self.caller)
            .map_err(|e| failure(format!("cannot place the real-time load: {e}")))?;
        let mut placement = spawn::Placement::on_cpus(applied.cpus.clone());
        placement.cgroup_procs = Some(applied.cgroup.procs());
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let launched = spawn::spawn(&placement, &argv)
            .map_err(|e| failure(format!("cannot start the real-time load: {e}")))?;
        self.running = Some(launched);
        Ok(())
    }

    /// Stop it: SIGTERM (stress-ng stops its workers), SIGKILL after 3 s, reaped.
    fn stop(&mut self) {
        let Some(mut launched) = self.running.take() else {
            return;
        };
        let pid = launched.child.id() as i32;
        // SAFETY: signalling our own child, not yet reaped (its pid cannot be reused).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while matches!(launched.child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                let _ = launched.child.kill();
                let _ = launched.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RtLoad<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `-p NAME`: the partition stays as it is; only the real-time load comes and goes.
struct AlreadyApplied<'a> {
    rt: RtLoad<'a>,
    /// The partitions applied, read once before the rounds.
    applied: Applied,
}

impl Partitioning for AlreadyApplied<'_> {
    fn enter(&mut self) -> Result<(), BenchError> {
        self.rt.start(&self.applied)
    }
    fn leave(&mut self) -> Result<(), BenchError> {
        self.rt.stop();
        Ok(())
    }
}

/// `--spec FILE` / `--isolate N`: applied for each partitioned round, reverted after.
struct PerRound<'a> {
    root: &'a Root,
    layout: &'a Layout,
    journal_dir: &'a std::path::Path,
    applied: Option<TemporaryPartition<'a>>,
    rt: RtLoad<'a>,
}

impl PerRound<'_> {
    /// After an error: stop the load and revert, saying nothing more (the error is told).
    fn leave_quietly(&mut self) {
        self.rt.stop();
        drop(self.applied.take());
    }
}

impl Partitioning for PerRound<'_> {
    fn enter(&mut self) -> Result<(), BenchError> {
        let applied = TemporaryPartition::apply(
            self.root,
            &self.layout.spec,
            &self.layout.spec_text,
            COST_MARKER,
            self.journal_dir,
        )
        .map_err(|e| {
            failure(format!(
                "the partition could not be applied (apply rolled back what it had changed): {e}"
            ))
        })?;
        // The partitions apply returned, typed: the load goes on their CPUs as they are.
        let applied = self.applied.insert(applied);
        self.rt.start(applied.applied())
    }

    fn leave(&mut self) -> Result<(), BenchError> {
        self.rt.stop();
        let Some(applied) = self.applied.take() else {
            return Ok(());
        };
        let report = applied.revert().map_err(|e| {
            failure(format!(
                "the revert failed: {e} — the partition may still be applied; see `tame status` and run `tame revert`"
            ))
        })?;
        let what = report.not_restored_lines();
        if !what.is_empty() {
            return Err(failure(format!(
                "reverting the partition left {} change(s) unrestored ({}) — see `tame status` and run `tame revert`",
                what.len(),
                what.join("; ")
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rt_load_is_a_fifo_cyclic_thread_per_isolated_cpu() {
        let argv = rt_load_argv(&CpuList::parse("2-3").unwrap(), 70);
        assert_eq!(
            argv.join(" "),
            "setpriv --pdeathsig TERM stress-ng --cyclic 2 --cyclic-policy fifo --cyclic-prio 80 --cyclic-sleep 100000 --taskset 2-3 --timeout 70s --quiet"
        );
    }

    fn options(partition: CostPartition, rt_load: bool) -> CostOptions {
        CostOptions {
            workloads: vec![Workload::Cpu],
            duration_ns: 1_000_000_000,
            rounds: 1,
            partition,
            rt_load,
            journal_dir: PathBuf::from("/nonexistent/tame-journal"),
            caller: Caller::current(),
            command_line: vec![],
        }
    }

    #[test]
    fn refusals_come_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let control = RunControl::new();
        let e = bench_cost(
            &root,
            &options(CostPartition::None, true),
            &control,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().starts_with("--rt-load runs"),
            "{e}"
        );
        let e = bench_cost(
            &root,
            &options(CostPartition::Applied("rt".into()), false),
            &control,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("no partitions are applied"),
            "{e}"
        );
        let mut zero = options(CostPartition::None, false);
        zero.rounds = 0;
        let e = bench_cost(&root, &zero, &control, &mut |_| {}).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().starts_with("--rounds 0"),
            "{e}"
        );
    }
}
