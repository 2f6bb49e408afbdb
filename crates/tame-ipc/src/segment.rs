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
    pack_owner, pack_peer_ns, peer_ns_of, ChannelSpec, HeaderError, Kind, Layout, RawHeader,
    HEADER_SIZE, OFFSET_MAGIC, OFFSET_PEERS, OFFSET_PEER_PID_NS, PEER_SLOTS,
};
use crate::liveness::{Liveness, ProcFs};
use crate::sigbus::{GuardError, Region};

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

/// Whether a mapping may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    /// Mapped `PROT_READ`: register readers, event listeners, inspection.
    ReadOnly,
}

/// An mmap of a segment's layout (never more: a peer that grows the file gains
/// nothing). Unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    access: Access,
    fd: OwnedFd,
    /// For unsealed (named) segments: the SIGBUS guard of this mapping.
    guard: Option<Region>,
}

// SAFETY: the mapping is plain shared memory owned by this value (unmapped only in
// Drop); moving it to another thread changes nothing about its validity.
unsafe impl Send for Mapping {}
// SAFETY: shared access never creates `&mut` into the mapping: every access goes
// through atomics or through a role claim that owns the bytes it touches.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd`. `guarded`: the file can be shrunk by others (named
    /// segments), so register the mapping with the SIGBUS guard before any access.
    pub(crate) fn map(
        fd: OwnedFd,
        len: u64,
        access: Access,
        guarded: bool,
        what: &str,
    ) -> Result<Mapping> {
        let length = usize::try_from(len)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| Error::os("mmap", what, Errno::EINVAL))?;
        let prot = match access {
            Access::ReadWrite => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            Access::ReadOnly => ProtFlags::PROT_READ,
        };
        // Populated now, so the real-time side never takes a page fault on its first
        // pass. Pages a shrink removed meanwhile are simply not populated (no fault).
        let flags = MapFlags::MAP_SHARED | MapFlags::MAP_POPULATE;
        // SAFETY: a fresh shared mapping of a file we hold; no Rust object aliases it.
        let ptr = unsafe { nix::sys::mman::mmap(None, length, prot, flags, &fd, 0) }
            .map_err(|e| Error::os("mmap", what, e))?;
        let ptr: NonNull<u8> = ptr.cast();
        let mut mapping = Mapping {
            ptr,
            len: length.get(),
            access,
            fd,
            guard: None,
        };
        if guarded {
            // Registered before the first access; on failure `mapping` is unmapped.
            let region = Region::register(
                ptr.as_ptr(),
                length.get(),
                access == Access::ReadWrite,
            )
            .map_err(|e| match e {
                GuardError::Install(errno) => {
                    Error::os("installing the SIGBUS handler (sigaction)", what, errno)
                }
                GuardError::Full => Error::os(
                    "guarding the mapping against SIGBUS (at most 1024 named segments per process: close some, or use anonymous segments)",
                    what,
                    Errno::ENOSPC,
                ),
            })?;
            mapping.guard = Some(region);
        }
        Ok(mapping)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn access(&self) -> Access {
        self.access
    }

    /// True once the SIGBUS guard replaced the mapping (the segment was shrunk).
    pub(crate) fn lost(&self) -> bool {
        self.guard.as_ref().is_some_and(Region::lost)
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
        // Unregistered first, so the SIGBUS guard never touches the range once it is
        // unmapped (and possibly reused).
        drop(self.guard.take());
        // SAFETY: we created this mapping with this length; every reference into it is
        // tied to an Arc<Mapping>, so none outlives it.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr.cast(), self.len) };
    }
}

