use super::*;
use tame_testing::synthetic::SyntheticHost;

/// `count` CPUs, whole cores, nothing sampled.
fn just(count: u32) -> Choice<'static> {
    Choice {
        count,
        ..Default::default()
    }
}

fn model(fixture: &str) -> HostModel {
    HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
        fixture,
    )))
}

#[test]
fn a_cpu_with_a_managed_irq_stays_with_the_system() {
    // dev-vm: a 2-CPU VM whose disk queue IRQ is kernel-managed on CPU 1.
    let m = model("dev-vm");
    let l = choose(&m, &just(1)).unwrap();
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
    let l = choose(&m, &just(2)).unwrap();
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
    // Whole cores with idle siblings say so in the comment; the spec body is unchanged.
    let comment = if l.work_cpus == l.isolated {
        let cpus = if count == 1 { "CPU" } else { "CPUs" };
        format!(
            "# {count} isolated {cpus} for the time-critical work, the rest for everything else."
        )
    } else {
        let idle = l.isolated.difference(&l.work_cpus);
        format!(
            "# {} isolated CPUs: the time-critical work on {}, their SMT {} {idle} left idle; the rest for everything else.",
            l.isolated.len(),
            l.work_cpus,
            if idle.len() == 1 { "sibling" } else { "siblings" }
        )
    };
    format!(
        "{comment}\n[[partition]]\nname = \"system\"\ncpus = \"{}\"\nrole = \"system\"\n\n[[partition]]\nname = \"{PARTITION}\"\ncpus = \"{}\"\nrole = \"isolated\"\n{mems}{idle}",
        l.system, l.isolated
    )
}

#[test]
fn the_generated_spec_text_is_a_view_of_the_typed_spec() {
    let (_dir, numa) = two_sockets();
    for (m, count) in [(model("rt-8cpu"), 2), (model("dev-vm"), 1), (numa, 2)] {
        let l = choose(&m, &just(count)).unwrap();
        assert_eq!(l.spec_text, text_as_formatted_before(&l, count));
        assert_eq!(Spec::parse("t", &l.spec_text).unwrap(), l.spec);
    }
}

#[test]
fn more_cpus_than_can_be_isolated_is_bad_input() {
    let e = choose(&model("dev-vm"), &just(2)).unwrap_err();
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
    SyntheticHost::two_socket_smt().unpartitioned().model()
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
    // Whole cores: each work CPU brings its sibling (CPU n's is n±24). 24 whole cores
    // do not fit beside CPU 0, so --cpus 24 shares cores.
    for (count, isolated, work) in [
        (1, "23,47", "47"),
        (2, "22-23,46-47", "46-47"),
        (24, "12-23,36-47", "12-23,36-47"),
    ] {
        let l = choose(&m, &just(count)).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.work_cpus.to_string()),
            (isolated.to_string(), work.to_string())
        );
        let n = l.isolated.len();
        assert_eq!(
            reason(&l, "NUMA:"),
            format!("NUMA: all {n} isolated CPUs on node 1 (CPUs 12-23,36-47), so they share its last-level cache and the partition's memory is bound to it (mems); node 0 keeps CPU 0 and the housekeeping")
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
    // Node 1's one core cannot give 4 work CPUs; on node 0 each brings its sibling.
    let l = choose(&m, &just(4)).unwrap();
    assert_eq!(l.isolated.to_string(), "8-11,32-35");
    // The work runs on the highest thread of each core, as it takes the highest CPUs.
    assert_eq!(l.work_cpus.to_string(), "32-35");
    assert_eq!(
        reason(&l, "NUMA:"),
        "NUMA: all 8 isolated CPUs on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, as no other node has 4 CPUs"
    );
    assert!(!l.isolated.contains(0));
}

