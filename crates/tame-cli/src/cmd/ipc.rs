//! `tame ipc ls|rm`: the shared-memory channel segments on this machine
//! (`/dev/shm/tame.*`), their owners, liveness and layout.
use tame_ipc::inspect::{self, SegmentInfo, SegmentState};
use tame_ipc::{Liveness, ProcFs, SegmentName};
use tame_results::ipc_ls::Listing;

use crate::Context;

#[derive(clap::Subcommand)]
pub enum IpcCommand {
    /// List shared-memory channel segments (/dev/shm/tame.*) with owner, liveness and layout.
    Ls(LsArgs),
    /// Remove a segment by name, or every stale one (creator and all role holders dead).
    Rm(RmArgs),
}

#[derive(clap::Args)]
pub struct LsArgs {
    /// Print the listing as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RmArgs {
    /// Segment name as `tame ipc ls` shows it, or as its file in /dev/shm (with the `tame.` prefix).
    #[arg(required_unless_present = "stale", conflicts_with = "stale")]
    pub name: Option<String>,
    /// Remove every stale segment instead of one by name.
    #[arg(long)]
    pub stale: bool,
    /// Remove NAME even if a live process created it or holds a role in it.
    #[arg(long, requires = "name")]
    pub force: bool,
}

pub fn run(ctx: &Context, cmd: IpcCommand) -> anyhow::Result<i32> {
    match cmd {
        IpcCommand::Ls(args) => ls(ctx, args),
        IpcCommand::Rm(args) => rm(ctx, args),
    }
}

fn shm_dir(ctx: &Context) -> std::path::PathBuf {
    ctx.root.path(tame_ipc::SHM_DIR)
}

fn proc_fs(ctx: &Context) -> ProcFs {
    ProcFs::new(ctx.root.proc_dir())
}

fn list(ctx: &Context) -> anyhow::Result<Vec<SegmentInfo>> {
    let dir = shm_dir(ctx);
    match inspect::list(&dir, &proc_fs(ctx)) {
        Ok(found) => Ok(found),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("cannot list {}: {e}", dir.display())),
    }
}

fn ls(ctx: &Context, args: LsArgs) -> anyhow::Result<i32> {
    let found = list(ctx)?;
    if args.json {
        let listing = Listing::new(&shm_dir(ctx), &found);
        super::topology::print_out(&(serde_json::to_string_pretty(&listing)? + "\n"))?;
    } else {
        super::topology::print_out(&tame_ipc::listing::table(&found))?;
    }
    Ok(0)
}

fn rm(ctx: &Context, args: RmArgs) -> anyhow::Result<i32> {
    let dir = shm_dir(ctx);
    if args.stale {
        let stale: Vec<SegmentInfo> = list(ctx)?
            .into_iter()
            .filter(SegmentInfo::is_stale)
            .collect();
        if stale.is_empty() {
            super::topology::print_out("no stale segments\n")?;
        }
        for segment in stale {
            // Names from the listing are valid (only valid segments can be stale).
            let name = SegmentName::new(&segment.name)?;
            match inspect::remove(&dir, &name) {
                Ok(()) => {
                    super::topology::print_out(&format!("removed {}\n", segment.path.display()))?
                }
                // Someone else removed it meanwhile: the goal is reached.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => anyhow::bail!("cannot remove {}: {e}", segment.path.display()),
            }
        }
        return Ok(0);
    }
    let Some(raw_name) = args.name else {
        return Err(crate::bad_input("tame ipc rm needs a NAME or --stale"));
    };
    let name = segment_named(&dir, &raw_name)?;
    let path = name.path_in(&dir);
    let info = inspect::inspect(&path, name.as_str(), &proc_fs(ctx));
    if let SegmentState::Valid(d) = &info.state {
        let users: Vec<String> = std::iter::once(&d.creator)
            .chain(&d.peers)
            .filter(|p| p.liveness != Liveness::Dead)
            .map(|p| format!("{} {} ({})", p.role, p.pid, p.liveness.name()))
            .collect();
        if !users.is_empty() && !args.force {
            return Err(crate::bad_input(format!(
                "{} is in use: {} — stop those processes first, or pass --force (their mappings stay valid, only the name goes)",
                path.display(),
                users.join(", ")
            )));
        }
    }
    inspect::remove(&dir, &name)
        .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", path.display()))?;
    super::topology::print_out(&format!("removed {}\n", path.display()))?;
    Ok(0)
}

/// The existing segment `given` names: as `tame ipc ls` shows it (`stale1`) or as
/// its file in the shm directory (`tame.stale1`). The name as given wins when both
/// exist (a segment may itself be called `tame.x`).
fn segment_named(dir: &std::path::Path, given: &str) -> anyhow::Result<SegmentName> {
    let bare = given
        .strip_prefix(tame_ipc::SHM_PREFIX)
        .and_then(|b| SegmentName::new(b).ok());
    let as_given = match SegmentName::new(given) {
        Ok(name) => Some(name),
        Err(e) if bare.is_none() => return Err(crate::bad_input(e.to_string())),
        Err(_) => None,
    };
    let candidates: Vec<SegmentName> = as_given.into_iter().chain(bare).collect();
    if let Some(found) = candidates.iter().find(|n| n.path_in(dir).exists()) {
        return Ok(found.clone());
    }
    let paths: Vec<String> = candidates
        .iter()
        .map(|n| n.path_in(dir).display().to_string())
        .collect();
    Err(crate::bad_input(format!(
        "no segment {} — `tame ipc ls` lists the existing ones",
        paths.join(" or ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(dir: &std::path::Path, given: &str) -> Result<String, String> {
        segment_named(dir, given)
            .map(|n| n.as_str().to_string())
            .map_err(|e| {
                assert!(e.downcast_ref::<crate::BadInput>().is_some(), "{e}");
                e.to_string()
            })
    }

    #[test]
    fn a_segment_is_named_with_or_without_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("tame.stale1"), "").unwrap();
        assert_eq!(named(d, "stale1").as_deref(), Ok("stale1"));
        assert_eq!(named(d, "tame.stale1").as_deref(), Ok("stale1"));
        // A segment called tame.x (file tame.tame.x) is found by its own name first.
        std::fs::write(d.join("tame.tame.stale1"), "").unwrap();
        assert_eq!(named(d, "tame.stale1").as_deref(), Ok("tame.stale1"));
        let err = named(d, "tame.gone").unwrap_err();
        assert_eq!(
            err,
            format!(
                "no segment {0}/tame.tame.gone or {0}/tame.gone — `tame ipc ls` lists the existing ones",
                d.display()
            )
        );
        let err = named(d, "gone").unwrap_err();
        assert!(
            err.starts_with(&format!("no segment {}/tame.gone —", d.display())),
            "{err}"
        );
        let err = named(d, "a/b").unwrap_err();
        assert!(err.contains("it contains '/'"), "{err}");
    }
}
