//! The journal on fixture trees through the fixture backend (which moves tasks
//! between cgroup task lists as the kernel does): every change recorded before
//! it is made, and revert gives back the tree byte for byte.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use tame_host::journal::*;
use tame_host::{CpuList, Root};
use tame_testing::FixtureBackend;

fn fixture() -> (tempfile::TempDir, Root, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = tame_testing::fixture_root(dir.path().join("root"));
    let w = |p: &str, s: &str| {
        let path = root.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    };
    w("/proc/irq/24/smp_affinity_list", "0-1\n");
    w("/sys/fs/cgroup/cpuset/tasks", "1\n2\n30\n");
    w("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n");
    let jdir = dir.path().join("journal");
    (dir, root, jdir)
}

fn snapshot(root: &Root) -> tame_testing::TreeSnapshot {
    tame_testing::snapshot_tree(root.base())
}

#[test]
fn journal_records_old_and_new_and_revert_restores_bytes() {
    let (_d, root, jdir) = fixture();
    let before = snapshot(&root);
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.note("spec", b"[[partition]]\nname = \"x\"\n").unwrap();
    j.create_dir(
        "/sys/fs/cgroup/cpuset/tame-sys",
        Some((
            "/sys/fs/cgroup/cpuset/tame-sys/tasks",
            "/sys/fs/cgroup/cpuset/tasks",
        )),
    )
    .unwrap()
    .unwrap();
    let results = j
        .write_batch(&[
            WriteRequest::new("/proc/irq/24/smp_affinity_list", "0"),
            WriteRequest::new("/sys/fs/cgroup/cpuset/tame-sys/cpuset.cpus", "0"),
            WriteRequest::new("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "0"),
        ])
        .unwrap();
    assert!(results.iter().all(|r| r.is_ok()));
    let moved = j
        .move_tasks(
            &[2, 30],
            "/sys/fs/cgroup/cpuset/tasks",
            "/sys/fs/cgroup/cpuset/tame-sys/tasks",
        )
        .unwrap();
    assert!(moved.iter().all(|r| r.is_ok()));
    assert_eq!(
        root.read("/sys/fs/cgroup/cpuset/tasks").unwrap(),
        "1\n",
        "fixture attach moves the id"
    );

    let rec = load(&jdir).unwrap().unwrap();
    assert_eq!(rec.entries.len(), 6);
    assert!(rec.entries.iter().all(|e| e.outcome == Outcome::Done));
    assert_eq!(rec.note("spec").unwrap(), b"[[partition]]\nname = \"x\"\n");
    assert_eq!(
        rec.entries[1].change,
        Change::Write {
            path: "/proc/irq/24/smp_affinity_list".into(),
            old: Some(b"0-1\n".to_vec()),
            new: b"0".to_vec(),
            restore_with: None
        }
    );
    assert!(matches!(
        &rec.entries[2].change,
        Change::Write { old: None, .. }
    ));

    let report = revert(&root, &jdir).unwrap();
    assert!(report.not_restored.is_empty(), "{report:?}");
    assert!(report.journal_removed);
    assert!(!journal_path(&jdir).exists());
    assert_eq!(snapshot(&root), before);
    // A second revert finds nothing to do.
    assert!(revert(&root, &jdir).unwrap().nothing_to_revert);
}

#[test]
fn a_pending_entry_whose_write_never_happened_reverts_cleanly() {
    let (_d, root, jdir) = fixture();
    let before = snapshot(&root);
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write(
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        b"0",
        None,
    )
    .unwrap()
    .unwrap();
    drop(j);
    // Simulate a kill right after the sync: a journaled write line with no outcome and
    // no change made, followed by a torn line.
    let mut text = std::fs::read_to_string(journal_path(&jdir)).unwrap();
    text.push_str("write 1 /proc/irq/24/smp_affinity_list =0-1%0A =0\nwrite 2 /proc/irq");
    std::fs::write(journal_path(&jdir), text).unwrap();
    let rec = load(&jdir).unwrap().unwrap();
    assert_eq!(rec.entries.len(), 2);
    assert_eq!(rec.entries[1].outcome, Outcome::Pending);
    let report = revert(&root, &jdir).unwrap();
    assert!(report.journal_removed, "{report:?}");
    assert_eq!(report.restored, 1);
    assert_eq!(snapshot(&root), before);
}

#[test]
fn revert_keeps_the_journal_and_says_why_when_a_value_cannot_be_restored() {
    let (_d, root, jdir) = fixture();
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write("/proc/irq/24/smp_affinity_list", b"0", None)
        .unwrap()
        .unwrap();
    drop(j);
    // The file's directory became a file: writing it back fails.
    std::fs::remove_dir_all(root.path("/proc/irq/24")).unwrap();
    std::fs::write(root.path("/proc/irq/24"), "").unwrap();
    let report = revert(&root, &jdir).unwrap();
    assert_eq!(report.not_restored.len(), 1);
    assert!(report.not_restored[0]
        .what
        .contains("/proc/irq/24/smp_affinity_list"));
    assert!(report.not_restored[0].reason.contains("cannot"));
    assert!(!report.journal_removed);
    assert!(journal_path(&jdir).exists());
}

#[test]
fn a_journal_for_another_root_is_refused() {
    let (_d, root, jdir) = fixture();
    Journal::open(&root, &jdir).unwrap();
    let other = Root::new("/elsewhere");
    assert!(matches!(
        Journal::open(&other, &jdir),
        Err(JournalError::OtherRoot { .. })
    ));
    assert!(matches!(
        revert(&other, &jdir),
        Err(JournalError::OtherRoot { .. })
    ));
}

#[test]
fn stage_hook_sees_every_change_before_and_after() {
    let (_d, root, jdir) = fixture();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut j = Journal::open(&root, &jdir).unwrap();
    let s = seen.clone();
    j.set_stage_hook(move |st| {
        s.borrow_mut().push(st);
        match st {
            Stage::Journaled(1) => Err(io::Error::from_raw_os_error(nix::errno::Errno::EIO as i32)),
            _ => Ok(()),
        }
    });
    j.write("/proc/irq/24/smp_affinity_list", b"1", None)
        .unwrap()
        .unwrap();
    let refused = j
        .write("/proc/irq/24/smp_affinity_list", b"0", None)
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(nix::errno::Errno::EIO as i32));
    assert_eq!(root.read("/proc/irq/24/smp_affinity_list").unwrap(), "1");
    assert_eq!(
        *seen.borrow(),
        vec![
            Stage::Journaled(0),
            Stage::Made(0),
            Stage::Journaled(1),
            Stage::Made(1)
        ]
    );
    let rec = load(&jdir).unwrap().unwrap();
    assert!(matches!(rec.entries[1].outcome, Outcome::Failed(_)));
}

