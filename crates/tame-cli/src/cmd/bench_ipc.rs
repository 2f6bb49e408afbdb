//! `tame bench ipc`: arguments and output for the IPC bench in `tame-bench`.

use tame_bench::engine;
use tame_bench::ipc::{self, IpcSettings, Transport};
use tame_rt::ClockKind;

use super::measuring::{install_stop_handler, parse_clock};
use crate::error::finished;
use crate::output::JsonOut;
use crate::Context;

#[derive(clap::Args)]
pub struct IpcBenchArgs {
    /// The two CPUs: the timing (sending) thread's, then the echoing (receiving) thread's.
    #[arg(long, default_value = "0,1", value_name = "A,B")]
    pub cpus: String,
    /// Transports to compare: all, or a list of floor, tame-ring, tame-register, rtrb, pipe, unix-socket, mq.
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub transports: String,
    /// Message sizes in bytes: 8, 64 or both.
    #[arg(long, default_value = "8,64", value_name = "LIST")]
    pub sizes: String,
    /// Measured round trips per transport and size (spread over the rounds).
    #[arg(long, default_value_t = 200_000)]
    pub round_trips: u64,
    /// Unmeasured round trips before each measured segment.
    #[arg(long, default_value_t = 2_000)]
    pub warmup: u64,
    /// Messages per transport and size for throughput (spread over the rounds).
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Rounds; each measures every transport once, in turn (interleaving).
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Slots of the tame and rtrb rings (a power of two).
    #[arg(long, default_value_t = 4096)]
    pub ring_capacity: u64,
    /// Clock: tsc (default where the TSC is invariant) or monotonic.
    #[arg(long, value_parser = parse_clock)]
    pub clock: Option<ClockKind>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
}

pub fn run(ctx: &Context, args: IpcBenchArgs) -> anyhow::Result<i32> {
    let cpus = ipc::parse_cpu_pair(&args.cpus)?;
    let transports = Transport::parse_list(&args.transports)?;
    let sizes = ipc::parse_sizes(&args.sizes)?;
    let clock = args
        .clock
        .unwrap_or_else(|| engine::preferred_clock(&ctx.root));
    let settings = IpcSettings {
        cpus,
        sizes,
        transports,
        round_trips: args.round_trips,
        warmup_round_trips: args.warmup,
        throughput_messages: args.messages,
        rounds: args.rounds,
        ring_capacity: args.ring_capacity,
        clock,
    };
    // Refused before the JSON file is created.
    ipc::check(&ctx.root, &settings)?;
    let json = JsonOut::open(args.json.as_deref(), "JSON result")?;
    let control = install_stop_handler()?;
    let done = ipc::run(&ctx.root, settings, ctx.command_line.clone(), &control)?;
    json.emit(&done.result, &ipc::summary_text(&done))?;
    Ok(finished(done.result.interrupted))
}
