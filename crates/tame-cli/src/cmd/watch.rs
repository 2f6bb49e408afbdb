//! `tame watch`: every activation of a program's threads — given by pid, as every
//! thread of a partition, or started here — with what delayed it, and snapshots of
//! misses. The work lives in `tame_bench::watch`; this parses, places, writes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tame_bench::units::parse_duration_ns;
use tame_bench::watch::run::{self as watch, ThreadFilter, Watched};
use tame_bench::watch::{WatchResult, WatchSettings, DEFAULT_SNAPSHOTS};
use tame_host::CpuList;
use tame_launch::run::RunOptions;
use tame_launch::target::{self, TargetRequest};
use tame_trace::tracefs::TraceClock;

use super::measuring::{self, install_stop_handler};
use crate::error::finished;
use crate::output::JsonOut;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Processes to watch (every thread, as they come and go).
    #[arg(value_name = "PID")]
    pids: Vec<u32>,
    /// Watch every thread in this applied partition; with `-- CMD`, start CMD in it (as `tame run -p`).
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// With `-- CMD`: the CPUs to start it on (default: where tame may run).
    #[arg(long, value_name = "LIST", conflicts_with = "partition")]
    cpus: Option<String>,
    /// Only these threads: thread ids (4411,4412) or a regular expression on their names.
    #[arg(long, value_name = "TIDS|REGEX")]
    threads: Option<String>,
    /// The program's period (`auto`: the median distance between releases, per thread).
    #[arg(long, default_value = "auto")]
    period: String,
    /// A response beyond this is a miss (default: the period).
    #[arg(long)]
    deadline: Option<String>,
    /// How long to watch (default: until the program ends, or Ctrl-C).
    #[arg(long)]
    duration: Option<String>,
    /// Write a snapshot of each miss (JSON and SVG) into DIR.
    #[arg(long, value_name = "DIR")]
    snapshot_on_miss: Option<PathBuf>,
    /// Snapshots kept at most.
    #[arg(long, default_value_t = DEFAULT_SNAPSHOTS)]
    snapshots: u32,
    /// How much of the CPU's time line a snapshot shows before the miss.
    #[arg(long, default_value = "20ms")]
    window: String,
    /// Write the result as JSON to FILE, or to stdout with `-` (the report then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Where `tame apply` keeps its journal, for -p (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR", requires = "partition")]
    journal_dir: Option<PathBuf>,
    /// The program to start and watch, and its arguments.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn duration(flag: &str, text: &str) -> anyhow::Result<u64> {
    parse_duration_ns(text).map_err(|e| bad_input(format!("{flag}: {e}")))
}

