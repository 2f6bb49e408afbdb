//! What both exports derive from the spec and the host: the CPU sets, the NUMA nodes
//! each partition lies in, the topology policy that keeps them, and the notes on what
//! no Kubernetes node setting expresses.

use tame_host::{CpuList, HostModel};
use tame_partition::spec::{IdleLimit, PartitionSpec, Role, Spec};

pub(crate) struct Layout<'a> {
    pub spec: &'a Spec,
    pub host: &'a HostModel,
    /// The system partition (validation guarantees there is one where partitions exist).
    pub system: Option<&'a PartitionSpec>,
    pub system_cpus: CpuList,
    /// Isolated and shared partitions together: Kubernetes' one pool of exclusive CPUs.
    pub exclusive_cpus: CpuList,
    /// Online CPUs in no partition.
    pub unassigned: CpuList,
}

impl<'a> Layout<'a> {
    pub fn new(spec: &'a Spec, host: &'a HostModel) -> Self {
        let system_cpus = spec.cpus_of(Role::System);
        let exclusive_cpus = spec
            .cpus_of(Role::Isolated)
            .union(&spec.cpus_of(Role::Shared));
        let unassigned = host
            .cpus
            .online
            .difference(&system_cpus.union(&exclusive_cpus));
        Layout {
            spec,
            host,
            system: spec.system(),
            system_cpus,
            exclusive_cpus,
            unassigned,
        }
    }

