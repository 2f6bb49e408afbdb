//! Shared-memory segments: named (/dev/shm/tame.NAME via shm_open) or anonymous
//! (memfd, passed to another process over a Unix socket), mapped and validated.

use std::ffi::CString;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::mman::{MapFlags, ProtFlags};
use nix::sys::stat::Mode;

use crate::error::{Error, Result};
use crate::layout::{
    pack_owner, ChannelSpec, HeaderError, Kind, Layout, RawHeader, HEADER_SIZE, MAX_SEGMENT_SIZE,
    OFFSET_MAGIC, OFFSET_PEERS, PEER_SLOTS,
};
use crate::liveness::{Liveness, ProcFs};

/// Every named segment is `/dev/shm/tame.NAME`, so leftovers are recognisable.
pub const SHM_PREFIX: &str = "tame.";
/// Where shm_open puts named segments on Linux.
pub const SHM_DIR: &str = "/dev/shm";
/// Longest NAME (NAME_MAX 255 minus the prefix, with room to spare).
pub const MAX_NAME_LEN: usize = 200;
/// Default permission of a named segment: owner read/write only.
pub const DEFAULT_MODE: u32 = 0o600;

/// A validated segment name (without the `tame.` prefix).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentName(String);

impl SegmentName {
    pub fn new(name: &str) -> Result<SegmentName> {
        let reason = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_NAME_LEN {
            Some("it is too long")
        } else if name.contains('/') {
            Some("it contains '/'")
        } else if name.starts_with('.') {
            Some("it starts with '.'")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            Some("it contains a character outside A-Z a-z 0-9 . _ -")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::InvalidName {
                name: name.to_string(),
                reason,
            }),
            None => Ok(SegmentName(name.to_string())),
        }
    }

    /// Recovers the name from a file name in /dev/shm (`tame.NAME`).
    pub fn from_file_name(file_name: &str) -> Option<SegmentName> {
        SegmentName::new(file_name.strip_prefix(SHM_PREFIX)?).ok()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The argument to shm_open: `/tame.NAME`.
    pub fn shm_name(&self) -> String {
        format!("/{SHM_PREFIX}{}", self.0)
    }

    /// The file below a shm directory: `DIR/tame.NAME`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{SHM_PREFIX}{}", self.0))
    }

    fn describe(&self) -> String {
        format!("segment {SHM_DIR}/{SHM_PREFIX}{}", self.0)
    }
}

/// What an opener expects to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Exactly this shape (kind, element size and alignment, capacity, type tag).
    Exact(ChannelSpec),
    /// Any valid segment of this kind.
    Kind(Kind),
    /// Any valid segment (inspection).
    Any,
}