#[test]
fn numa_a_count_no_node_holds_spans_nodes_and_says_so() {
    let (_dir, m) = two_sockets();
    let l = choose(&m, &just(25)).unwrap();
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
fn smt_the_work_cpus_sibling_joins_the_partition_idle() {
    let (_dir, m) = two_sockets();
    let l = choose(&m, &just(1)).unwrap();
    // The sibling is isolated (no load on the core) but the work does not run on it.
    assert_eq!(
        (l.isolated.to_string(), l.work_cpus.to_string()),
        ("23,47".into(), "47".into())
    );
    assert_eq!(l.work().to_string(), "47");
    assert_eq!(
        reason(&l, "SMT:"),
        "SMT: sibling 23 of CPU 47 is in the partition and left idle, so no load shares the core (--share-core gives it back to the system)"
    );
    let l = choose(&m, &just(2)).unwrap();
    // Every CPU of this server has a kernel-managed NVMe queue: said once, not per CPU.
    assert_eq!(
        l.reasons,
        vec![
            "CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string(),
            "CPUs 22-23,46-47 are isolated although kernel-managed IRQs fire there: no CPU without one was left, so they will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)".to_string(),
            reason(&l, "NUMA:").to_string(),
            "SMT: siblings 22-23 of CPUs 46-47 are in the partition and left idle, so no load shares their cores (--share-core gives them back to the system)".to_string(),
            "Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string(),
        ]
    );
}

#[test]
fn smt_share_core_splits_and_uses_cores_as_before() {
    let (_dir, m) = two_sockets();
    let share = |count| Choice {
        count,
        share_core: true,
        activity: None,
    };
    let l = choose(&m, &share(1)).unwrap();
    assert_eq!(
        (l.isolated.to_string(), l.work_cpus.to_string()),
        ("47".into(), "47".into())
    );
    assert_eq!(
        reason(&l, "SMT:"),
        "SMT: the sibling 23 of isolated CPU 47 stays with the system (--share-core): system work on 23 shares the core (execution units, L1/L2 caches) with the work — without --share-core the partition takes whole cores and leaves the siblings idle"
    );
    // Two CPUs take one whole core, and the work runs on both threads.
    let l = choose(&m, &share(2)).unwrap();
    assert_eq!(
        (l.isolated.to_string(), l.work_cpus.to_string()),
        ("23,47".into(), "23,47".into())
    );
    assert_eq!(
        reason(&l, "SMT:"),
        "SMT: CPUs 23,47 are whole cores (siblings isolated together), so no system work shares their cores; siblings still compete with each other — one real-time thread per core, its sibling left idle, interferes least"
    );
}

#[test]
fn smt_on_two_vcpus_that_are_siblings() {
    let mut h = SyntheticHost::two_socket_smt().unpartitioned();
    (h.sockets, h.cores_per_socket, h.threads_per_core) = (1, 1, 2);
    h.managed_irqs = 0;
    let (_dir, m) = h.model();
    // The one core would leave the system no CPU: the work shares it, and says why.
    let l = choose(&m, &just(1)).unwrap();
    assert_eq!(l.isolated.to_string(), "1");
    assert_eq!(l.work_cpus.to_string(), "1");
    assert!(
        !l.reasons.iter().any(|r| r.starts_with("NUMA:")),
        "{:?}",
        l.reasons
    );
    assert_eq!(
        reason(&l, "SMT:"),
        "SMT: the sibling 0 of isolated CPU 1 stays with the system: whole cores for --cpus 1 (siblings left idle) would leave the system no CPU, so system work on 0 shares the core (execution units, L1/L2 caches) with the work"
    );
}

#[test]
fn this_2_vcpu_vm_has_no_numa_or_smt_reason() {
    let l = choose(&model("dev-vm"), &just(1)).unwrap();
    assert_eq!(
        l.reasons,
        vec![
            "CPU 1 stays with the system: kernel-managed IRQ 36 (virtio1-req.0) fires there and cannot move at run time".to_string(),
            "CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string(),
            "Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string(),
        ]
    );
    assert_eq!(l.work_cpus, l.isolated);
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
    let l = choose(&m, &just(2)).unwrap();
    assert_eq!(l.isolated.to_string(), "10-11,34-35");
    assert_eq!(
        reason(&l, "NUMA:"),
        "NUMA: all 4 isolated CPUs on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, whose CPUs carry fewer kernel-managed IRQs than the other nodes'"
    );
    assert_eq!(
        l.reasons[0],
        "CPUs 12-23,36-47 stay with the system: kernel-managed IRQs fire there and cannot move at run time"
    );
}

#[test]
fn cpus_isolated_at_boot_are_chosen() {
    // rt-8cpu booted with isolcpus/nohz_full on 2-3 only: without the boot rule the
    // highest CPUs (6-7) would be taken.
    let mut h = SyntheticHost::rt_8cpu();
    h.cmdline = h.cmdline.replace("2-7", "2-3");
    h.isolated = CpuList::parse("2-3").unwrap();
    h.nohz_full = Some(h.isolated.clone());
    let (_dir, m) = h.unpartitioned().model();
    let l = choose(&m, &just(2)).unwrap();
    assert_eq!(l.isolated.to_string(), "2-3");
    assert_eq!(
        l.reasons[0],
        "Boot: the work runs on CPUs 2-3, isolated at boot (isolcpus=managed_irq,domain,2-3 nohz_full=2-3): the kernel keeps its own tasks and, while one task runs, the tick off them, which a partition made at run time cannot"
    );
    // More than were isolated: the rest come from the others, and it says so.
    let l = choose(&m, &just(3)).unwrap();
    assert_eq!(l.isolated.to_string(), "2-3,7");
    assert!(l.reasons[0].starts_with("Boot: CPUs 2-3 were isolated at boot (isolcpus=managed_irq,domain,2-3 nohz_full=2-3), but --cpus 3 needs more: the work also runs on 7,"), "{:?}", l.reasons);
}

#[test]
fn cpus_isolated_at_boot_pull_the_partition_to_their_node() {
    // The SMT server booted with isolcpus on two cores of node 0 (CPU 0's node).
    let mut h = SyntheticHost::two_socket_smt();
    h.cmdline.push_str(" isolcpus=4-5,28-29");
    h.isolated = CpuList::parse("4-5,28-29").unwrap();
    let (_dir, m) = h.unpartitioned().model();
    let l = choose(&m, &just(2)).unwrap();
    assert_eq!(
        (l.isolated.to_string(), l.work_cpus.to_string()),
        ("4-5,28-29".into(), "28-29".into())
    );
    assert_eq!(
        reason(&l, "NUMA:"),
        "NUMA: all 4 isolated CPUs on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, whose CPUs were isolated at boot, more of them than the other nodes'"
    );
}

#[test]
fn one_last_level_cache_and_not_the_housekeeping_cpus() {
    // rt-8cpu (boot-isolated 2-7) with two L3 caches: 0-1,6-7 (CPU 0's) and 2-5.
    let mut m = model("rt-8cpu");
    let l3 = |cpus: &str| tame_host::cpu::Cache {
        level: 3,
        kind: "Unified".into(),
        size_kib: Some(16384),
        ways: Some(16),
        id: None,
        cpus: CpuList::parse(cpus).unwrap(),
    };
    m.cpus.caches.retain(|c| c.level < 3);
    m.cpus.caches.extend([l3("0-1,6-7"), l3("2-5")]);
    // 6-7 rank as 4-5 do; only the cache tells them apart.
    let l = choose(&m, &just(2)).unwrap();
    assert_eq!(l.isolated.to_string(), "4-5");
    assert_eq!(
        reason(&l, "LLC:"),
        "LLC: the partition's 2 CPUs share one L3 cache (CPUs 2-5) of the 2 here, so no other cache's traffic evicts the work's lines; the one of CPU 0 (CPUs 0-1,6-7) stays with the housekeeping"
    );
    // Five fit no cache: spread, and the most one cache holds is named.
    let l = choose(&m, &just(5)).unwrap();
    assert_eq!(l.isolated.to_string(), "3-7");
    assert!(
        reason(&l, "LLC:").starts_with(
            "LLC: --cpus 5 does not fit one last-level cache (the roomiest has room for 4)"
        ),
        "{:?}",
        l.reasons
    );
}

fn quiet(cpu: u32) -> tame_host::activity::CpuRates {
    tame_host::activity::CpuRates {
        cpu,
        device_irqs: 10,
        local_timer: 250,
        steal_permille: Some(0),
        ..Default::default()
    }
}

#[test]
fn measured_rates_count_only_when_well_above_the_quietest() {
    use tame_host::activity::{BusyIrq, CpuActivity};
    // rt-8cpu: CPUs 2-7 are alike by what is read; the sample tells them apart.
    let m = model("rt-8cpu");
    let mut cpus: Vec<_> = (0..8).map(quiet).collect();
    cpus[7].device_irqs = 2000;
    cpus[7].busiest_irq = Some(BusyIrq {
        number: 40,
        name: "eth0-rx-0".into(),
        per_s: 1900,
    });
    cpus[5].steal_permille = Some(100);
    // Noise: 30 device IRQs/s is under the floor, 400 timer events/s within 2× of 250.
    cpus[6].device_irqs = 30;
    cpus[6].local_timer = 400;
    let activity = CpuActivity {
        interval_ms: 1000,
        cpus,
    };
    let l = choose(
        &m,
        &Choice {
            count: 2,
            share_core: false,
            activity: Some(&activity),
        },
    )
    .unwrap();
    assert_eq!(l.isolated.to_string(), "4,6");
    let rates: Vec<&String> = l
        .reasons
        .iter()
        .filter(|r| r.starts_with("Rates"))
        .collect();
    assert_eq!(
        rates,
        vec![
            "Rates over 1000 ms on the work's CPUs 4,6: at most 30 device IRQs/s, 400 timer events/s (local timer and timer softirqs), 0.0 % of the time stolen",
            "Rates: CPU 7 was passed over for 2000 device IRQs/s (most from IRQ 40 eth0-rx-0, 1900/s), over twice the quietest CPU's",
            "Rates: CPU 5 was passed over for 10.0 % of its time stolen, over twice the quietest CPU's",
        ]
    );
    // Without the sample, the highest CPUs.
    assert_eq!(choose(&m, &just(2)).unwrap().isolated.to_string(), "6-7");
}

#[test]
fn bands_ignore_noise_and_grow_by_doubling() {
    assert_eq!(band(100, 50), 0);
    assert_eq!(band(101, 50), 1);
    assert_eq!(band(199, 50), 1);
    assert_eq!(band(200, 50), 2);
    assert_eq!(band(u64::MAX, 0), 63);
}
