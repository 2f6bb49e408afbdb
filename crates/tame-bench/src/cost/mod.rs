//! `tame bench cost`: what separating real-time work costs the time-sharing side. Ordinary
//! throughput workloads — stress-ng classes (their bogo-ops/s) and a compile loop (files
//! compiled per second) — run on the machine as it is (every online CPU, `shared`) and on
//! the system partition while a partition is applied (`partitioned`), round after round,
//! each workload on all the CPUs its configuration has, one instance per CPU.
//!
//! The DROPS paper measured the general-purpose side's throughput with and without the
//! real-time machinery (AIM, hbench); the real-time-vs-real-fast paper the build time on
//! -rt against a stock kernel. Here the machinery is a partition: the cost is the CPUs it
//! takes and whatever it does to the rest ([`figures`]: the relative cost, in total and per
//! remaining CPU).
//!
//! Making and undoing the partitioned configuration is the caller's ([`Partitioning`]:
//! `tame-assess` applies a spec through the journal and reverts it every round); this
//! module runs the workloads and turns their figures into the common result schema.

pub mod compile;
pub mod figures;
pub mod stress;
pub mod view;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tame_host::environment::RunEnvironment;
use tame_host::{CpuList, Root};

use crate::engine::RunControl;
use crate::error::{invalid, io_failed, Result};
use crate::result::{unix_now_ns, BenchResult, Calibration};
use tame_launch::spawn::resolve;

/// The bench's name in results.
pub const NAME: &str = "cost";

/// One throughput workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// stress-ng cpu: arithmetic, no system calls.
    Cpu,
    /// stress-ng syscall: a wide range of system calls.
    Syscall,
    /// stress-ng switch: context switches between process pairs.
    Switch,
    /// stress-ng pipe: data through pipes.
    Pipe,
    /// stress-ng memcpy: memory copies.
    Memcpy,
    /// stress-ng hdd: file writes and reads in a temporary directory.
    Hdd,
    /// gcc -O2 over a generated tree of C files, one compiler per CPU (as `make -j N`).
    Build,
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::Cpu,
        Workload::Syscall,
        Workload::Switch,
        Workload::Pipe,
        Workload::Memcpy,
        Workload::Hdd,
        Workload::Build,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Cpu => "cpu",
            Workload::Syscall => "syscall",
            Workload::Switch => "switch",
            Workload::Pipe => "pipe",
            Workload::Memcpy => "memcpy",
            Workload::Hdd => "hdd",
            Workload::Build => "build",
        }
    }

    /// The stress-ng stressor it runs, if it is one.
    pub fn stressor(self) -> Option<&'static str> {
        (self != Workload::Build).then(|| self.name())
    }

    /// What its throughput counts per second.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Build => "files/s",
            _ => "bogo-ops/s",
        }
    }

    /// `all`, or a comma-separated list of workload names; each once, in the listed order
    /// of [`Workload::ALL`].
    pub fn parse_list(text: &str) -> Result<Vec<Workload>> {
        if text.trim() == "all" {
            return Ok(Self::ALL.to_vec());
        }
        let mut out = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let w = Self::ALL
                .into_iter()
                .find(|w| w.name().eq_ignore_ascii_case(word))
                .ok_or_else(|| {
                    invalid(format!(
                        "unknown workload {word:?} — bench cost runs {}; give `all` or some of them, comma-separated",
                        Self::ALL.map(Workload::name).join(", ")
                    ))
                })?;
            if !out.contains(&w) {
                out.push(w);
            }
        }
        if out.is_empty() {
            return Err(invalid(
                "--workloads names no workload — give `all` or a list such as cpu,pipe,build",
            ));
        }
        out.sort();
        Ok(out)
    }
}

/// The tools the workloads run, checked before anything starts.
pub fn check_tools(workloads: &[Workload]) -> Result<()> {
    let stress: Vec<&str> = workloads.iter().filter_map(|w| w.stressor()).collect();
    if !stress.is_empty() && resolve("stress-ng").is_none() {
        return Err(invalid(format!(
            "stress-ng not found in PATH — the workloads {} run stress-ng; install it with `apt-get install stress-ng` (scripts/install-deps.sh does), or leave them out with --workloads build",
            stress.join(", ")
        )));
    }
    if workloads.contains(&Workload::Build) && resolve("gcc").is_none() {
        return Err(invalid(
            "gcc not found in PATH — the build workload compiles C files with gcc; install it with `apt-get install gcc` (scripts/install-deps.sh does), or leave it out of --workloads",
        ));
    }
    Ok(())
}

