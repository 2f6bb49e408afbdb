//! tame-reserve's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//!
//! Both modules change the machine (real-time threads, SCHED_DEADLINE bandwidth, cgroups,
//! servers and clients as other users): each test holds `tame_testing::serial::module`,
//! so the two never overlap, as when they were binaries of their own.

mod serve_hostile;
mod system;
