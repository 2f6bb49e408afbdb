//! tame-trace's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//!
//! `system` starts tracing on the live machine: its tests hold
//! `tame_testing::serial::module`.

mod system;