/// An mmap of a whole segment. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory owned by this value (unmapped only in
// Drop); moving it to another thread changes nothing about its validity.
unsafe impl Send for Mapping {}
// SAFETY: shared access never creates `&mut` into the mapping: every access goes
// through atomics or through a role claim that owns the bytes it touches.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn map(fd: OwnedFd, len: u64, writable: bool, what: &str) -> Result<Mapping> {
        let length = usize::try_from(len)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| Error::os("mmap", what, Errno::EINVAL))?;
        let prot = if writable {
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE
        } else {
            ProtFlags::PROT_READ
        };
        // Writable (channel) mappings are populated now, so the real-time side never
        // takes a page fault on its first pass over the slots.
        let flags = if writable {
            MapFlags::MAP_SHARED | MapFlags::MAP_POPULATE
        } else {
            MapFlags::MAP_SHARED
        };
        // SAFETY: a fresh shared mapping of a file we hold; no Rust object aliases it.
        let ptr = unsafe { nix::sys::mman::mmap(None, length, prot, flags, &fd, 0) }
            .map_err(|e| Error::os("mmap", what, e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len: length.get(),
            fd,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Base pointer; callers stay below `len()`.
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// An 8-byte atomic at `offset`. Panics only on a programming error (offsets come
    /// from a validated [`Layout`]).
    pub(crate) fn atomic_u64(&self, offset: u64) -> &AtomicU64 {
        let offset = usize::try_from(offset).expect("offset fits usize");
        assert!(
            offset % 8 == 0 && offset + 8 <= self.len,
            "atomic outside the mapping"
        );
        // SAFETY: offset + 8 ≤ len and offset is 8-aligned from a page-aligned base
        // (asserted above); shared memory is only ever accessed atomically here.
        unsafe { &*(self.base().add(offset) as *const AtomicU64) }
    }

    pub(crate) fn atomic_u32(&self, offset: u64) -> &AtomicU32 {
        let offset = usize::try_from(offset).expect("offset fits usize");
        assert!(
            offset % 4 == 0 && offset + 4 <= self.len,
            "atomic outside the mapping"
        );
        // SAFETY: offset + 4 ≤ len and offset is 4-aligned from a page-aligned base
        // (asserted above); shared memory is only ever accessed atomically here.
        unsafe { &*(self.base().add(offset) as *const AtomicU32) }
    }

    /// A consistent-enough copy of the header: magic first (acquire), then each word.
    pub(crate) fn header_snapshot(&self) -> RawHeader {
        let mut words = [0u64; (HEADER_SIZE / 8) as usize];
        words[0] = self.atomic_u64(OFFSET_MAGIC).load(Ordering::Acquire);
        for (i, word) in words.iter_mut().enumerate().skip(1) {
            *word = self.atomic_u64(i as u64 * 8).load(Ordering::Relaxed);
        }
        bytemuck::cast(words)
    }

    /// Writes a header, publishing the magic last so openers never see a half header.
    fn publish_header(&self, header: &RawHeader) {
        let words: [u64; (HEADER_SIZE / 8) as usize] = bytemuck::cast(*header);
        for (i, word) in words.iter().enumerate().skip(1) {
            self.atomic_u64(i as u64 * 8)
                .store(*word, Ordering::Relaxed);
        }
        self.atomic_u64(OFFSET_MAGIC)
            .store(words[0], Ordering::Release);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we created this mapping with this length; every reference into it is
        // tied to an Arc<Mapping>, so none outlives it.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr.cast(), self.len) };
    }
}

/// A mapped, validated segment. Channel handles ([`crate::Ring`] etc.) wrap it.
#[derive(Clone, Debug)]
pub struct Segment {
    pub(crate) map: Arc<Mapping>,
    layout: Layout,
    name: Option<SegmentName>,
    what: Arc<str>,
    creator_pid: u32,
    creator_start_ticks: u64,
    proc: ProcFs,
}

/// A role slot holder as seen now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerState {
    /// Nobody holds the role.
    Absent,
    /// The holder exists (pid and start time match).
    Alive { pid: u32 },
    /// The holder exited or was killed; its pid may even be reused by another process.
    Dead { pid: u32 },
    /// The holder could not be checked (/proc unreadable, another pid namespace).
    Unknown { pid: u32 },
}

impl PeerState {
    pub fn pid(self) -> Option<u32> {
        match self {
            PeerState::Absent => None,
            PeerState::Alive { pid } | PeerState::Dead { pid } | PeerState::Unknown { pid } => {
                Some(pid)
            }
        }
    }
}

