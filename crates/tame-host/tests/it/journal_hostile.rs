//! Revert does as root what a journal says, so a journal someone altered (or one in a
//! place someone else can write) must be refused, and revert must undo only what was
//! done: hostile records (`..`, paths outside the trees tame changes, a setuid mode),
//! a symlinked or world-writable journal, a failed `mkdir` of someone else's directory.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use tame_host::journal::*;
use tame_host::Root;

struct Tree {
    dir: tempfile::TempDir,
    root: Root,
    jdir: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = tame_testing::fixture_root(dir.path().join("root"));
    let t = Tree {
        jdir: dir.path().join("journal"),
        root,
        dir,
    };
    t.put("/proc/irq/24/smp_affinity_list", "0-1\n");
    t.put("/sys/fs/cgroup/cpuset/tasks", "1\n2\n");
    t.put("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n");
    t
}

impl Tree {
    fn put(&self, p: &str, s: &str) {
        let path = self.root.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    }

    fn read(&self, p: &str) -> String {
        self.root.read(p).unwrap()
    }

    /// A journal with these record lines, as if written for this tree.
    fn journal(&self, records: &str) {
        std::fs::create_dir_all(&self.jdir).unwrap();
        let base = escape(self.root.base().to_string_lossy().as_bytes());
        std::fs::write(
            journal_path(&self.jdir),
            format!("tame-journal 1 {base}\n{records}"),
        )
        .unwrap();
    }

    /// A file beside the root, which no journal may reach.
    fn outside(&self) -> PathBuf {
        let p = self.dir.path().join("outside");
        if !p.exists() {
            std::fs::write(&p, "mine\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        p
    }
}

fn assert_hostile(err: JournalError, line: usize, needle: &str) {
    match &err {
        JournalError::Hostile {
            line: l, reason, ..
        } => {
            assert_eq!(*l, line, "{err}");
            assert!(reason.contains(needle), "{err}");
        }
        _ => panic!("expected a hostile-record refusal, got {err}"),
    }
    assert!(err.is_bad_input());
}

#[test]
fn a_record_climbing_out_of_the_root_is_refused_and_nothing_is_written() {
    let t = tree();
    let outside = t.outside();
    // Revert of this would write "owned" to ROOT/sys/../../outside = the file beside the root.
    t.journal("write 0 /sys/../../outside =mine%0A =x\ndone 0\nwrite 1 /proc/irq/24/smp_affinity_list =9%0A =0\ndone 1\n");
    assert_hostile(load(&t.jdir).unwrap_err(), 2, "..");
    assert_hostile(revert(&t.root, &t.jdir).unwrap_err(), 2, "..");
    assert_hostile(Journal::open(&t.root, &t.jdir).unwrap_err(), 2, "..");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    assert_eq!(
        t.read("/proc/irq/24/smp_affinity_list"),
        "0-1\n",
        "revert refused as a whole"
    );
    assert!(journal_path(&t.jdir).exists(), "kept for the admin");
    let shown = revert(&t.root, &t.jdir).unwrap_err().to_string();
    assert!(
        shown.contains(":2:") && shown.contains("outside"),
        "{shown}"
    );
}

#[test]
fn every_path_field_is_held_to_the_allow_list() {
    let t = tree();
    for (record, needle) in [
        ("write 0 /etc/passwd =x =y\n", "outside the trees"),
        ("write 0 etc/passwd =x =y\n", "absolute"),
        ("mkdir 0 /tmp/x\n", "outside the trees"),
        (
            "mkdir 0 /sys/fs/cgroup/cpuset/a /sys/fs/cgroup/cpuset/a/tasks /etc/cron.d/x\n",
            "outside the trees",
        ),
        (
            "move 0 7 /sys/fs/cgroup/cpuset/tasks /root/.ssh/authorized_keys\n",
            "outside",
        ),
        (
            "move 0 7 /sys/fs/cgroup/cpuset/../../../x /sys/fs/cgroup/cpuset/tasks\n",
            "..",
        ),
        ("owner 0 /var/x 0:0:644 0:0:600\n", "outside the trees"),
        (
            "place 0 7 7 - - =/etc/x - - =/sys/fs/cgroup/cpuset/tasks\n",
            "outside",
        ),
        (
            "place 0 7 7 - - =/sys/fs/cgroup/cpuset/tasks - - =/sys//x\n",
            "plain path",
        ),
    ] {
        t.journal(record);
        assert_hostile(load(&t.jdir).unwrap_err(), 2, needle);
    }
}

#[test]
fn an_owner_record_with_a_setuid_or_world_writable_mode_is_refused() {
    let t = tree();
    let path = "/sys/fs/cgroup/cpuset/tasks";
    let full = t.root.path(path);
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (old, new, needle) in [
        ("0:0:4777", "0:0:644", "setuid"),
        ("0:0:644", "0:0:2755", "setgid"),
        ("0:0:666", "0:0:644", "anyone"),
    ] {
        t.journal(&format!("owner 0 {path} {old} {new}\ndone 0\n"));
        assert_hostile(revert(&t.root, &t.jdir).unwrap_err(), 2, needle);
    }
    assert_eq!(full.metadata().unwrap().mode() & 0o7777, 0o644);

    // Nor does the journal record (and make) such a change.
    let mut j = Journal::open(&t.root, &t.jdir.with_file_name("j2")).unwrap();
    let err = j
        .set_owner(
            path,
            Ownership {
                uid: 0,
                gid: 0,
                mode: 0o4755,
            },
        )
        .unwrap_err();
    assert!(matches!(err, JournalError::NotAllowed { .. }), "{err}");
    assert_eq!(full.metadata().unwrap().mode() & 0o7777, 0o644);
}

#[test]
fn a_write_outside_the_allow_list_is_refused_before_anything_is_recorded() {
    let t = tree();
    let outside = t.outside();
    let mut j = Journal::open(&t.root, &t.jdir).unwrap();
    let err = j
        .write_batch(&[
            WriteRequest::new("/proc/irq/24/smp_affinity_list", "0"),
            WriteRequest::new("/sys/../../outside", "owned"),
        ])
        .unwrap_err();
    assert!(
        matches!(&err, JournalError::NotAllowed { path, .. } if path == "/sys/../../outside"),
        "{err}"
    );
    assert!(!err.is_bad_input());
    let err = j.create_dir("/tmp/x", None).unwrap_err();
    assert!(matches!(err, JournalError::NotAllowed { .. }), "{err}");
    drop(j);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "0-1\n");
    assert!(load(&t.jdir).unwrap().unwrap().entries.is_empty());
}

#[test]
fn a_symlinked_journal_file_or_directory_is_refused() {
    let t = tree();
    // A valid-looking journal elsewhere, reached through a link.
    let elsewhere = t.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let base = escape(t.root.base().to_string_lossy().as_bytes());
    std::fs::write(
        elsewhere.join("journal"),
        format!("tame-journal 1 {base}\nwrite 0 /proc/irq/24/smp_affinity_list =7%0A =0\ndone 0\n"),
    )
    .unwrap();
    std::fs::create_dir(&t.jdir).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("journal"), journal_path(&t.jdir)).unwrap();
    for err in [
        load(&t.jdir).unwrap_err(),
        revert(&t.root, &t.jdir).unwrap_err(),
        Journal::open(&t.root, &t.jdir).unwrap_err(),
    ] {
        assert!(
            matches!(&err, JournalError::UnsafeLocation { reason, .. } if reason.contains("symbolic link")),
            "{err}"
        );
        assert!(err.is_bad_input());
    }
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "0-1\n");

    let linked_dir = t.dir.path().join("linked");
    std::os::unix::fs::symlink(&elsewhere, &linked_dir).unwrap();
    let err = revert(&t.root, &linked_dir).unwrap_err();
    assert!(matches!(err, JournalError::UnsafeLocation { .. }), "{err}");
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "0-1\n");
}

