//! Partitions: carve the machine's CPUs, memory nodes, IRQs, kernel threads, idle
//! states and cache ways into a system partition and isolated ones, at run time,
//! transactionally (every write journaled first) and reversibly.
//!
//! Flow: [`spec::Spec::parse`] → [`plan::plan`] (validates everything, writes
//! nothing) → [`apply::apply`] (journaled, rolls back on failure) →
//! [`status::status`] / [`apply::revert`]. Apply returns the typed [`Applied`] partition
//! set; [`Applied::read`] reads it back from the journal for every other reader.

pub mod applied;
pub mod apply;
pub mod enable;
pub mod plan;
pub mod spec;
mod spec_file;
pub mod status;

pub use applied::{Applied, AppliedPartition, AppliedSpecError, PartitionCgroup};
pub use apply::{apply, apply_file, revert, ApplyError, ApplyReport};
pub use plan::{plan, Invalid, Plan, Step, Task};
pub use spec::{PartitionSpec, Role, Spec, SpecBuilder, SpecError};
pub use status::{status, Status};
