//! `tame bench cache`: arguments into `tame_bench::cache` settings, run like every engine
//! bench; the competitor's CPU and the partition's cache ways are resolved here.

use tame_bench::cache::{ways, CacheSettings, CompetitorSettings};
use tame_bench::engine;
use tame_bench::error::BenchError;
use tame_host::cpu::CpuTopology;
use tame_host::reader::Reader;
use tame_host::CpuList;
use tame_rt::ClockKind;

use super::bench::{measure, CommonArgs};
use super::bench_mem::measured_cpu;
use super::measuring::Partitioned;
use crate::Context;

#[derive(clap::Args)]
pub struct CacheArgs {
    /// The CPU the work runs on, one (default: the last online CPU; with -p the partition's
    /// last). `--cpu` is read too (what this option was called before).
    #[arg(
        long = "cpus",
        alias = "cpu",
        value_name = "CPU",
        allow_hyphen_values = true
    )]
    cpu: Option<u32>,
    /// The CPU the competitor runs on (default: the first other online CPU; with -p the
    /// system partition's first).
    #[arg(
        long,
        allow_hyphen_values = true,
        conflicts_with = "no_competitor",
        value_name = "CPU"
    )]
    competitor_cpu: Option<u32>,
    /// Time the work alone only (the baseline).
    #[arg(long)]
    no_competitor: bool,
    /// n of the n×n f64 matrix multiply (the paper's is 64: 96 KiB of matrices).
    #[arg(long, allow_hyphen_values = true, default_value_t = tame_bench::cache::DEFAULT_MATRIX, value_name = "N")]
    matrix: u32,
    /// Timed multiplies per configuration and round.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value_t = 500,
        value_name = "N"
    )]
    iterations: u64,
    /// Size the iterations so the run lasts about this long (e.g. 10s), instead of --iterations.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "iterations")]
    duration: Option<String>,
    /// Rounds; each times every configuration once, in turn.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value_t = 5,
        value_name = "N"
    )]
    rounds: u32,
    #[command(flatten)]
    common: CommonArgs,
}

pub fn run(ctx: &Context, a: CacheArgs) -> anyhow::Result<i32> {
    let partitioned = a.common.partitioned(ctx)?;
    let cpu = measured_cpu(ctx, a.cpu, partitioned.as_ref())?;
    let topology = CpuTopology::read(&mut Reader::new(&ctx.root));
    let competitor = if a.no_competitor {
        None
    } else {
        let c = competitor_cpu(
            a.competitor_cpu,
            cpu,
            &topology.online,
            partitioned.as_ref(),
        )?;
        let llc = topology.last_level_cache(c).and_then(|l| l.size_kib);
        Some(CompetitorSettings::new(c, llc))
    };
    let iterations = match a.duration.as_deref() {
        Some(d) => {
            let configurations = if competitor.is_some() { 2 } else { 1 };
            let ns = tame_bench::units::parse_duration_ns(d)?;
            tame_bench::cache::iterations_for(ns, a.matrix.clamp(8, 1024), a.rounds, configurations)
        }
        None => a.iterations,
    };
    let cache_ways = ways::read(&ctx.root, partition_ways(partitioned.as_ref()));
    let settings = CacheSettings::new(
        cpu,
        competitor,
        a.matrix,
        iterations,
        a.rounds,
        cache_ways,
        a.common.threads(ClockKind::Monotonic),
    )?;
    if let Some(c) = &settings.competitor {
        engine::validate_cpus(&CpuList::from_cpus([c.cpu]), &topology.online)
            .map_err(|e| BenchError::Invalid(format!("--competitor-cpu: {e}")))?;
    }
    measure(ctx, settings, &a.common, partitioned, None)
}

/// `--competitor-cpu`, else the first CPU other than the measured one: of the system
/// partition with -p, of the online CPUs without.
fn competitor_cpu(
    asked: Option<u32>,
    measured: u32,
    online: &CpuList,
    partitioned: Option<&Partitioned>,
) -> tame_bench::Result<u32> {
    if let Some(c) = asked {
        return Ok(c);
    }
    let pool = partitioned
        .and_then(|p| p.system_cpus.as_ref())
        .unwrap_or(online);
    pool.iter().find(|&c| c != measured).ok_or_else(|| {
        BenchError::Invalid(format!(
            "no CPU for the competitor: {pool} holds only the measured CPU {measured} — name one with --competitor-cpu, or pass --no-competitor"
        ))
    })
}

/// With -p: the partition's name and its `cache_ways` in the applied spec (read with -p).
fn partition_ways(partitioned: Option<&Partitioned>) -> Option<ways::Partition<'_>> {
    partitioned.map(|p| ways::Partition {
        name: p.placement.partition.as_str(),
        cache_ways: p.cache_ways,
    })
}
