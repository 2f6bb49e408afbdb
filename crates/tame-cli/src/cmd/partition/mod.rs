//! `tame plan | apply | status | revert`: partitions of the machine.

use std::path::{Path, PathBuf};

use tame_host::journal::{RevertReport, DEFAULT_JOURNAL_DIR};
use tame_host::HostModel;
use tame_partition::{plan::describe, ApplyError, Spec, Step};

use crate::{bad_input, Context};

/// Print a line; a closed stdout (`tame status | head`) is not an error of the
/// command, and must not panic as `println!` would.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

#[derive(clap::Args)]
pub struct PlanArgs {
    /// The partition spec (TOML; see examples/).
    pub spec: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The partition spec (TOML; see examples/).
    pub spec: PathBuf,
    /// Where the journal of changes lives (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RevertArgs {
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

fn journal_dir(ctx: &Context, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| ctx.root.path(DEFAULT_JOURNAL_DIR))
}

fn read_spec(path: &Path) -> anyhow::Result<(Spec, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read spec {}: {e} — give the path of a partition spec (see examples/)",
            path.display()
        ))
    })?;
    let spec = Spec::parse(&path.display().to_string(), &text)
        .map_err(|e| bad_input(format!("{e} — correct the spec and run again")))?;
    Ok((spec, text))
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    out!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub fn run_plan(ctx: &Context, args: PlanArgs) -> anyhow::Result<i32> {
    let (spec, _) = read_spec(&args.spec)?;
    let host = HostModel::read(&ctx.root);
    let plan = tame_partition::plan(&spec, &host).map_err(|e| bad_input(e.to_string()))?;
    if args.json {
        print_json(&plan)?;
        return Ok(0);
    }
    out!(
        "Plan for {} — isolated CPUs: {}",
        args.spec.display(),
        if plan.isolated_cpus.is_empty() {
            "none".to_string()
        } else {
            plan.isolated_cpus.to_string()
        }
    );
    out!("\nAt run time (tame apply; no reboot):");
    if plan.is_empty() {
        out!("  nothing to change: the spec is applied");
    }
    for step in &plan.runtime {
        let why = match step {
            Step::Mkdir { why, .. }
            | Step::Write { why, .. }
            | Step::Owner { why, .. }
            | Step::MoveTasks { why, .. } => why,
        };
        out!("  {}    # {why}", describe(step));
    }
    if !plan.stay.is_empty() {
        let names: Vec<String> = plan.stay.iter().map(|t| t.comm.clone()).collect();
        out!(
            "  kernel threads the kernel places itself (per-CPU, or workqueue workers following the cpumask): {}",
            names.join(", ")
        );
    }
    out!("\nNeeds a reboot (add to the kernel command line):");
    if plan.needs_reboot.is_empty() {
        out!("  nothing");
    }
    for p in &plan.needs_reboot {
        out!("  {}    # {}", p.parameter, p.why);
    }
    if !plan.warnings.is_empty() {
        out!("\nWarnings:");
        for w in &plan.warnings {
            out!("  - {w}");
        }
    }
    Ok(0)
}

