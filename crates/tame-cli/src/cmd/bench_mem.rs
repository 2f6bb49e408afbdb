//! `tame bench mem`: arguments into `tame_bench::mem` settings, run like every engine bench.

use tame_bench::engine;
use tame_bench::mem::{sweep, MemHost, MemRequest, MemSettings};

use super::bench::{measure, CommonArgs};
use super::measuring::{self, Partitioned};
use crate::Context;

#[derive(clap::Args)]
pub struct MemArgs {
    /// The CPU to measure on, one (default: the last online CPU; with -p the partition's
    /// last). `--cpu` is read too (what this option was called before).
    #[arg(
        long = "cpus",
        alias = "cpu",
        value_name = "CPU",
        allow_hyphen_values = true
    )]
    cpu: Option<u32>,
    /// The NUMA node the buffers are bound to (default: the CPU's node; on a one-node
    /// machine it is only recorded).
    #[arg(long, allow_hyphen_values = true)]
    node: Option<u32>,
    /// Buffer sizes, e.g. 16K,1M,64M (16K..512M, whole 4K pages; default: a sweep across
    /// the measured CPU's caches into DRAM, within the memory available).
    #[arg(long, value_name = "LIST")]
    sizes: Option<String>,
    /// Timed batches of 1024 accesses per size and pattern.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value_t = 1000,
        value_name = "N"
    )]
    batches: u64,
    /// Back the buffers with huge pages: the hugetlb pool where it holds the largest
    /// buffer, else transparent huge pages.
    #[arg(long)]
    hugepages: bool,
    #[command(flatten)]
    common: CommonArgs,
}

pub fn run(ctx: &Context, a: MemArgs) -> anyhow::Result<i32> {
    let sizes = a.sizes.as_deref().map(sweep::parse_sizes).transpose()?;
    let partitioned = a.common.partitioned(ctx)?;
    let cpu = measured_cpu(ctx, a.cpu, partitioned.as_ref())?;
    let host = MemHost::read(&ctx.root)?;
    // The TSC where it is invariant: an all-L1 batch lasts about a microsecond.
    let threads = a.common.threads(engine::preferred_clock(&ctx.root));
    let settings = MemSettings::resolve(
        MemRequest {
            cpu,
            node: a.node,
            sizes,
            batches: a.batches,
            huge_pages: a.hugepages,
            threads,
        },
        &host,
    )?;
    measure(ctx, settings, &a.common, partitioned, None)
}

/// `--cpus`, else the last of the CPUs a bench would measure (online, or the partition's);
/// whether it may be used is checked when the run is prepared.
pub(super) fn measured_cpu(
    ctx: &Context,
    asked: Option<u32>,
    partitioned: Option<&Partitioned>,
) -> anyhow::Result<u32> {
    if let Some(cpu) = asked {
        return Ok(cpu);
    }
    let cpus = measuring::measured_cpus(ctx, None, partitioned, None)?;
    cpus.iter()
        .last()
        .ok_or_else(|| anyhow::anyhow!("no CPU to measure on: the CPU list is empty"))
}
