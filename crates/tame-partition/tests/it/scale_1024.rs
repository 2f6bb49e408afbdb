//! Scale (issue 28): `check`, `plan`, and `apply` and `revert` on a fixture tree each take
//! under a second on a synthetic host of 1024 CPUs and 4096 IRQs (half of them
//! kernel-managed), in the unoptimised test build; docs/partitions.md, "Scale", has the
//! numbers.
//!
//! Self-contained (no `common`). One test: the tree (about 110 000 files, 350 MB of tmpfs,
//! 2 s to write) is written once, used by each step in turn, so that no step's reading is
//! another's load and apply never runs beside a read, and removed at the end, also when a
//! step fails. A step over the limit is tried again, up to three times in all, and the
//! best time counts: the limit is about this code, not about a neighbour that had the
//! CPUs for a moment.

use std::time::{Duration, Instant};

use tame_host::{CpuList, HostModel, Root};
use tame_partition::{apply, plan, revert, Spec, Step};
use tame_testing::synthetic::SyntheticHost;

/// Every step must take less than this.
const LIMIT: Duration = Duration::from_secs(1);
/// How often a step over the limit is run in all.
const TRIES: usize = 3;

/// The system partition keeps the first 64 cores with their siblings (0-63 and 512-575),
/// the rest is isolated: together every CPU of the machine.
const SPEC: &str = r#"
[[partition]]
name = "system"
cpus = "0-63,512-575"
role = "system"

[[partition]]
name = "rt"
cpus = "64-511,576-1023"
role = "isolated"
idle = "poll"
"#;

const ISOLATED: &str = "64-511,576-1023";

#[test]
fn check_plan_apply_and_revert_on_1024_cpus_take_under_a_second_each() {
    // Timed, or many workers wide: alone among this binary's heavy modules.
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tame_testing::scratch_dir("scale1024");
    let base = dir.path().join("root");
    let (written, took) = timed(|| SyntheticHost::big_1024().write(&base));
    written.unwrap();
    eprintln!("writing the 1024-CPU tree: {took:.2?}");
    let root = tame_testing::fixture_root(&base);
    check_step(&root);
    plan_step(&root);
    apply_and_revert_step(&root, &dir.path().join("journal"));
}

/// Run `step` until the time it gives is under `LIMIT` (at most `TRIES` times); its last
/// result.
fn best_of<T>(what: &str, mut step: impl FnMut() -> (T, Duration)) -> T {
    let mut best = Duration::MAX;
    for _ in 0..TRIES {
        let (out, took) = step();
        eprintln!("{what}: {took:.2?}");
        best = best.min(took);
        if took < LIMIT {
            return out;
        }
    }
    panic!("{what} took {best:.2?} at best on 1024 CPUs (limit {LIMIT:?}, {TRIES} tries)");
}

/// `f`'s result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed())
}

fn spec() -> Spec {
    Spec::parse("scale.toml", SPEC).unwrap()
}

/// Read the host and run every check.
fn check_step(root: &Root) {
    let (model, report) = best_of("check (read the host, run every check)", || {
        timed(|| {
            let model = HostModel::read(root);
            let target = tame_check::Target::default_for(&model);
            let report = tame_check::check(&model, &target);
            (model, report)
        })
    });
    assert_eq!(model.cpus.online.len(), 1024);
    assert_eq!(model.irqs.irqs.len(), 4096);
    assert_eq!(model.irqs.irqs.iter().filter(|i| i.managed).count(), 2048);
    assert!(model.problems.is_empty(), "{:?}", model.problems);
    // Nothing isolated yet: every online CPU but the first is checked.
    assert_eq!(report.cpus, CpuList::parse("1-1023").unwrap());
    let found = |id: &str| {
        report
            .findings
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id} finding"))
            .found
            .clone()
    };
    // cpuhp, migration, ksoftirqd and a kworker on each of the 1023 CPUs.
    let kthreads = found("cpus.per_cpu_kthreads");
    assert!(
        kthreads.starts_with("4092 per-CPU kernel threads"),
        "{kthreads}"
    );
    assert!(report.findings.iter().any(|f| f.id == "irqs.managed"));
}

/// Read the host, validate the spec, plan.
fn plan_step(root: &Root) {
    let (model, p) = best_of("plan (read the host, validate, plan)", || {
        timed(|| {
            let model = HostModel::read(root);
            let p = plan(&spec(), &model).unwrap();
            (model, p)
        })
    });
    let all = spec()
        .partitions
        .iter()
        .fold(CpuList::new(), |a, p| a.union(&p.cpus));
    assert_eq!(all, model.cpus.online, "the spec covers every CPU");
    assert_eq!(p.isolated_cpus, CpuList::parse(ISOLATED).unwrap());
    let writes = |suffix: &str| {
        p.runtime
            .iter()
            .filter(|s| matches!(s, Step::Write { path, .. } if path.ends_with(suffix)))
            .count()
    };
    // Every IRQ the kernel does not manage moves off the isolated CPUs; every isolated
    // CPU gets its idle limit.
    assert_eq!(writes("/smp_affinity_list"), 2048);
    assert_eq!(writes("/pm_qos_resume_latency_us"), 896);
    let rt_cpus = p.runtime.iter().find_map(|s| match s {
        Step::Write { path, new, .. } if path == "/sys/fs/cgroup/tame-rt/cpuset.cpus" => {
            Some(new.as_str())
        }
        _ => None,
    });
    assert_eq!(rt_cpus, Some(ISOLATED));
    assert!(p.warnings.iter().any(|w| w.contains("kernel-managed")));
}

/// Apply through the journal, revert: the tree is back byte for byte.
fn apply_and_revert_step(root: &Root, journal: &std::path::Path) {
    let before = tame_testing::snapshot_tree(root.base());
    // Each try applies and reverts, so the tree is back before anything is asserted; the
    // slower of the two counts.
    let (report, rep) = best_of("apply or revert, the slower", || {
        let (report, apply_took) = timed(|| apply(root, &spec(), SPEC, journal, None));
        let (rep, revert_took) = timed(|| revert(root, journal));
        eprintln!("  apply {apply_took:.2?}, revert {revert_took:.2?}");
        ((report, rep), apply_took.max(revert_took))
    });
    let (report, rep) = (report.unwrap(), rep.unwrap());
    assert_eq!(report.directories, 1);
    assert!(report.writes >= 2048 + 896, "{} writes", report.writes);
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    assert!(rep.not_restored.is_empty(), "{:?}", rep.not_restored);
    assert!(rep.journal_removed);
    let diff = tame_testing::tree_differences(&before, &tame_testing::snapshot_tree(root.base()));
    assert!(diff.is_empty(), "revert left differences: {diff:?}");
}
