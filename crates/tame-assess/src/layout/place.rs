//! Where the ranked CPUs go: one NUMA node, one last-level cache, whole SMT cores.

use super::*;

/// How the partition treats SMT cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// A whole core per work CPU, its siblings idle in the partition.
    WholeCores,
    /// CPUs as asked; siblings may be split or both used (`--share-core`).
    Share,
}

/// CPUs picked for the partition.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Picked {
    pub(super) isolated: CpuList,
    pub(super) work: CpuList,
}

/// How many work CPUs `pool` can give: its whole cores, or its CPUs.
pub(super) fn room(r: &Ranker, pool: &CpuList, mode: Mode) -> usize {
    match mode {
        Mode::Share => pool.len(),
        Mode::WholeCores => {
            let mut seen = CpuList::new();
            let mut n = 0;
            for cpu in pool.iter() {
                if seen.contains(cpu) {
                    continue;
                }
                let core = r.core(cpu);
                seen = seen.union(&core);
                n += usize::from(core.is_subset(pool));
            }
            n
        }
    }
}

/// The `count` best work CPUs of `pool`, the least disturbed first (then the highest), at
/// most `limit` CPUs in the partition. Whole cores: each work CPU brings its core, which
/// must lie in `pool`. Share: a CPU's whole core where it still fits the count, and the
/// work runs on all of them. None: `pool` has not room enough.
pub(super) fn pick(
    r: &Ranker,
    pool: &CpuList,
    count: usize,
    mode: Mode,
    limit: usize,
) -> Option<Picked> {
    let mut p = Picked::default();
    for cpu in r.ranked(pool) {
        if p.work.len() >= count {
            break;
        }
        if p.isolated.contains(cpu) {
            continue;
        }
        let core = r.core(cpu).intersection(pool);
        match mode {
            Mode::WholeCores => {
                if core != r.core(cpu) || p.isolated.len() + core.len() > limit {
                    continue;
                }
                p.isolated = p.isolated.union(&core);
                p.work.insert(cpu);
            }
            Mode::Share => {
                let with_core = p.isolated.union(&core);
                p.isolated = if with_core.len() <= count {
                    with_core
                } else {
                    p.isolated.union(&CpuList::from_cpus([cpu]))
                };
                p.work = p.isolated.clone();
            }
        }
    }
    (p.work.len() == count && p.isolated.len() <= limit).then_some(p)
}

/// Pick in one last-level cache of `pool` where the machine has several there and one has
/// room (the partition's CPUs then share it and no other), preferring one the housekeeping
/// CPU does not use; with why. Else pick in all of `pool`.
pub(super) fn pick_in_cache(
    r: &Ranker,
    pool: &CpuList,
    count: usize,
    mode: Mode,
    limit: usize,
) -> Option<(Picked, Vec<String>)> {
    let mut caches: Vec<(u8, CpuList)> = Vec::new();
    for cpu in pool.iter() {
        let Some(llc) = r.model.cpus.last_level_cache(cpu) else {
            return pick(r, pool, count, mode, limit).map(|p| (p, Vec::new()));
        };
        if !caches.iter().any(|(_, c)| *c == llc.cpus) {
            caches.push((llc.level, llc.cpus.clone()));
        }
    }
    if caches.len() < 2 {
        return pick(r, pool, count, mode, limit).map(|p| (p, Vec::new()));
    }
    let keeper = r.keeper;
    let best = caches
        .iter()
        .filter_map(|(level, cpus)| {
            let spare = cpus.intersection(pool);
            let p = pick(r, &spare, count, mode, limit)?;
            Some((*level, cpus, r.cost(&p.work), p))
        })
        .min_by_key(|(_, cpus, cost, p)| {
            (
                *cost,
                cpus.contains(keeper),
                Reverse(room(r, &cpus.intersection(pool), mode)),
                p.work.first(),
            )
        });
    let Some((level, cpus, cost, p)) = best else {
        let p = pick(r, pool, count, mode, limit)?;
        let most = caches
            .iter()
            .map(|(_, c)| room(r, &c.intersection(pool), mode))
            .max()
            .unwrap_or(0);
        return Some((p, vec![format!(
            "LLC: --cpus {count} does not fit one last-level cache (the roomiest has room for {most}): the partition spans {} caches, so the work competes with the other caches' traffic for memory bandwidth and sees another cache's lines only through the slower interconnect — ask for at most {most} to keep it in one",
            caches.len()
        )]));
    };
    let keeper_cache = caches.iter().find(|(_, c)| c.contains(keeper));
    let why = match keeper_cache {
        Some((_, k)) if !cpus.contains(keeper) => {
            format!("the one of CPU {keeper} (CPUs {k}) stays with the housekeeping")
        }
        Some(_) => {
            let others_fit = caches
                .iter()
                .filter(|(_, c)| !c.contains(keeper))
                .filter_map(|(_, c)| pick(r, &c.intersection(pool), count, mode, limit))
                .map(|p| r.cost(&p.work))
                .min();
            match others_fit {
                Some(other) if other > cost => format!(
                    "the one of CPU {keeper}, {}",
                    better_because(other, cost, "caches")
                ),
                _ => format!("the one of CPU {keeper}, as no other has room"),
            }
        }
        None => String::new(),
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!("; {why}")
    };
    Some((
        p.clone(),
        vec![format!(
            "LLC: the partition's {} {} one L{level} cache ({}) of the {} here, so no other cache's traffic evicts the work's lines{why}",
            tame_rt::plural::count(p.isolated.len() as u64, "CPU", "CPUs"),
            tame_rt::plural::word(p.isolated.len() as u64, "shares", "share"),
            cpus.named(),
            caches.len()
        )],
    ))
}

