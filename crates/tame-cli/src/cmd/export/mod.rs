//! `tame export …`: tame's results and specs in the formats of the engines that run fleets
//! (Prometheus' text exposition, Kubernetes' KubeletConfiguration and OpenShift's
//! PerformanceProfile). One module per format.

pub mod kubernetes;
pub mod prometheus;

use crate::Context;

#[derive(clap::Subcommand)]
pub enum ExportCommand {
    /// Results as Prometheus text exposition (for node_exporter's textfile collector).
    Prometheus(prometheus::PrometheusArgs),
    /// The KubeletConfiguration fields that realise a partition spec on a Kubernetes node.
    Kubelet(kubernetes::KubeletArgs),
    /// An OpenShift PerformanceProfile that realises a partition spec.
    PerformanceProfile(kubernetes::ProfileArgs),
}

pub fn run(ctx: &Context, command: ExportCommand) -> anyhow::Result<i32> {
    match command {
        ExportCommand::Prometheus(a) => prometheus::run(ctx, a),
        ExportCommand::Kubelet(a) => kubernetes::run_kubelet(ctx, a),
        ExportCommand::PerformanceProfile(a) => kubernetes::run_profile(ctx, a),
    }
}
