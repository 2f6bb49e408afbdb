//! The guard on a fixture tree (no root, no kernel): a partition applied through the fixture
//! backend, then passes compared. What appears is reported once, what goes once; a drifted
//! value is repaired through the journal; one that keeps coming back backs off; and revert
//! afterwards gives the tree back byte for byte.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tame_guard::backoff::Rules;
use tame_guard::{Config, Guard, Kind, Metrics};
use tame_host::Root;
use tame_partition::{apply, revert, Spec};
use tame_testing::synthetic::{CgroupLayout, SyntheticHost};

const SPEC: &str = r#"
[[partition]]
name = "system"
cpus = "0-1"
role = "system"

[[partition]]
name = "rt"
cpus = "2-7"
role = "isolated"
"#;

const WQ: &str = "/sys/devices/virtual/workqueue/cpumask";

struct Fx {
    _dir: tempfile::TempDir,
    root: Root,
    journal: std::path::PathBuf,
}

fn fixture() -> Fx {
    let mut h = SyntheticHost::rt_8cpu();
    h.cgroups = CgroupLayout::V1;
    h.isolated = tame_host::CpuList::new();
    h.nohz_full = None;
    h.irq_cpus = None;
    h.managed_avoid = None;
    h.irqbalance = None;
    let dir = tame_testing::scratch_dir("guardfx");
    let base = dir.path().join("root");
    h.write(&base).unwrap();
    let root = tame_testing::fixture_root(&base);
    put(&root, WQ, "ff\n");
    put(&root, "/sys/fs/cgroup/cpuset/tasks", "1\n");
    put(
        &root,
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        "1\n",
    );
    Fx {
        journal: dir.path().join("journal"),
        root,
        _dir: dir,
    }
}

fn put(root: &Root, path: &str, text: &str) {
    let p = root.path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn config(f: &Fx, repair: bool) -> Config {
    Config {
        root: f.root.clone(),
        journal_dir: f.journal.clone(),
        partitions: Vec::new(),
        repair,
        interval: Duration::from_millis(10),
        max_irq_rate: tame_guard::DEFAULT_MAX_IRQ_RATE,
        backoff: Rules::default(),
        trace: false,
    }
}

/// The spec applied on `f` through the fixture backend.
fn applied(f: &Fx) {
    apply(
        &f.root,
        &Spec::parse("t", SPEC).unwrap(),
        SPEC,
        &f.journal,
        None,
    )
    .unwrap();
}

/// One pass; the lines it logged.
fn pass(g: &mut Guard) -> Vec<String> {
    let mut out = Vec::new();
    assert!(g.pass(&mut out).unwrap());
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn with<'a>(lines: &'a [String], needle: &str) -> Vec<&'a String> {
    lines.iter().filter(|l| l.contains(needle)).collect()
}

#[test]
fn nothing_applied_and_unknown_partitions_are_bad_input() {
    let f = fixture();
    let e = Guard::new(config(&f, false), Arc::default()).err().unwrap();
    assert!(e.is_bad_input());
    assert!(e.to_string().contains("no partition is applied"), "{e}");
    applied(&f);
    let mut c = config(&f, false);
    c.partitions = vec!["nope".into()];
    let e = Guard::new(c.clone(), Arc::default()).err().unwrap();
    assert!(e.to_string().contains("-p nope: no partition nope"), "{e}");
    c.partitions = vec!["system".into()];
    let e = Guard::new(c, Arc::default()).err().unwrap();
    assert!(e.to_string().contains("is not isolated"), "{e}");
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn drift_is_reported_once_when_it_appears_and_once_when_it_goes() {
    let f = fixture();
    applied(&f);
    let metrics = Arc::new(Mutex::new(Metrics::new(0, "proc_scan", &["rt".into()])));
    let mut g = Guard::new(config(&f, false), metrics.clone()).unwrap();
    let first = pass(&mut g);
    assert!(with(&first, "event=drift ").is_empty(), "{first:#?}");
    put(&f.root, WQ, "ff\n");
    let second = pass(&mut g);
    let drift = with(&second, "event=drift ");
    assert_eq!(drift.len(), 1, "{second:#?}");
    assert!(
        drift[0].contains(&format!("path={WQ} applied=03 now=ff"))
            && drift[0].contains("action=reported"),
        "{}",
        drift[0]
    );
    // Still there: nothing new.
    assert!(with(&pass(&mut g), "event=drift").is_empty());
    assert_eq!(metrics.lock().unwrap().drifted, 1);
    put(&f.root, WQ, "03\n");
    let gone = pass(&mut g);
    let cleared = with(&gone, "event=drift_gone");
    assert_eq!(cleared.len(), 1, "{gone:#?}");
    assert!(cleared[0].contains("action=cleared"));
    let m = metrics.lock().unwrap().clone();
    assert_eq!(
        (
            m.drifted,
            m.events[&Kind::Drift],
            m.events[&Kind::DriftGone]
        ),
        (0, 1, 1)
    );
    assert_eq!(m.passes, 4);
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn a_repair_goes_through_the_journal_backs_off_and_revert_restores_the_tree() {
    let f = fixture();
    let before = tame_testing::snapshot_tree(f.root.base());
    applied(&f);
    let metrics = Arc::new(Mutex::new(Metrics::default()));
    let mut g = Guard::new(config(&f, true), metrics.clone()).unwrap();
    pass(&mut g);
    let mut actions = Vec::new();
    // Another writer puts its value back after every repair.
    for _ in 0..5 {
        put(&f.root, WQ, "ff\n");
        let lines = pass(&mut g);
        let drift = with(&lines, "event=drift ");
        actions.push(
            drift
                .first()
                .map(|l| {
                    l.rsplit_once("action=")
                        .unwrap()
                        .1
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string()
                })
                .unwrap_or_default(),
        );
    }
    assert_eq!(
        actions,
        ["repaired", "repaired", "repaired", "backoff", ""],
        "three repairs within the window, then a backoff (and quiet while it lasts)"
    );
    // While backing off the value stays as the other writer left it.
    assert_eq!(f.root.read(WQ).unwrap().trim(), "ff");
    // (The fixture's tasks keep their status files, so their repairs are refused and
    // counted too: only the drift's are known here.)
    let m = metrics.lock().unwrap().clone();
    assert!(m.repairs >= 3 && m.backoffs >= 1, "{m:?}");
    // The journal's lock was released after each round: revert takes it.
    drop(g);
    assert!(revert(&f.root, &f.journal).unwrap().journal_removed);
    let d = tame_testing::tree_differences(&before, &tame_testing::snapshot_tree(f.root.base()));
    assert!(d.is_empty(), "{d:#?}");
}
