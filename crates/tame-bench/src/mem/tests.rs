use super::*;
use crate::result::Metric;
use crate::stats::Summary;
use tame_host::cpu::{Cache, Cpu, NumaNode};

fn request() -> MemRequest {
    MemRequest {
        cpu: 1,
        node: None,
        sizes: None,
        batches: 100,
        huge_pages: false,
        threads: ThreadSettings::unprivileged(),
    }
}

/// A two-CPU, two-node host with 32K/512K/32M caches and `available_kib` available.
fn host(available_kib: u64, nodes: usize) -> MemHost {
    let cache = |level, kib| Cache {
        level,
        kind: "Unified".into(),
        size_kib: Some(kib),
        ways: None,
        id: None,
        cpus: CpuList::parse("0-1").unwrap(),
    };
    let node = |id: u32| NumaNode {
        id,
        cpus: CpuList::from_cpus([id]),
        mem_total_kib: Some(1 << 20),
        mem_free_kib: None,
    };
    MemHost {
        topology: CpuTopology {
            caches: vec![cache(1, 32), cache(2, 512), cache(3, 32 * 1024)],
            nodes: (0..nodes as u32).map(node).collect(),
            cpus: vec![Cpu {
                id: 1,
                online: true,
                package: None,
                die: None,
                core: None,
                thread_siblings: CpuList::from_cpus([1]),
                node: Some(if nodes > 1 { 1 } else { 0 }),
            }],
            ..CpuTopology::default()
        },
        meminfo: MemInfo {
            available_kib: Some(available_kib),
            huge_pages_free: Some(0),
            huge_page_kib: Some(2048),
        },
        thp: Some("never".into()),
    }
}

#[test]
fn the_default_sweep_comes_from_the_caches_and_the_cpus_node() {
    let s = MemSettings::resolve(request(), &host(24 << 20, 2)).unwrap();
    assert_eq!(s.sizes.len(), 7);
    assert_eq!(*s.sizes.last().unwrap(), 128 * sweep::MIB);
    assert_eq!((s.node, s.node_bound), (1, true));
    assert!(
        s.sweep.contains("L1 32KiB, L2 512KiB, L3 32MiB"),
        "{}",
        s.sweep
    );
    assert_eq!(s.llc_bytes(), Some(32 * sweep::MIB));
    // One node: recorded, not bound.
    let s = MemSettings::resolve(request(), &host(24 << 20, 1)).unwrap();
    assert_eq!((s.node, s.node_bound), (0, false));
}

#[test]
fn sizes_beyond_the_memory_available_are_dropped_or_refused() {
    // 100 MiB available: 75 MiB usable, so the 128 MiB point goes.
    let s = MemSettings::resolve(request(), &host(100 << 10, 1)).unwrap();
    assert_eq!(*s.sizes.last().unwrap(), 64 * sweep::MIB);
    assert!(s.sweep.contains("left out 128MiB"), "{}", s.sweep);
    let e = MemSettings::resolve(
        MemRequest {
            sizes: Some(vec![16 * sweep::KIB, 512 * sweep::MIB]),
            ..request()
        },
        &host(100 << 10, 1),
    )
    .unwrap_err();
    assert!(
        e.is_bad_input() && e.to_string().contains("does not fit"),
        "{e}"
    );
}

#[test]
fn bad_nodes_batches_and_huge_pages_are_refused_with_what_to_do() {
    let cases = [
        (
            MemRequest {
                node: Some(5),
                ..request()
            },
            "no such NUMA node",
        ),
        (
            MemRequest {
                batches: 5,
                ..request()
            },
            "--batches 5",
        ),
        (
            MemRequest {
                huge_pages: true,
                ..request()
            },
            "vm.nr_hugepages",
        ),
    ];
    for (req, needle) in cases {
        let e = MemSettings::resolve(req, &host(24 << 20, 2)).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains(needle), "{e}");
    }
    // THP in madvise mode, or a pool large enough, grants --hugepages.
    let pages = |h: &MemHost| {
        let req = MemRequest {
            huge_pages: true,
            ..request()
        };
        MemSettings::resolve(req, h).unwrap().huge_pages
    };
    let mut h = host(24 << 20, 1);
    h.thp = Some("madvise".into());
    assert_eq!(pages(&h), HugePages::Thp);
    // 64 free 2 MiB pages hold the 128 MiB buffer.
    h.meminfo.huge_pages_free = Some(64);
    assert_eq!(pages(&h), HugePages::Hugetlb);
}

#[test]
fn per_access_figures_come_from_batch_times() {
    // Recorded batch times of 1024 chases (ns): 1.5, 1.6, 100 ns per access.
    let raw = [1_536u64, 1_638, 102_400];
    let out = summarise(&Clock::monotonic(), 3, Pattern::Chase, 65_536, 1024, &raw);
    let a = out.access.summary();
    assert_eq!((a.min, a.max, a.count), (1_500, 100_000, 3));
    assert_eq!(out.batch.summary().max, 102_400);
    assert_eq!(out.label(), "chase 64KiB");
    assert_eq!(out.counters()[0], ("buffer_bytes", 65_536));
}

fn group(pattern: Pattern, bytes: u64, p50: u64) -> GroupResult {
    GroupResult {
        label: label(pattern, bytes),
        metrics: vec![Metric {
            name: "access".into(),
            unit: "ps".into(),
            summary: Summary {
                count: 10,
                p50,
                ..Summary::default()
            },
            distribution: None,
        }],
        counters: [("buffer_bytes".to_string(), bytes)].into_iter().collect(),
        ..GroupResult::default()
    }
}

#[test]
fn the_sweep_group_divides_the_largest_median_by_the_smallest() {
    let groups = vec![
        group(Pattern::Chase, 16 << 10, 1_250),
        group(Pattern::Stream, 16 << 10, 500),
        group(Pattern::Chase, 128 << 20, 110_000),
        group(Pattern::Stream, 128 << 20, 2_000),
    ];
    let m = sweep_group(&groups);
    assert_eq!(m.label, "sweep");
    assert_eq!(m.derived["chase_p50_largest_over_smallest"], 88.0);
    assert_eq!(m.derived["stream_p50_largest_over_smallest"], 4.0);
    assert!(
        sweep_group(&groups[..2]).derived.is_empty(),
        "one size: no ratio"
    );
}

#[test]
fn a_real_size_is_timed_batch_by_batch_for_both_patterns() {
    let settings = MemSettings::resolve(
        MemRequest {
            sizes: Some(vec![64 * sweep::KIB]),
            batches: 50,
            ..request()
        },
        &host(24 << 20, 1),
    )
    .unwrap();
    let mut raw = vec![0u64; 50];
    let mut ticks = 0;
    let out = measure_size(
        &settings,
        &Clock::monotonic(),
        &RunControl::new(),
        64 * sweep::KIB,
        &mut raw,
        |_| ticks += 1,
    )
    .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].0, out[1].0), (Pattern::Chase, Pattern::Stream));
    assert!(out.iter().all(|(_, r)| r.len() == 50));
    assert_eq!(ticks, 100);
    // 1024 accesses take more than 100 ns on any machine (0.1 ns each).
    assert!(
        out.iter().all(|(_, r)| r.iter().all(|&t| t > 100)),
        "{out:?}"
    );
}
