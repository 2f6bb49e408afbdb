//! The whole machine as one serialisable model: what every later capability
//! (check, partitions, bench) starts from.

use serde::{Deserialize, Serialize};

use crate::accounts::Accounts;
use crate::cgroup::CgroupModel;
use crate::cpu::CpuTopology;
use crate::error::Unreadable;
use crate::irq::IrqModel;
use crate::kernel::KernelInfo;
use crate::knobs::Knobs;
use crate::memory::Memory;
use crate::mounts::{mounts_of_type, read_mounts, Mount};
use crate::power::Power;
use crate::process::Processes;
use crate::reader::Reader;
use crate::sched::SchedTimers;
use crate::tracing::Tracing;
use crate::virt::Virtualisation;
use crate::{CpuList, Root};

/// Bumped when a field changes meaning or is removed.
impl crate::Document for HostModel {
    const SCHEMA: crate::Schema = crate::schema!(Number "tame.topology", 1);
}

/// The IRQs as a reader of their own found them.
struct IrqsRead {
    irqs: IrqModel,
    problems: Vec<Unreadable>,
    knobs: Knobs,
}

/// Read the IRQs with a reader of their own (on a thread of their own in [`HostModel::read`]).
fn read_irqs(root: &Root) -> IrqsRead {
    let mut r = Reader::new(root);
    let irqs = IrqModel::read(&mut r);
    IrqsRead {
        irqs,
        problems: r.problems,
        knobs: r.knobs,
    }
}

/// Everything the host layer knows about the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub schema: u32,
    pub cpus: CpuTopology,
    pub irqs: IrqModel,
    pub cgroups: CgroupModel,
    pub kernel: KernelInfo,
    pub sched: SchedTimers,
    pub memory: Memory,
    pub power: Power,
    pub tracing: Tracing,
    pub processes: Processes,
    pub virt: Virtualisation,
    /// The mount table (cgroups, tracefs, resctrl and debugfs are found here).
    pub mounts: Vec<Mount>,
    /// User and group ids by name.
    #[serde(default)]
    pub accounts: Accounts,
    /// The files tame may write, as they read now (a plan's old values).
    #[serde(default)]
    pub knobs: Knobs,
    /// Files that were expected but could not be read or understood.
    pub problems: Vec<Unreadable>,
}

impl HostModel {
    /// Read the machine below `root`. Never fails: what cannot be read is in `problems`.
    ///
    /// The IRQs (on a big machine a fifth of the files, and a /proc/interrupts of tens
    /// of MB) are read by a second thread while this one reads the rest. No other part
    /// needs them, and what they found (problems, knobs) is put where a reading in one
    /// thread puts it, so the model is the same either way; it is read in one thread
    /// where no second one can be started.
    pub fn read(root: &Root) -> Self {
        std::thread::scope(|s| {
            let beside = std::thread::Builder::new()
                .name("tame-read-irqs".into())
                .spawn_scoped(s, || read_irqs(root));
            match beside {
                Ok(t) => Self::read_with(root, || {
                    t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
                }),
                Err(_) => Self::read_with(root, || read_irqs(root)),
            }
        })
    }

    /// [`HostModel::read`], the IRQs from `irqs` (called once everything else is read),
    /// their problems and knobs put where a reading in turn would have put them.
    fn read_with(root: &Root, irqs: impl FnOnce() -> IrqsRead) -> Self {
        let mut r = Reader::new(root);
        let mounts = read_mounts(&mut r);
        let debugfs_mounted = mounts_of_type(&mounts, "debugfs").next().is_some();
        let cpus = CpuTopology::read(&mut r);
        let last_cpu = cpus.possible.iter().last();
        let cpu_ids: Vec<u32> = cpus.cpus.iter().map(|c| c.id).collect();
        let kernel = KernelInfo::read(&mut r, last_cpu, debugfs_mounted);
        let sched = SchedTimers::read(&mut r, debugfs_mounted);
        let virt = Virtualisation::read(&mut r, &cpus.flags, &sched.clocksources_available);
        // The IRQs' turn: what was found so far is put aside for theirs to follow.
        let (mut problems, mut knobs) = (
            std::mem::take(&mut r.problems),
            std::mem::take(&mut r.knobs),
        );
        let cgroups = CgroupModel::from_mounts(&mut r, &mounts);
        let memory = Memory::read(&mut r);
        let power = Power::read(&mut r, &cpu_ids);
        let tracing = Tracing::read(&mut r, &mounts, &cpus.flags);
        let processes = Processes::read(&mut r);
        let accounts = Accounts::read(&mut r);
        crate::knobs::read_extra(&mut r, power.cpufreq.iter().map(|c| c.cpu));
        let theirs = irqs();
        problems.extend(theirs.problems);
        problems.append(&mut r.problems);
        knobs.take_later(theirs.knobs);
        knobs.take_later(std::mem::take(&mut r.knobs));
        let irqs = theirs.irqs;
        HostModel {
            schema: <HostModel as crate::Document>::SCHEMA.version,
            cpus,
            irqs,
            cgroups,
            kernel,
            sched,
            memory,
            power,
            tracing,
            processes,
            virt,
            mounts,
            accounts,
            knobs,
            problems,
        }
    }

    /// Highest possible CPU + 1: the width of the kernel's CPU masks.
    pub fn nr_cpu_ids(&self) -> u32 {
        let possible = if self.cpus.possible.is_empty() {
            &self.cpus.online
        } else {
            &self.cpus.possible
        };
        possible.iter().last().map_or(1, |c| c + 1)
    }

    /// NUMA nodes that have memory; node 0 on a kernel without NUMA.
    pub fn nodes_with_memory(&self) -> CpuList {
        if self.cpus.nodes.is_empty() {
            return CpuList::from_cpus([0]);
        }
        self.cpus
            .nodes
            .iter()
            .filter(|n| n.mem_total_kib.unwrap_or(0) > 0)
            .map(|n| n.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading the IRQs in a second thread gives the model one thread gives, problems in
    /// the same order and knobs included.
    #[test]
    fn the_irqs_read_beside_the_rest_make_the_same_model() {
        let dir = tempfile::tempdir().unwrap();
        tame_testing::synthetic::SyntheticHost::two_socket_smt()
            .write(dir.path())
            .unwrap();
        // A problem before the IRQs (the CPUs), among them, and after them (power).
        let put = |p: &str, text: &str| std::fs::write(dir.path().join(p), text).unwrap();
        put("sys/devices/system/cpu/cpu3/topology/core_id", "three\n");
        put("proc/irq/30/node", "near\n");
        put(
            "sys/devices/system/cpu/cpu5/cpuidle/state2/latency",
            "soon\n",
        );
        let root = Root::new(dir.path());
        let beside = HostModel::read(&root);
        let alone = HostModel::read_with(&root, || read_irqs(&root));
        assert_eq!(beside, alone);
        let paths: Vec<String> = beside.problems.iter().map(|p| p.path.clone()).collect();
        let at = |needle: &str| paths.iter().position(|p| p.ends_with(needle)).unwrap();
        assert!(at("cpu3/topology/core_id") < at("irq/30/node"), "{paths:?}");
        assert!(at("irq/30/node") < at("state2/latency"), "{paths:?}");
        assert!(beside.knobs.exists("/proc/irq/30/smp_affinity_list"));
    }
}
