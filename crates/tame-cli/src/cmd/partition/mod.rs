//! `tame plan | apply | status | revert`: partitions of the machine. Each command is
//! one `tame_partition` call; [`view`] turns its result into the human text.

mod from_kubelet;
mod view;

use std::path::{Path, PathBuf};

use tame_host::HostModel;
use tame_partition::Spec;

use crate::output::{print_json, print_out};
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct PlanArgs {
    /// The partition spec (TOML; see examples/).
    pub spec: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Name every kernel thread that stays where the kernel keeps it (else a count).
    #[arg(long, short)]
    pub verbose: bool,
    /// Instead of the plan: compare a node's kubelet config file (YAML or JSON) with the
    /// KubeletConfiguration tame sets for the spec (`tame export kubelet`). Exit 0 when it
    /// matches, 1 when a field differs or is missing, 2 on bad input.
    #[arg(long, value_name = "FILE")]
    pub from_kubelet: Option<PathBuf>,
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
    /// Name every kernel thread that stayed where the kernel keeps it (else a count).
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Where the journal of changes lives (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RevertArgs {
    /// Where the journal of changes lives (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Print what was undone as JSON.
    #[arg(long)]
    pub json: bool,
}

impl ApplyArgs {
    /// `--journal-dir`, else the default below `--root`.
    pub(crate) fn journal_dir(&self, ctx: &Context) -> PathBuf {
        ctx.journal_dir(self.journal_dir.as_deref())
    }
}

pub(crate) fn read_spec(path: &Path) -> anyhow::Result<(Spec, String)> {
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

pub fn run_plan(ctx: &Context, args: PlanArgs) -> anyhow::Result<i32> {
    let (spec, _) = read_spec(&args.spec)?;
    if let Some(file) = &args.from_kubelet {
        return from_kubelet::run(ctx, &args.spec, &spec, file, args.json);
    }
    let plan = tame_partition::plan(&spec, &HostModel::read(&ctx.root))?;
    if args.json {
        print_json(&plan)?;
    } else {
        print_out(&view::plan(&args.spec, &plan, args.verbose))?;
    }
    Ok(0)
}

pub fn run_apply(ctx: &Context, args: ApplyArgs) -> anyhow::Result<i32> {
    let (spec, text) = read_spec(&args.spec)?;
    let dir = args.journal_dir(ctx);
    // Noted in the journal, so `tame status` can name the command that repairs drift.
    // Symlinks resolved: status reads the noted file without following one.
    let absolute = std::fs::canonicalize(&args.spec)
        .or_else(|_| std::path::absolute(&args.spec))
        .ok();
    let report =
        tame_partition::apply_file(&ctx.root, &spec, &text, absolute.as_deref(), &dir, None)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_out(&view::apply(&args.spec, &report, args.verbose))?;
    }
    Ok(0)
}

pub fn run_status(ctx: &Context, args: StatusArgs) -> anyhow::Result<i32> {
    let invocation = view::Invocation {
        root: (ctx.root.base() != Path::new("/")).then(|| ctx.root.base().display().to_string()),
        journal_dir: args.journal_dir.as_ref().map(|d| d.display().to_string()),
        // The command needs sudo where this user may not change the host.
        sudo: !tame_host::privilege::may_change(&ctx.root),
    };
    let dir = ctx.journal_dir(args.journal_dir.as_deref());
    let status = tame_partition::status(&ctx.root, &dir)?;
    if args.json {
        print_json(&status)?;
    } else {
        print_out(&view::status(&status, &invocation))?;
    }
    Ok(0)
}

pub fn run_revert(ctx: &Context, args: RevertArgs) -> anyhow::Result<i32> {
    let dir = ctx.journal_dir(args.journal_dir.as_deref());
    let report = tame_partition::revert(&ctx.root, &dir)?;
    if args.json {
        print_json(&tame_host::journal::RevertDoc::from(&report))?;
    } else {
        print_out(&view::revert(&dir, &report))?;
    }
    // A bench noise killed with its tracing set up (e.g. inside a killed assess) is
    // undone here too: `tame revert` puts back whatever tame left.
    for note in tame_trace::tracefs::recover_stale(&ctx.root) {
        eprintln!("tame revert: {note}");
    }
    Ok(if report.not_restored.is_empty() { 0 } else { 1 })
}
