//! `tame`: predictable real-time execution beside an ordinary Linux system.
//!
//! This binary only parses arguments, dispatches to one module per command,
//! and maps errors to exit codes (once, in `error::exit_code`); the work lives in
//! the library crates.

mod cmd;
mod context;
mod error;
mod output;

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
    /// Can this machine run your time-critical work beside Linux, and what does it take?
    /// Measures shared and partitioned under load, always reverts, and decides.
    Assess(cmd::assess::AssessArgs),
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
    /// Run a program placed on isolated CPUs from its first instruction.
    Run(cmd::launch::RunArgs),
    /// Move a running program's threads onto isolated CPUs (recorded; `tame attach` undoes it).
    Detach(cmd::launch::DetachArgs),
    /// Every activation of a program's threads (by pid, in a partition, or started here):
    /// wake latency, response, run time, what delayed it, and a snapshot of each miss.
    Watch(cmd::watch::WatchArgs),
    /// Put a detached program back exactly as it was.
    Attach(cmd::launch::AttachArgs),
    /// What tame placed, per partition, with switches and faults since placement.
    Ps(cmd::launch::PsArgs),
    /// Shared-memory channel segments.
    #[command(subcommand)]
    Ipc(cmd::ipc::IpcCommand),
    /// Validate a partition spec and show the changes apply would make (and boot parameters).
    Plan(cmd::partition::PlanArgs),
    /// Apply a partition spec, journaled and reversible.
    Apply(cmd::partition::ApplyArgs),
    /// Show the applied partitions, drift, and what still runs on isolated CPUs.
    Status(cmd::partition::StatusArgs),
    /// Undo every change of `tame apply`, from its journal.
    Revert(cmd::partition::RevertArgs),
    /// Keep a partition across reboots: its spec, a unit applying it at boot, systemd
    /// drop-ins and boot parameters, each file journaled (`tame disable` removes them).
    Enable(cmd::enable::EnableArgs),
    /// Remove what `tame enable` installed, byte for byte.
    Disable(cmd::enable::DisableArgs),
    /// Compare two results of the same bench: per-metric and per-source differences and ratios;
    /// --gate: fail (exit 1) when a new result is worse than baselines by more than their spread.
    Compare(cmd::compare::CompareArgs),
    /// Results and specs for fleet engines: Prometheus metrics, Kubernetes node settings.
    #[command(subcommand)]
    Export(cmd::export::ExportCommand),
    /// Draw results as one self-contained HTML page of figures (and each figure as SVG).
    Report(cmd::report::ReportArgs),
    /// Guarantee a process a CPU share per period (scheduling server, SCHED_DEADLINE or cgroup).
    Reserve(cmd::reserve::ReserveArgs),
    /// The scheduling server behind `tame reserve --backend server`.
    Serve(cmd::serve::ServeArgs),
    /// Watch the applied partitions live: tasks, IRQs and values that erode them, one
    /// line per event; with --repair put them back through the journal.
    Guard(cmd::guard::GuardArgs),
    /// Print a shell completion script (bash, zsh or fish) to stdout.
    Completions(cmd::generate::CompletionsArgs),
    /// Write one manual page per command into a directory (`make install` runs it).
    #[command(hide = true)]
    Man(cmd::generate::ManArgs),
    /// The helpers `tame bench reserve` starts (work kernels, a scheduling server).
    #[command(hide = true, name = "reserve-kit")]
    ReserveKit(cmd::bench_reserve::KitArgs),
}

fn main() {
    let cli = Cli::parse();
    let ctx = Context::new(cli.root);
    let result = match cli.command {
        Command::Assess(a) => cmd::assess::run(&ctx, a),
        Command::Bench(c) => cmd::bench::run(&ctx, *c),
        Command::Check(a) => cmd::check::run(&ctx, a),
        Command::Topology(a) => cmd::topology::run(&ctx, a),
        Command::Host(c) => cmd::host::run(&ctx, c),
        Command::Run(a) => cmd::launch::run_run(&ctx, a),
        Command::Detach(a) => cmd::launch::run_detach(&ctx, a),
        Command::Attach(a) => cmd::launch::run_attach(&ctx, a),
        Command::Watch(a) => cmd::watch::run(&ctx, a),
        Command::Ps(a) => cmd::launch::run_ps(&ctx, a),
        Command::Ipc(c) => cmd::ipc::run(&ctx, c),
        Command::Plan(a) => cmd::partition::run_plan(&ctx, a),
        Command::Apply(a) => cmd::partition::run_apply(&ctx, a),
        Command::Status(a) => cmd::partition::run_status(&ctx, a),
        Command::Revert(a) => cmd::partition::run_revert(&ctx, a),
        Command::Enable(a) => cmd::enable::run_enable(&ctx, a),
        Command::Disable(a) => cmd::enable::run_disable(&ctx, a),
        Command::Compare(a) => cmd::compare::run(&ctx, a),
        Command::Export(c) => cmd::export::run(&ctx, c),
        Command::Report(a) => cmd::report::run(&ctx, a),
        Command::Reserve(a) => cmd::reserve::run(&ctx, a),
        Command::Serve(a) => cmd::serve::run(&ctx, a),
        Command::Guard(a) => cmd::guard::run(&ctx, a),
        Command::Completions(a) => cmd::generate::completions(&ctx, a),
        Command::Man(a) => cmd::generate::man(&ctx, a),
        Command::ReserveKit(a) => cmd::bench_reserve::run_kit(a),
    };
    std::process::exit(error::exit_code(result));
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The journal directory each command resolves, for the commands that read or write
    /// the partition journal.
    fn journal_dir(args: &[&str]) -> PathBuf {
        let cli = Cli::try_parse_from(args).unwrap();
        let ctx = Context::new(cli.root.clone());
        match &cli.command {
            Command::Apply(a) => a.journal_dir(&ctx),
            Command::Run(a) => a.journal_dir(&ctx),
            Command::Reserve(a) => a.state_dir(&ctx),
            _ => unreachable!("not a command with a journal directory"),
        }
    }

    #[test]
    fn under_root_apply_run_and_reserve_use_one_journal_dir() {
        let apply = journal_dir(&["tame", "--root", "/fx", "apply", "rt.toml"]);
        assert_eq!(apply, PathBuf::from("/fx/var/lib/tame"));
        let run = journal_dir(&["tame", "--root", "/fx", "run", "-p", "rt", "--", "true"]);
        let reserve = journal_dir(&["tame", "--root", "/fx", "reserve", "--list"]);
        assert_eq!((&run, &reserve), (&apply, &apply));
        // Without --root: the real one; given: as given.
        assert_eq!(
            journal_dir(&["tame", "run", "--cpu", "1", "--", "true"]),
            PathBuf::from("/var/lib/tame")
        );
        let given = ["tame", "--root", "/fx", "run", "-p", "rt"];
        let given = [&given[..], &["--journal-dir", "/j", "--", "true"]].concat();
        assert_eq!(journal_dir(&given), PathBuf::from("/j"));
    }
}
