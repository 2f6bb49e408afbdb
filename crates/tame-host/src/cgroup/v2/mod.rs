//! cgroup v2: one unified hierarchy; a controller is used below a group only
//! when the group enables it in `cgroup.subtree_control`; domain groups hold
//! whole processes.

pub mod cpu;
pub mod cpuset;

use crate::cgroup::{CgroupWrite, Group, Setting};

/// The processes of a group; writing a pid (or any of its thread ids) moves the process.
pub const PROCS: &str = "cgroup.procs";
/// The threads of a group.
pub const THREADS: &str = "cgroup.threads";
/// The controllers available to a group.
pub const CONTROLLERS: &str = "cgroup.controllers";
/// The controllers a group's children may use; written `+name` / `-name`.
pub const SUBTREE_CONTROL: &str = "cgroup.subtree_control";

/// Enable a controller for the children; revert writes `-name` (the file prints
/// a list, which cannot be written back).
pub(crate) fn enable(g: &Group, controller: &str) -> CgroupWrite {
    CgroupWrite {
        restore_with: Some(format!("-{controller}")),
        ..CgroupWrite::new(
            g.file(SUBTREE_CONTROL),
            format!("+{controller}"),
            Setting::SubtreeControl,
        )
    }
}
