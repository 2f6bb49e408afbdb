//! `tame bench ipc`: arguments and output for the IPC bench in `tame-bench`.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use tame_bench::engine;
use tame_bench::ipc::{self, sides, IpcSettings, Sides, Transport};
use tame_bench::load::LoadSpec;
use tame_bench::session::Conditions;
use tame_rt::ClockKind;

use super::measuring::{self, install_stop_handler, parse_clock, Partitioned};
use crate::error::finished;
use crate::output::{create, JsonOut};
use crate::Context;

#[derive(clap::Args)]
pub struct IpcBenchArgs {
    /// The two CPUs: the timing (sending) thread's, then the echoing (receiving) thread's
    /// (default 0,1; with -p the partition's first CPU, and its second or else the system
    /// partition's first).
    #[arg(long, value_name = "A,B")]
    pub cpus: Option<String>,
    /// Transports to compare: all, or a list of floor, tame-ring, tame-register, rtrb, pipe,
    /// unix-socket, mq, iceoryx2 (iceoryx2 only in a tame built with `--features iceoryx2`;
    /// `all` includes it there).
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub transports: String,
    /// Message sizes in bytes, any of 8, 56, 64, 256, 1024 (default: the three of the ring's
    /// goals; all five take about 5/3 as long).
    #[arg(long, default_value = "8,56,64", value_name = "LIST")]
    pub sizes: String,
    /// Measured round trips per transport and size (spread over the rounds).
    #[arg(long, allow_hyphen_values = true, default_value_t = 200_000)]
    pub round_trips: u64,
    /// Unmeasured round trips before each measured segment.
    #[arg(long, allow_hyphen_values = true, default_value_t = 2_000)]
    pub warmup: u64,
    /// Messages per transport and size for throughput (spread over the rounds).
    #[arg(long, allow_hyphen_values = true, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Rounds; each measures every transport once, in turn (interleaving).
    #[arg(long, allow_hyphen_values = true, default_value_t = 5)]
    pub rounds: u32,
    /// Slots of the tame and rtrb rings (a power of two).
    #[arg(long, allow_hyphen_values = true, default_value_t = 4096)]
    pub ring_capacity: u64,
    /// Clock: tsc (default where the TSC is invariant) or monotonic.
    #[arg(long, value_parser = parse_clock)]
    pub clock: Option<ClockKind>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// Every measured round trip as CSV (timestamp_ns,cpu,value_ns,group; value = round trip).
    #[arg(long, visible_alias = "raw", value_name = "FILE", value_parser = super::bench::samples_file)]
    pub samples: Option<PathBuf>,
    /// Background load during the run: any of cpu,io,hdd,vm,sock,build,cache,stream,rt.
    #[arg(long, value_name = "LIST")]
    pub load: Option<String>,
    /// CPUs the load runs on (default: all online CPUs; with -p, the system partition's
    /// other than the bench's two, or all of them when that leaves none).
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<String>,
    /// Time from inside this applied partition (`tame apply`): the timing thread joins its
    /// cgroup on its first CPU; the echo thread runs on its second CPU, or with one CPU on the
    /// system partition, outside it.
    #[arg(short = 'p', long, value_name = "NAME")]
    pub partition: Option<String>,
    /// Where `tame apply` keeps its journal, for -p (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR", requires = "partition")]
    pub journal_dir: Option<PathBuf>,
}

pub fn run(ctx: &Context, args: IpcBenchArgs) -> anyhow::Result<i32> {
    let asked = args.cpus.as_deref().map(ipc::parse_cpu_pair).transpose()?;
    let transports = Transport::parse_list(&args.transports)?;
    let sizes = ipc::parse_sizes(&args.sizes)?;
    let partitioned =
        measuring::partition(ctx, args.partition.as_deref(), args.journal_dir.as_deref())?;
    let system = partitioned.as_ref().and_then(|p| p.system_cpus.as_ref());
    let sides = sides::choose(asked, partitioned.as_ref().map(|p| &p.placement), system)?;
    let load = load(ctx, &args, partitioned.as_ref(), &sides)?;
    let clock = args
        .clock
        .unwrap_or_else(|| engine::preferred_clock(&ctx.root));
    let settings = IpcSettings {
        sides,
        sizes,
        transports,
        round_trips: args.round_trips,
        warmup_round_trips: args.warmup,
        throughput_messages: args.messages,
        rounds: args.rounds,
        ring_capacity: args.ring_capacity,
        clock,
    };
    let conditions = Conditions {
        load: load.as_ref(),
        placement: partitioned.as_ref().map(|p| &p.placement),
    };
    // Refused before any output file is created.
    ipc::check(&ctx.root, &settings, conditions)?;
    let capacity = settings.sample_capacity(args.samples.is_some())?;
    let json = JsonOut::open(args.json.as_deref(), "JSON result")?;
    let samples = args
        .samples
        .as_ref()
        .map(|p| create(p, "samples"))
        .transpose()?;
    let control = install_stop_handler()?;
    // How long it takes is not known beforehand (a default run takes minutes).
    let tick = measuring::progress(settings.progress_total(), None);
    let done = ipc::run(
        &ctx.root,
        settings,
        conditions,
        &control,
        capacity,
        tick,
        ctx.command_line.clone(),
    )?;
    if let Some(file) = samples {
        let mut w = std::io::BufWriter::new(file);
        ipc::write_samples_csv(&mut w, &done.samples)
            .and_then(|()| w.flush())
            .context("cannot write the samples")?;
    }
    json.emit(&done.result, &ipc::summary_text(&done))?;
    Ok(finished(done.result.interrupted))
}

/// `--load` on `--load-cpus`; with -p the load defaults to the system partition's CPUs
/// other than the bench's (see [`sides::default_load_cpus`]).
fn load(
    ctx: &Context,
    args: &IpcBenchArgs,
    partitioned: Option<&Partitioned>,
    sides: &Sides,
) -> anyhow::Result<Option<LoadSpec>> {
    let default = partitioned
        .and_then(|p| p.system_cpus.as_ref())
        .map(|system| sides::default_load_cpus(system, sides).to_string());
    // Only a load gets the default: --load-cpus alone stays an error.
    let cpus = args
        .load_cpus
        .as_deref()
        .or(default.as_deref().filter(|_| args.load.is_some()));
    Ok(tame_bench::target::load(
        &ctx.root,
        args.load.as_deref(),
        cpus,
    )?)
}
