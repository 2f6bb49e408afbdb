//! `tame bench cost -p NAME`: when the applied partitions cannot be read because the
//! journal fails, that is a failure (exit 1), not the user's bad input (exit 2); no
//! partitions applied is bad input. Both are refused before anything runs.

use std::path::PathBuf;

use tame_assess::cost::{bench_cost, CostOptions, CostPartition};
use tame_bench::cost::Workload;
use tame_bench::engine::RunControl;
use tame_host::error::{report, LayerError};
use tame_host::Root;

fn options(journal_dir: PathBuf) -> CostOptions {
    CostOptions {
        workloads: vec![Workload::Cpu],
        duration_ns: 1_000_000_000,
        rounds: 1,
        partition: CostPartition::Applied("rt".into()),
        rt_load: false,
        journal_dir,
        caller: tame_launch::target::Caller::current(),
        command_line: vec![],
    }
}

#[test]
fn a_journal_that_cannot_be_read_is_a_failure_and_none_applied_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    // A journal that is not one: reading it fails (tame's or the file's fault, not the
    // command's).
    let journal_dir = dir.path().join("journal-dir");
    std::fs::create_dir(&journal_dir).unwrap();
    std::fs::write(journal_dir.join("journal"), "not a tame journal\n").unwrap();
    let e = bench_cost(
        &root,
        &options(journal_dir),
        &RunControl::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(!LayerError::is_bad_input(&e), "{}", report(&e));
    assert!(report(&e).contains("journal"), "{}", report(&e));

    let e = bench_cost(
        &root,
        &options(dir.path().join("none-applied")),
        &RunControl::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    assert!(e.to_string().contains("no partitions are applied"), "{e}");
}