/// Reads the header with pread (never through a mapping, so neither a shrink nor a
/// huge file can hurt): a copy of the first [`HEADER_SIZE`] bytes, or `None` if the
/// file holds fewer.
pub(crate) fn read_header(fd: BorrowedFd<'_>) -> std::result::Result<Option<RawHeader>, Errno> {
    let mut bytes = [0u8; HEADER_SIZE as usize];
    let mut filled = 0;
    while filled < bytes.len() {
        match nix::sys::uio::pread(fd, &mut bytes[filled..], filled as i64) {
            Ok(0) => return Ok(None),
            Ok(n) => filled += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(bytemuck::cast(bytes)))
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
    creator_pid_ns: u32,
    proc: ProcFs,
}

/// A role slot holder as seen now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerState {
    /// Nobody holds the role.
    Absent,
    /// The holder exists (pid and start time match).
    Alive { pid: u32 },
    /// The holder certainly exited or was killed (its pid, in the namespace it recorded
    /// and which is ours, is gone, a zombie, or reused by another process).
    Dead { pid: u32 },
    /// The holder could not be checked: another or unrecorded pid namespace, hidden
    /// by /proc (hidepid), /proc unreadable. Never taken over.
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
    /// Creates `/dev/shm/tame.NAME` with `mode` (refused if it exists). The mode must
    /// let the owner read and write and must not let others write: opens refuse
    /// world-writable segments (any local user could write garbage or shrink them).
    pub fn create(name: &SegmentName, spec: ChannelSpec, mode: u32) -> Result<Segment> {
        let layout = Layout::compute(spec)?;
        if mode & !0o777 != 0 || mode & 0o600 != 0o600 {
            return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
                "mode {mode:#o} must be a permission mode (≤ 0o777) that lets the owner read and write"
            ))));
        }
        if mode & 0o002 != 0 {
            return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
                "mode {mode:#o} lets every local user write the segment (and shrink it), so opens would refuse it — share it with a group instead (e.g. 0o660)"
            ))));
        }
        let what = name.describe();
        let shm_name = name.shm_name();
        let fd = nix::sys::mman::shm_open(
            shm_name.as_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
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
            // SAFETY: F_ADD_SEALS takes an integer flag set and touches no memory of
            // ours; `fd` is open for the whole call (owned here).
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, ANONYMOUS_SEALS) } != 0 {
                return Err(Error::os("fcntl(F_ADD_SEALS)", &what, Errno::last()));
            }
        }
        let proc = ProcFs::default();
        let start_ticks = proc.own_start_ticks()?;
        let pid_ns = proc.pid_ns().unwrap_or(0);
        // A named file can be shrunk by anyone who may write it: guard the mapping.
        let map = Mapping::map(
            fd,
            layout.segment_size,
            Access::ReadWrite,
            name.is_some(),
            &what,
        )?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let pid = std::process::id();
        let mut header = layout.header(pid, start_ticks, u64::try_from(now).unwrap_or(u64::MAX));
        header.creator_pid_ns = pid_ns;
        map.publish_header(&header);
        Ok(Segment {
            map: Arc::new(map),
            layout,
            name,
            what: what.into(),
            creator_pid: pid,
            creator_start_ticks: start_ticks,
            creator_pid_ns: pid_ns,
            proc,
        })
    }

    /// Opens `/dev/shm/tame.NAME` read-write and validates it against `expect`.
    /// Refused (`Untrusted`) unless it is a regular file owned by this user or root
    /// and not writable by others.
    pub fn open(name: &SegmentName, expect: Expect) -> Result<Segment> {
        Segment::open_with(name, expect, Access::ReadWrite)
    }

    /// Opens `/dev/shm/tame.NAME` read-only (mapped `PROT_READ`): enough for register
    /// readers and event listeners, and for users who may only read the segment.
    /// Roles cannot be claimed through it (`ReadOnly`).
    pub fn open_read_only(name: &SegmentName, expect: Expect) -> Result<Segment> {
        Segment::open_with(name, expect, Access::ReadOnly)
    }

    fn open_with(name: &SegmentName, expect: Expect, access: Access) -> Result<Segment> {
        let what = name.describe();
        let mode = match access {
            Access::ReadWrite => OFlag::O_RDWR,
            Access::ReadOnly => OFlag::O_RDONLY,
        };
        // O_NONBLOCK: a FIFO planted under the name would block a read-only open until
        // some writer came (forever); this way it opens at once and check_owner refuses
        // it as not a regular file. A regular file ignores the flag.
        let fd = nix::sys::mman::shm_open(
            name.shm_name().as_str(),
            mode | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK,
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
            // O_NOFOLLOW on a symbolic link planted under the name.
            Errno::ELOOP => Error::Untrusted {
                what: what.clone(),
                reason: "it is a symbolic link".into(),
                remedy: REMOVE_AND_RECREATE,
            },
            e => Error::os("shm_open", &what, e),
        })?;
        check_owner(&fd, &what)?;
        Segment::from_owned_fd(fd, expect, Some(name.clone()), what, access)
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

    /// Maps a segment received as a file descriptor (a memfd from
    /// [`Segment::create_anonymous`], over a Unix socket). The descriptor must be
    /// sealed against shrinking (`F_SEAL_SHRINK`): that seal is what makes SIGBUS
    /// impossible, so an unsealed descriptor is refused (`Untrusted`).
    pub fn from_fd(fd: OwnedFd, expect: Expect) -> Result<Segment> {
        Segment::from_fd_with(fd, expect, Access::ReadWrite)
    }

    /// As [`Segment::from_fd`], mapped read-only.
    pub fn from_fd_read_only(fd: OwnedFd, expect: Expect) -> Result<Segment> {
        Segment::from_fd_with(fd, expect, Access::ReadOnly)
    }

    fn from_fd_with(fd: OwnedFd, expect: Expect, access: Access) -> Result<Segment> {
        let what = format!("segment fd {}", fd.as_raw_fd());
        check_sealed(&fd, &what)?;
        Segment::from_owned_fd(fd, expect, None, what, access)
    }

    fn from_owned_fd(
        fd: OwnedFd,
        expect: Expect,
        name: Option<SegmentName>,
        what: String,
        access: Access,
    ) -> Result<Segment> {
        let stat = fstat(&fd, &what)?;
        if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::Untrusted {
                what,
                reason: "it is not a regular file".into(),
                remedy: REMOVE_AND_RECREATE,
            });
        }
        let file_size = u64::try_from(stat.st_size).unwrap_or(0);
        // Only the header is read before validation, with pread: nothing is mapped
        // until the layout is known, and then exactly the layout (whatever the file
        // size: a grown file costs nothing, a shrunk one is refused or guarded).
        // pread is no acquire load: on a weakly ordered CPU it may see the magic a
        // creator publishes last before the fields it wrote just before (still zero in
        // the fresh file). A creator publishes once, within microseconds, so a header
        // that looks half-written is read again a few times before it is refused.
        let mut attempts = 0;
        let (header, layout) = loop {
            let header = match read_header(fd.as_fd()) {
                Ok(Some(header)) => header,
                Ok(None) if file_size == 0 => {
                    return Err(Error::Header {
                        what,
                        source: HeaderError::NotReady,
                    })
                }
                Ok(None) => {
                    return Err(Error::Header {
                        what,
                        source: HeaderError::Corrupted(format!(
                            "size {file_size} B is smaller than a header"
                        )),
                    })
                }
                Err(e) => return Err(Error::os("pread", &what, e)),
            };
            match Layout::from_header(&header, file_size) {
                Err(HeaderError::Corrupted(_))
                    if attempts < HALF_WRITTEN_RETRIES && looks_half_written(&header) =>
                {
                    attempts += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Ok(layout) => break (header, layout),
                Err(source) => return Err(Error::Header { what, source }),
            }
        };
        check_expectation(&layout, expect, &what)?;
        let map = Mapping::map(fd, layout.segment_size, access, name.is_some(), &what)?;
        Ok(Segment {
            map: Arc::new(map),
            layout,
            name,
            what: what.into(),
            creator_pid: header.creator_pid,
            creator_start_ticks: header.creator_start_ticks,
            creator_pid_ns: header.creator_pid_ns,
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

    /// How many bytes are mapped: always the layout's size, whatever the file's.
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// Whether `len` bytes at `addr` overlap this mapping. Bindings use it to refuse a
    /// caller's buffer that aliases the channel's own slots, which the raw copies
    /// (`push_many_ptr`, `pop_many_ptr`) forbid.
    pub fn overlaps(&self, addr: *const u8, len: usize) -> bool {
        let (start, end) = (addr as usize, (addr as usize).saturating_add(len));
        let base = self.map.base() as usize;
        len > 0 && start < base + self.map.len() && base < end
    }

    /// Whether this segment was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.map.access() == Access::ReadOnly
    }

    /// True once someone shrank this (named) segment under our mapping: the SIGBUS
    /// guard then replaced the mapping by private zero-filled memory, so this side
    /// shares nothing with its peers any more (operations see zeros, `Corrupted`
    /// indices or their own writes). Recreate the channel. Always false for anonymous
    /// segments, which cannot be shrunk.
    pub fn is_lost(&self) -> bool {
        self.map.lost()
    }

    /// Creator pid and start ticks as recorded at creation.
    pub fn creator(&self) -> (u32, u64) {
        (self.creator_pid, self.creator_start_ticks)
    }

    /// The creator's pid namespace as recorded (0: not recorded, a 1.0 creator).
    pub fn creator_pid_ns(&self) -> u32 {
        self.creator_pid_ns
    }

    pub fn creator_liveness(&self) -> Liveness {
        self.proc.recorded_liveness(
            self.creator_pid,
            self.creator_start_ticks,
            self.creator_pid_ns,
        )
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

    fn peer_ns_slot(&self, slot: usize) -> &AtomicU64 {
        assert!(slot < PEER_SLOTS);
        self.map.atomic_u64(OFFSET_PEER_PID_NS + 8 * slot as u64)
    }

    /// Who holds role `slot` now, checked against /proc (a few system calls, no waiting).
    pub fn peer_state(&self, slot: usize) -> PeerState {
        let owner = self.peer_slot(slot).load(Ordering::Acquire);
        let ns_word = self.peer_ns_slot(slot).load(Ordering::Acquire);
        owner_state(owner, peer_ns_of(owner, ns_word), &self.proc)
    }

    /// Claims role `slot` for this process; takes it over only if its holder is
    /// certainly dead (never when its state is `Unknown`).
    pub(crate) fn claim(&self, slot: usize, role: &'static str) -> Result<RoleClaim> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                what: self.what.to_string(),
                op: role,
            });
        }
        let me = pack_owner(std::process::id(), self.proc.own_start_ticks()?);
        let my_ns = self.proc.pid_ns().unwrap_or(0);
        let cell = self.peer_slot(slot);
        // Bounded: each failed CAS means another process changed the slot; give up
        // with RoleTaken rather than spin.
        for _ in 0..8 {
            let current = cell.load(Ordering::Acquire);
            let ns_word = self.peer_ns_slot(slot).load(Ordering::Acquire);
            let takeover = match owner_state(current, peer_ns_of(current, ns_word), &self.proc) {
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
                // Our namespace, tagged with our owner word: until this store lands a
                // reader sees no namespace for us and reports Unknown, never Dead.
                self.peer_ns_slot(slot)
                    .store(pack_peer_ns(me, my_ns), Ordering::Release);
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

/// How often an open reads a header again that looks half-written (see
/// `from_owned_fd`).
const HALF_WRITTEN_RETRIES: u32 = 3;

/// Fields every published header has non-zero, still zero: seen mid-publication.
fn looks_half_written(header: &RawHeader) -> bool {
    header.kind == 0
        || header.header_size == 0
        || header.control_offset == 0
        || header.data_offset == 0
        || header.segment_size == 0
}

/// Seals every anonymous segment carries; [`REQUIRED_SEALS`] is what `from_fd` relies on.
const ANONYMOUS_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
/// Shrinking is what raises SIGBUS in a mapping; growing does no harm (only the layout
/// is mapped), and further seals a peer could add (F_SEAL_WRITE needs no writable
/// mapping to exist; F_SEAL_FUTURE_WRITE leaves existing mappings alone) at worst
/// make a later open fail.
const REQUIRED_SEALS: libc::c_int = libc::F_SEAL_SHRINK;

const REMOVE_AND_RECREATE: &str =
    "remove it (`tame ipc rm NAME`) and have the intended owner create it again";

/// A named segment is adopted only if nobody but its owner (this user or root) can
/// write it: otherwise another user could have planted it, or could shrink or scribble
/// on it at will.
fn check_owner(fd: &OwnedFd, what: &str) -> Result<()> {
    let stat = fstat(fd, what)?;
    // SAFETY: geteuid takes no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let untrusted = |reason: String| Error::Untrusted {
        what: what.to_string(),
        reason,
        remedy: REMOVE_AND_RECREATE,
    };
    if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(untrusted("it is not a regular file".into()));
    }
    if stat.st_uid != euid && stat.st_uid != 0 {
        return Err(untrusted(format!(
            "it is owned by uid {}, neither this user (uid {euid}) nor root, who could have planted it",
            stat.st_uid
        )));
    }
    if stat.st_mode & 0o002 != 0 {
        return Err(untrusted(format!(
            "its mode {:#o} lets every local user write it (and shrink it)",
            stat.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// The safe mode's promise rests on the seal against shrinking: refuse a descriptor
/// that lacks it (a named segment's, an unsealed memfd, any other file).
fn check_sealed(fd: &OwnedFd, what: &str) -> Result<()> {
    // SAFETY: F_GET_SEALS takes no argument and touches no memory of ours; `fd` is
    // open for the whole call (owned by the caller).
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    let reason = if seals < 0 {
        format!(
            "it cannot carry seals ({}), so anyone who can write it can shrink it",
            Errno::last()
        )
    } else if seals & REQUIRED_SEALS != REQUIRED_SEALS {
        format!(
            "it is not sealed against shrinking (seals {seals:#x}), so a peer could truncate it under the mapping"
        )
    } else {
        return Ok(());
    };
    Err(Error::Untrusted {
        what: what.to_string(),
        reason,
        remedy: "pass the descriptor of an anonymous segment (create_anonymous, sealed), or open a named segment by its name",
    })
}

fn fstat(fd: &OwnedFd, what: &str) -> Result<libc::stat> {
    nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Error::os("fstat", what, e))
}

pub(crate) fn owner_state(owner: u64, pid_ns: u32, proc: &ProcFs) -> PeerState {
    if owner == 0 {
        return PeerState::Absent;
    }
    let pid = crate::layout::unpack_owner(owner).0;
    match proc.owner_liveness(owner, pid_ns) {
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

    #[test]
    fn overlaps_is_true_only_for_ranges_touching_the_mapping() {
        let segment = Segment::create_anonymous(ChannelSpec::register::<u64>()).unwrap();
        let base = segment.map.base() as *const u8;
        let len = segment.mapped_len();
        assert!(segment.overlaps(base, 1));
        assert!(segment.overlaps(base.wrapping_add(len - 1), 8));
        assert!(segment.overlaps(base.wrapping_sub(4), 5));
        assert!(!segment.overlaps(base.wrapping_sub(4), 4));
        assert!(!segment.overlaps(base.wrapping_add(len), 8));
        assert!(!segment.overlaps(base, 0));
        let private = [0u8; 16];
        assert!(!segment.overlaps(private.as_ptr(), private.len()));
    }

    #[test]
    fn a_received_descriptor_can_be_mapped_read_only() {
        let spec = ChannelSpec::register::<u64>();
        let segment = Segment::create_anonymous(spec).unwrap();
        let fd = segment.fd().try_clone_to_owned().unwrap();
        let read_only = Segment::from_fd_read_only(fd, Expect::Exact(spec)).unwrap();
        assert!(read_only.is_read_only());
        assert!(!segment.is_read_only());
    }
}
