//! `tame bench cost`: what separating real-time work costs ordinary work — throughput of
//! stress-ng classes and a compile loop on the machine as it is and on the system partition
//! while a partition is applied (`tame_assess::cost`, which applies and always reverts).

use std::path::PathBuf;

use tame_assess::cost::{CostOptions, CostPartition};
use tame_bench::cost::{view, Step, Workload};
use tame_bench::units::parse_duration_ns;

use super::measuring::install_stop_handler;
use crate::error::finished;
use crate::output::JsonOut;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct CostArgs {
    /// Workloads: all, or a list of cpu, syscall, switch, pipe, memcpy, hdd (stress-ng
    /// classes, bogo-ops/s) and build (gcc over a generated tree, files/s).
    #[arg(long, default_value = "all", value_name = "LIST")]
    workloads: String,
    /// How long each workload runs in each round and configuration (whole seconds).
    #[arg(long, allow_hyphen_values = true, default_value = "5s")]
    duration: String,
    /// Rounds: each runs every workload in each configuration, in turn.
    #[arg(long, allow_hyphen_values = true, default_value_t = 3)]
    rounds: u32,
    /// Also measure partitioned: apply this spec for each partitioned round and revert it
    /// after (needs root); the workloads run on its system partition.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["isolate", "partition"])]
    spec: Option<PathBuf>,
    /// Also measure partitioned, isolating N CPUs chosen as `tame assess --cpus N` does
    /// (applied for each partitioned round, reverted after; needs root).
    #[arg(
        long,
        allow_hyphen_values = true,
        value_name = "N",
        conflicts_with = "partition"
    )]
    isolate: Option<u32>,
    /// Measure only partitioned, in the system partition of the spec applied now beside
    /// isolated partition NAME (the machine as it was is not there to measure).
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// During the partitioned rounds, run a real-time load in the isolated partition
    /// (stress-ng cyclic: a SCHED_FIFO thread per CPU waking every 100 µs).
    #[arg(long)]
    rt_load: bool,
    /// Where the partition's journal lives (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
}

fn options(ctx: &Context, a: &CostArgs) -> anyhow::Result<CostOptions> {
    let workloads = Workload::parse_list(&a.workloads)?;
    let duration_ns =
        parse_duration_ns(&a.duration).map_err(|e| bad_input(format!("--duration: {e}")))?;
    let partition = match (&a.spec, a.isolate, &a.partition) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                bad_input(format!(
                    "cannot read spec {}: {e} — give the path of a partition spec (see examples/)",
                    path.display()
                ))
            })?;
            CostPartition::Spec(path.display().to_string(), text)
        }
        (None, Some(n), _) => CostPartition::Isolate(n),
        (None, None, Some(name)) => CostPartition::Applied(name.clone()),
        (None, None, None) => CostPartition::None,
    };
    Ok(CostOptions {
        workloads,
        duration_ns,
        rounds: a.rounds,
        partition,
        rt_load: a.rt_load,
        journal_dir: ctx.journal_dir(a.journal_dir.as_deref()),
        caller: ctx.caller.clone(),
        command_line: ctx.command_line.clone(),
    })
}

pub fn run(ctx: &Context, a: CostArgs) -> anyhow::Result<i32> {
    let options = options(ctx, &a)?;
    let json = JsonOut::open(a.json.as_deref(), "JSON result")?;
    let control = install_stop_handler()?;
    let mut step = |s: Step| {
        eprintln!(
            "tame bench cost: round {}/{} {} (CPUs {}): {}",
            s.round + 1,
            s.rounds,
            s.config.kind.name(),
            s.config.cpus,
            s.workload.name()
        );
    };
    let result = tame_assess::cost::bench_cost(&ctx.root, &options, &control, &mut step)?;
    json.emit(&result, &view::table(&result))?;
    Ok(finished(result.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CostArgs,
    }

    #[test]
    fn one_partition_source_at_a_time() {
        for argv in [
            &["x", "--spec", "a.toml", "--isolate", "1"][..],
            &["x", "--spec", "a.toml", "-p", "rt"],
            &["x", "--isolate", "1", "-p", "rt"],
        ] {
            let e = Cli::try_parse_from(argv).err().expect("refused");
            assert_eq!(e.exit_code(), 2, "{argv:?}");
        }
        let c = Cli::try_parse_from(["x", "--rounds", "2", "--rt-load", "-p", "rt"]).unwrap();
        assert_eq!((c.args.rounds, c.args.rt_load), (2, true));
        assert_eq!(c.args.partition.as_deref(), Some("rt"));
    }
}
