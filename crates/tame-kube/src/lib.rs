//! Kubernetes' view of a partition spec, so that what was measured on one machine with
//! tame is what a fleet of nodes gets:
//! - [`kubelet::export`]: the KubeletConfiguration fields (static CPU manager with the
//!   system partition reserved, topology manager, memory manager where mems are set);
//! - [`profile::export`]: an OpenShift PerformanceProfile (isolated and reserved CPUs,
//!   huge pages, real-time kernel, IRQ load balancing, topology policy);
//! - [`compare::compare`]: a node's kubelet config file against the kubelet export.
//!
//! Each exported field carries why it has its value; what the spec says that Kubernetes
//! cannot express is listed, never dropped. Pure: works on a [`tame_host::HostModel`].

pub mod compare;
mod cpuset;
pub mod document;
mod hugepages;
pub mod kubelet;
mod layout;
pub mod profile;
mod quantity;

pub use compare::{compare, parse_node_config, Comparison, NodeConfigError, Outcome};
pub use document::{inline, Check, Export, Field};
/// The YAML value type of documents and node configs.
pub use serde_norway::Value;

use tame_host::HostModel;
use tame_partition::{Invalid, Spec};

/// Both exports of a spec, validated on the host first (as `tame plan` does): a spec
/// that cannot be applied here is refused with the plan's errors.
pub fn kubelet_for(spec: &Spec, host: &HostModel) -> Result<Export, Invalid> {
    let plan = tame_partition::plan(spec, host)?;
    let mut export = kubelet::export(spec, host, &plan);
    export.plan_warnings = plan.warnings;
    Ok(export)
}

/// The PerformanceProfile named `name`, validated on the host first.
pub fn profile_for(spec: &Spec, host: &HostModel, name: &str) -> Result<Export, Invalid> {
    let plan = tame_partition::plan(spec, host)?;
    let mut export = profile::export(spec, host, name);
    export.plan_warnings = plan.warnings;
    Ok(export)
}
