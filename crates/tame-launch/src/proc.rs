//! Vetting a process before placing it. The host layer does the reading
//! (`tame_host::process::inspect`); here its refusals become [`LaunchError`]s
//! (bad input: a wrong PID), for the launch commands.

pub use tame_host::process::{counters, ProcessInfo, ThreadCounters};
use tame_host::Root;

use crate::error::{invalid, LaunchError};

/// Read and vet a process: it must exist, not be a zombie, not be a kernel thread.
pub fn inspect(root: &Root, pid: u32) -> Result<ProcessInfo, LaunchError> {
    tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))
}