#[test]
fn ownership_is_journaled_and_restored() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_d, root, jdir) = fixture();
    let path = "/sys/fs/cgroup/cpuset/tasks";
    let full = root.path(path);
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = Ownership::of(&full).unwrap();
    let mut j = Journal::open(&root, &jdir).unwrap();
    // Our own uid and gid: allowed without privileges.
    let new = Ownership {
        mode: 0o664,
        ..before
    };
    j.set_owner(path, new).unwrap().unwrap();
    assert_eq!(Ownership::of(&full).unwrap().mode, 0o664);
    let rec = load(&jdir).unwrap().unwrap();
    assert_eq!(
        rec.entries[0].change,
        Change::Owner {
            path: path.into(),
            old: before,
            new
        }
    );
    let report = revert(&root, &jdir).unwrap();
    assert!(report.journal_removed, "{report:?}");
    assert_eq!(Ownership::of(&full).unwrap(), before);
}

fn put(root: &Root, p: &str, s: &str) {
    let path = root.path(p);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, s).unwrap();
}

#[test]
fn a_placement_is_journaled_before_it_is_made_and_reverted_policy_first() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FixtureBackend::new());
    let root = backend.root(dir.path().join("root"));
    let jdir = dir.path().join("journal");
    put(&root, "/sys/fs/cgroup/cpuset/tasks", "1\n40\n41\n");
    put(&root, "/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n");
    put(&root, "/sys/fs/cgroup/cpuset/rt/tasks", "");
    put(&root, "/sys/fs/cgroup/cpuset/rt/cpuset.cpus", "2-3\n");
    for tid in [40, 41, 42] {
        std::fs::create_dir_all(root.path(format!("/proc/40/task/{tid}"))).unwrap();
    }
    backend.add_thread(40, CpuList::parse("0-3").unwrap());
    backend.add_thread(41, CpuList::parse("1").unwrap());
    let before = snapshot(&root);
    let fifo = {
        let mut s = root.thread_sched(40).unwrap();
        s.policy = 1;
        s.priority = 5;
        s
    };
    let new = ThreadPlacement {
        affinity: Some(CpuList::parse("3").unwrap()),
        sched: Some(fifo),
        cgroup: Some("/sys/fs/cgroup/cpuset/rt/tasks".into()),
    };
    let mut j = Journal::open(&root, &jdir).unwrap();
    for tid in [40, 41] {
        j.place(40, tid, &new, Some("/sys/fs/cgroup/cpuset/tasks"))
            .unwrap()
            .unwrap();
    }
    // A thread that does not exist is refused before anything is journaled for it.
    let refused = j.place(40, 99, &new, None).unwrap().unwrap_err();
    assert_eq!(refused.step, PlaceStep::Read);
    assert_eq!(
        root.read("/sys/fs/cgroup/cpuset/rt/tasks").unwrap(),
        "40\n41\n"
    );
    assert_eq!(backend.thread(41).unwrap().affinity.to_string(), "3");
    assert_eq!(backend.thread(41).unwrap().sched, fifo);
    // Thread 42 was born after the placement and inherited it: revert gives it 40's old state.
    backend.set_thread(42, backend.thread(40).unwrap());
    put(&root, "/sys/fs/cgroup/cpuset/rt/tasks", "40\n41\n42\n");
    let old40 = match &load(&jdir).unwrap().unwrap().entries[0].change {
        Change::Placement { old, .. } => old.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(old40.affinity.as_ref().unwrap().to_string(), "0-3");
    assert_eq!(old40.cgroup.as_deref(), Some("/sys/fs/cgroup/cpuset/tasks"));
    j.adopt(40, 42, &old40).unwrap();
    drop(j);
    let report = revert(&root, &jdir).unwrap();
    assert!(report.not_restored.is_empty(), "{report:?}");
    assert_eq!(report.restored, 3, "{report:?}");
    assert_eq!(backend.thread(40).unwrap().affinity.to_string(), "0-3");
    assert_eq!(backend.thread(41).unwrap().affinity.to_string(), "1");
    assert_eq!(backend.thread(41).unwrap().sched.policy, 0);
    assert_eq!(backend.thread(42).unwrap().affinity.to_string(), "0-3");
    assert_eq!(backend.thread(42).unwrap().sched.policy, 0);
    assert_eq!(
        root.read("/sys/fs/cgroup/cpuset/tasks").unwrap(),
        "1\n40\n41\n42\n"
    );
    put(&root, "/sys/fs/cgroup/cpuset/tasks", "1\n40\n41\n");
    assert_eq!(snapshot(&root), before);
}

