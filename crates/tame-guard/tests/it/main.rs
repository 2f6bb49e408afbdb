//! tame-guard's integration tests: one binary, each file a module (docs/testing.md).

mod fixtures;
