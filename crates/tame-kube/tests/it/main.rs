//! tame-kube's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).

mod api_server;
mod exports;
mod manifests;
