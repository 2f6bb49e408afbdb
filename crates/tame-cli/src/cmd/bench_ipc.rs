//! `tame bench ipc`: arguments and output for the IPC bench in `tame-bench`.

use std::io::Write as _;

use anyhow::Context as _;
use tame_bench::ipc::{self, IpcSettings, Transport};
use tame_host::environment::RunEnvironment;
use tame_rt::ClockKind;

use crate::error::EXIT_INTERRUPTED;
use crate::{bad_input, Context};

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
    #[arg(long, value_parser = super::bench::parse_clock)]
    pub clock: Option<ClockKind>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
}

fn parse_cpus(text: &str) -> anyhow::Result<[u32; 2]> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let cpus: Option<Vec<u32>> = parts.iter().map(|p| p.parse().ok()).collect();
    match cpus.as_deref() {
        Some([a, b]) => Ok([*a, *b]),
        _ => Err(bad_input(format!(
            "--cpus {text:?}: expected two CPU numbers A,B (e.g. 0,1) — the bench runs one thread on each"
        ))),
    }
}

fn parse_transports(text: &str) -> anyhow::Result<Vec<Transport>> {
    if text.trim() == "all" {
        return Ok(Transport::ALL.to_vec());
    }
    let mut transports = Vec::new();
    for name in text.split(',').map(str::trim) {
        let transport = Transport::parse(name).ok_or_else(|| {
            let known: Vec<&str> = Transport::ALL.iter().map(|t| t.name()).collect();
            bad_input(format!(
                "--transports: unknown transport {name:?} — use all or any of {}",
                known.join(", ")
            ))
        })?;
        if !transports.contains(&transport) {
            transports.push(transport);
        }
    }
    Ok(transports)
}

fn parse_sizes(text: &str) -> anyhow::Result<Vec<usize>> {
    let mut sizes = Vec::new();
    for part in text.split(',').map(str::trim) {
        let size = part
            .parse()
            .ok()
            .filter(|s| ipc::SIZES.contains(s))
            .ok_or_else(|| {
                bad_input(format!(
                    "--sizes: {part:?} is not a supported size — use 8, 64 or 8,64"
                ))
            })?;
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    Ok(sizes)
}

pub fn run(ctx: &Context, args: IpcBenchArgs) -> anyhow::Result<i32> {
    let cpus = parse_cpus(&args.cpus)?;
    let transports = parse_transports(&args.transports)?;
    let sizes = parse_sizes(&args.sizes)?;
    let environment = RunEnvironment::capture(&ctx.root);
    let clock = args
        .clock
        .unwrap_or_else(|| super::bench::preferred_clock(ctx));
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
    settings
        .validate(&environment.online_cpus)
        .map_err(super::bench::lift)?;
    // Open the JSON file before measuring so a bad path fails first.
    let mut json_file = match args.json.as_deref() {
        None | Some("-") => None,
        Some(path) => Some(std::fs::File::create(path).map_err(|e| {
            bad_input(format!(
                "cannot create {path}: {e} — pass a writable path with --json"
            ))
        })?),
    };
    let control = super::bench::install_stop_handler()?;
    let finished = ipc::run(&ctx.root, settings, ctx.command_line.clone(), &control)
        .map_err(super::bench::lift)?;
    let text = ipc::summary_text(&finished);
    let json = finished.result.to_json();
    if let Some(file) = json_file.as_mut() {
        writeln!(file, "{json}").context("cannot write the JSON result")?;
    }
    if args.json.as_deref() == Some("-") {
        eprint!("{text}");
        super::topology::print_out(&(json + "\n"))?;
    } else {
        super::topology::print_out(&text)?;
    }
    Ok(if finished.result.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    })
}