/// The two configurations compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigKind {
    /// The machine as it is: every online CPU.
    Shared,
    /// The system partition's CPUs while a partition is applied.
    Partitioned,
}

impl ConfigKind {
    pub fn name(self) -> &'static str {
        match self {
            ConfigKind::Shared => "shared",
            ConfigKind::Partitioned => "partitioned",
        }
    }
}

/// One configuration: the CPUs the workloads run on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub kind: ConfigKind,
    pub cpus: CpuList,
}

/// The partition behind the partitioned configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSetup {
    /// The isolated partition (where the real-time load runs, with `--rt-load`).
    pub isolated: String,
    pub isolated_cpus: CpuList,
    /// Where the spec came from (a file, or a layout tame chose) when bench cost applies it
    /// for each partitioned round and reverts it after; `None` when it was applied already
    /// (`-p`), and only the partitioned configuration is measured.
    pub applied_per_round: Option<String>,
    /// The real-time load that ran in the isolated partition during the partitioned
    /// rounds, as started; `None` for none.
    pub rt_load: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostSettings {
    pub workloads: Vec<Workload>,
    /// How long each workload runs in each round, ns.
    pub duration_ns: u64,
    pub rounds: u32,
    /// Measured in this order in every round.
    pub configurations: Vec<Configuration>,
    pub partition: Option<PartitionSetup>,
}

/// stress-ng takes its run time in whole seconds.
const MAX_DURATION_NS: u64 = 3600 * 1_000_000_000;

impl CostSettings {
    pub fn new(
        workloads: Vec<Workload>,
        duration_ns: u64,
        rounds: u32,
        configurations: Vec<Configuration>,
        partition: Option<PartitionSetup>,
    ) -> Result<Self> {
        if rounds == 0 {
            return Err(invalid(
                "--rounds 0 measures nothing — give 1 or more (3 or more show the spread between rounds)",
            ));
        }
        if duration_ns < 1_000_000_000
            || !duration_ns.is_multiple_of(1_000_000_000)
            || duration_ns > MAX_DURATION_NS
        {
            return Err(invalid(format!(
                "--duration {}: each workload runs a whole number of seconds between 1s and 1h (stress-ng counts its run time in seconds) — give e.g. 5s",
                tame_rt::duration::format_ns_as(duration_ns, tame_rt::duration::NsStyle::Fixed)
            )));
        }
        if let Some(c) = configurations.iter().find(|c| c.cpus.is_empty()) {
            return Err(invalid(format!(
                "the {} configuration has no CPU to run the workloads on",
                c.kind.name()
            )));
        }
        check_tools(&workloads)?;
        Ok(CostSettings {
            workloads,
            duration_ns,
            rounds,
            configurations,
            partition,
        })
    }

    /// The time the workloads take, ns (without stress-ng's start-up and the apply/revert).
    pub fn expected_ns(&self) -> u64 {
        self.duration_ns
            .saturating_mul(self.workloads.len() as u64)
            .saturating_mul(self.configurations.len() as u64)
            .saturating_mul(u64::from(self.rounds))
    }
}

/// Makes and undoes the partitioned configuration around each partitioned round.
pub trait Partitioning {
    /// Before a partitioned round: apply the partition (where bench cost applies it) and
    /// start the real-time load (where asked).
    fn enter(&mut self) -> Result<()>;
    /// After it, also when it failed or was interrupted: undo what `enter` did.
    fn leave(&mut self) -> Result<()>;
}

/// For a run without a partitioned configuration.
pub struct NoPartition;

impl Partitioning for NoPartition {
    fn enter(&mut self) -> Result<()> {
        Ok(())
    }
    fn leave(&mut self) -> Result<()> {
        Ok(())
    }
}