/// A NUMA node the partition fits: its CPUs, how many work CPUs it has room for, what
/// would be picked there, with why (its caches) and at what cost.
pub(super) struct NodeFit<'a> {
    pub(super) id: u32,
    pub(super) cpus: &'a CpuList,
    pub(super) room: usize,
    pub(super) picked: Picked,
    pub(super) llc: Vec<String>,
    pub(super) cost: Score,
}

/// Where the isolated CPUs go, with why when the machine has more than one NUMA node:
/// all on one node where they fit (memory and last-level cache shared, nothing remote),
/// preferring a node other than the housekeeping CPU's; else spread, most room first.
/// None: the CPUs do not fit the machine in this mode.
pub(super) fn place(r: &Ranker, count: usize, mode: Mode) -> Option<(Picked, Vec<String>)> {
    let model = r.model;
    let online = &model.cpus.online;
    let limit = online.len().saturating_sub(1);
    let nodes = nodes(model);
    if nodes.len() < 2 {
        return pick_in_cache(r, online, count, mode, limit);
    }
    let keeper = r.keeper;
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
    let fits: Vec<NodeFit> = free
        .iter()
        .filter_map(|(id, cpus, spare)| {
            let (picked, llc) = pick_in_cache(r, spare, count, mode, limit)?;
            Some(NodeFit {
                id: *id,
                cpus,
                room: room(r, spare, mode),
                cost: r.cost(&picked.work),
                picked,
                llc,
            })
        })
        .collect();
    let best = fits
        .iter()
        .min_by_key(|f| (f.cost, Some(f.id) == home, Reverse(f.room), f.id));
    if let Some(NodeFit {
        id,
        cpus: node_cpus,
        picked: chosen,
        llc,
        cost,
        ..
    }) = best
    {
        let why = if Some(*id) != home {
            match home {
                Some(h) => format!("node {h} keeps CPU {keeper} and the housekeeping"),
                None => format!("CPU {keeper} stays with the system for housekeeping"),
            }
        } else {
            let other = fits
                .iter()
                .filter(|f| Some(f.id) != home)
                .map(|f| f.cost)
                .min();
            match other {
                Some(other) if other > *cost => format!(
                    "the node of CPU {keeper}, {}",
                    better_because(other, *cost, "nodes")
                ),
                _ => format!(
                    "the node of CPU {keeper}, as no other node has {}",
                    tame_rt::plural::count(count as u64, "CPU", "CPUs")
                ),
            }
        };
        let shared = if llc.is_empty() {
            "they share its last-level cache and "
        } else {
            ""
        };
        let mut reasons = vec![format!(
            "NUMA: {} on node {id} ({}), so {shared}the partition's memory is bound to it (mems); {why}",
            match chosen.isolated.len() {
                1 => "the isolated CPU".to_string(),
                n => format!("all {n} isolated CPUs"),
            },
            node_cpus.named()
        )];
        reasons.extend(llc.iter().cloned());
        return Some((chosen.clone(), reasons));
    }
    // No node holds them all: spread over the nodes with the most room, and say so.
    let mut order: Vec<(u32, CpuList, usize)> = free
        .into_iter()
        .map(|(id, _, spare)| {
            let n = room(r, &spare, mode);
            (id, spare, n)
        })
        .collect();
    order.sort_by_key(|(id, _, n)| (Reverse(*n), Some(*id) == home, *id));
    let mut chosen = Picked::default();
    let mut used = Vec::new();
    for (id, spare, n) in &order {
        let left = count.saturating_sub(chosen.work.len());
        if left == 0 {
            break;
        }
        let room_left = limit.saturating_sub(chosen.isolated.len());
        if let Some(p) = pick(r, spare, left.min(*n), mode, room_left) {
            chosen.isolated = chosen.isolated.union(&p.isolated);
            chosen.work = chosen.work.union(&p.work);
            used.push(id.to_string());
        }
    }
    // CPUs the nodes do not list (a partial topology) make up the rest.
    if chosen.work.len() < count {
        let rest = online.difference(&chosen.isolated).difference(&keep);
        let room_left = limit.saturating_sub(chosen.isolated.len());
        let p = pick(r, &rest, count - chosen.work.len(), mode, room_left)?;
        chosen.isolated = chosen.isolated.union(&p.isolated);
        chosen.work = chosen.work.union(&p.work);
    }
    let most_free = order.first().map_or(0, |(_, _, n)| *n);
    let most = order.first().map_or(0, |(id, _, _)| *id);
    let what = match mode {
        Mode::Share => "CPUs",
        Mode::WholeCores => "whole cores",
    };
    let reason = format!(
        "NUMA: --cpus {count} does not fit one node (node {most} has the most {what} to spare, {most_free}): the partition spans nodes {}, so the work may reach memory and caches on another node, which is slower — ask for at most {most_free} to keep it on one",
        used.join(",")
    );
    Some((chosen, vec![reason]))
}

/// The one node all of `cpus` are on, when the machine has several and that node has
/// memory: the partition's memory is then bound to it.
pub(super) fn local_memory(model: &HostModel, cpus: &CpuList) -> Option<u32> {
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
pub(super) fn nodes(model: &HostModel) -> Vec<(u32, CpuList)> {
    model
        .cpus
        .nodes
        .iter()
        .map(|n| (n.id, n.cpus.intersection(&model.cpus.online)))
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect()
}
