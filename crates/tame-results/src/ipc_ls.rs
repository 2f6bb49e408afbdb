//! `tame ipc ls --json`: the shared-memory channel segments as a versioned document. It
//! lives here, not beside [`SegmentInfo`] in tame-ipc, because tame-ipc depends on nothing
//! (no serde, no tame-host for the [`Schema`]); its text view is `tame_ipc::listing::table`.

use std::path::Path;

use serde::Serialize;
use tame_host::{Document, Schema};
use tame_ipc::inspect::{self, Description, SegmentInfo, SegmentState};

/// The listing: where the segments were looked for, and each one found.
#[derive(Serialize)]
pub struct Listing {
    schema: Schema,
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

impl Document for Listing {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.ipc.ls", 1);
}

impl Listing {
    /// The segments `found` in `shm_dir`.
    pub fn new(shm_dir: &Path, found: &[SegmentInfo]) -> Self {
        Listing {
            schema: Self::SCHEMA,
            shm_dir: shm_dir.display().to_string(),
            segments: found.iter().map(SegmentView::from).collect(),
        }
    }
}
