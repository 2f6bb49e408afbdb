//! `tame ipc ls|rm`: the shared-memory channel segments on this machine
//! (`/dev/shm/tame.*`), their owners, liveness and layout.
use std::fmt::Write as _;

use serde::Serialize;
use tame_ipc::inspect::{self, Description, SegmentInfo, SegmentState};
use tame_ipc::{Liveness, ProcFs, SegmentName};

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

/// Version of the JSON listing below.
const LS_SCHEMA: &str = "tame.ipc.ls/1";

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
        let listing = Listing {
            schema: LS_SCHEMA,
            shm_dir: shm_dir(ctx).display().to_string(),
            segments: found.iter().map(SegmentView::from).collect(),
        };
        super::topology::print_out(&(serde_json::to_string_pretty(&listing)? + "\n"))?;
    } else {
        super::topology::print_out(&table(&found))?;
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

#[derive(Serialize)]
struct Listing {
    schema: &'static str,
    shm_dir: String,
    segments: Vec<SegmentView>,
}

/// One segment as the JSON listing shows it.
#[derive(Serialize)]
struct SegmentView {
    name: String,
    path: String,
    size_bytes: u64,
    uid: u32,
    /// Octal permission, e.g. "0600".
    mode: String,
    /// "valid", "not_ready", "invalid" or "unreadable".
    state: &'static str,
    /// Why the segment is invalid or unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<LayoutView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creator: Option<PartyView>,
    peers: Vec<PartyView>,
    stale: bool,
}

#[derive(Serialize)]
struct LayoutView {
    kind: &'static str,
    version: String,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    type_tag: u64,
    created_unix_ns: u64,
}

#[derive(Serialize)]
struct PartyView {
    role: &'static str,
    pid: u32,
    liveness: &'static str,
}

impl From<&SegmentInfo> for SegmentView {
    fn from(info: &SegmentInfo) -> SegmentView {
        let (state, reason, description) = match &info.state {
            SegmentState::Valid(d) => ("valid", None, Some(d)),
            SegmentState::NotReady => ("not_ready", None, None),
            SegmentState::Invalid(why) => ("invalid", Some(why.clone()), None),
            SegmentState::Unreadable(why) => ("unreadable", Some(why.clone()), None),
        };
        let party = |p: &inspect::Party| PartyView {
            role: p.role,
            pid: p.pid,
            liveness: p.liveness.name(),
        };
        SegmentView {
            name: info.name.clone(),
            path: info.path.display().to_string(),
            size_bytes: info.size,
            uid: info.uid,
            mode: format!("{:04o}", info.mode),
            state,
            reason,
            layout: description.map(layout_view),
            creator: description.map(|d| party(&d.creator)),
            peers: description
                .map(|d| d.peers.iter().map(party).collect())
                .unwrap_or_default(),
            stale: info.is_stale(),
        }
    }
}

fn layout_view(d: &Description) -> LayoutView {
    let spec = d.layout.spec;
    LayoutView {
        kind: spec.kind.name(),
        version: format!("{}.{}", d.layout_major, d.layout_minor),
        elem_size: spec.elem_size,
        elem_align: spec.elem_align,
        capacity: spec.capacity,
        type_tag: spec.type_tag,
        created_unix_ns: d.created_unix_ns,
    }
}

/// The human view of the listing.
fn table(found: &[SegmentInfo]) -> String {
    let mut s = String::new();
    if found.is_empty() {
        s.push_str("no segments\n");
        return s;
    }
    let _ = writeln!(
        s,
        "{:<24} {:<9} {:<22} {:<7} {:>9} {:<5} {:<18} ROLES / STATE",
        "NAME", "KIND", "SHAPE", "LAYOUT", "SIZE", "MODE", "CREATOR"
    );
    for info in found {
        match &info.state {
            SegmentState::Valid(d) => {
                let spec = d.layout.spec;
                let shape = match spec.kind {
                    tame_ipc::Kind::Ring => format!("{} x {} B", spec.capacity, spec.elem_size),
                    tame_ipc::Kind::Register => format!("{} B", spec.elem_size),
                    tame_ipc::Kind::Event => "-".to_string(),
                };
                let peers: Vec<String> = d
                    .peers
                    .iter()
                    .map(|p| format!("{} {} {}", p.role, p.pid, p.liveness.name()))
                    .collect();
                let mut roles = if peers.is_empty() {
                    "-".to_string()
                } else {
                    peers.join(", ")
                };
                if info.is_stale() {
                    roles.push_str("  [stale]");
                }
                let _ = writeln!(
                    s,
                    "{:<24} {:<9} {:<22} {:<7} {:>9} {:04o}  {:<18} {}",
                    info.name,
                    spec.kind.name(),
                    shape,
                    format!("{}.{}", d.layout_major, d.layout_minor),
                    info.size,
                    info.mode,
                    format!("{} {}", d.creator.pid, d.creator.liveness.name()),
                    roles
                );
            }
            other => {
                let state = match other {
                    SegmentState::NotReady => {
                        "being created (or its creator died while creating it)".to_string()
                    }
                    SegmentState::Invalid(why) => format!("invalid: {why}"),
                    SegmentState::Unreadable(why) => format!("unreadable: {why}"),
                    SegmentState::Valid(_) => unreachable!("handled above"),
                };
                let _ = writeln!(
                    s,
                    "{:<24} {:<9} {:<22} {:<7} {:>9} {:04o}  {:<18} {}",
                    info.name, "?", "-", "-", info.size, info.mode, "-", state
                );
            }
        }
    }
    s
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
