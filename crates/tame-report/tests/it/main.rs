//! tame-report's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//! `common` holds what the modules share.

mod browser;
mod common;
mod render;
mod watch;
