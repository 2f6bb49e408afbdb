//! `tame`: predictable real-time execution beside an ordinary Linux system.
//!
//! This binary only parses arguments, dispatches to one module per command,
//! and maps errors to exit codes; the work lives in the library crates.

mod cmd;
mod context;
mod error;

use clap::{Parser, Subcommand};

pub use context::Context;
pub use error::{bad_input, BadInput};

#[derive(Parser)]
#[command(
    name = "tame",
    version,
    about = "Predictable real-time execution beside an ordinary Linux system"
)]
struct Cli {
    /// Read the host below this directory instead of `/` (a fixture tree from `tame host capture`).
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    root: std::path::PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure how predictably threads run on this machine.
    #[command(subcommand)]
    Bench(Box<cmd::bench::BenchCommand>),
    /// Audit this machine for real-time fitness: what disturbs it and how to fix it.
    Check(cmd::check::CheckArgs),
    /// Show the machine at a glance: CPUs, caches, NUMA nodes, IRQs.
    Topology(cmd::topology::TopologyArgs),
    /// Host-layer utilities.
    #[command(subcommand)]
    Host(cmd::host::HostCommand),
    /// Shared-memory channel segments.
    #[command(subcommand)]
    Ipc(cmd::ipc::IpcCommand),
}

fn main() {
    let cli = Cli::parse();
    let ctx = Context::new(cli.root);
    let result = match cli.command {
        Command::Bench(c) => cmd::bench::run(&ctx, *c),
        Command::Check(a) => cmd::check::run(&ctx, a),
        Command::Topology(a) => cmd::topology::run(&ctx, a),
        Command::Host(c) => cmd::host::run(&ctx, c),
        Command::Ipc(c) => cmd::ipc::run(&ctx, c),
    };
    std::process::exit(error::exit_code(result));
}
