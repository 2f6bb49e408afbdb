//! tame-launch's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).

mod detach_fixture;
mod one_door;