/// One workload's throughput in one round of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub config: ConfigKind,
    pub workload: Workload,
    /// 0-based.
    pub round: u32,
    /// The CPUs the workload had.
    pub cpus: usize,
    /// Operations (files) per second of wall-clock time.
    pub throughput: f64,
}

/// What is being measured now, for progress output.
#[derive(Clone, Copy, Debug)]
pub struct Step<'a> {
    pub round: u32,
    pub rounds: u32,
    pub config: &'a Configuration,
    pub workload: Workload,
}

/// Run every round: each configuration in turn (the partitioned one between
/// `partitioning.enter` and `leave`), each workload for `duration_ns`. Ctrl-C (`control`)
/// ends the run after the current workload; the result then says `interrupted`.
pub fn run(
    root: &Root,
    settings: CostSettings,
    partitioning: &mut dyn Partitioning,
    control: &RunControl,
    step: &mut dyn FnMut(Step),
    command_line: Vec<String>,
) -> Result<BenchResult<CostSettings>> {
    let environment = RunEnvironment::capture(root);
    let started_unix_ns = unix_now_ns();
    let start = Instant::now();
    let workdir = tempfile::Builder::new()
        .prefix("tame-cost.")
        .tempdir()
        .map_err(|e| io_failed("cannot create a temporary directory for the workloads", e))?;
    let tree = settings
        .workloads
        .contains(&Workload::Build)
        .then(|| compile::Tree::generate(&workdir.path().join("tree")))
        .transpose()?;
    let duration = Duration::from_nanos(settings.duration_ns);
    let mut samples = Vec::new();
    'rounds: for round in 0..settings.rounds {
        for config in &settings.configurations {
            if control.stopped() {
                break 'rounds;
            }
            let partitioned = config.kind == ConfigKind::Partitioned;
            if partitioned {
                partitioning.enter()?;
            }
            let mut one = |workload: Workload| -> Result<Option<f64>> {
                step(Step {
                    round,
                    rounds: settings.rounds,
                    config,
                    workload,
                });
                match workload.stressor() {
                    Some(s) => Ok(
                        stress::run(s, &config.cpus, duration, workdir.path(), control)?
                            .map(|r| r.throughput),
                    ),
                    None => match &tree {
                        Some(t) => compile::run(t, &config.cpus, duration, control),
                        None => Ok(None),
                    },
                }
            };
            let mut measured = Ok(());
            for &workload in &settings.workloads {
                if control.stopped() {
                    break;
                }
                match one(workload) {
                    Ok(Some(throughput)) => samples.push(Sample {
                        config: config.kind,
                        workload,
                        round,
                        cpus: config.cpus.len(),
                        throughput,
                    }),
                    Ok(None) => {}
                    Err(e) => {
                        measured = Err(e);
                        break;
                    }
                }
            }
            // Undone even when a workload failed: the error is reported after.
            let left = if partitioned {
                partitioning.leave()
            } else {
                Ok(())
            };
            measured?;
            left?;
        }
    }
    let (groups, merged) = figures::groups(&settings.workloads, &samples);
    Ok(BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: NAME.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns,
        elapsed_ns: start.elapsed().as_nanos() as u64,
        interrupted: control.stopped(),
        environment,
        calibration: Calibration::default(),
        load: None,
        partition: settings.partition.as_ref().map(|p| p.isolated.clone()),
        settings,
        groups,
        merged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_all_or_a_list_and_refuse_unknown_names() {
        assert_eq!(Workload::parse_list("all").unwrap(), Workload::ALL.to_vec());
        assert_eq!(
            Workload::parse_list("build, cpu,CPU").unwrap(),
            vec![Workload::Cpu, Workload::Build]
        );
        let e = Workload::parse_list("cpu,aim").unwrap_err();
        assert!(e.is_bad_input());
        assert_eq!(
            e.to_string(),
            "unknown workload \"aim\" — bench cost runs cpu, syscall, switch, pipe, memcpy, hdd, build; give `all` or some of them, comma-separated"
        );
        assert!(Workload::parse_list(" , ").unwrap_err().is_bad_input());
    }

    fn shared() -> Vec<Configuration> {
        vec![Configuration {
            kind: ConfigKind::Shared,
            cpus: CpuList::parse("0").unwrap(),
        }]
    }

    #[test]
    fn zero_rounds_and_odd_durations_are_bad_input() {
        let e =
            CostSettings::new(vec![Workload::Cpu], 1_000_000_000, 0, shared(), None).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().starts_with("--rounds 0"),
            "{e}"
        );
        for ns in [
            0,
            500_000_000,
            1_500_000_000,
            MAX_DURATION_NS + 1_000_000_000,
        ] {
            let e = CostSettings::new(vec![Workload::Cpu], ns, 1, shared(), None).unwrap_err();
            assert!(
                e.is_bad_input() && e.to_string().contains("whole number of seconds"),
                "{e}"
            );
        }
        let none = vec![Configuration {
            kind: ConfigKind::Partitioned,
            cpus: CpuList::new(),
        }];
        let e = CostSettings::new(vec![Workload::Cpu], 1_000_000_000, 1, none, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("partitioned configuration has no CPU"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    /// Counts enter/leave; stops the run from inside the first partitioned round when asked.
    struct Fake<'a> {
        calls: Vec<&'static str>,
        stop: Option<&'a RunControl>,
        fail_enter: bool,
    }

    impl Partitioning for Fake<'_> {
        fn enter(&mut self) -> Result<()> {
            self.calls.push("enter");
            if self.fail_enter {
                return Err(invalid("cannot apply"));
            }
            if let Some(c) = self.stop {
                c.request_stop();
            }
            Ok(())
        }
        fn leave(&mut self) -> Result<()> {
            self.calls.push("leave");
            Ok(())
        }
    }

    /// `rounds` of the build workload, shared and partitioned, a fifth of a second each:
    /// the order of the rounds is checked here, not what the workload measures (so
    /// shorter than the whole seconds `--duration` takes).
    fn settings(rounds: u32) -> CostSettings {
        let cpu0 = CpuList::parse("0").unwrap();
        let mut settings = CostSettings::new(
            vec![Workload::Build],
            1_000_000_000,
            rounds,
            vec![
                Configuration {
                    kind: ConfigKind::Shared,
                    cpus: cpu0.clone(),
                },
                Configuration {
                    kind: ConfigKind::Partitioned,
                    cpus: cpu0,
                },
            ],
            None,
        )
        .unwrap();
        settings.duration_ns = 200_000_000;
        settings
    }

    #[test]
    fn every_partitioned_round_is_left_even_when_stopped_inside_it() {
        if !tame_testing::require::require(resolve("gcc").is_some(), "gcc") {
            return;
        }
        let root = Root::system();
        let mut steps = Vec::new();
        let mut fake = Fake {
            calls: vec![],
            stop: None,
            fail_enter: false,
        };
        let control = RunControl::new();
        let r = run(
            &root,
            settings(2),
            &mut fake,
            &control,
            &mut |s| steps.push(format!("{} {}", s.round, s.config.kind.name())),
            vec![],
        )
        .unwrap();
        assert_eq!(fake.calls, ["enter", "leave", "enter", "leave"]);
        assert_eq!(
            steps,
            ["0 shared", "0 partitioned", "1 shared", "1 partitioned"]
        );
        assert_eq!(r.groups.len(), 2);
        assert!(r.merged.derived.contains_key("cost_percent_build"));
        assert!(!r.interrupted);
        // Ctrl-C inside the first partitioned round: nothing more runs, the round is left.
        let control = RunControl::new();
        let mut fake = Fake {
            calls: vec![],
            stop: Some(&control),
            fail_enter: false,
        };
        let r = run(&root, settings(3), &mut fake, &control, &mut |_| {}, vec![]).unwrap();
        assert_eq!(fake.calls, ["enter", "leave"]);
        assert!(r.interrupted);
        assert_eq!(r.groups.len(), 1, "the shared round before it is kept");
        // A failed enter is the run's error (the caller undoes what enter did).
        let mut fake = Fake {
            calls: vec![],
            stop: None,
            fail_enter: true,
        };
        let e = run(
            &root,
            settings(1),
            &mut fake,
            &RunControl::new(),
            &mut |_| {},
            vec![],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "cannot apply");
        assert_eq!(fake.calls, ["enter"]);
    }
}