fn refused_location(t: &Tree, dir: &Path, needle: &str) {
    for err in [
        load(dir).unwrap_err(),
        revert(&t.root, dir).unwrap_err(),
        Journal::open(&t.root, dir).unwrap_err(),
    ] {
        assert!(
            matches!(&err, JournalError::UnsafeLocation { reason, .. } if reason.contains(needle)),
            "{err}"
        );
    }
}

#[test]
fn a_journal_others_may_write_or_own_is_refused() {
    let t = tree();
    t.journal("write 0 /proc/irq/24/smp_affinity_list =7%0A =0\ndone 0\n");
    let set_mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));

    set_mode(&t.jdir, 0o777).unwrap();
    refused_location(&t, &t.jdir, "mode 777");
    set_mode(&t.jdir, 0o775).unwrap();
    refused_location(&t, &t.jdir, "group or others");
    set_mode(&t.jdir, 0o755).unwrap();

    set_mode(&journal_path(&t.jdir), 0o666).unwrap();
    refused_location(&t, &t.jdir, "mode 666");
    set_mode(&journal_path(&t.jdir), 0o644).unwrap();

    if tame_testing::require::part(
        tame_testing::require::is_root(),
        "root (chown to another user)",
    ) {
        // Owned by someone else (nobody), though not writable by others.
        std::os::unix::fs::chown(&t.jdir, Some(65534), None).unwrap();
        refused_location(&t, &t.jdir, "uid 65534");
        std::os::unix::fs::chown(&t.jdir, Some(0), None).unwrap();
        std::os::unix::fs::chown(journal_path(&t.jdir), Some(65534), None).unwrap();
        refused_location(&t, &t.jdir, "uid 65534");
        std::os::unix::fs::chown(journal_path(&t.jdir), Some(0), None).unwrap();
    }
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "0-1\n");
    // Safe again: it reverts.
    assert!(revert(&t.root, &t.jdir).unwrap().journal_removed);
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "7\n");
}

