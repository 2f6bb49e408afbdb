//! Test tooling for tame's crates, used as a dev-dependency only:
//!
//! - [`fixture`]: a [`tame_host::backend::HostBackend`] for fixture trees that does
//!   on a write what the kernel would (moving a task between cgroup task lists,
//!   creating a new cgroup's task lists, enabling a controller, selecting a
//!   `[choice]`), and keeps thread placement in memory;
//! - [`synthetic`]: machines we do not have, written as the files the host layer reads;
//! - [`tree`]: the committed fixture hosts, tmpfs scratch directories, tree snapshots;
//! - [`require`]: what a test needs from the machine: skipped outside CI, failed under `CI=true`;
//! - [`child`]: a test that runs one of its binary's tests as a child process;
//! - [`serial`]: the modules of one test binary that must not run beside each other;
//! - [`poll`]: waiting for what another process or the kernel does;
//! - [`fuzz`]: the runner of the fuzz tests and their case count (`TAME_FUZZ_CASES`);
//! - [`browser`]: a page opened in headless chromium: console, exceptions, requests, screenshots;
//! - [`ink`]: whether a screenshot shows something (share of non-background pixels, colours);
//! - [`source`]: the workspace's Rust sources as code (comments and test items blanked);
//! - [`promtool`]: what `promtool check metrics` says of a Prometheus exposition.

pub mod browser;
pub mod child;
pub mod fixture;
pub mod fuzz;
pub mod ink;
pub mod poll;
pub mod promtool;
pub mod require;
pub mod serial;
pub mod source;
pub mod synthetic;
pub mod tree;

pub use fixture::{fixture_root, FixtureBackend, FixtureThread};
pub use tree::{
    committed_fixture, fixture_hosts_dir, scratch_dir, snapshot_tree, tree_differences,
    TreeSnapshot,
};