    fn non_system(&self) -> impl Iterator<Item = &'a PartitionSpec> {
        self.spec
            .partitions
            .iter()
            .filter(|p| p.role != Role::System)
    }

    fn isolated(&self) -> impl Iterator<Item = &'a PartitionSpec> {
        self.spec
            .partitions
            .iter()
            .filter(|p| p.role == Role::Isolated)
    }

    /// NUMA nodes of a partition's CPUs.
    fn cpu_nodes(&self, p: &PartitionSpec) -> CpuList {
        p.cpus
            .iter()
            .filter_map(|c| self.host.cpus.cpu(c).and_then(|c| c.node))
            .collect()
    }

    /// NUMA nodes of a partition: those of its CPUs, and its `mems`.
    fn nodes_of(&self, p: &PartitionSpec) -> CpuList {
        self.cpu_nodes(p)
            .union(p.mems.as_ref().unwrap_or(&CpuList::new()))
    }

    /// `(policy, why)` for the topology manager (kubelet and PerformanceProfile alike).
    pub fn topology_policy(&self) -> (&'static str, String) {
        let isolated: Vec<&PartitionSpec> = self.isolated().collect();
        if isolated.is_empty() {
            return (
                "best-effort",
                "no isolated partition, so nothing must stay on one NUMA node: best-effort prefers aligned placements without refusing pods".into(),
            );
        }
        if self.host.cpus.nodes.len() <= 1 {
            return (
                "single-numa-node",
                "this host has one NUMA node, so every partition lies in one".into(),
            );
        }
        // Shared partitions count too: their CPUs are exclusive CPUs to the kubelet, and a
        // Guaranteed pod as wide as one that spans nodes is refused by single-numa-node.
        let spanning: Vec<String> = self
            .non_system()
            .filter(|p| self.nodes_of(p).len() > 1)
            .map(|p| format!("{:?} (nodes {})", p.name, self.nodes_of(p)))
            .collect();
        if spanning.is_empty() {
            let each: Vec<String> = self
                .non_system()
                .map(|p| format!("{:?} node {}", p.name, self.nodes_of(p)))
                .collect();
            return (
                "single-numa-node",
                format!(
                    "every isolated and shared partition lies in one NUMA node ({}): a pod's exclusive CPUs and memory then come from one node, as the spec keeps them",
                    each.join(", ")
                ),
            );
        }
        (
            "restricted",
            format!(
                "partition {} spans NUMA nodes, so single-numa-node would refuse a pod as wide as it; restricted still refuses any placement wider than the narrowest that fits",
                spanning.join(", ")
            ),
        )
    }

    /// Whether every non-system partition takes whole cores; `None` on a host without
    /// SMT siblings (the question does not arise).
    pub fn whole_cores(&self) -> Option<bool> {
        let smt = self
            .host
            .cpus
            .online
            .iter()
            .any(|c| !self.host.cpus.online_siblings(c).is_empty());
        if !smt {
            return None;
        }
        Some(self.non_system().all(|p| {
            p.cpus
                .iter()
                .all(|c| self.host.cpus.online_siblings(c).is_subset(&p.cpus))
        }))
    }

    /// The NUMA nodes with memory where the system partition runs: where the kubelet's
    /// memory reservation for the system belongs.
    pub fn system_memory_nodes(&self) -> CpuList {
        let with_memory = self.host.nodes_with_memory();
        let nodes = match self.system {
            Some(s) => match &s.mems {
                Some(m) => m.clone(),
                None => self.nodes_of(s),
            },
            None => CpuList::new(),
        }
        .intersection(&with_memory);
        if nodes.is_empty() {
            // No NUMA information for the system CPUs: the first node with memory.
            with_memory.iter().take(1).collect()
        } else {
            nodes
        }
    }

    /// Whether any partition sets `mems` (the memory manager is what comes closest).
    pub fn sets_mems(&self) -> bool {
        self.spec.partitions.iter().any(|p| p.mems.is_some())
    }

    /// Whether IRQs stay on the system partition alone (no other partition accepts them).
    pub fn irqs_on_system_only(&self) -> bool {
        self.non_system().all(|p| !p.accepts_irqs())
    }

    /// Whether every isolated partition polls when idle.
    pub fn all_isolated_poll(&self) -> bool {
        let mut isolated = self.isolated().peekable();
        isolated.peek().is_some()
            && isolated.all(|p| matches!(p.idle_limit(), Ok(Some(IdleLimit::Poll))))
    }

    /// What the spec says that no KubeletConfiguration or PerformanceProfile field
    /// expresses, one sentence each (both exports list these).
    pub fn common_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let non_system: Vec<&PartitionSpec> = self.non_system().collect();
        if !self.exclusive_cpus.is_empty() {
            notes.push(format!(
                "the exclusive CPUs ({}) are exclusive only once claimed: the kubelet runs every pod that is not Guaranteed with integer CPUs on all CPUs no such pod holds yet, where tame keeps ordinary tasks off isolated CPUs — give the real-time pods integer CPU requests equal to their limits",
                self.exclusive_cpus
            ));
        }
        if non_system.len() > 1 {
            let names: Vec<String> = non_system
                .iter()
                .map(|p| format!("{:?} ({})", p.name, p.cpus))
                .collect();
            notes.push(format!(
                "partitions {} become one pool: the kubelet hands any pod exclusive CPUs from any of them, with no per-partition pool — keep one partition per node pool, or place pods with the topology manager and node labels",
                names.join(", ")
            ));
        }
        for p in self
            .spec
            .partitions
            .iter()
            .filter(|p| p.role == Role::Shared)
        {
            notes.push(format!(
                "partition {:?} is shared (load-balanced among its own CPUs); Kubernetes knows only exclusive CPUs per container — a pod with several integer CPUs balances among them",
                p.name
            ));
        }
        for p in &non_system {
            // mems that are the nodes of the partition's own CPUs are what the memory
            // manager gives a pod on those CPUs; other nodes cannot be asked for.
            if let Some(m) = p.mems.as_ref().filter(|m| **m != self.cpu_nodes(p)) {
                notes.push(format!(
                    "partition {:?}: mems = \"{m}\" is not the NUMA node of its CPUs ({}) — the memory manager takes a pod's memory from its CPUs' nodes; no setting binds a CPU set to other memory nodes",
                    p.name,
                    self.cpu_nodes(p)
                ));
            }
            if p.accepts_irqs() {
                notes.push(format!(
                    "partition {:?}: irqs = true — device IRQs are allowed on the exclusive CPUs; Kubernetes has no per-CPU-set IRQ choice (CRI-O's pod annotation irq-load-balancing.crio.io decides per pod)",
                    p.name
                ));
            }
            if let Some(idle) = &p.idle {
                notes.push(format!(
                    "partition {:?}: idle = {idle:?} — no kubelet field limits idle states per CPU set (CRI-O's pod annotation cpu-c-states.crio.io does, per pod)",
                    p.name
                ));
            }
            if let Some(g) = &p.governor {
                notes.push(format!(
                    "partition {:?}: governor = {g:?} — no kubelet field sets a cpufreq governor per CPU set (CRI-O's pod annotation cpu-freq-governor.crio.io does, per pod)",
                    p.name
                ));
            }
            if let Some(on) = p.watchdog {
                notes.push(format!(
                    "partition {:?}: watchdog = {on} — no kubelet or PerformanceProfile field sets kernel.watchdog_cpumask: set it with a Tuned profile or MachineConfig (or tame apply on the node); the boot parameter nowatchdog turns the watchdogs off everywhere",
                    p.name
                ));
            }
        }
        for p in &self.spec.partitions {
            if p.cache_ways.is_some() || p.mem_bandwidth.is_some() {
                notes.push(format!(
                    "partition {:?}: cache_ways/mem_bandwidth (resctrl) — no kubelet or PerformanceProfile field; the container runtime's RDT classes (CRI-O, containerd) assign resctrl groups per pod",
                    p.name
                ));
            }
            if p.user.is_some() || p.group.is_some() {
                notes.push(format!(
                    "partition {:?}: user/group — who may place tasks is a pod's securityContext and RBAC in Kubernetes, not a node setting",
                    p.name
                ));
            }
        }
        if let Some(v) = self.spec.rt_runtime_us {
            notes.push(format!(
                "rt_runtime_us = {v} — the sysctl kernel.sched_rt_runtime_us is no kubelet or PerformanceProfile field: set it with a Tuned profile or MachineConfig (or tame apply on the node)"
            ));
        }
        if let Some(v) = self.spec.timer_migration {
            notes.push(format!(
                "timer_migration = {v} — the sysctl kernel.timer_migration is no kubelet or PerformanceProfile field: set it with a Tuned profile or MachineConfig (or tame apply on the node)"
            ));
        }
        if !self.unassigned.is_empty() {
            notes.push(format!(
                "CPUs {} belong to no partition: tame leaves them idle, the kubelet counts them as allocatable",
                self.unassigned
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_setting_is_said_to_need_another_tool() {
        let host = HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            "rt-8cpu",
        )));
        let text = "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n[[partition]]\nname = \"rt\"\ncpus = \"2-7\"\nrole = \"isolated\"\nwatchdog = false\n";
        let spec = Spec::parse("t", text).unwrap();
        let notes = Layout::new(&spec, &host).common_notes();
        assert!(
            notes.iter().any(|n| n.starts_with(
                "partition \"rt\": watchdog = false — no kubelet or PerformanceProfile field sets kernel.watchdog_cpumask"
            )),
            "{notes:#?}"
        );
    }
}