impl Segment {
    /// Creates `/dev/shm/tame.NAME` with `mode` (refused if it exists).
    pub fn create(name: &SegmentName, spec: ChannelSpec, mode: u32) -> Result<Segment> {
        let layout = Layout::compute(spec)?;
        if mode & !0o777 != 0 || mode & 0o600 != 0o600 {
            return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
                "mode {mode:#o} must be a permission mode (≤ 0o777) that lets the owner read and write"
            ))));
        }
        let what = name.describe();
        let shm_name = name.shm_name();
        let fd = nix::sys::mman::shm_open(
            shm_name.as_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map_err(|e| match e {
            Errno::EEXIST => Error::AlreadyExists { what: what.clone() },
            Errno::EACCES => Error::PermissionDenied {
                what: SHM_DIR.to_string(),
                detail: String::new(),
            },
            e => Error::os("shm_open", &what, e),
        })?;
        // Everything after this point removes the half-made segment on failure.
        let built = (|| {
            // shm_open applies the umask; set the asked-for mode exactly.
            nix::sys::stat::fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(mode))
                .map_err(|e| Error::os("fchmod", &what, e))?;
            Segment::initialise(fd, layout, Some(name.clone()), what.clone())
        })();
        if built.is_err() {
            let _ = nix::sys::mman::shm_unlink(shm_name.as_str());
        }
        built
    }

    /// Creates an anonymous segment (memfd), sealed against resizing so a peer cannot
    /// shrink it under us. Pass [`Segment::fd`] to another process to share it.
    pub fn create_anonymous(spec: ChannelSpec) -> Result<Segment> {
        let layout = Layout::compute(spec)?;
        let what = "anonymous segment (memfd)".to_string();
        let label = CString::new(format!("{SHM_PREFIX}{}", spec.kind)).expect("no NUL");
        let flags = nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC
            | nix::sys::memfd::MemFdCreateFlag::MFD_ALLOW_SEALING;
        let fd = nix::sys::memfd::memfd_create(&label, flags)
            .map_err(|e| Error::os("memfd_create", &what, e))?;
        Segment::initialise(fd, layout, None, what)
    }

    fn initialise(
        fd: OwnedFd,
        layout: Layout,
        name: Option<SegmentName>,
        what: String,
    ) -> Result<Segment> {
        let size = i64::try_from(layout.segment_size).expect("segment size below MAX_SEGMENT_SIZE");
        nix::unistd::ftruncate(&fd, size).map_err(|e| Error::os("ftruncate", &what, e))?;
        if name.is_none() {
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            // SAFETY: F_ADD_SEALS takes an integer flag set and touches no memory of
            // ours; `fd` is open for the whole call (owned here).
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
                return Err(Error::os("fcntl(F_ADD_SEALS)", &what, Errno::last()));
            }
        }
        let proc = ProcFs::default();
        let start_ticks = proc.own_start_ticks()?;
        let map = Mapping::map(fd, layout.segment_size, true, &what)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let pid = std::process::id();
        map.publish_header(&layout.header(
            pid,
            start_ticks,
            u64::try_from(now).unwrap_or(u64::MAX),
        ));
        Ok(Segment {
            map: Arc::new(map),
            layout,
            name,
            what: what.into(),
            creator_pid: pid,
            creator_start_ticks: start_ticks,
            proc,
        })
    }

    /// Opens `/dev/shm/tame.NAME` and validates it against `expect`.
    pub fn open(name: &SegmentName, expect: Expect) -> Result<Segment> {
        let what = name.describe();
        let fd = nix::sys::mman::shm_open(
            name.shm_name().as_str(),
            OFlag::O_RDWR | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ENOENT => Error::NotFound { what: what.clone() },
            Errno::EACCES => {
                let meta = std::fs::metadata(name.path_in(Path::new(SHM_DIR)));
                let detail = meta
                    .map(|m| {
                        use std::os::unix::fs::MetadataExt;
                        format!(" (mode {:#o}, owner uid {})", m.mode() & 0o7777, m.uid())
                    })
                    .unwrap_or_default();
                Error::PermissionDenied {
                    what: what.clone(),
                    detail,
                }
            }
            e => Error::os("shm_open", &what, e),
        })?;
        Segment::from_owned_fd(fd, expect, Some(name.clone()), what)
    }

    /// Opens the named segment if it exists (validating it against `spec`), otherwise
    /// creates it. Waits briefly for a concurrent creator to finish initialising.
    pub fn open_or_create(name: &SegmentName, spec: ChannelSpec, mode: u32) -> Result<Segment> {
        Layout::compute(spec)?;
        for _ in 0..200 {
            match Segment::open(name, Expect::Exact(spec)) {
                Err(Error::NotFound { .. }) => match Segment::create(name, spec, mode) {
                    Err(Error::AlreadyExists { .. }) => continue,
                    other => return other,
                },
                Err(Error::Header {
                    source: HeaderError::NotReady,
                    ..
                }) => std::thread::sleep(Duration::from_millis(1)),
                other => return other,
            }
        }
        Err(Error::Header {
            what: name.describe(),
            source: HeaderError::NotReady,
        })
    }

    /// Maps a segment received as a file descriptor (e.g. a memfd over a Unix socket).
    pub fn from_fd(fd: OwnedFd, expect: Expect) -> Result<Segment> {
        let what = format!("segment fd {}", fd.as_raw_fd());
        Segment::from_owned_fd(fd, expect, None, what)
    }

    fn from_owned_fd(
        fd: OwnedFd,
        expect: Expect,
        name: Option<SegmentName>,
        what: String,
    ) -> Result<Segment> {
        let file_size = file_size(&fd, &what)?;
        if file_size == 0 {
            return Err(Error::Header {
                what,
                source: HeaderError::NotReady,
            });
        }
        if !(HEADER_SIZE..=MAX_SEGMENT_SIZE).contains(&file_size) {
            return Err(Error::Header {
                what,
                source: HeaderError::Corrupted(format!(
                    "size {file_size} B is not a plausible segment size"
                )),
            });
        }
        let map = Mapping::map(fd, file_size, true, &what)?;
        let header = map.header_snapshot();
        let layout = Layout::from_header(&header, file_size).map_err(|source| Error::Header {
            what: what.clone(),
            source,
        })?;
        check_expectation(&layout, expect, &what)?;
        Ok(Segment {
            map: Arc::new(map),
            layout,
            name,
            what: what.into(),
            creator_pid: header.creator_pid,
            creator_start_ticks: header.creator_start_ticks,
            proc: ProcFs::default(),
        })
    }

    /// Replaces the /proc used for liveness checks (tests, containers).
    pub fn with_proc(mut self, proc: ProcFs) -> Segment {
        self.proc = proc;
        self
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn spec(&self) -> ChannelSpec {
        self.layout.spec
    }

    pub fn name(&self) -> Option<&SegmentName> {
        self.name.as_ref()
    }

    pub fn describe(&self) -> &str {
        &self.what
    }

    /// The descriptor to pass to another process (see [`crate::fdpass`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.map.fd.as_fd()
    }

    /// Creator pid and start ticks as recorded at creation.
    pub fn creator(&self) -> (u32, u64) {
        (self.creator_pid, self.creator_start_ticks)
    }

    pub fn creator_liveness(&self) -> Liveness {
        self.proc
            .liveness(self.creator_pid, self.creator_start_ticks)
    }

    /// Removes the name of a named segment; mappings stay valid until closed.
    pub fn unlink(&self) -> Result<()> {
        match &self.name {
            Some(name) => unlink(name),
            None => Ok(()),
        }
    }

    fn peer_slot(&self, slot: usize) -> &AtomicU64 {
        assert!(slot < PEER_SLOTS);
        self.map.atomic_u64(OFFSET_PEERS + 8 * slot as u64)
    }

    /// Who holds role `slot` now, checked against /proc (a few system calls, no waiting).
    pub fn peer_state(&self, slot: usize) -> PeerState {
        let owner = self.peer_slot(slot).load(Ordering::Acquire);
        owner_state(owner, &self.proc)
    }

    /// Claims role `slot` for this process; takes it over if its holder is dead.
    pub(crate) fn claim(&self, slot: usize, role: &'static str) -> Result<RoleClaim> {
        let me = pack_owner(std::process::id(), self.proc.own_start_ticks()?);
        let cell = self.peer_slot(slot);
        // Bounded: each failed CAS means another process changed the slot; give up
        // with RoleTaken rather than spin.
        for _ in 0..8 {
            let current = cell.load(Ordering::Acquire);
            let takeover = match owner_state(current, &self.proc) {
                PeerState::Absent | PeerState::Dead { .. } => true,
                PeerState::Alive { pid } | PeerState::Unknown { pid } => {
                    return Err(Error::RoleTaken {
                        what: self.what.to_string(),
                        role,
                        pid,
                    })
                }
            };
            if takeover
                && cell
                    .compare_exchange(current, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return Ok(RoleClaim {
                    segment: self.clone(),
                    slot,
                    owner: me,
                });
            }
        }
        let pid = crate::layout::unpack_owner(cell.load(Ordering::Acquire)).0;
        Err(Error::RoleTaken {
            what: self.what.to_string(),
            role,
            pid,
        })
    }
}

