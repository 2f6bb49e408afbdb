//! Listing and removing named segments for tools (`tame ipc ls/rm`). Works on any
//! directory (the real /dev/shm or a fixture tree) and reads only headers (pread; no
//! mapping, so neither a huge nor a shrinking file can hurt the tool).

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::layout::{unpack_owner, HeaderError, Kind, Layout, RawHeader};
use crate::liveness::{Liveness, ProcFs};
use crate::segment::{read_header, SegmentName, SHM_PREFIX};

/// One file named `tame.*` in the shm directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The name without the prefix, as found (it may not be a valid name).
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub uid: u32,
    pub mode: u32,
    pub state: SegmentState,
}

/// What the header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentState {
    Valid(Description),
    /// Magic not written yet: being created (or its creator died while creating it).
    NotReady,
    /// Not a segment this library accepts; the reason.
    Invalid(String),
    /// The file could not be opened or mapped; the reason.
    Unreadable(String),
}

/// A valid segment's layout and the processes recorded in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub layout: Layout,
    pub layout_major: u16,
    pub layout_minor: u16,
    pub created_unix_ns: u64,
    pub creator: Party,
    /// Attached role holders (empty roles are left out).
    pub peers: Vec<Party>,
}

/// A process recorded in a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Party {
    pub role: &'static str,
    pub pid: u32,
    pub liveness: Liveness,
}

impl SegmentInfo {
    /// Stale: a valid segment whose creator and every attached role holder are
    /// certainly dead (`Unknown` — another pid namespace, hidepid, a 1.0 header that
    /// recorded no namespace — is never dead). Segments that are being created,
    /// unreadable or invalid are never stale (remove them by name after looking).
    pub fn is_stale(&self) -> bool {
        match &self.state {
            SegmentState::Valid(d) => {
                d.creator.liveness == Liveness::Dead
                    && d.peers.iter().all(|p| p.liveness == Liveness::Dead)
            }
            _ => false,
        }
    }
}

/// Role names of the slots of a kind.
pub fn role_names(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Ring => &["producer", "consumer"],
        Kind::Register => &["writer"],
        Kind::Event => &[],
    }
}

/// Every `tame.*` file in `shm_dir`, sorted by name.
pub fn list(shm_dir: &Path, proc: &ProcFs) -> io::Result<Vec<SegmentInfo>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(shm_dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str().and_then(|n| n.strip_prefix(SHM_PREFIX)) else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        found.push(inspect(&entry.path(), name, proc));
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// Reads one segment file.
pub fn inspect(path: &Path, name: &str, proc: &ProcFs) -> SegmentInfo {
    let mut info = SegmentInfo {
        name: name.to_string(),
        path: path.to_path_buf(),
        size: 0,
        uid: 0,
        mode: 0,
        state: SegmentState::NotReady,
    };
    // Neither a planted symbolic link nor a FIFO (which would block the open) is
    // followed or waited for.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) => {
            info.state = SegmentState::Unreadable(e.to_string());
            return info;
        }
    };
    match file.metadata() {
        Ok(meta) => {
            info.size = meta.len();
            info.uid = meta.uid();
            info.mode = meta.mode() & 0o7777;
            if !meta.is_file() {
                info.state = SegmentState::Invalid("not a regular file".into());
                return info;
            }
        }
        Err(e) => {
            info.state = SegmentState::Unreadable(e.to_string());
            return info;
        }
    }
    if info.size == 0 {
        return info;
    }
    // The header is read with pread, never through a mapping: a segment shrunk or
    // grown meanwhile cannot hurt the tool.
    let header = match read_header(file.as_fd()) {
        Ok(Some(header)) => header,
        Ok(None) => {
            info.state =
                SegmentState::Invalid(format!("size {} B is smaller than a header", info.size));
            return info;
        }
        Err(e) => {
            info.state = SegmentState::Unreadable(e.to_string());
            return info;
        }
    };
    info.state = describe(&header, info.size, proc);
    info
}

/// Interprets a header snapshot (pure apart from the liveness checks).
pub fn describe(header: &RawHeader, file_size: u64, proc: &ProcFs) -> SegmentState {
    let layout = match Layout::from_header(header, file_size) {
        Ok(layout) => layout,
        Err(HeaderError::NotReady) => return SegmentState::NotReady,
        Err(e) => return SegmentState::Invalid(e.to_string()),
    };
    let peers = role_names(layout.spec.kind)
        .iter()
        .enumerate()
        .filter(|&(slot, _)| header.peers[slot] != 0)
        .map(|(slot, role)| Party {
            role,
            pid: unpack_owner(header.peers[slot]).0,
            liveness: proc.owner_liveness(header.peers[slot], header.peer_pid_ns(slot)),
        })
        .collect();
    SegmentState::Valid(Description {
        layout,
        layout_major: header.layout_major,
        layout_minor: header.layout_minor,
        created_unix_ns: header.created_unix_ns,
        creator: Party {
            role: "creator",
            pid: header.creator_pid,
            liveness: proc.recorded_liveness(
                header.creator_pid,
                header.creator_start_ticks,
                header.creator_pid_ns,
            ),
        },
        peers,
    })
}

/// Removes `DIR/tame.NAME`.
pub fn remove(shm_dir: &Path, name: &SegmentName) -> io::Result<()> {
    std::fs::remove_file(name.path_in(shm_dir))
}
