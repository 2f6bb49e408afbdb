//! Fault injection: apply is SIGKILLed right after each change is journaled (before
//! it is made) and right after it is made; revert must then restore the snapshot.

mod common;

use std::os::unix::process::ExitStatusExt;

use common::*;
use tame_host::journal::Stage;
use tame_partition::{apply, revert, status, Spec};
use tame_testing::child::{assert_ran_one, child_arg, child_test};

/// Set in the child: `ROOT\tJOURNAL\tSEQ\tSTAGE` (STAGE: journaled | made).
const CHILD_ENV: &str = "TAME_PARTITION_TEST_KILL_AT";

const CHILD: &str = "child_apply_killed_at";
const PARENT: &str = "sigkill_at_every_step_then_revert_restores_the_snapshot";

/// Runs only as the child of the test below: applies and kills itself at the given point.
#[test]
#[ignore = "child side of sigkill_at_every_step_then_revert_restores_the_snapshot, run by it"]
fn child_apply_killed_at() {
    let arg = child_arg(CHILD_ENV, PARENT);
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
    for seq in 0..total {
        for stage in ["journaled", "made"] {
            let arg = format!(
                "{}\t{}\t{seq}\t{stage}",
                f.root.base().display(),
                f.journal.display()
            );
            let out = child_test(CHILD).env(CHILD_ENV, arg).output().unwrap();
            assert_ran_one(CHILD, &out.stdout);
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
