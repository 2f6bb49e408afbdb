//! A crash can cut the journal at any byte. For every byte offset of a real apply's
//! journal: put the tree in the state it had when the journal was that long, cut the
//! journal there, apply again (which must cut the torn line off, not append to it),
//! then revert: the tree must be the original snapshot, and the journal gone.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use tame_host::journal::{self, Stage, TORN_NOTE};
use tame_partition::{apply, revert, Spec};
use tame_testing::TreeSnapshot;

/// Every kind of change apply makes (directories, task moves, IRQ affinities, sysctls,
/// cpuset files), on a box small enough to try every byte of its journal.
const SPEC: &str = r#"
timer_migration = false
[[partition]]
name = "system"
cpus = "0"
role = "system"

[[partition]]
name = "rt"
cpus = "1"
role = "isolated"
idle = "poll"
"#;

fn small_fixture() -> Fixture {
    let mut host = v1_host();
    host.cores_per_socket = 2;
    host.irqs = 3;
    host.managed_irqs = 1;
    host.pci_devices = 1;
    host.timer_migration = true;
    let f = fixture(&host);
    add_v1_cpuset_files(&f.root);
    f
}

/// Make the tree that is `now` exactly `want` (changing only what differs).
fn restore(now: &TreeSnapshot, want: &TreeSnapshot) {
    // Deepest first, so a directory is empty when its turn comes.
    for (path, kind) in now.iter().rev() {
        if !want.contains_key(path) {
            match kind {
                None => std::fs::remove_dir(path).unwrap(),
                Some(_) => std::fs::remove_file(path).unwrap(),
            }
        }
    }
    for (path, kind) in want {
        match kind {
            None => std::fs::create_dir_all(path).unwrap(),
            Some(bytes) if now.get(path) != Some(kind) => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
            Some(_) => {}
        }
    }
}

#[test]
fn a_journal_cut_at_every_byte_then_applied_again_reverts_to_the_snapshot() {
    let f = small_fixture();
    let spec = Spec::parse("test.toml", SPEC).unwrap();
    let before = snapshot(&f.root);
    let jpath = journal::journal_path(&f.journal);

    // One apply, remembering at each stage how long the journal was and what the tree
    // held: a crash while the journal had k bytes left the tree of the last stage at
    // or below k (the tree changes only between stages, the journal only outside them).
    let stages: Rc<RefCell<Vec<(u64, TreeSnapshot)>>> = Rc::default();
    let seen = stages.clone();
    let (base, jp) = (f.root.base().to_path_buf(), jpath.clone());
    let hook = move |_: Stage| {
        let len = std::fs::metadata(&jp).unwrap().len();
        seen.borrow_mut()
            .push((len, tame_testing::snapshot_tree(&base)));
        Ok(())
    };
    apply(&f.root, &spec, SPEC, &f.journal, Some(Box::new(hook))).unwrap();
    let full = std::fs::read(&jpath).unwrap();
    let stages = stages.take();
    assert!(stages.len() > 40, "only {} stages", stages.len());
    assert!(revert(&f.root, &f.journal).unwrap().journal_removed);
    assert!(differences(&before, &snapshot(&f.root)).is_empty());

    let mut torn_seen = 0;
    for k in 0..=full.len() {
        let tree = stages
            .iter()
            .rev()
            .find(|(len, _)| *len <= k as u64)
            .map_or(&before, |(_, t)| t);
        // Each round ends with the tree back at `before` (checked below).
        restore(&before, tree);
        std::fs::create_dir_all(&f.journal).unwrap();
        std::fs::write(&jpath, &full[..k]).unwrap();

        let again = apply(&f.root, &spec, SPEC, &f.journal, None)
            .unwrap_or_else(|e| panic!("apply after a cut at byte {k}: {e}"));
        let rec = journal::load(&f.journal)
            .unwrap_or_else(|e| panic!("cut at byte {k}: the journal no longer reads: {e}"))
            .unwrap();
        let line_start = full[..k]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let header_done = full[..k].contains(&b'\n');
        // An apply with nothing left to do opens no journal; revert reads past the torn line.
        if header_done && line_start < k && !again.unchanged {
            // The torn bytes were cut off and recorded.
            assert_eq!(
                rec.note(TORN_NOTE),
                Some(&full[line_start..k]),
                "cut at byte {k}"
            );
            torn_seen += 1;
        }
        let rep = revert(&f.root, &f.journal).unwrap();
        assert!(
            rep.not_restored.is_empty() && rep.journal_removed,
            "cut at byte {k}: {rep:?}"
        );
        let d = differences(&before, &snapshot(&f.root));
        assert!(d.is_empty(), "cut at byte {k}: {d:#?}");
    }
    assert!(torn_seen > full.len() / 2, "only {torn_seen} torn cuts");
}
