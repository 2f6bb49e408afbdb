//! `tame bench noise`: every gap on the measured CPUs, attributed to what caused it.
//! The work lives in `tame_bench::noise`; this parses, opens outputs and prints.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use tame_bench::engine::{self, ThreadSettings};
use tame_bench::noise::{self, NoiseSettings, DETECTOR_PRIORITY};
use tame_bench::session::Conditions;
use tame_bench::units::parse_duration_ns;
use tame_rt::{ClockKind, Policy};

use super::measuring::{self, install_stop_handler, parse_clock};
use crate::error::finished;
use crate::output::{create, JsonOut};
use crate::Context;

#[derive(clap::Args)]
pub struct NoiseArgs {
    /// CPUs to measure, one detector thread each (`all`, or a list such as 1,3-4; default
    /// all, or with -p every CPU of the partition).
    #[arg(long)]
    cpus: Option<String>,
    /// How long to measure.
    #[arg(long, allow_hyphen_values = true, default_value = "10s")]
    duration: String,
    /// Smallest gap recorded (default: 5× the loop floor, at least 1us).
    #[arg(long, allow_hyphen_values = true)]
    threshold: Option<String>,
    /// Detector scheduling policy: other (default, so higher-priority work shows as noise), fifo, rr.
    #[arg(long, default_value = "other")]
    policy: Policy,
    /// Static priority for fifo/rr (default 1).
    #[arg(long, allow_hyphen_values = true)]
    priority: Option<i32>,
    /// Clock: tsc (default where invariant; trace clock x86-tsc) or monotonic (trace clock mono, µs stamps).
    #[arg(long, value_parser = parse_clock)]
    clock: Option<ClockKind>,
    /// Do not lock memory.
    #[arg(long)]
    no_mlock: bool,
    /// Gaps only: do not capture tracefs events.
    #[arg(long)]
    no_trace: bool,
    /// Write the result as JSON to FILE, or to stdout with `-` (the report then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Write every gap as CSV: cpu,start_ns,duration_ns,class,source.
    #[arg(long, value_name = "FILE")]
    gaps: Option<PathBuf>,
    /// Background load during the run: any of cpu,io,hdd,vm,sock,build,cache,stream,rt.
    #[arg(long, value_name = "LIST")]
    load: Option<String>,
    /// CPUs the load runs on (default: all online CPUs; with -p, the system partition's).
    #[arg(long, value_name = "LIST")]
    load_cpus: Option<String>,
    /// Measure inside this applied partition (`tame apply`): its CPUs unless --cpus picks
    /// some of them; the detectors join its cgroup, tame, its trace reader and the load stay outside.
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// Where `tame apply` keeps its journal (default /var/lib/tame below --root): read for
    /// -p, and to name the partition of a --cpus CPU outside tame's cpuset.
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
}

pub fn run(ctx: &Context, a: NoiseArgs) -> anyhow::Result<i32> {
    let partitioned = measuring::partition(ctx, a.partition.as_deref(), a.journal_dir.as_deref())?;
    let cpus = measuring::measured_cpus(
        ctx,
        a.cpus.as_deref(),
        partitioned.as_ref(),
        a.journal_dir.as_deref(),
    )?;
    let duration_ns = parse_duration_ns(&a.duration)?;
    let threshold_ns = a.threshold.as_deref().map(parse_duration_ns).transpose()?;
    let clock = a
        .clock
        .unwrap_or_else(|| engine::preferred_clock(&ctx.root));
    let threads = ThreadSettings::new(a.policy, a.priority, DETECTOR_PRIORITY, !a.no_mlock, clock);
    let settings = NoiseSettings::new(cpus, duration_ns, threshold_ns, threads, !a.no_trace)?;
    let load = measuring::load(
        ctx,
        a.load.as_deref(),
        a.load_cpus.as_deref(),
        partitioned.as_ref(),
    )?;
    // Outputs are created before anything runs, so an unwritable path is bad input.
    let json = JsonOut::open(a.json.as_deref(), "JSON result")?;
    let gaps_file = a.gaps.as_ref().map(|p| create(p, "gaps CSV")).transpose()?;
    let control = install_stop_handler()?;
    let title = settings.title();
    let run = noise::run(
        &ctx.root,
        settings,
        Conditions {
            load: load.as_ref(),
            placement: partitioned.as_ref().map(|p| &p.placement),
        },
        &control,
        measuring::timed_progress(duration_ns),
        ctx.command_line.clone(),
    )?;
    if let Some(f) = gaps_file {
        let mut w = std::io::BufWriter::new(f);
        noise::view::write_gaps_csv(&mut w, &run.gaps, run.result.noise.attribution.available)
            .and_then(|()| w.flush())
            .context("cannot write the gaps CSV")?;
    }
    json.emit(&run.result, &noise::view::report(&run.result, &title))?;
    Ok(finished(run.result.result.interrupted))
}
