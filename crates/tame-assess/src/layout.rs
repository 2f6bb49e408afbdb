//! Which CPUs to isolate, and the partition spec that does it. The choice uses what the
//! planner warns about: a kernel-managed IRQ cannot leave its CPU at run time (it would
//! keep interrupting the work), CPU 0 carries housekeeping the kernel cannot move, and
//! SMT siblings split between partitions compete for one core.

use serde::{Deserialize, Serialize};
use tame_host::{CpuList, HostModel};
use tame_partition::{PartitionSpec, Role, Spec};

use crate::error::{invalid, AssessError};

/// The name of the isolated partition assess generates.
pub const PARTITION: &str = "rt";
/// First line of every spec text assess applies: `tame status` shows it, and the next
/// assess knows a journal it finds is its own (left by a killed run) and reverts it.
pub const MARKER: &str = "# applied by tame assess";

/// The partitions to measure in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// The isolated partition measured in, and its CPUs.
    pub partition: String,
    pub isolated: CpuList,
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

/// The cpuidle driver, if there is one (the kernel prints `none` when there is not): without
/// one, idle is the architecture's halt and `idle = "poll"` changes nothing.
pub fn cpuidle_driver(model: &HostModel) -> Option<String> {
    model
        .power
        .cpuidle_driver
        .clone()
        .filter(|d| !d.is_empty() && d != "none")
}

/// The kernel-managed IRQs that fire on `cpu`: they cannot leave it at run time.
fn managed_irqs(model: &HostModel, cpu: u32) -> Vec<String> {
    model
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed && i.fires_on().is_some_and(|c| c.contains(cpu)))
        .map(|i| format!("IRQ {} ({})", i.number, i.name))
        .collect()
}

/// How poor a choice `cpu` is to isolate: a kernel-managed IRQ there would keep
/// interrupting the work (worst), CPU 0 carries housekeeping the kernel cannot move.
fn penalty(model: &HostModel, cpu: u32) -> u32 {
    let managed = if managed_irqs(model, cpu).is_empty() {
        0
    } else {
        4
    };
    managed + if cpu == 0 { 2 } else { 0 }
}

/// Why the CPUs the penalties speak against went where they went.
fn penalty_reasons(model: &HostModel, chosen: &CpuList, system: &CpuList) -> Vec<String> {
    let with_managed = |cpus: &CpuList| {
        CpuList::from_cpus(cpus.iter().filter(|&c| !managed_irqs(model, c).is_empty()))
    };
    let (kept, isolated) = (with_managed(system), with_managed(chosen));
    let mut reasons = Vec::new();
    // Kept back for its managed IRQs only when the isolated CPUs have none.
    if isolated.is_empty() && !kept.is_empty() {
        reasons.push(if kept.len() == 1 {
            format!(
                "CPU {kept} stays with the system: kernel-managed {} fire(s) there and cannot move at run time",
                managed_irqs(model, kept.first().unwrap_or(0)).join(", ")
            )
        } else {
            format!("CPUs {kept} stay with the system: kernel-managed IRQs fire there and cannot move at run time")
        });
    }
    if system.contains(0) {
        reasons.push("CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string());
    }
    if !isolated.is_empty() {
        let which = if isolated.len() == 1 {
            format!(
                "CPU {isolated} is isolated although kernel-managed {} fire(s) there",
                managed_irqs(model, isolated.first().unwrap_or(0)).join(", ")
            )
        } else {
            format!("CPUs {isolated} are isolated although kernel-managed IRQs fire there")
        };
        reasons.push(format!(
            "{which}: no CPU without one was left, so they will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)"
        ));
    }
    if chosen.contains(0) {
        reasons.push("CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string());
    }
    reasons
}

/// Choose `count` CPUs to isolate: on one NUMA node where they fit, the least
/// disturbed first (then the highest, keeping low CPUs for housekeeping), whole cores
/// together where the count allows.
pub fn choose(model: &HostModel, count: u32) -> Result<Layout, AssessError> {
    let online = &model.cpus.online;
    let available = online.len().saturating_sub(1);
    if count as usize > available {
        return Err(invalid(format!(
            "--cpus {count}: this machine has {} online CPU(s) and the system partition needs at least one, so at most {available} can be isolated — ask for fewer",
            online.len()
        )));
    }
    let (chosen, placement) = place(model, count as usize);
    let system = online.difference(&chosen);
    let mut reasons = penalty_reasons(model, &chosen, &system);
    reasons.extend(placement);
    reasons.extend(smt_reasons(model, &chosen, count));
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
        isolated: chosen,
        system,
        reasons,
        spec_text: generated_text(&spec, count),
        warnings: planned_warnings(model, &spec, "the generated spec")?,
        spec,
    })
}

