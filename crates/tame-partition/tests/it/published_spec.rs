//! The applied spec is published for the users a partition names (the journal is
//! root's alone, 0600 in a 0711 directory) and goes with the journal.

use std::os::unix::fs::MetadataExt as _;

use crate::common::*;
use tame_partition::apply::PUBLIC_SPEC;
use tame_partition::{apply, revert, Applied, Spec};

#[test]
fn apply_publishes_the_spec_readably_and_revert_removes_it() {
    let f = v1_fixture();
    let spec = Spec::parse("test.toml", MINIMAL_8).unwrap();
    apply(&f.root, &spec, MINIMAL_8, &f.journal, None).unwrap();
    let public = f.journal.join(PUBLIC_SPEC);
    assert_eq!(std::fs::read_to_string(&public).unwrap(), MINIMAL_8);
    assert_eq!(public.metadata().unwrap().mode() & 0o777, 0o644);
    let dir_mode = f.journal.metadata().unwrap().mode() & 0o777;
    assert_eq!(
        dir_mode, 0o711,
        "others may open a named file, not list or write"
    );
    let journal_mode = f.journal.join("journal").metadata().unwrap().mode() & 0o777;
    assert_eq!(journal_mode, 0o600);
    let back = Applied::read(&f.root, &f.journal).unwrap().unwrap();
    assert_eq!(back.partitions.len(), spec.partitions.len());

    let report = revert(&f.root, &f.journal).unwrap();
    assert!(report.journal_removed, "{report:?}");
    assert!(!public.exists(), "the published spec goes with the journal");
    assert!(Applied::read(&f.root, &f.journal).unwrap().is_none());
}
