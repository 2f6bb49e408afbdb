//! One user of a journal at a time: a second `Journal::open` or a `revert` from
//! elsewhere is refused naming the holder; the holder's own thread may revert (an
//! apply rolling back); a holder killed with SIGKILL blocks nobody.

use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Command;

use tame_host::journal::*;
use tame_host::Root;

const CHILD_ENV: &str = "TAME_HOST_TEST_LOCK_KILLED";

fn tree() -> (tempfile::TempDir, Root, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = tame_testing::fixture_root(dir.path().join("root"));
    let p = root.path("/proc/sys/kernel/timer_migration");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, "1\n").unwrap();
    let jdir = dir.path().join("journal");
    (dir, root, jdir)
}

fn locked_by(err: JournalError, pid: u32) {
    match &err {
        JournalError::Locked { holder, .. } => {
            assert_eq!(holder.pid, Some(pid), "{err}");
            assert!(holder.since.is_some(), "{err}");
        }
        _ => panic!("expected Locked, got {err}"),
    }
    assert!(err.is_bad_input());
}

#[test]
fn others_are_refused_while_the_holder_may_revert() {
    let (_d, root, jdir) = tree();
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write("/proc/sys/kernel/timer_migration", b"0", None)
        .unwrap()
        .unwrap();
    let (r, d) = (root.clone(), jdir.clone());
    let (open, rev) = std::thread::spawn(move || {
        (
            Journal::open(&r, &d).unwrap_err(),
            revert(&r, &d).unwrap_err(),
        )
    })
    .join()
    .unwrap();
    locked_by(open, std::process::id());
    locked_by(rev, std::process::id());
    assert_eq!(root.read("/proc/sys/kernel/timer_migration").unwrap(), "0");
    // The holder's thread reverts under its own lock.
    assert!(revert(&root, &jdir).unwrap().journal_removed);
    assert_eq!(
        root.read("/proc/sys/kernel/timer_migration").unwrap(),
        "1\n"
    );
    drop(j);
    assert!(
        !jdir.join(LOCK_FILE).exists(),
        "the holder removes the lock file"
    );
    Journal::open(&root, &jdir).unwrap();
}

#[test]
fn a_journal_reverts_itself_under_its_lock() {
    let (_d, root, jdir) = tree();
    let mut j = Journal::open(&root, &jdir).unwrap();
    j.write("/proc/sys/kernel/timer_migration", b"0", None)
        .unwrap()
        .unwrap();
    let rep = j.revert().unwrap();
    assert!(rep.journal_removed && rep.restored == 1, "{rep:?}");
    assert_eq!(
        root.read("/proc/sys/kernel/timer_migration").unwrap(),
        "1\n"
    );
    assert!(!jdir.join(LOCK_FILE).exists());
}

/// Runs only as the child of the test below: opens the journal, changes a value, and
/// is killed holding the lock.
#[test]
#[ignore = "run by a_holder_killed_with_sigkill_blocks_nobody"]
fn child_killed_holding_the_lock() {
    let arg = std::env::var(CHILD_ENV).expect("run by a_holder_killed_with_sigkill_blocks_nobody");
    let (base, jdir) = arg.split_once('\t').unwrap();
    let root = tame_testing::fixture_root(base);
    let mut j = Journal::open(&root, std::path::Path::new(jdir)).unwrap();
    j.write("/proc/sys/kernel/timer_migration", b"0", None)
        .unwrap()
        .unwrap();
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL).unwrap();
}

#[test]
fn a_holder_killed_with_sigkill_blocks_nobody() {
    let (_d, root, jdir) = tree();
    let name = tame_testing::serial::test_name(module_path!(), "child_killed_holding_the_lock");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--ignored", "--nocapture"])
        .env(
            CHILD_ENV,
            format!("{}\t{}", root.base().display(), jdir.display()),
        )
        .output()
        .unwrap();
    tame_testing::child::assert_ran_one(&name, &out.stdout);
    assert_eq!(
        out.status.signal(),
        Some(libc_sigkill()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its lock file is left, naming it, but the kernel dropped the lock.
    assert!(jdir.join(LOCK_FILE).exists());
    let rep = revert(&root, &jdir).unwrap();
    assert!(rep.journal_removed, "{rep:?}");
    assert_eq!(
        root.read("/proc/sys/kernel/timer_migration").unwrap(),
        "1\n"
    );
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}
