//! Partitions: carve the machine's CPUs, memory nodes, IRQs, kernel threads, idle
//! states and cache ways into a system partition and isolated ones, at run time,
//! transactionally (every write journaled first) and reversibly.
//!
//! Flow: [`spec::Spec::parse`] → [`plan::plan`] (validates everything, writes
//! nothing) → [`apply::apply`] (journaled, rolls back on failure) →
//! [`status::status`] / [`apply::revert`].

pub mod apply;
pub mod plan;
pub mod spec;
mod spec_file;
pub mod status;

pub use apply::{apply, apply_file, revert, ApplyError, ApplyReport};
pub use plan::{plan, Invalid, Plan, Step, Task};
pub use spec::{Spec, SpecError};
pub use status::{status, Status};
