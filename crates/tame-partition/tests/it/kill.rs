//! Fault injection: apply is SIGKILLed right after each change is journaled (before
//! it is made) and right after it is made; revert must then restore the snapshot.

use std::os::unix::process::ExitStatusExt;

use crate::common::*;
use tame_host::journal::Stage;
use tame_partition::{apply, revert, status, Spec};
use tame_testing::child::{assert_ran_one, child_arg, child_test};

/// Set in the child: `ROOT\tJOURNAL\tSEQ\tSTAGE` (STAGE: journaled | made).
const CHILD_ENV: &str = "TAME_PARTITION_TEST_KILL_AT";

/// The child side's name in this binary (`kill::child_apply_killed_at`).
fn child() -> String {
    tame_testing::serial::test_name(module_path!(), "child_apply_killed_at")
}
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

/// Every (step, stage) with `index % workers` its number in the list, each killed in a
/// child on this worker's own fixture: the steps it tried, and how many steps there were.
fn worker(index: usize, workers: usize) -> (Vec<(u64, &'static str)>, u64) {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let total = count_steps(&f, MINIMAL_8);
    let child = child();
    let points = (0..total).flat_map(|seq| ["journaled", "made"].map(|stage| (seq, stage)));
    let mut tried = Vec::new();
    for (seq, stage) in points.skip(index).step_by(workers) {
        let arg = format!(
            "{}\t{}\t{seq}\t{stage}",
            f.root.base().display(),
            f.journal.display()
        );
        let out = child_test(&child).env(CHILD_ENV, arg).output().unwrap();
        assert_ran_one(&child, &out.stdout);
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
        tried.push((seq, stage));
    }
    (tried, total)
}

/// The steps are shared out among a few workers (as many as there are CPUs, at most 4),
/// each on a fixture of its own: a child is mostly waiting to start and to be killed.
#[test]
fn sigkill_at_every_step_then_revert_restores_the_snapshot() {
    // Timed, or many workers wide: alone among this binary's heavy modules.
    let _machine = tame_testing::serial::module(module_path!());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let done: Vec<(Vec<(u64, &str)>, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|i| s.spawn(move || worker(i, workers)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let total = done[0].1;
    assert!(total > 20, "only {total} steps");
    assert!(
        done.iter().all(|(_, t)| *t == total),
        "the workers' applies differ"
    );
    // Every step, killed once before and once after its change.
    let mut tried: Vec<(u64, &str)> = done.into_iter().flat_map(|(t, _)| t).collect();
    tried.sort_unstable();
    let mut every: Vec<(u64, &str)> = (0..total)
        .flat_map(|seq| ["journaled", "made"].map(|stage| (seq, stage)))
        .collect();
    every.sort_unstable();
    assert_eq!(tried, every);
}
