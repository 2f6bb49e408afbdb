//! The versioned result of `tame assess`: the requirement, the layout and spec, the
//! check's findings, both phases' figures, the verdict, and what was restored.
//! Documented in docs/assess.md; bump its schema (`impl Document for AssessReport`) on any change an old reader
//! would misread.

use serde::{Deserialize, Serialize};
use tame_bench::cycle::CycleSettings;
use tame_bench::load::LoadDescription;
use tame_bench::noise::NoiseResult;
use tame_bench::result::BenchResult;
use tame_check::CheckReport;
use tame_host::environment::RunEnvironment;

use crate::figures::{CycleFigures, NoiseFigures, WorkThroughput};
use crate::layout::Layout;
use crate::requirement::Requirement;
use crate::verdict::{Machine, Verdict};

impl tame_host::Document for AssessReport {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.assess", 1);
}

/// One configuration measured: periodic wakeups, then the busy loop, under the same load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Measured at all; when not, why not.
    pub measured: bool,
    pub not_measured: Option<String>,
    pub cycle: Option<CycleFigures>,
    pub noise: Option<NoiseFigures>,
    /// The load during the periodic-wakeup measurement, with its throughput.
    pub load: Option<LoadDescription>,
    /// The scheduling of the periodic thread (`fifo 95`, `other`).
    pub policy: String,
    /// Ordinary work's throughput in this configuration, measured briefly after the rest
    /// (absent with `--no-cost`, without stress-ng, and in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<WorkThroughput>,
    /// The phase's full results in the common schema (docs/results.md), as `tame bench
    /// cycle` and `tame bench noise` write them: `tame compare` and other readers of that
    /// schema take them as they are.
    #[serde(default)]
    pub results: PhaseResults,
}

/// The benches' own results of one phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResults {
    pub cycle: Option<BenchResult<CycleSettings>>,
    pub noise: Option<NoiseResult>,
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
        crate::verdict::decide(requirement, &self.shared, &self.partitioned, &self.machine)
    }

    pub fn to_json(&self) -> String {
        tame_bench::json::pretty(self).expect("the report serialises: all keys are strings")
    }
}
