//! A crash can cut the journal at any byte. For every byte offset of a real apply's
//! journal: put the tree in the state it had when the journal was that long, cut the
//! journal there, apply again (which must cut the torn line off, not append to it),
//! then revert: the tree must be the original snapshot, and the journal gone.
//!
//! About two thousand offsets, each an apply and a revert on a fixture tree: the offsets
//! are shared out among a few workers (as many as there are CPUs, at most 4), each with
//! a fixture and a real apply of its own (the same journal but for the fixture's path,
//! which has the same length), and the tree a crash left at each stage is computed once
//! as the changes from the snapshot, made again for each offset of that stage.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use crate::common::*;
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

/// What turns the tree `from` into the tree `to`, changing only what differs.
#[derive(Default)]
struct Changes {
    /// Deepest first, so a directory is empty when its turn comes (`true`: a directory).
    remove: Vec<(PathBuf, bool)>,
    dirs: Vec<PathBuf>,
    files: Vec<(PathBuf, Vec<u8>)>,
}

impl Changes {
    fn between(from: &TreeSnapshot, to: &TreeSnapshot) -> Changes {
        let mut c = Changes::default();
        for (path, kind) in from.iter().rev() {
            if !to.contains_key(path) {
                c.remove.push((path.clone(), kind.is_none()));
            }
        }
        for (path, kind) in to {
            match kind {
                None if !from.contains_key(path) => c.dirs.push(path.clone()),
                Some(bytes) if from.get(path) != Some(kind) => {
                    c.files.push((path.clone(), bytes.clone()))
                }
                _ => {}
            }
        }
        c
    }

    fn make(&self) {
        for (path, dir) in &self.remove {
            if *dir {
                std::fs::remove_dir(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
        for path in &self.dirs {
            std::fs::create_dir_all(path).unwrap();
        }
        for (path, bytes) in &self.files {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
}

/// What a worker did: its journal (its fixture's path as `ROOT`), the offsets it tried,
/// and how many of them left a torn line that the second apply recorded.
struct Worker {
    journal: String,
    len: usize,
    tried: Vec<usize>,
    torn_seen: usize,
}

/// One apply on a fresh fixture, then every offset `k` of its journal with
/// `k % workers == index`.
fn worker(index: usize, workers: usize) -> Worker {
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
    // What each stage's tree differs in from the snapshot, found once.
    let stages: Vec<(u64, Changes)> = stages
        .iter()
        .map(|(len, tree)| (*len, Changes::between(&before, tree)))
        .collect();
    let unchanged = Changes::default();

    let mut tried = Vec::new();
    let mut torn_seen = 0;
    for k in (index..=full.len()).step_by(workers) {
        let changes = stages
            .iter()
            .rev()
            .find(|(len, _)| *len <= k as u64)
            .map_or(&unchanged, |(_, c)| c);
        // Each round ends with the tree back at `before` (checked below).
        changes.make();
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
        tried.push(k);
    }
    let journal =
        String::from_utf8_lossy(&full).replace(&f.root.base().display().to_string(), "ROOT");
    Worker {
        journal,
        len: full.len(),
        tried,
        torn_seen,
    }
}

#[test]
fn a_journal_cut_at_every_byte_then_applied_again_reverts_to_the_snapshot() {
    // Timed, or many workers wide: alone among this binary's heavy modules.
    let _machine = tame_testing::serial::module(module_path!());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let done: Vec<Worker> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|i| s.spawn(move || worker(i, workers)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let (journal, len) = (&done[0].journal, done[0].len);
    for w in &done {
        assert_eq!(
            (&w.journal, w.len),
            (journal, len),
            "the workers' applies journal the same"
        );
    }
    // Every offset, from the empty journal to the whole one, tried once.
    let mut tried: Vec<usize> = done.iter().flat_map(|w| w.tried.iter().copied()).collect();
    tried.sort_unstable();
    assert!(
        tried.iter().copied().eq(0..=len),
        "offsets tried: {} of {}",
        tried.len(),
        len + 1
    );
    let torn_seen: usize = done.iter().map(|w| w.torn_seen).sum();
    assert!(torn_seen > len / 2, "only {torn_seen} torn cuts");
}
