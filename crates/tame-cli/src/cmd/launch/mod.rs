//! `tame run`, `tame detach`, `tame attach`, `tame ps`: place programs on
//! isolated CPUs and put them back. Each command is a `tame_launch` call; [`view`]
//! renders what detach and ps report.

use tame_launch::view as json;
mod view;

use std::ffi::OsString;
use std::path::PathBuf;

use tame_bench::units::parse_duration_ns;
use tame_launch::detach::{self, Store, ThreadSelection};
use tame_launch::ps;
use tame_launch::run::{self, RunOptions};
use tame_launch::target::{self, TargetRequest};
use tame_rt::Policy;

use crate::output::{print_json, print_out};
use crate::{bad_input, Context};

/// Where the program goes and how it is scheduled; shared by run and detach.
#[derive(clap::Args)]
pub struct Target {
    /// A partition applied with `tame apply` (its CPUs and cpuset).
    #[arg(short = 'p', long, conflicts_with_all = ["cpus", "cpu"])]
    partition: Option<String>,
    /// CPUs to place it on.
    #[arg(long)]
    cpus: Option<String>,
    /// One CPU to place it on.
    #[arg(long)]
    cpu: Option<u32>,
    /// Scheduling policy: fifo, rr, deadline or other (default: unchanged).
    #[arg(long)]
    policy: Option<Policy>,
    /// Static priority for fifo/rr (default 80).
    #[arg(long)]
    priority: Option<i32>,
    /// Place it even though other work runs there (the system partition, or --cpus that isolcpus= does not cover).
    #[arg(long)]
    shared_ok: bool,
    // The default is below --root (Context::journal_dir); the help shows it as before.
    /// Where `tame apply` keeps its journal and tame its placement journals [default: /var/lib/tame]
    #[arg(long)]
    journal_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    target: Target,
    /// Lock all memory of the program after exec (mlockall through a preload library).
    #[arg(long)]
    mlock: bool,
    /// Heap to fault in and keep locked after exec (implies --mlock), e.g. 64M.
    #[arg(long, value_name = "SIZE")]
    prefault: Option<String>,
    /// RLIMIT_RTTIME: the longest a real-time thread may run without blocking (e.g. 500ms).
    #[arg(long, value_name = "LIMIT")]
    rttime: Option<String>,
    /// Children of the program start as SCHED_OTHER (SCHED_RESET_ON_FORK).
    #[arg(long)]
    reset_on_fork: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
pub struct DetachArgs {
    pid: u32,
    #[command(flatten)]
    target: Target,
    /// Which threads: all, main, or thread ids (1234,1240).
    #[arg(long, default_value = "all")]
    threads: String,
    /// Print what was moved, and each thread's state before, as JSON (schema tame.detach/1).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct AttachArgs {
    pid: u32,
    /// Where the placement journals are (as given to `tame detach`) [default: /var/lib/tame]
    #[arg(long)]
    journal_dir: Option<PathBuf>,
    /// Print what was restored as JSON (schema tame.attach/1).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct PsArgs {
    /// Print the placed threads as JSON (schema tame.ps/1).
    #[arg(long)]
    json: bool,
    /// Where the placement journals are (as given to `tame run` and `tame detach`) [default: /var/lib/tame]
    #[arg(long)]
    journal_dir: Option<PathBuf>,
}

impl Target {
    /// `--journal-dir`, else the default below `--root`.
    fn journal_dir(&self, ctx: &Context) -> PathBuf {
        ctx.journal_dir(self.journal_dir.as_deref())
    }

    fn resolve(&self, ctx: &Context) -> anyhow::Result<target::Target> {
        let request = TargetRequest {
            partition: self.partition.clone(),
            cpus: self.cpus.clone(),
            cpu: self.cpu,
            policy: self.policy,
            priority: self.priority,
            shared_ok: self.shared_ok,
            journal_dir: self.journal_dir(ctx),
        };
        Ok(target::resolve(&ctx.root, &request, &ctx.caller)?)
    }
}

fn size_bytes(text: &str) -> anyhow::Result<u64> {
    tame_rt::size::parse_bytes(text).ok_or_else(|| {
        bad_input(format!(
            "size {text:?} is not a number of bytes (e.g. 64M, 512K)"
        ))
    })
}

impl RunArgs {
    /// Where the applied partitions are read and the placement journal is kept.
    pub(crate) fn journal_dir(&self, ctx: &Context) -> PathBuf {
        self.target.journal_dir(ctx)
    }
}

pub fn run_run(ctx: &Context, a: RunArgs) -> anyhow::Result<i32> {
    let target = a.target.resolve(ctx)?;
    let prefault_bytes = a.prefault.as_deref().map(size_bytes).transpose()?;
    let options = RunOptions {
        reset_on_fork: a.reset_on_fork,
        rttime_us: a
            .rttime
            .as_deref()
            .map(|t| parse_duration_ns(t).map(|ns| ns / 1000))
            .transpose()
            .map_err(|e| bad_input(format!("--rttime: {e}")))?,
        mlock: a.mlock,
        prefault_bytes,
    };
    let store = Store::new(&a.journal_dir(ctx));
    let ended = run::run(&ctx.root, &store, &target, &options, &a.command)?;
    if let Some(why) = ended.explain(&options) {
        eprintln!("tame run: {why}");
    }
    Ok(ended.code)
}

pub fn run_detach(ctx: &Context, a: DetachArgs) -> anyhow::Result<i32> {
    let caller = &ctx.caller;
    // The PID before the target: "no process" says more than "CPU not isolated".
    detach::vet(&ctx.root, a.pid, caller.uid)?;
    let target = a.target.resolve(ctx)?;
    let threads = ThreadSelection::parse(&a.threads)?;
    let req = target.detach_request(a.pid, threads);
    let store = Store::new(&a.target.journal_dir(ctx));
    let record = detach::detach(&ctx.root, &store, &req, caller.uid)?;
    if a.json {
        print_json(&json::detached(&record, req.sched))?;
    } else {
        print_out(&view::detached(&record, req.sched))?;
    }
    Ok(0)
}

pub fn run_attach(ctx: &Context, a: AttachArgs) -> anyhow::Result<i32> {
    let store = Store::new(&ctx.journal_dir(a.journal_dir.as_deref()));
    let report = detach::attach(&ctx.root, &store, a.pid, ctx.caller.uid)?;
    let code = if report.failed.is_empty() { 0 } else { 1 };
    if a.json {
        print_json(&json::attached(&report, a.pid))?;
        return Ok(code);
    }
    if report.exited {
        println!(
            "process {} has exited; its placement journal was removed",
            a.pid
        );
        return Ok(0);
    }
    println!(
        "attached process {}: {} restored, {} created since detach given the main thread's previous placement",
        a.pid,
        tame_rt::plural::count(report.restored.len() as u64, "thread", "threads"),
        report.adopted.len()
    );
    for (tid, why) in &report.failed {
        eprintln!("  thread {tid} not restored: {why}");
    }
    Ok(code)
}

pub fn run_ps(ctx: &Context, a: PsArgs) -> anyhow::Result<i32> {
    let found = ps::ps(
        &ctx.root,
        &Store::new(&ctx.journal_dir(a.journal_dir.as_deref())),
    );
    // On stderr in both forms (the JSON lists them as `gone` too).
    for g in &found.gone {
        eprintln!("{}", view::gone(g));
    }
    if a.json {
        print_json(&json::ps(&found))?;
    } else {
        print_out(&view::ps(&found.rows))?;
    }
    Ok(0)
}
