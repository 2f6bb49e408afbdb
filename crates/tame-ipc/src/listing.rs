//! The human view of `tame ipc ls`: one line per segment, with kind, shape, layout version,
//! size, mode, creator and the role holders (or why it cannot be read). Its JSON document
//! is `tame_results::ipc_ls::Listing` (tame-ipc depends on nothing, serde included).

use std::fmt::Write as _;

use crate::inspect::{SegmentInfo, SegmentState};

/// The human view of the listing.
pub fn table(found: &[SegmentInfo]) -> String {
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
                    crate::Kind::Ring => format!("{} x {} B", spec.capacity, spec.elem_size),
                    crate::Kind::Register => format!("{} B", spec.elem_size),
                    crate::Kind::Event => "-".to_string(),
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
