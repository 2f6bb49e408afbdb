use serde::{Deserialize, Serialize};
use tame_host::{CpuList, HostModel};

/// The CPUs a check is about, and the rest (housekeeping).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub cpus: CpuList,
    /// Online CPUs not in `cpus`: where IRQs, threads and timers should go. Empty when
    /// the checked CPUs are every online CPU (finding `cpus.housekeeping`).
    pub housekeeping: CpuList,
    /// Why these CPUs: asked with --cpus, isolated at boot, or the default.
    pub reason: String,
}

impl Target {
    /// CPUs the user asked about (assumed valid: the caller checks they are online).
    pub fn asked(model: &HostModel, cpus: CpuList) -> Self {
        Self::build(model, cpus, "asked with --cpus")
    }

    /// The isolated CPUs of the spec `tame apply` applied (what `tame status` shows).
    pub fn applied(model: &HostModel, cpus: CpuList) -> Self {
        Self::build(
            model,
            cpus,
            "the isolated partitions applied with tame apply (see tame status); choose with --cpus",
        )
    }

    /// Without --cpus: the CPUs isolated at boot (isolcpus, nohz_full) or at run time
    /// by an isolated cpuset partition (see [`crate::isolation`]); else every online CPU but the first, which a
    /// partitioned machine keeps for housekeeping.
    pub fn default_for(model: &HostModel) -> Self {
        let online = &model.cpus.online;
        let isolated = boot_isolated(model).intersection(online);
        if !isolated.is_empty() {
            return Self::build(model, isolated, "isolated at boot or by a cpuset partition");
        }
        if online.len() > 1 {
            let first = CpuList::from_cpus(online.first());
            return Self::build(
                model,
                online.difference(&first),
                "every online CPU but the first (kept for housekeeping); choose with --cpus",
            );
        }
        Self::build(model, online.clone(), "the only online CPU")
    }

    fn build(model: &HostModel, cpus: CpuList, reason: &str) -> Self {
        // No stand-in when nothing is left: a checked CPU named as housekeeping
        // would turn every fix into one that moves work onto a checked CPU.
        Target {
            housekeeping: model.cpus.online.difference(&cpus),
            cpus,
            reason: reason.to_string(),
        }
    }

    /// What to do when the checked CPUs leave none for housekeeping: check fewer
    /// (the first kept out, as without --cpus), or, on a one-CPU machine, add one.
    pub fn leave_one_out(&self) -> String {
        let rest = self.cpus.difference(&CpuList::from_cpus(self.cpus.first()));
        if rest.is_empty() {
            format!(
                "real-time isolation needs a CPU for housekeeping besides CPU {}: give the machine a second CPU",
                self.cpus
            )
        } else {
            format!("leave at least one online CPU out of the checked ones for housekeeping, e.g. --cpus {rest}")
        }
    }
}

/// CPUs isolated by the boot line or, at run time, by isolated cpuset partitions
/// (tame's on cgroup v1 or v2, any valid isolated v2 partition).
pub fn boot_isolated(model: &HostModel) -> CpuList {
    cmdline_isolated(model).union(&crate::isolation::run_time_cpus(model))
}

/// CPUs named by `isolcpus=` or `nohz_full=` on the kernel command line.
pub fn cmdline_isolated(model: &HostModel) -> CpuList {
    let b = &model.kernel.boot;
    let mut set = CpuList::new();
    if let Some(i) = &b.isolcpus {
        set = set.union(&i.cpus);
    }
    if let Some(n) = &b.nohz_full {
        set = set.union(n);
    }
    set
}