/// Holds a role slot; frees it on drop (unless someone took it over meanwhile).
#[derive(Debug)]
pub(crate) struct RoleClaim {
    pub(crate) segment: Segment,
    slot: usize,
    owner: u64,
}

impl Drop for RoleClaim {
    fn drop(&mut self) {
        let _ = self.segment.peer_slot(self.slot).compare_exchange(
            self.owner,
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

pub(crate) fn owner_state(owner: u64, proc: &ProcFs) -> PeerState {
    if owner == 0 {
        return PeerState::Absent;
    }
    let pid = crate::layout::unpack_owner(owner).0;
    match proc.owner_liveness(owner) {
        Liveness::Alive => PeerState::Alive { pid },
        Liveness::Dead => PeerState::Dead { pid },
        Liveness::Unknown => PeerState::Unknown { pid },
    }
}

fn check_expectation(layout: &Layout, expect: Expect, what: &str) -> Result<()> {
    let found = layout.spec;
    let ok = match expect {
        Expect::Exact(spec) => spec == found,
        Expect::Kind(kind) => kind == found.kind,
        Expect::Any => true,
    };
    if ok {
        return Ok(());
    }
    let expected = match expect {
        Expect::Exact(spec) => spec.to_string(),
        Expect::Kind(kind) => kind.to_string(),
        Expect::Any => unreachable!("Any always matches"),
    };
    Err(Error::LayoutMismatch {
        what: what.to_string(),
        found: found.to_string(),
        expected,
    })
}

fn file_size(fd: &OwnedFd, what: &str) -> Result<u64> {
    let stat = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Error::os("fstat", what, e))?;
    Ok(u64::try_from(stat.st_size).unwrap_or(0))
}

/// Removes `/dev/shm/tame.NAME`.
pub fn unlink(name: &SegmentName) -> Result<()> {
    nix::sys::mman::shm_unlink(name.shm_name().as_str()).map_err(|e| match e {
        Errno::ENOENT => Error::NotFound {
            what: name.describe(),
        },
        e => Error::os("shm_unlink", &name.describe(), e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(SegmentName::new("sensor-0.v2_a").is_ok());
        for bad in [
            "",
            "a/b",
            ".hidden",
            "sp ace",
            "ü",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            let e = SegmentName::new(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidName { .. }), "{bad:?}");
        }
        let name = SegmentName::new("x").unwrap();
        assert_eq!(name.shm_name(), "/tame.x");
        assert_eq!(SegmentName::from_file_name("tame.x"), Some(name));
        assert_eq!(SegmentName::from_file_name("other.x"), None);
    }
}
