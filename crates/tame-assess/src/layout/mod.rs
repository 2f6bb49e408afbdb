//! Which CPUs to isolate, and the partition spec that does it. The choice ranks each CPU
//! by what tame reads and measures, in this order (lower first; see [`Score`]):
//!
//! 1. isolated at boot (`isolcpus=` domain, `nohz_full=`): the kernel already keeps its own
//!    work and the tick off those CPUs;
//! 2. the planner's structural penalties: a kernel-managed IRQ cannot leave its CPU at run
//!    time (it would keep interrupting the work), CPU 0 carries housekeeping the kernel
//!    cannot move;
//! 3. what a short sample measured ([`CpuActivity`]): stolen time, device IRQs, timer
//!    events — each counted only where it is over twice the quietest CPU's rate and over a
//!    floor, so the noise of a 1 s sample does not reorder CPUs;
//! 4. the highest CPU number (low CPUs stay for housekeeping).
//!
//! Then placement: one NUMA node where the CPUs fit, one last-level cache within it, and
//! whole SMT cores: the work runs on one thread of each core, its siblings join the
//! partition idle (unless `share_core`).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tame_host::activity::{CpuActivity, CpuRates};
use tame_host::{CpuList, HostModel};
use tame_partition::{PartitionSpec, Role, Spec};

use crate::error::{invalid, AssessError};

mod place;
mod rank;
mod reasons;

use place::*;
use rank::*;
use reasons::*;

/// The name of the isolated partition assess generates.
pub const PARTITION: &str = "rt";
/// First line of every spec text assess applies: `tame status` shows it, and the next
/// assess knows a journal it finds is its own (left by a killed run) and reverts it.
pub const MARKER: &str = "# applied by tame assess";

/// The partitions to measure in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// The isolated partition measured in, and its CPUs (all of them, idle SMT siblings too).
    pub partition: String,
    pub isolated: CpuList,
    /// The CPUs of the partition the work and the measurement run on: `isolated` less the
    /// SMT siblings left idle. Empty in reports written before it existed: read it with
    /// [`Layout::work`].
    #[serde(default)]
    pub work_cpus: CpuList,
    /// Where the system (and the load) runs.
    pub system: CpuList,
    /// Why these CPUs, one line each.
    pub reasons: Vec<String>,
    /// The spec text (without the marker line).
    pub spec_text: String,
    /// What the planner warns about this spec.
    pub warnings: Vec<String>,
    /// The spec itself, typed: what is applied (`spec_text` is its text).
    #[serde(skip)]
    pub spec: Spec,
}

impl Layout {
    /// Where the work runs (`isolated` where a report predates `work_cpus`).
    pub fn work(&self) -> &CpuList {
        if self.work_cpus.is_empty() {
            &self.isolated
        } else {
            &self.work_cpus
        }
    }
}

/// What `choose` is asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Choice<'a> {
    /// How many CPUs the work runs on (`--cpus`).
    pub count: u32,
    /// Let the work's CPUs share cores: SMT siblings may be split between the partitions
    /// or both used by the work (`--share-core`). Without it the partition takes whole
    /// cores and leaves the siblings of the work's CPUs idle.
    pub share_core: bool,
    /// Per-CPU rates sampled just before (assess samples 1 s); None: not sampled.
    pub activity: Option<&'a CpuActivity>,
}

/// The cpuidle driver, if there is one (the kernel prints `none` when there is not): without
/// one, idle is the architecture's halt and `idle = "poll"` changes nothing.
pub fn cpuidle_driver(model: &HostModel) -> Option<String> {
    model
        .power
        .cpuidle_driver
        .clone()
        .filter(|d| !d.is_empty() && d != "none")
}