#[test]
fn revert_reports_an_unrestorable_placement_by_its_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FixtureBackend::new());
    let root = backend.root(dir.path().join("root"));
    let jdir = dir.path().join("journal");
    std::fs::create_dir_all(root.path("/proc/7/task/7")).unwrap();
    put(&root, "/sys/fs/cgroup/cpu/tasks", "7\n");
    put(&root, "/sys/fs/cgroup/cpu/g/tasks", "");
    backend.add_thread(7, CpuList::parse("0-1").unwrap());
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.note("who", b"test").unwrap();
    let new = ThreadPlacement {
        affinity: Some(CpuList::parse("1").unwrap()),
        cgroup: Some("/sys/fs/cgroup/cpu/g/tasks".into()),
        ..Default::default()
    };
    j.place(7, 7, &new, Some("/sys/fs/cgroup/cpu/tasks"))
        .unwrap()
        .unwrap();
    drop(j);
    // The old task list became a directory: the thread cannot go back.
    std::fs::remove_file(root.path("/sys/fs/cgroup/cpu/tasks")).unwrap();
    std::fs::create_dir(root.path("/sys/fs/cgroup/cpu/tasks")).unwrap();
    let report = revert(&root, &jdir).unwrap();
    assert_eq!(report.not_restored.len(), 1, "{report:?}");
    assert_eq!(report.not_restored[0].seq, 0);
    assert!(report.not_restored[0]
        .what
        .contains("thread 7 of process 7"));
    assert!(report.not_restored[0]
        .reason
        .starts_with("cgroup /sys/fs/cgroup/cpu/tasks:"));
    assert_eq!(
        backend.thread(7).unwrap().affinity.to_string(),
        "0-1",
        "the rest is restored"
    );
    assert!(!report.journal_removed);
    // Once the thread has exited (gone from /proc), nothing is left to restore.
    std::fs::remove_dir_all(root.path("/proc/7")).unwrap();
    assert!(revert(&root, &jdir).unwrap().journal_removed);
}

#[test]
fn rewrite_is_only_for_paths_this_journal_recorded() {
    let (_d, root, jdir) = fixture();
    let mut j = Journal::open(&root, &jdir).unwrap();
    let path = "/proc/irq/24/smp_affinity_list";
    let refused = j.rewrite(path, b"1").unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
    j.write(path, b"0", None).unwrap().unwrap();
    j.rewrite(path, b"1").unwrap();
    assert_eq!(root.read(path).unwrap(), "1");
    drop(j);
    // Reopened, the journal still knows the path.
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.rewrite(path, b"0").unwrap();
    drop(j);
    assert!(revert(&root, &jdir).unwrap().journal_removed);
    assert_eq!(root.read(path).unwrap(), "0-1\n");
}