/// The text of a generated spec, as the user sees it (saved as spec.toml) and the journal
/// notes it: a comment saying what it is for, then the spec.
fn generated_text(spec: &Spec, count: u32) -> String {
    format!(
        "# {count} isolated CPU(s) for the time-critical work, the rest for everything else.\n{}",
        spec.to_toml()
    )
}

/// The `count` best CPUs of `pool`: the least disturbed first, then the highest; a
/// CPU's whole core (its online SMT siblings in the pool) where it still fits.
fn pick(model: &HostModel, pool: &CpuList, count: usize) -> CpuList {
    let online = &model.cpus.online;
    let mut ranked: Vec<(u32, u32)> = pool.iter().map(|cpu| (penalty(model, cpu), cpu)).collect();
    ranked.sort_by_key(|&(penalty, cpu)| (penalty, std::cmp::Reverse(cpu)));
    let mut chosen = CpuList::new();
    for &(_, cpu) in &ranked {
        if chosen.len() >= count {
            break;
        }
        if chosen.contains(cpu) {
            continue;
        }
        let core = model
            .cpus
            .cpu(cpu)
            .map(|c| c.thread_siblings.intersection(online).intersection(pool))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| CpuList::from_cpus([cpu]));
        let with_core = chosen.union(&core);
        chosen = if with_core.len() <= count {
            with_core
        } else {
            chosen.union(&CpuList::from_cpus([cpu]))
        };
    }
    chosen
}

/// The one node all of `cpus` are on, when the machine has several and that node has
/// memory: the partition's memory is then bound to it.
fn local_memory(model: &HostModel, cpus: &CpuList) -> Option<u32> {
    let nodes = nodes(model);
    if nodes.len() < 2 {
        return None;
    }
    let (id, _) = nodes
        .iter()
        .find(|(_, node_cpus)| cpus.difference(node_cpus).is_empty())?;
    model.nodes_with_memory().contains(*id).then_some(*id)
}

/// The online CPUs of each NUMA node that has any.
fn nodes(model: &HostModel) -> Vec<(u32, CpuList)> {
    model
        .cpus
        .nodes
        .iter()
        .map(|n| (n.id, n.cpus.intersection(&model.cpus.online)))
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect()
}

