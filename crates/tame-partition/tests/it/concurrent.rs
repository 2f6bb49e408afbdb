//! Two applies at once: the second (and any revert meanwhile) is refused with a
//! bad-input error naming the first, changes nothing, and the first's journal
//! reverts to the snapshot. Once from two threads, once from two processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;
use tame_host::error::LayerError as _;
use tame_host::journal::{JournalError, Stage};
use tame_partition::{apply, revert, ApplyError, Spec};

/// The change at which the first apply waits for the test.
const PAUSE_AT: Stage = Stage::Journaled(3);
/// Set in the child: `ROOT\tJOURNAL\tSIGNALS_DIR`.
const CHILD_ENV: &str = "TAME_PARTITION_TEST_CONCURRENT";

fn spec() -> Spec {
    Spec::parse("test.toml", MINIMAL_8).unwrap()
}

/// The second apply and a revert, while the first holds the journal: both refused,
/// naming `holder_pid`, and the tree left as the first has it.
fn second_comers_are_refused(f: &Fixture, holder_pid: u32) {
    let during = snapshot(&f.root);
    let err = apply(&f.root, &spec(), MINIMAL_8, &f.journal, None).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    let ApplyError::Journal(JournalError::Locked { holder, .. }) = &err else {
        panic!("expected the journal to be locked, got {err}");
    };
    assert_eq!(holder.pid, Some(holder_pid), "{err}");
    assert!(
        holder.since.is_some() && !holder.command.is_empty(),
        "{err}"
    );
    assert!(err.to_string().contains("in use by"), "{err}");
    let err = revert(&f.root, &f.journal).unwrap_err();
    assert!(
        matches!(&err, ApplyError::Journal(JournalError::Locked { holder, .. }) if holder.pid == Some(holder_pid)),
        "{err}"
    );
    let d = differences(&during, &snapshot(&f.root));
    assert!(d.is_empty(), "the refused apply changed: {d:#?}");
}

fn reverts_to(f: &Fixture, before: &tame_testing::TreeSnapshot) {
    let rep = revert(&f.root, &f.journal).unwrap();
    assert!(
        rep.not_restored.is_empty() && rep.journal_removed,
        "{rep:?}"
    );
    let d = differences(before, &snapshot(&f.root));
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn two_applies_from_two_threads() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let (paused_tx, paused_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (root, journal) = (f.root.clone(), f.journal.clone());
    let first = std::thread::spawn(move || {
        let hook = move |st: Stage| {
            if st == PAUSE_AT {
                paused_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            }
            Ok(())
        };
        apply(&root, &spec(), MINIMAL_8, &journal, Some(Box::new(hook)))
    });
    paused_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    second_comers_are_refused(&f, std::process::id());
    go_tx.send(()).unwrap();
    first.join().unwrap().unwrap();
    reverts_to(&f, &before);
}

/// Runs only as the child of the test below (`--ignored`): applies, and at
/// [`PAUSE_AT`] says so (file `paused`) and waits for file `go`.
#[test]
#[ignore = "run by two_applies_from_two_processes"]
fn child_apply_paused() {
    let arg = std::env::var(CHILD_ENV).expect("run by two_applies_from_two_processes");
    let f: Vec<&str> = arg.split('\t').collect();
    let root = tame_testing::fixture_root(f[0]);
    let signals = PathBuf::from(f[2]);
    let hook = move |st: Stage| {
        if st == PAUSE_AT {
            std::fs::write(signals.join("paused"), "").unwrap();
            wait_for(&signals.join("go"));
        }
        Ok(())
    };
    apply(
        &root,
        &spec(),
        MINIMAL_8,
        Path::new(f[1]),
        Some(Box::new(hook)),
    )
    .unwrap();
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_applies_from_two_processes() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let signals = tempfile::tempdir().unwrap();
    let arg = format!(
        "{}\t{}\t{}",
        f.root.base().display(),
        f.journal.display(),
        signals.path().display()
    );
    let name = tame_testing::serial::test_name(module_path!(), "child_apply_paused");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--ignored", "--nocapture"])
        .env(CHILD_ENV, arg)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !signals.path().join("paused").exists() {
        let status = child.try_wait().unwrap();
        assert!(status.is_none(), "the first apply ended early: {status:?}");
        assert!(Instant::now() < deadline, "the first apply never paused");
        std::thread::sleep(Duration::from_millis(5));
    }
    second_comers_are_refused(&f, child.id());
    std::fs::write(signals.path().join("go"), "").unwrap();
    assert!(child.wait().unwrap().success());
    reverts_to(&f, &before);
}