#[test]
fn a_value_the_kernel_prints_differently_is_restored_with_its_restore_value() {
    let (_d, root, jdir) = fixture();
    let sc = "/sys/fs/cgroup/cgroup.subtree_control";
    put(&root, sc, "cpu io memory pids\n");
    let before = snapshot(&root);
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write(sc, b"+cpuset", Some(b"-cpuset")).unwrap().unwrap();
    assert_eq!(root.read(sc).unwrap(), "cpuset cpu io memory pids\n");
    drop(j);
    let report = revert(&root, &jdir).unwrap();
    assert!(report.not_restored.is_empty(), "{report:?}");
    assert_eq!(snapshot(&root), before);
}

/// `tame enable`'s records: a new file (its mode, not the umask's) and a link, removed by
/// revert only while they are what was made; a file changed since is left, saying so.
#[test]
fn installed_files_and_links_are_removed_only_while_unchanged() {
    use std::os::unix::fs::MetadataExt as _;
    let (_d, root, jdir) = fixture();
    std::fs::create_dir_all(root.path("/etc/systemd/system")).unwrap();
    let before = snapshot(&root);
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.create_dir("/etc/tame", None).unwrap().unwrap();
    j.install_file("/etc/tame/partition.toml", b"[x]\n", 0o644)
        .unwrap()
        .unwrap();
    j.link(
        "/etc/systemd/system/tame.service",
        "/etc/tame/partition.toml",
    )
    .unwrap()
    .unwrap();
    // Never over a file someone else has: refused (EEXIST), and revert leaves it.
    std::fs::write(root.path("/etc/systemd/system/theirs"), "x").unwrap();
    let taken = j
        .install_file("/etc/systemd/system/theirs", b"y", 0o644)
        .unwrap();
    assert_eq!(
        taken.unwrap_err().raw_os_error(),
        Some(nix::errno::Errno::EEXIST as i32)
    );
    assert!(j.install_file("/etc/passwd", b"y", 0o644).is_err());
    drop(j);
    let meta = std::fs::metadata(root.path("/etc/tame/partition.toml")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o644);
    assert_eq!(
        std::fs::read_link(root.path("/etc/systemd/system/tame.service")).unwrap(),
        PathBuf::from("/etc/tame/partition.toml")
    );

    std::fs::write(root.path("/etc/tame/partition.toml"), "[changed]\n").unwrap();
    let r = revert(&root, &jdir).unwrap();
    assert_eq!(r.not_restored.len(), 2, "{r:?}");
    assert!(r.not_restored[0]
        .reason
        .contains("changed since tame wrote it"));
    assert!(root.exists("/etc/tame/partition.toml"));
    assert!(!root.exists("/etc/systemd/system/tame.service"));
    assert_eq!(root.read("/etc/systemd/system/theirs").unwrap(), "x");

    std::fs::write(root.path("/etc/tame/partition.toml"), "[x]\n").unwrap();
    let r = revert(&root, &jdir).unwrap();
    assert!(r.journal_removed, "{r:?}");
    std::fs::remove_file(root.path("/etc/systemd/system/theirs")).unwrap();
    assert_eq!(snapshot(&root), before);
}

/// A journal begun in an earlier boot holds nothing in effect (the reboot undid it, its
/// task ids name other tasks now): revert removes it without writing anything; one whose
/// changes persist (enable's files) is reverted as usual.
#[test]
fn a_journal_from_an_earlier_boot_is_removed_without_acting_on_it() {
    let (_d, root, jdir) = fixture();
    let boot_id = root.path("/proc/sys/kernel/random/boot_id");
    std::fs::create_dir_all(boot_id.parent().unwrap()).unwrap();
    std::fs::write(&boot_id, "aaaa\n").unwrap();
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write("/proc/irq/24/smp_affinity_list", b"0", None)
        .unwrap()
        .unwrap();
    drop(j);
    // This boot: reverted as usual.
    assert!(!load(&jdir).unwrap().unwrap().from_previous_boot(&root));
    std::fs::write(&boot_id, "bbbb\n").unwrap();
    // The machine booted since; "0" is what this boot's kernel happens to hold.
    let r = revert(&root, &jdir).unwrap();
    assert!(r.previous_boot && r.journal_removed, "{r:?}");
    assert_eq!(r.restored, 0);
    assert_eq!(root.read("/proc/irq/24/smp_affinity_list").unwrap(), "0");

    let mut j = Journal::open(&root, &jdir).unwrap();
    j.note(PERSISTS_NOTE, b"files").unwrap();
    j.write("/proc/irq/24/smp_affinity_list", b"1", None)
        .unwrap()
        .unwrap();
    drop(j);
    std::fs::write(&boot_id, "cccc\n").unwrap();
    let r = revert(&root, &jdir).unwrap();
    assert!(!r.previous_boot && r.restored == 1, "{r:?}");
    assert_eq!(root.read("/proc/irq/24/smp_affinity_list").unwrap(), "0");
}