/// Where the isolated CPUs go, with why when the machine has more than one NUMA node:
/// all on one node where they fit (memory and last-level cache shared, nothing remote),
/// preferring a node other than the housekeeping CPU's; else spread, most free first.
fn place(model: &HostModel, count: usize) -> (CpuList, Vec<String>) {
    let online = &model.cpus.online;
    let nodes = nodes(model);
    if nodes.len() < 2 {
        return (pick(model, online, count), Vec::new());
    }
    // The CPU the system keeps for housekeeping: CPU 0 (the first online one if it is not).
    let keeper = if online.contains(0) {
        0
    } else {
        online.first().unwrap_or(0)
    };
    let keep = CpuList::from_cpus([keeper]);
    let home = nodes
        .iter()
        .find(|(_, cpus)| cpus.contains(keeper))
        .map(|(id, _)| *id);
    // Each node: its id, its online CPUs, and those it can give (the keeper stays).
    let free: Vec<(u32, &CpuList, CpuList)> = nodes
        .iter()
        .map(|(id, cpus)| (*id, cpus, cpus.difference(&keep)))
        .collect();
    let cost = |cpus: &CpuList| cpus.iter().map(|c| penalty(model, c)).sum::<u32>();
    let best = free
        .iter()
        .filter(|(_, _, spare)| spare.len() >= count)
        .map(|(id, cpus, spare)| (*id, *cpus, spare.len(), pick(model, spare, count)))
        .min_by_key(|(id, _, spare, chosen)| {
            (
                cost(chosen),
                Some(*id) == home,
                std::cmp::Reverse(*spare),
                *id,
            )
        });
    if let Some((id, node_cpus, _, chosen)) = best {
        let why = if Some(id) != home {
            match home {
                Some(h) => format!("node {h} keeps CPU {keeper} and the housekeeping"),
                None => format!("CPU {keeper} stays with the system for housekeeping"),
            }
        } else if free
            .iter()
            .any(|(n, _, spare)| Some(*n) != home && spare.len() >= count)
        {
            format!("the node of CPU {keeper}, whose CPUs carry fewer kernel-managed IRQs than the other nodes'")
        } else {
            format!("the node of CPU {keeper}, as no other node has {count} CPU(s)")
        };
        let reason = format!(
            "NUMA: all {count} isolated CPU(s) on node {id} (CPUs {node_cpus}), so they share its last-level cache and the partition's memory is bound to it (mems); {why}"
        );
        return (chosen, vec![reason]);
    }
    // No node holds them all: spread over the nodes with the most CPUs to spare, and say so.
    let mut order: Vec<(u32, CpuList)> =
        free.into_iter().map(|(id, _, spare)| (id, spare)).collect();
    order.sort_by_key(|(id, spare)| (std::cmp::Reverse(spare.len()), Some(*id) == home, *id));
    let mut chosen = CpuList::new();
    let mut used = Vec::new();
    for (id, spare) in &order {
        let left = count.saturating_sub(chosen.len());
        if left == 0 {
            break;
        }
        chosen = chosen.union(&pick(model, spare, left.min(spare.len())));
        used.push(id.to_string());
    }
    // CPUs the nodes do not list (a partial topology) make up the rest.
    if chosen.len() < count {
        let rest = online.difference(&chosen).difference(&keep);
        chosen = chosen.union(&pick(model, &rest, count - chosen.len()));
    }
    let most_free = order.first().map_or(0, |(_, spare)| spare.len());
    let most = order.first().map_or(0, |(id, _)| *id);
    let reason = format!(
        "NUMA: --cpus {count} does not fit one node (node {most} has the most CPUs to spare, {most_free}): the partition spans nodes {}, so the work may reach memory and caches on another node, which is slower — ask for at most {most_free} to keep it on one",
        used.join(",")
    );
    (chosen, vec![reason])
}

