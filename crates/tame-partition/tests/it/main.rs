//! tame-partition's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//! `common` holds what the modules share.
//!
//! `system` applies a real partition, `scale_1024` times steps against a limit, `torn` and
//! `kill` each run a worker per CPU: their tests hold `tame_testing::serial::module`, so
//! none of them runs beside another; the other fixture-tree modules run beside anything.
//! `kill` and `concurrent` run this binary's own tests as child processes, by their full
//! names (`kill::child_apply_killed_at`).

mod common;
mod concurrent;
mod fixtures;
mod fuzz;
mod kill;
mod overflow;
mod published_spec;
mod roundtrip;
mod scale_1024;
mod system;
mod torn;
