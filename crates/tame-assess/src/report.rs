//! The versioned result of `tame assess`: the requirement, the layout and spec, the
//! check's findings, the calibration of the work, every round's figures and each
//! configuration's merged over its rounds, the verdict, and what was restored.
//!
//! `tame.assess/2` ran the work at every activation in interleaved rounds; a
//! `tame.assess/1` report (periodic wakeups only, one phase each) still reads into this
//! type — its `cycle` figures and stored verdict — for `tame report` and
//! `tame export prometheus`.
//! Documented in docs/assess.md; bump its schema (`impl Document for AssessReport`) on any change an old reader
//! would misread.

use serde::{Deserialize, Serialize};
use tame_bench::cycle::CycleSettings;
use tame_bench::load::LoadDescription;
use tame_bench::noise::NoiseResult;
use tame_bench::result::BenchResult;
use tame_check::CheckReport;
use tame_host::environment::RunEnvironment;

use tame_bench::job::WorkCalibration;

use crate::figures::{CycleFigures, JobFigures, NoiseFigures, WorkThroughput};
use crate::knobs::{Knob, RebootOption};
use crate::layout::Layout;
use crate::requirement::Requirement;
use crate::rounds::{Effect, Round};
use crate::verdict::{Machine, Verdict};

impl tame_host::Document for AssessReport {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.assess", 2);
}

/// One configuration over all its rounds: the work at every activation, then the busy
/// loop, under the same load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Measured at all; when not, why not.
    pub measured: bool,
    pub not_measured: Option<String>,
    /// Every round's activations merged (absent in tame.assess/1 reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobFigures>,
    /// Periodic wakeups without work: tame.assess/1 reports only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<CycleFigures>,
    /// The busy loop over all rounds: what interrupted the work, per cause.
    pub noise: Option<NoiseFigures>,
    /// The load during the work (each stressor's throughput averaged over the rounds).
    pub load: Option<LoadDescription>,
    /// Rounds of this configuration measured.
    #[serde(default)]
    pub rounds: u32,
    /// The round with the most misses for its activations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_round: Option<u32>,
    /// The scheduling of the periodic thread (`fifo 95`, `other`).
    pub policy: String,
    /// Ordinary work's throughput in this configuration, measured briefly after the rest
    /// (absent with `--no-cost`, without stress-ng, and in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<WorkThroughput>,
    /// tame.assess/1 only: the phase's results in the common schema (in /2 each round
    /// keeps its own, `rounds[i].results`).
    #[serde(default, skip_serializing_if = "PhaseResults::is_empty")]
    pub results: PhaseResults,
}

/// The benches' own results of one tame.assess/1 phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResults {
    pub cycle: Option<BenchResult<CycleSettings>>,
    pub noise: Option<NoiseResult>,
}

impl PhaseResults {
    pub fn is_empty(&self) -> bool {
        self.cycle.is_none() && self.noise.is_none()
    }
}

/// The user's program as the work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramWork {
    pub command: Vec<String>,
    /// `--threads`: the threads the verdict is about; `None`: the one with the most
    /// activations in each round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<String>,
}

/// How long it measured and how that was chosen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLength {
    /// Each configuration's measured time over all its rounds (the work
    /// [`crate::verdict::JOB_SHARE_PERCENT`] of it, the busy loop the rest).
    pub per_configuration_ns: u64,
    pub rounds: u32,
    /// `--duration auto`: the miss-rate bound it was sized to show with no miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_target_bound: Option<f64>,
    /// `--duration auto` wanted longer than `--max-duration` and was cut to it.
    #[serde(default)]
    pub capped: bool,
}

impl Phase {
    pub fn skipped(why: impl Into<String>) -> Self {
        Phase {
            not_measured: Some(why.into()),
            ..Phase::default()
        }
    }
}

/// What was done to the machine and undone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Restoration {
    /// An earlier assess had been killed: its partition was reverted first.
    pub recovered_earlier_run: bool,
    /// Changes the partition made, all written back.
    pub changes_reverted: usize,
    /// What could not be put back (the journal is kept; `tame revert` retries).
    pub not_restored: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssessReport {
    pub schema: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    pub started_unix_ns: u64,
    pub requirement: Requirement,
    pub environment: RunEnvironment,
    /// The check of the chosen CPUs on the machine as found.
    pub check: CheckReport,
    /// The same check while the partition was applied: what the partition did not fix.
    pub check_partitioned: Option<CheckReport>,
    pub layout: Layout,
    /// Where the spec was written, when an output directory was given.
    pub spec_file: Option<String>,
    /// How long it measured (absent in tame.assess/1 reports).
    #[serde(default)]
    pub run_length: RunLength,
    /// The work each activation ran, calibrated undisturbed before the first round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<WorkCalibration>,
    /// `tame assess -- CMD`: the user's program, watched as the work instead of the
    /// calibrated one (each round's `results.watch` holds its threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramWork>,
    /// Every round in the order it ran: shared 1, partitioned 1, shared 2, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
    /// Figures compared round by round: an effect only beyond the rounds' spread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
    /// The generated partition's knobs beyond CPUs: set or why not, and what the rounds
    /// saw of what each removes (empty for a user's spec and in older reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<Knob>,
    /// Boot parameters the partitioned rounds measured a reason for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reboot_options: Vec<RebootOption>,
    pub shared: Phase,
    pub partitioned: Phase,
    /// What the verdict knew of the machine besides the measurements.
    pub machine: Machine,
    pub verdict: Verdict,
    pub restoration: Restoration,
    /// Ctrl-C cut the assessment short: what was measured is reported.
    pub interrupted: bool,
}

impl AssessReport {
    /// The verdict these measurements give for another requirement (the histograms are
    /// kept, so any deadline and miss rate can be checked against them).
    pub fn decide_for(&self, requirement: &Requirement) -> Verdict {
        let mut machine = self.machine.clone();
        if machine.reboot_fixes.iter().any(|f| f.finding.is_empty()) {
            // A report from before the fixes kept their finding: read them from its check.
            let check = self.check_partitioned.as_ref().unwrap_or(&self.check);
            machine.reboot_fixes = crate::attribution::RebootFix::from_check(check);
        }
        crate::verdict::decide(requirement, &self.shared, &self.partitioned, &machine)
    }

    pub fn to_json(&self) -> String {
        tame_bench::json::pretty(self).expect("the report serialises: all keys are strings")
    }
}
