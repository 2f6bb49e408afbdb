//! tame-host's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//!
//! `journal_lock` runs one of this binary's tests as a child process, by its full name
//! (`journal_lock::child_killed_holding_the_lock`). Every module works on fixture trees (or
//! reads the live machine): none needs to run alone.

mod cgroup_handle;
mod fixtures;
mod fuzz_journal;
mod journal;
mod journal_hostile;
mod journal_lock;
mod one_door;
