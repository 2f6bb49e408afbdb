//! tame-bench's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//!
//! `noise_system` traces and measures the live machine, `add_a_bench` measures briefly
//! through the recipe of docs/architecture.md: their tests hold `tame_testing::serial::module`.

mod add_a_bench;
mod noise_system;
