//! Fault injection: apply is SIGKILLed right after each change is journaled (before
//! it is made) and right after it is made; revert must then restore the snapshot.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use common::*;
use tame_host::journal::Stage;
use tame_partition::{apply, revert, status, Spec};

/// Set in the child: `ROOT\tJOURNAL\tSEQ\tSTAGE` (STAGE: journaled | made).
const CHILD_ENV: &str = "TAME_PARTITION_TEST_KILL_AT";

/// Runs only as the child of the test below: applies and kills itself at the given point.
#[test]
fn child_apply_killed_at() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return;
    };
    let f: Vec<&str> = arg.split('\t').collect();
    let (root, journal) = (
        tame_testing::fixture_root(f[0]),
        std::path::PathBuf::from(f[1]),
    );
    let seq: u64 = f[2].parse().unwrap();
    let target = if f[3] == "made" {
        Stage::Made(seq)
    } else {
        Stage::Journaled(seq)
    };
    let hook = move |st: Stage| {
        if st == target {
            // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        Ok(())
    };
    let spec = Spec::parse("test.toml", MINIMAL_8).unwrap();
    apply(&root, &spec, MINIMAL_8, &journal, Some(Box::new(hook))).unwrap();
}

#[test]
fn sigkill_at_every_step_then_revert_restores_the_snapshot() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let total = count_steps(&f, MINIMAL_8);
    assert!(total > 20, "only {total} steps");
    let exe = std::env::current_exe().unwrap();
    for seq in 0..total {
        for stage in ["journaled", "made"] {
            let arg = format!(
                "{}\t{}\t{seq}\t{stage}",
                f.root.base().display(),
                f.journal.display()
            );
            let out = Command::new(&exe)
                .args([
                    "--exact",
                    "child_apply_killed_at",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, arg)
                .output()
                .unwrap();
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGKILL),
                "child was not killed at {stage} {seq}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let st = status(&f.root, &f.journal).unwrap();
            assert!(st.applied, "no journal after a kill at {stage} {seq}");
            assert!(
                st.interrupted >= 1,
                "the killed change has no outcome: {stage} {seq}"
            );
            let rep = revert(&f.root, &f.journal).unwrap();
            assert!(rep.not_restored.is_empty(), "{stage} {seq}: {rep:?}");
            assert!(rep.journal_removed);
            let d = differences(&before, &snapshot(&f.root));
            assert!(d.is_empty(), "after a kill at {stage} {seq}: {d:#?}");
        }
    }
}