/// What isolating `chosen` does to SMT cores: a sibling left with the system shares
/// the core with the work; whole cores keep system work off them.
fn smt_reasons(model: &HostModel, chosen: &CpuList, count: u32) -> Vec<String> {
    let mut split = CpuList::new();
    let mut left = CpuList::new();
    let mut whole = CpuList::new();
    for cpu in chosen.iter() {
        let siblings = model.cpus.online_siblings(cpu);
        if siblings.is_empty() {
            continue;
        }
        let outside = siblings.difference(chosen);
        if outside.is_empty() {
            whole.insert(cpu);
        } else {
            split.insert(cpu);
            left = left.union(&outside);
        }
    }
    let mut reasons = Vec::new();
    if !split.is_empty() {
        reasons.push(format!(
            "SMT: the sibling(s) {left} of isolated CPU(s) {split} stay with the system: --cpus {count} cannot take whole cores, so system work on {left} shares the core (execution units, L1/L2 caches) with the work — --cpus {} isolates whole cores",
            count as usize + left.len()
        ));
    }
    if !whole.is_empty() {
        reasons.push(format!(
            "SMT: CPUs {whole} are whole cores (siblings isolated together), so no system work shares their cores; siblings still compete with each other — one real-time thread per core, its sibling left idle, interferes least"
        ));
    }
    reasons
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
mod tests {
    use super::*;

    fn model(fixture: &str) -> HostModel {
        HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            fixture,
        )))
    }

    #[test]
    fn a_cpu_with_a_managed_irq_stays_with_the_system() {
        // dev-vm: a 2-CPU VM whose disk queue IRQ is kernel-managed on CPU 1.
        let m = model("dev-vm");
        let l = choose(&m, 1).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.system.to_string()),
            ("0".into(), "1".into())
        );
        assert!(
            l.reasons[0].starts_with("CPU 1 stays with the system: kernel-managed IRQ"),
            "{:?}",
            l.reasons
        );
        assert!(
            l.spec_text.contains("cpus = \"0\"\nrole = \"isolated\""),
            "{}",
            l.spec_text
        );
        assert!(
            l.warnings.iter().any(|w| w.contains("isolates CPU 0")),
            "{:?}",
            l.warnings
        );
    }

    #[test]
    fn cpu_0_and_low_cpus_stay_with_the_system_on_a_quiet_host() {
        let m = model("rt-8cpu");
        let l = choose(&m, 2).unwrap();
        assert!(!l.isolated.contains(0), "{}", l.isolated);
        assert_eq!(l.isolated.len(), 2);
        assert_eq!(l.system.len() + 2, m.cpus.online.len());
    }

    /// The text assess wrote with `format!` before the spec was built typed: the view of
    /// the typed spec must read the same, byte for byte (saved as spec.toml, noted in the
    /// journal).
    fn text_as_formatted_before(l: &Layout, count: u32) -> String {
        let rt = &l.spec.partitions[1];
        let mems = rt
            .mems
            .as_ref()
            .map_or(String::new(), |n| format!("mems = \"{n}\"\n"));
        let idle = rt
            .idle
            .as_ref()
            .map_or(String::new(), |i| format!("idle = \"{i}\"\n"));
        format!(
            "# {count} isolated CPU(s) for the time-critical work, the rest for everything else.\n[[partition]]\nname = \"system\"\ncpus = \"{}\"\nrole = \"system\"\n\n[[partition]]\nname = \"{PARTITION}\"\ncpus = \"{}\"\nrole = \"isolated\"\n{mems}{idle}",
            l.system, l.isolated
        )
    }

    #[test]
    fn the_generated_spec_text_is_a_view_of_the_typed_spec() {
        let (_dir, numa) = two_sockets();
        for (m, count) in [(model("rt-8cpu"), 2), (model("dev-vm"), 1), (numa, 2)] {
            let l = choose(&m, count).unwrap();
            assert_eq!(l.spec_text, text_as_formatted_before(&l, count));
            assert_eq!(Spec::parse("t", &l.spec_text).unwrap(), l.spec);
        }
    }

    #[test]
    fn more_cpus_than_can_be_isolated_is_bad_input() {
        let e = choose(&model("dev-vm"), 2).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains("at most 1 can be isolated"), "{e}");
    }

    #[test]
    fn a_users_spec_must_validate_and_have_an_isolated_partition() {
        let m = model("dev-vm");
        let e = from_spec(
            &m,
            "s.toml",
            "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n",
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("no isolated partition"),
            "{e}"
        );
        let e = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0-7\"\nrole = \"system\"\n[[partition]]\nname = \"x\"\ncpus = \"9\"\nrole = \"isolated\"\n").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("cannot be applied here"),
            "{e}"
        );
        let l = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n[[partition]]\nname = \"loop\"\ncpus = \"1\"\nrole = \"isolated\"\n").unwrap();
        assert_eq!(
            (l.partition.as_str(), l.isolated.to_string()),
            ("loop", "1".into())
        );
    }

    /// The synthetic two-socket server (2 nodes × 12 cores × 2 threads) without its
    /// cgroup partitions.
    fn two_sockets() -> (tempfile::TempDir, HostModel) {
        let dir = tame_testing::scratch_dir("layout-");
        let mut h = tame_testing::synthetic::SyntheticHost::two_socket_smt();
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        h.write(dir.path()).unwrap();
        let m = HostModel::read(&tame_host::Root::new(dir.path()));
        (dir, m)
    }

    fn reason<'a>(l: &'a Layout, start: &str) -> &'a str {
        l.reasons
            .iter()
            .find(|r| r.starts_with(start))
            .unwrap_or_else(|| panic!("no reason {start:?} in {:#?}", l.reasons))
    }

    #[test]
    fn numa_the_isolated_cpus_share_a_node_away_from_cpu_0() {
        let (_dir, m) = two_sockets();
        // Node 0 holds CPUs 0-11,24-35, node 1 12-23,36-47.
        for (count, isolated) in [(1, "47"), (2, "23,47"), (24, "12-23,36-47")] {
            let l = choose(&m, count).unwrap();
            assert_eq!(l.isolated.to_string(), isolated);
            assert_eq!(
                reason(&l, "NUMA:"),
                format!("NUMA: all {count} isolated CPU(s) on node 1 (CPUs 12-23,36-47), so they share its last-level cache and the partition's memory is bound to it (mems); node 0 keeps CPU 0 and the housekeeping")
            );
            // The memory goes with them, and the spec still plans.
            assert!(
                l.spec_text.contains("role = \"isolated\"\nmems = \"1\"\n"),
                "{}",
                l.spec_text
            );
        }
    }

    #[test]
    fn numa_the_housekeeping_node_when_no_other_has_room() {
        let (_dir, mut m) = two_sockets();
        // Only CPUs 12 and 36 of node 1 online: 4 CPUs fit node 0 alone.
        let gone = CpuList::parse("13-23,37-47").unwrap();
        m.cpus.online = m.cpus.online.difference(&gone);
        let l = choose(&m, 4).unwrap();
        assert_eq!(l.isolated.to_string(), "10-11,34-35");
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: all 4 isolated CPU(s) on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, as no other node has 4 CPU(s)"
        );
        assert!(!l.isolated.contains(0));
    }

    #[test]
    fn numa_a_count_no_node_holds_spans_nodes_and_says_so() {
        let (_dir, m) = two_sockets();
        let l = choose(&m, 25).unwrap();
        assert_eq!(l.isolated.len(), 25);
        assert!(CpuList::parse("12-23,36-47")
            .unwrap()
            .is_subset(&l.isolated));
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: --cpus 25 does not fit one node (node 1 has the most CPUs to spare, 24): the partition spans nodes 1,0, so the work may reach memory and caches on another node, which is slower — ask for at most 24 to keep it on one"
        );
    }

    #[test]
    fn smt_a_split_core_and_whole_cores_are_explained() {
        let (_dir, m) = two_sockets();
        let l = choose(&m, 1).unwrap();
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: the sibling(s) 23 of isolated CPU(s) 47 stay with the system: --cpus 1 cannot take whole cores, so system work on 23 shares the core (execution units, L1/L2 caches) with the work — --cpus 2 isolates whole cores"
        );
        let l = choose(&m, 2).unwrap();
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: CPUs 23,47 are whole cores (siblings isolated together), so no system work shares their cores; siblings still compete with each other — one real-time thread per core, its sibling left idle, interferes least"
        );
        // Every CPU of this server has a kernel-managed NVMe queue: said once, not per CPU.
        assert_eq!(
            l.reasons,
            vec![
                "CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string(),
                "CPUs 23,47 are isolated although kernel-managed IRQs fire there: no CPU without one was left, so they will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)".to_string(),
                reason(&l, "NUMA:").to_string(),
                reason(&l, "SMT:").to_string(),
            ]
        );
    }

    #[test]
    fn smt_on_two_vcpus_that_are_siblings() {
        let dir = tame_testing::scratch_dir("layout-2smt-");
        let mut h = tame_testing::synthetic::SyntheticHost::two_socket_smt();
        (h.sockets, h.cores_per_socket, h.threads_per_core) = (1, 1, 2);
        h.managed_irqs = 0;
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        h.write(dir.path()).unwrap();
        let m = HostModel::read(&tame_host::Root::new(dir.path()));
        let l = choose(&m, 1).unwrap();
        assert_eq!(l.isolated.to_string(), "1");
        assert!(
            !l.reasons.iter().any(|r| r.starts_with("NUMA:")),
            "{:?}",
            l.reasons
        );
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: the sibling(s) 0 of isolated CPU(s) 1 stay with the system: --cpus 1 cannot take whole cores, so system work on 0 shares the core (execution units, L1/L2 caches) with the work — --cpus 2 isolates whole cores"
        );
    }

    #[test]
    fn this_2_vcpu_vm_has_no_numa_or_smt_reason() {
        let l = choose(&model("dev-vm"), 1).unwrap();
        assert_eq!(
            l.reasons,
            vec![
                "CPU 1 stays with the system: kernel-managed IRQ 36 (virtio1-req.0) fire(s) there and cannot move at run time".to_string(),
                "CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string(),
            ]
        );
    }

    #[test]
    fn numa_the_housekeeping_node_when_its_cpus_are_less_disturbed() {
        let (_dir, mut m) = two_sockets();
        // Node 0's NVMe queues are not kernel-managed here; node 1's are.
        let node0 = CpuList::parse("0-11,24-35").unwrap();
        for irq in m.irqs.irqs.iter_mut() {
            if irq.fires_on().is_some_and(|c| c.is_subset(&node0)) {
                irq.managed = false;
            }
        }
        let l = choose(&m, 2).unwrap();
        assert_eq!(l.isolated.to_string(), "11,35");
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: all 2 isolated CPU(s) on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, whose CPUs carry fewer kernel-managed IRQs than the other nodes'"
        );
        assert_eq!(
            l.reasons[0],
            "CPUs 12-23,36-47 stay with the system: kernel-managed IRQs fire there and cannot move at run time"
        );
    }
}
