//! cgroup v1: one hierarchy per controller (or a few together), threads listed
//! and attached one by one in `tasks`.

pub mod cpu;
pub mod cpuset;

/// The threads of a group; writing a thread id attaches that thread.
pub const TASKS: &str = "tasks";
/// The processes of a group; writing a pid attaches all its threads.
pub const PROCS: &str = "cgroup.procs";