/// Choose the CPUs to isolate for `choice.count` CPUs of work: on one NUMA node and one
/// last-level cache where they fit, the best ranked first (see the module's order), whole
/// cores with the work's siblings idle unless `choice.share_core`.
pub fn choose(model: &HostModel, choice: &Choice) -> Result<Layout, AssessError> {
    let count = choice.count;
    let online = &model.cpus.online;
    let available = online.len().saturating_sub(1);
    if count as usize > available {
        return Err(invalid(format!(
            "--cpus {count}: this machine has {} online and the system partition needs at least one, so at most {available} can be isolated — ask for fewer",
            tame_rt::plural::count(online.len() as u64, "CPU", "CPUs")
        )));
    }
    let r = Ranker::new(model, choice.activity);
    let whole = if choice.share_core {
        None
    } else {
        place(&r, count as usize, Mode::WholeCores)
    };
    let (mode, fell_back) = match whole {
        Some(_) => (Mode::WholeCores, false),
        None => (Mode::Share, !choice.share_core),
    };
    let (picked, placement) = match whole {
        Some(w) => w,
        None => place(&r, count as usize, Mode::Share).ok_or_else(|| {
            invalid(format!(
                "--cpus {count}: the CPUs of this machine's topology do not make room for {count} — ask for fewer"
            ))
        })?,
    };
    let chosen = picked.isolated.clone();
    let system = online.difference(&chosen);
    let mut reasons = boot_reasons(model, &picked.work, count);
    reasons.extend(penalty_reasons(model, &chosen, &system));
    reasons.extend(placement);
    reasons.extend(smt_reasons(model, &picked, count, mode, fell_back));
    reasons.extend(rate_reasons(&r, choice.activity, &picked));
    let mut rt = PartitionSpec::new(PARTITION, chosen.clone(), Role::Isolated);
    if let Some(node) = local_memory(model, &chosen) {
        rt = rt.with_mems(CpuList::from_cpus([node]));
    }
    if cpuidle_driver(model).is_some() {
        rt = rt.with_idle("poll");
    }
    let spec = Spec::builder()
        .partition(PartitionSpec::new("system", system.clone(), Role::System))
        .partition(rt)
        .build();
    Ok(Layout {
        partition: PARTITION.to_string(),
        spec_text: generated_text(&spec, count, &picked),
        isolated: chosen,
        work_cpus: picked.work,
        system,
        reasons,
        warnings: planned_warnings(model, &spec, "the generated spec")?,
        spec,
    })
}

/// The text of a generated spec, as the user sees it (saved as spec.toml) and the journal
/// notes it: a comment saying what it is for, then the spec.
fn generated_text(spec: &Spec, count: u32, p: &Picked) -> String {
    let idle = p.isolated.difference(&p.work);
    let what = if idle.is_empty() {
        format!(
            "# {} for the time-critical work, the rest for everything else.",
            tame_rt::plural::count(u64::from(count), "isolated CPU", "isolated CPUs")
        )
    } else {
        format!(
            "# {}: the time-critical work on {}, their SMT {} {idle} left idle; the rest for everything else.",
            tame_rt::plural::count(p.isolated.len() as u64, "isolated CPU", "isolated CPUs"),
            p.work,
            tame_rt::plural::word(idle.len() as u64, "sibling", "siblings")
        )
    };
    format!("{what}\n{}", spec.to_toml())
}

/// The user's own spec (`--spec FILE`): its first isolated partition is measured.
pub fn from_spec(model: &HostModel, name: &str, text: &str) -> Result<Layout, AssessError> {
    let spec = Spec::parse(name, text)
        .map_err(|e| invalid(format!("{e} — correct the spec and run again")))?;
    let rt = spec
        .partitions
        .iter()
        .find(|p| p.role == Role::Isolated)
        .ok_or_else(|| {
            invalid(format!(
                "{name} has no isolated partition — assess measures the work on one; add a partition with role = \"isolated\""
            ))
        })?;
    Ok(Layout {
        partition: rt.name.clone(),
        isolated: rt.cpus.clone(),
        work_cpus: rt.cpus.clone(),
        system: spec.cpus_of(Role::System),
        reasons: vec![format!("the CPUs of partition {:?} in {name}", rt.name)],
        spec_text: text.to_string(),
        warnings: planned_warnings(model, &spec, name)?,
        spec,
    })
}

/// Plan the spec (which validates it against the host; nothing is written) for its warnings.
fn planned_warnings(
    model: &HostModel,
    spec: &Spec,
    name: &str,
) -> Result<Vec<String>, AssessError> {
    let plan = tame_partition::plan(spec, model)
        .map_err(|e| invalid(format!("{name} cannot be applied here: {e}")))?;
    Ok(plan.warnings)
}

#[cfg(test)]
mod tests;