pub fn run(ctx: &Context, a: WatchArgs) -> anyhow::Result<i32> {
    if !ctx.caller.is_root() {
        return Err(bad_input(
            "tame watch needs root: it follows threads through the kernel's tracepoints (tracefs) — run it with sudo",
        ));
    }
    let modes = usize::from(!a.pids.is_empty())
        + usize::from(!a.command.is_empty())
        + usize::from(a.partition.is_some() && a.command.is_empty());
    if modes != 1 {
        return Err(bad_input(
            "say what to watch: process ids (tame watch 4411), every thread of a partition (-p NAME), or a program to start (tame watch [-p NAME] -- CMD ARGS)",
        ));
    }
    if a.cpus.is_some() && a.command.is_empty() {
        return Err(bad_input(
            "--cpus places a program tame starts: give it with -- CMD, or leave --cpus out",
        ));
    }
    let period_ns = match a.period.as_str() {
        "auto" => None,
        p => Some(duration("--period", p)?),
    };
    let settings = WatchSettings {
        pids: a.pids.clone(),
        command: (!a.command.is_empty()).then(|| {
            a.command
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect()
        }),
        threads: a.threads.clone(),
        period_ns,
        deadline_ns: a
            .deadline
            .as_deref()
            .map(|d| duration("--deadline", d))
            .transpose()?,
        duration_ns: a
            .duration
            .as_deref()
            .map(|d| duration("--duration", d))
            .transpose()?,
        window_ns: duration("--window", &a.window)?,
        snapshots: if a.snapshot_on_miss.is_some() {
            a.snapshots
        } else {
            0
        },
        cpus: CpuList::default(),
        trace_clock: TraceClock::X86Tsc,
    };
    watch::validate(&settings)?;
    let filter = match a.threads.as_deref() {
        Some(t) => ThreadFilter::parse(t)?,
        None => ThreadFilter::All,
    };
    if let Some(dir) = &a.snapshot_on_miss {
        std::fs::create_dir_all(dir).map_err(|e| {
            bad_input(format!(
                "cannot create the snapshot directory {}: {e} — give a directory tame can write",
                dir.display()
            ))
        })?;
    }
    let json = JsonOut::open(a.json.as_deref(), "JSON result")?;
    for &pid in &a.pids {
        if !ctx.root.process(pid).exists() {
            return Err(bad_input(format!(
                "there is no process {pid} — check the id (ps, tame ps)"
            )));
        }
    }
    let (watched, partition) = watched(ctx, &a)?;
    let control = install_stop_handler()?;
    let mut run = watch::run(
        &ctx.root,
        settings,
        &filter,
        watched,
        &control,
        partition,
        ctx.command_line.clone(),
    )?;
    if let Some(dir) = &a.snapshot_on_miss {
        write_snapshots(dir, &run.result)?;
        run.result.watch.snapshot_dir = Some(dir.display().to_string());
    }
    let title = "watch: activations of the watched threads";
    json.emit(
        &run.result,
        &tame_bench::watch::view::report(&run.result, title),
    )?;
    Ok(finished(run.result.result.interrupted))
}

/// What to watch, and the partition it is in when that was asked.
fn watched(ctx: &Context, a: &WatchArgs) -> anyhow::Result<(Watched, Option<String>)> {
    if a.command.is_empty() && a.pids.is_empty() {
        let p = measuring::partition(ctx, a.partition.as_deref(), a.journal_dir.as_deref())?
            .expect("-p was given");
        let threads_file = p.placement.group.threads();
        return Ok((Watched::Group { threads_file }, Some(p.placement.partition)));
    }
    if a.command.is_empty() {
        return Ok((Watched::Pids(a.pids.clone()), None));
    }
    let request = TargetRequest {
        partition: a.partition.clone(),
        cpus: a.cpus.clone(),
        cpu: None,
        policy: None,
        priority: None,
        shared_ok: true,
        journal_dir: ctx.journal_dir(a.journal_dir.as_deref()),
    };
    let held = if a.partition.is_none() && a.cpus.is_none() {
        tame_launch::spawn::Spawn::argv(&a.command)?.spawn_held()?
    } else {
        let target = target::resolve(&ctx.root, &request, &ctx.caller)?;
        let options = RunOptions {
            reset_on_fork: false,
            rttime_us: None,
            mlock: false,
            prefault_bytes: None,
        };
        let placement = tame_launch::run::placement(&ctx.root, &target, &options);
        tame_launch::spawn::spawn_held(&placement, &a.command)?
    };
    Ok((Watched::Command(held), a.partition.clone()))
}

fn write_snapshots(dir: &Path, result: &WatchResult) -> anyhow::Result<()> {
    for (i, s) in result.watch.snapshots.iter().enumerate() {
        let base = dir.join(format!("miss-{}", i + 1));
        std::fs::write(base.with_extension("json"), s.to_json() + "\n")
            .with_context(|| format!("cannot write {}.json", base.display()))?;
        std::fs::write(base.with_extension("svg"), tame_report::snapshot_svg(s))
            .with_context(|| format!("cannot write {}.svg", base.display()))?;
    }
    Ok(())
}