#[test]
fn a_new_journal_is_private_to_its_owner() {
    let t = tree();
    let nested = t.jdir.join("placed/42");
    let mut j = Journal::open(&t.root, &nested).unwrap();
    j.note("x", b"y").unwrap();
    let mode = |p: &Path| p.metadata().unwrap().mode() & 0o7777;
    // Others may not list the directory nor read what is in it (the files are 0600); they
    // may open a file published there on purpose (the applied spec, 0644).
    assert_eq!(mode(&nested), 0o711);
    // Parents (shared, e.g. /run/tame) get the usual mode, never writable by others.
    assert_eq!(mode(&t.jdir) & 0o022, 0);
    assert_eq!(mode(&journal_path(&nested)), 0o600);
    assert_eq!(mode(&nested.join(LOCK_FILE)), 0o600);
}

#[test]
fn a_failed_mkdir_of_someone_elses_directory_is_never_undone() {
    let t = tree();
    // Someone else's cgroup, with a task in it.
    t.put("/sys/fs/cgroup/cpuset/theirs/tasks", "77\n");
    t.put("/sys/fs/cgroup/cpuset/theirs/cpuset.cpus", "1\n");
    let mut j = Journal::open(&t.root, &t.jdir).unwrap();
    let refused = j
        .create_dir(
            "/sys/fs/cgroup/cpuset/theirs",
            Some((
                "/sys/fs/cgroup/cpuset/theirs/tasks",
                "/sys/fs/cgroup/cpuset/tasks",
            )),
        )
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
    // A write inside it, recorded as done, is not skipped as "inside a directory we made".
    j.write("/sys/fs/cgroup/cpuset/theirs/cpuset.cpus", b"0", None)
        .unwrap()
        .unwrap();
    drop(j);
    let rec = load(&t.jdir).unwrap().unwrap();
    assert!(matches!(rec.entries[0].outcome, Outcome::Failed(_)));
    // Even if its outcome line were lost, the record and its outcome share one write:
    // the journal never holds this mkdir without the `failed`.
    let text = std::fs::read_to_string(journal_path(&t.jdir)).unwrap();
    assert!(
        text.contains("mkdir 0 /sys/fs/cgroup/cpuset/theirs /sys/fs/cgroup/cpuset/theirs/tasks /sys/fs/cgroup/cpuset/tasks\nfailed 0 "),
        "{text}"
    );

    let rep = revert(&t.root, &t.jdir).unwrap();
    assert!(
        rep.not_restored.is_empty() && rep.journal_removed,
        "{rep:?}"
    );
    assert_eq!(rep.not_made, 1);
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/theirs/tasks"), "77\n");
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/theirs/cpuset.cpus"), "1\n");
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/tasks"), "1\n2\n");
}

#[test]
fn a_failed_write_or_move_is_left_alone() {
    let t = tree();
    // Someone else set these after our attempts failed.
    t.put("/proc/irq/24/smp_affinity_list", "3\n");
    t.put("/sys/fs/cgroup/cpuset/a/tasks", "9\n");
    t.journal(concat!(
        "write 0 /proc/irq/24/smp_affinity_list =0-1%0A =0\n",
        "failed 0 Input/output%20error\n",
        "move 1 9 /sys/fs/cgroup/cpuset/tasks /sys/fs/cgroup/cpuset/a/tasks\n",
        "failed 1 No%20such%20process\n",
    ));
    let rep = revert(&t.root, &t.jdir).unwrap();
    assert_eq!((rep.restored, rep.not_made), (0, 2), "{rep:?}");
    assert!(rep.journal_removed);
    assert_eq!(t.read("/proc/irq/24/smp_affinity_list"), "3\n");
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/a/tasks"), "9\n");
}

#[test]
fn a_journaled_mkdir_that_failed_is_not_undone() {
    let t = tree();
    t.put("/sys/fs/cgroup/cpuset/theirs/tasks", "77\n");
    t.journal(concat!(
        "mkdir 0 /sys/fs/cgroup/cpuset/theirs /sys/fs/cgroup/cpuset/theirs/tasks /sys/fs/cgroup/cpuset/tasks\n",
        "failed 0 File%20exists%20(os%20error%2017)\n",
    ));
    let rep = revert(&t.root, &t.jdir).unwrap();
    assert_eq!((rep.restored, rep.not_made), (0, 1), "{rep:?}");
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/theirs/tasks"), "77\n");
    assert_eq!(t.read("/sys/fs/cgroup/cpuset/tasks"), "1\n2\n");
}

#[test]
fn configuration_records_stay_in_the_places_enable_installs() {
    let t = tree();
    for (record, needle) in [
        (
            "install 0 /etc/passwd 644 =x\n",
            "outside the places tame installs",
        ),
        (
            "install 0 /proc/sys/kernel/x 644 =x\n",
            "outside the places",
        ),
        ("install 0 /etc/tame/../shadow 644 =x\n", "plain path"),
        ("install 0 /etc/tame/x 4755 =x\n", "setuid"),
        ("install 0 /etc/tame/x 666 =x\n", "anyone write"),
        ("link 0 /etc/cron.d/x =/etc/tame/x\n", "outside the places"),
        ("mkdir 0 /etc/cron.d\n", "outside the trees"),
    ] {
        t.journal(record);
        assert_hostile(load(&t.jdir).unwrap_err(), 2, needle);
    }
}