pub fn run_apply(ctx: &Context, args: ApplyArgs) -> anyhow::Result<i32> {
    let (spec, text) = read_spec(&args.spec)?;
    let dir = journal_dir(ctx, args.journal_dir);
    let report = match tame_partition::apply(&ctx.root, &spec, &text, &dir, None) {
        Ok(r) => r,
        Err(
            e
            @ (ApplyError::NotRoot | ApplyError::Invalid(_) | ApplyError::OtherSpecApplied { .. }),
        ) => return Err(bad_input(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if args.json {
        print_json(&report)?;
        return Ok(0);
    }
    if report.unchanged {
        out!(
            "Nothing changed: {} is already applied.",
            args.spec.display()
        );
    } else {
        out!(
            "Applied {}: {} writes, {} directories, {} tasks moved. Journal: {} (undo with `tame revert`).",
            args.spec.display(),
            report.writes,
            report.directories,
            report.tasks_moved,
            report.journal
        );
    }
    if !report.refused.is_empty() {
        out!("The kernel kept these where they are:");
        // One line per reason: there are dozens of per-CPU kernel threads.
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &report.refused {
            match by_reason.iter_mut().find(|(reason, _)| *reason == r.reason) {
                Some((_, whats)) => whats.push(&r.what),
                None => by_reason.push((&r.reason, vec![&r.what])),
            }
        }
        for (reason, whats) in by_reason {
            out!("  - {}: {reason}", whats.join(", "));
        }
    }
    for w in &report.warnings {
        out!("warning: {w}");
    }
    Ok(0)
}

pub fn run_status(ctx: &Context, args: StatusArgs) -> anyhow::Result<i32> {
    let dir = journal_dir(ctx, args.journal_dir);
    let status = tame_partition::status(&ctx.root, &dir)?;
    if args.json {
        print_json(&status)?;
        return Ok(0);
    }
    if !status.applied {
        out!("No partitions applied (no journal at {}).", status.journal);
        return Ok(0);
    }
    out!(
        "Applied ({} changes journaled in {}):",
        status.changes,
        status.journal
    );
    if let Some(spec) = &status.spec {
        for line in spec.lines() {
            out!("  | {line}");
        }
    }
    if status.interrupted > 0 {
        out!(
            "\n{} changes have no recorded outcome: apply was interrupted — run `tame revert`.",
            status.interrupted
        );
    }
    out!("\nDrift (changed by someone else since apply):");
    if status.drift.is_empty() {
        out!("  none");
    }
    for d in &status.drift {
        out!(
            "  {}: applied {} → now {}",
            d.path,
            d.applied,
            d.now.as_deref().unwrap_or("(gone)")
        );
    }
    let a = &status.audit;
    out!("\nOn isolated CPUs {}:", a.isolated_cpus);
    let (bound, others): (Vec<_>, Vec<_>) = a.tasks.iter().partition(|t| t.bound_by_kernel);
    if others.is_empty() {
        out!("  no movable task");
    }
    for t in &others {
        out!(
            "  task {} ({}{}) may run on {}",
            t.tid,
            t.comm,
            if t.kernel_thread {
                ", kernel thread"
            } else {
                ""
            },
            t.cpus_allowed
        );
    }
    if !bound.is_empty() {
        let names: Vec<&str> = bound.iter().map(|t| t.comm.as_str()).collect();
        out!(
            "  kernel threads the kernel places itself (cannot move): {}",
            names.join(", ")
        );
    }
    if a.irqs.is_empty() {
        out!("  no device IRQ");
    }
    for i in &a.irqs {
        out!(
            "  IRQ {} ({}) fires on {}{}",
            i.irq,
            i.name,
            i.fires_on,
            if i.managed {
                " — kernel-managed, cannot move"
            } else if i.moving {
                " — routed away; moves when it next fires"
            } else {
                ""
            }
        );
    }
    for (cpu, timers) in &a.timers {
        let list: Vec<String> = timers.iter().map(|(f, n)| format!("{f} ×{n}")).collect();
        out!("  CPU {cpu} hrtimers: {}", list.join(", "));
    }
    for (cpu, n) in &a.timer_interrupts {
        out!("  CPU {cpu}: {n} local timer interrupts since boot");
    }
    Ok(0)
}

pub fn run_revert(ctx: &Context, args: RevertArgs) -> anyhow::Result<i32> {
    let dir = journal_dir(ctx, args.journal_dir);
    let report: RevertReport = match tame_partition::revert(&ctx.root, &dir) {
        Ok(r) => r,
        Err(e @ ApplyError::NotRoot) => return Err(bad_input(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if args.json {
        let items: Vec<serde_json::Value> = report
            .not_restored
            .iter()
            .map(|n| serde_json::json!({"what": n.what, "reason": n.reason}))
            .collect();
        print_json(&serde_json::json!({
            "schema": 1,
            "entries": report.entries,
            "restored": report.restored,
            "not_restored": items,
            "journal_removed": report.journal_removed,
            "nothing_to_revert": report.nothing_to_revert,
        }))?;
    } else if report.nothing_to_revert {
        out!("Nothing to revert (no journal in {}).", dir.display());
    } else if report.not_restored.is_empty() {
        out!(
            "Reverted: {} journaled changes, {} values written back; the journal is removed.",
            report.entries,
            report.restored
        );
    } else {
        out!("Could not restore everything; the journal stays so `tame revert` can be run again:");
        for n in &report.not_restored {
            out!("  - {}: {}", n.what, n.reason);
        }
    }
    Ok(if report.not_restored.is_empty() { 0 } else { 1 })
}
