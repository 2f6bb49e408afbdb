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

/// After a reboot (a new boot id) the journal of the last apply holds nothing in effect:
/// the partition reads as not applied, and apply — what tame-partition.service runs at
/// boot — sets the old journal aside and journals this boot's changes alone, so revert
/// never acts on task ids of the previous boot.
#[test]
fn apply_after_a_reboot_starts_a_journal_of_its_own() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = v1_fixture();
    put(&f.root, "/proc/sys/kernel/random/boot_id", "boot-1\n");
    let spec = Spec::parse("test.toml", MINIMAL_8).unwrap();
    let first = apply(&f.root, &spec, MINIMAL_8, &f.journal, None).unwrap();
    assert!(!first.warnings.iter().any(|w| w.contains("reboot")));
    let stale = std::fs::read(f.journal.join("journal")).unwrap();
    // What a reboot does: the kernel's values are back, the boot id is new; the journal stays.
    assert!(revert(&f.root, &f.journal).unwrap().journal_removed);
    put(&f.root, "/proc/sys/kernel/random/boot_id", "boot-2\n");
    let pristine = snapshot(&f.root);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(f.journal.join("journal"))
        .and_then(|mut j| std::io::Write::write_all(&mut j, &stale))
        .unwrap();
    assert!(Applied::read(&f.root, &f.journal).unwrap().is_none());
    let status = tame_partition::status(&f.root, &f.journal).unwrap();
    assert!(!status.applied && status.previous_boot);

    let again = apply(&f.root, &spec, MINIMAL_8, &f.journal, None).unwrap();
    assert!(
        again
            .warnings
            .iter()
            .any(|w| w.contains("before the last reboot")),
        "{:?}",
        again.warnings
    );
    let journal = std::fs::read_to_string(f.journal.join("journal")).unwrap();
    assert_eq!(journal.matches("tame-journal 1").count(), 1);
    assert!(journal.contains("note boot_id boot-2"), "{journal}");
    assert!(!journal.contains("boot-1"), "{journal}");
    assert!(revert(&f.root, &f.journal).unwrap().journal_removed);
    assert!(differences(&pristine, &snapshot(&f.root)).is_empty());
}
