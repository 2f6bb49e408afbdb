//! The on-memory layout of a segment: header fields, offsets and their validation.
//!
//! Every segment starts with a 128-byte header. Creation computes the layout from a
//! [`ChannelSpec`]; opening recomputes it from the header fields and accepts the segment
//! only if every recorded offset and size equals the recomputed one and fits in the file.
//! After that the opener uses only its private copy ([`Layout`]), never the header again,
//! so a peer that scribbles on the header later cannot steer it out of bounds.

use std::fmt;

use bytemuck::{Pod, Zeroable};

/// "TAMEIPC" followed by a zero byte, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TAMEIPC\0");
/// Segments with the same major version are compatible; see the crate README.
/// 2.0 changed the ring protocol: each ring slot carries its own sequence word, so a
/// message moves the slot's cache line only (1.x published a tail index per message).
pub const LAYOUT_MAJOR: u16 = 2;
/// Minor versions only add meaning to fields that were reserved (zero) before.
/// (1.1 recorded the pid namespace of the creator and of each role holder; 2.0 keeps it.)
pub const LAYOUT_MINOR: u16 = 0;
/// Size of the v1 header, which is also where the kind-specific control block begins.
pub const HEADER_SIZE: u64 = 128;
/// Control words are kept on separate 128-byte blocks: two cache lines, so the
/// adjacent-line prefetcher does not couple the producer's and consumer's lines.
pub const CONTROL_BLOCK: u64 = 128;
/// Segment sizes are rounded up to this.
pub const PAGE: u64 = 4096;
/// The cache line the ring's slot layout is planned for (x86-64 and most aarch64).
pub const CACHE_LINE: u64 = 64;

/// Largest element, in bytes.
pub const MAX_ELEM_SIZE: u32 = 1 << 20;
/// Largest element alignment.
pub const MAX_ELEM_ALIGN: u32 = 4096;
/// Largest ring capacity, in slots.
pub const MAX_CAPACITY: u64 = 1 << 30;
/// Largest segment this library creates or maps.
pub const MAX_SEGMENT_SIZE: u64 = 1 << 36;

/// Byte offsets of the header fields that are accessed atomically while shared.
pub(crate) const OFFSET_MAGIC: u64 = 0;
pub(crate) const OFFSET_PEERS: u64 = 96;
pub(crate) const OFFSET_PEER_PID_NS: u64 = 112;
/// Number of role slots (ring: producer, consumer; register: writer).
pub const PEER_SLOTS: usize = 2;

/// What a segment holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Single-producer single-consumer ring of fixed-size slots.
    Ring,
    /// Latest-value register: one writer, many readers.
    Register,
    /// Event counter for simple signalling.
    Event,
}

impl Kind {
    pub fn code(self) -> u16 {
        match self {
            Kind::Ring => 1,
            Kind::Register => 2,
            Kind::Event => 3,
        }
    }

    pub fn from_code(code: u16) -> Option<Kind> {
        match code {
            1 => Some(Kind::Ring),
            2 => Some(Kind::Register),
            3 => Some(Kind::Event),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ring => "ring",
            Kind::Register => "register",
            Kind::Event => "event",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The header as it lies in shared memory (v1.1). All fields little-endian native
/// (the segment never leaves the machine).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RawHeader {
    /// [`MAGIC`]; written last by the creator (release), zero while it initialises.
    pub magic: u64,
    pub layout_major: u16,
    pub layout_minor: u16,
    pub kind: u16,
    /// Reserved; zero in v1.0.
    pub flags: u16,
    pub header_size: u32,
    pub elem_size: u32,
    pub elem_align: u32,
    pub reserved0: u32,
    pub capacity: u64,
    /// Opaque user tag naming the element type (0: untagged); must match on open.
    pub type_tag: u64,
    pub segment_size: u64,
    pub control_offset: u64,
    pub data_offset: u64,
    pub creator_pid: u32,
    /// Since 1.1: inode of the creator's pid namespace (`/proc/self/ns/pid`), so a
    /// reader can tell whether `creator_pid` is a pid of its own namespace; 0 when
    /// not recorded (a 1.0 creator, or the namespace could not be read).
    pub creator_pid_ns: u32,
    /// Start time of the creator (clock ticks after boot, /proc/PID/stat field 22).
    pub creator_start_ticks: u64,
    /// Wall-clock creation time, nanoseconds since the Unix epoch (informational).
    pub created_unix_ns: u64,
    /// Role slots: 0 ring producer / register writer, 1 ring consumer. Each holds
    /// `pid << 32 | (start_ticks & 0xffff_ffff)`, 0 when free. Accessed atomically.
    pub peers: [u64; PEER_SLOTS],
    /// Since 1.1: the pid namespace of each role holder, written right after the
    /// holder claims its slot: [`pack_peer_ns`]`(owner, ns)`. It counts only while
    /// its tag matches the slot's current owner (0 or a stale value: not recorded).
    pub peer_pid_ns: [u64; PEER_SLOTS],
}

impl RawHeader {
    /// The header's bytes as they lie in a segment (fixtures, tools).
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::bytes_of(self)
    }

    /// Records `pid_ns` as the pid namespace of the creator and of every role holder
    /// now in `peers` (what a 1.1 creator and claimers write; fixtures, tools).
    pub fn with_pid_ns(mut self, pid_ns: u32) -> RawHeader {
        self.creator_pid_ns = pid_ns;
        for (slot, owner) in self.peers.iter().enumerate() {
            self.peer_pid_ns[slot] = if *owner == 0 {
                0
            } else {
                pack_peer_ns(*owner, pid_ns)
            };
        }
        self
    }

    /// The recorded pid namespace of the holder of role `slot`, 0 when not recorded
    /// (or recorded for an earlier holder).
    pub fn peer_pid_ns(&self, slot: usize) -> u32 {
        peer_ns_of(self.peers[slot], self.peer_pid_ns[slot])
    }
}

const _: () = assert!(std::mem::size_of::<RawHeader>() as u64 == HEADER_SIZE);
const _: () = assert!(std::mem::offset_of!(RawHeader, peers) as u64 == OFFSET_PEERS);
const _: () = assert!(std::mem::offset_of!(RawHeader, magic) as u64 == OFFSET_MAGIC);
const _: () = assert!(std::mem::offset_of!(RawHeader, peer_pid_ns) as u64 == OFFSET_PEER_PID_NS);

/// What the user asks for: the shape of a channel. Validated by [`Layout::compute`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelSpec {
    pub kind: Kind,
    pub elem_size: u32,
    pub elem_align: u32,
    pub capacity: u64,
    pub type_tag: u64,
}

impl ChannelSpec {
    /// A ring of `capacity` slots of `T`.
    pub fn ring<T>(capacity: u64) -> ChannelSpec {
        ChannelSpec::raw(Kind::Ring, size_u32::<T>(), align_u32::<T>(), capacity)
    }

    /// A latest-value register holding one `T`.
    pub fn register<T>() -> ChannelSpec {
        ChannelSpec::raw(Kind::Register, size_u32::<T>(), align_u32::<T>(), 1)
    }

    /// An event counter.
    pub fn event() -> ChannelSpec {
        ChannelSpec::raw(Kind::Event, 0, 1, 0)
    }

    /// A spec from raw numbers (the C ABI and tools use this).
    pub fn raw(kind: Kind, elem_size: u32, elem_align: u32, capacity: u64) -> ChannelSpec {
        ChannelSpec {
            kind,
            elem_size,
            elem_align,
            capacity,
            type_tag: 0,
        }
    }

    /// Tags the element type, so that an opener expecting another type is refused.
    pub fn with_type_tag(mut self, tag: u64) -> ChannelSpec {
        self.type_tag = tag;
        self
    }
}

impl fmt::Display for ChannelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Ring => write!(
                f,
                "ring of {} × {} B (align {})",
                self.capacity, self.elem_size, self.elem_align
            )?,
            Kind::Register => write!(
                f,
                "register of {} B (align {})",
                self.elem_size, self.elem_align
            )?,
            Kind::Event => f.write_str("event counter")?,
        }
        if self.type_tag != 0 {
            write!(f, ", type tag {:#x}", self.type_tag)?;
        }
        Ok(())
    }
}

fn size_u32<T>() -> u32 {
    u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX)
}

fn align_u32<T>() -> u32 {
    u32::try_from(std::mem::align_of::<T>()).unwrap_or(u32::MAX)
}

/// A validated layout: every offset is in bounds of `segment_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub spec: ChannelSpec,
    /// Distance between ring slots (see [`ring_slot_stride`]) or the register's value
    /// size rounded up to whole words.
    pub stride: u64,
    pub control_offset: u64,
    pub data_offset: u64,
    pub data_size: u64,
    pub segment_size: u64,
}

/// Why a spec cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// Why a header is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("the segment is still being initialised by its creator (magic not yet written)")]
    NotReady,
    #[error("not a tame-ipc segment (magic {0:#018x})")]
    BadMagic(u64),
    #[error("layout version {found_major}.{found_minor} is not compatible with this library's {LAYOUT_MAJOR}.{LAYOUT_MINOR} (major versions must match)")]
    IncompatibleVersion { found_major: u16, found_minor: u16 },
    #[error("corrupted header: {0}")]
    Corrupted(String),
}

fn round_up(value: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    value.checked_add(align - 1).map(|v| v & !(align - 1))
}

/// Where a ring slot's sequence word lies: right after the element, on a whole word.
pub fn ring_seq_offset(elem_size: u32) -> u64 {
    (u64::from(elem_size) + 7) & !7
}

/// The distance between ring slots. A slot is the element, then its 8-byte sequence
/// word. A slot that fits in a cache line gets the next power of two, so it never
/// straddles two lines (a message then moves exactly one line); a larger one is rounded
/// up to whole lines, so no two slots share a line. Then up to the element alignment.
/// `None` on overflow (sizes are validated before this matters).
pub fn ring_slot_stride(elem_size: u32, elem_align: u32) -> Option<u64> {
    let slot = ring_seq_offset(elem_size) + 8;
    let lines = if slot <= CACHE_LINE {
        slot.next_power_of_two()
    } else {
        round_up(slot, CACHE_LINE)?
    };
    round_up(lines, u64::from(elem_align))
}

impl Layout {
    /// Validates a spec and computes where everything lies. Pure: the same function
    /// checks headers on open, so creator and opener cannot disagree.
    pub fn compute(spec: ChannelSpec) -> Result<Layout, SpecError> {
        let err = |m: String| Err(SpecError(m));
        if !spec.elem_align.is_power_of_two() || spec.elem_align > MAX_ELEM_ALIGN {
            return err(format!(
                "element alignment {} must be a power of two no larger than {MAX_ELEM_ALIGN}",
                spec.elem_align
            ));
        }
        match spec.kind {
            Kind::Ring | Kind::Register => {
                if spec.elem_size == 0 {
                    return err("element size 0 — an element must have at least one byte".into());
                }
                if spec.elem_size > MAX_ELEM_SIZE {
                    return err(format!(
                        "element size {} B exceeds the limit of {MAX_ELEM_SIZE} B — pass large data by reference or split it",
                        spec.elem_size
                    ));
                }
            }
            Kind::Event => {
                if spec.elem_size != 0 || spec.capacity != 0 || spec.elem_align != 1 {
                    return err(
                        "an event counter has no elements (size 0, align 1, capacity 0)".into(),
                    );
                }
            }
        }
        match spec.kind {
            Kind::Ring => {
                if spec.capacity == 0 || !spec.capacity.is_power_of_two() {
                    return err(format!(
                        "ring capacity {} must be a power of two ≥ 1 (e.g. {})",
                        spec.capacity,
                        spec.capacity
                            .max(1)
                            .checked_next_power_of_two()
                            .unwrap_or(MAX_CAPACITY)
                            .min(MAX_CAPACITY)
                    ));
                }
                if spec.capacity > MAX_CAPACITY {
                    return err(format!(
                        "ring capacity {} exceeds the limit of {MAX_CAPACITY}",
                        spec.capacity
                    ));
                }
            }
            Kind::Register => {
                if spec.capacity != 1 {
                    return err(format!(
                        "a register holds one value (capacity 1, got {})",
                        spec.capacity
                    ));
                }
            }
            Kind::Event => {}
        }

        let align = u64::from(spec.elem_align);
        let stride = match spec.kind {
            Kind::Ring => ring_slot_stride(spec.elem_size, spec.elem_align).unwrap_or(u64::MAX),
            // Register data is stored as 8-byte words (read and written atomically).
            Kind::Register => round_up(u64::from(spec.elem_size), 8).unwrap_or(u64::MAX),
            Kind::Event => 0,
        };
        let control_offset = HEADER_SIZE;
        let control_size = match spec.kind {
            Kind::Ring => 2 * CONTROL_BLOCK,
            Kind::Register | Kind::Event => CONTROL_BLOCK,
        };
        let data_offset = round_up(control_offset + control_size, align.max(CONTROL_BLOCK))
            .ok_or_else(|| SpecError("layout overflow".into()))?;
        let data_size = match spec.kind {
            Kind::Ring => stride.checked_mul(spec.capacity),
            Kind::Register => Some(stride),
            Kind::Event => Some(0),
        }
        .ok_or_else(|| SpecError("layout overflow".into()))?;
        let segment_size = data_offset
            .checked_add(data_size)
            .and_then(|end| round_up(end, PAGE))
            .filter(|&size| size <= MAX_SEGMENT_SIZE)
            .ok_or_else(|| {
                SpecError(format!(
                    "{spec} needs more than the limit of {MAX_SEGMENT_SIZE} B — use fewer or smaller slots"
                ))
            })?;
        Ok(Layout {
            spec,
            stride,
            control_offset,
            data_offset,
            data_size,
            segment_size,
        })
    }

    /// The header a creator writes for this layout (magic included; the caller publishes
    /// it last).
    pub fn header(
        &self,
        creator_pid: u32,
        creator_start_ticks: u64,
        created_unix_ns: u64,
    ) -> RawHeader {
        RawHeader {
            magic: MAGIC,
            layout_major: LAYOUT_MAJOR,
            layout_minor: LAYOUT_MINOR,
            kind: self.spec.kind.code(),
            flags: 0,
            header_size: HEADER_SIZE as u32,
            elem_size: self.spec.elem_size,
            elem_align: self.spec.elem_align,
            reserved0: 0,
            capacity: self.spec.capacity,
            type_tag: self.spec.type_tag,
            segment_size: self.segment_size,
            control_offset: self.control_offset,
            data_offset: self.data_offset,
            creator_pid,
            creator_pid_ns: 0,
            creator_start_ticks,
            created_unix_ns,
            peers: [0; PEER_SLOTS],
            peer_pid_ns: [0; PEER_SLOTS],
        }
    }

    /// Validates a header snapshot against the size of the file it came from.
    ///
    /// Accepts any minor version of the same major version (see the README's
    /// compatibility rule); everything else must be exactly what [`Layout::compute`]
    /// derives from the recorded spec.
    pub fn from_header(header: &RawHeader, file_size: u64) -> Result<Layout, HeaderError> {
        let corrupted = |m: String| Err(HeaderError::Corrupted(m));
        if header.magic == 0 {
            return Err(HeaderError::NotReady);
        }
        if header.magic != MAGIC {
            return Err(HeaderError::BadMagic(header.magic));
        }
        if header.layout_major != LAYOUT_MAJOR {
            return Err(HeaderError::IncompatibleVersion {
                found_major: header.layout_major,
                found_minor: header.layout_minor,
            });
        }
        // A later minor version may grow the header, never shrink it.
        if u64::from(header.header_size) < HEADER_SIZE
            || u64::from(header.header_size) > header.control_offset
        {
            return corrupted(format!(
                "header size {} is out of range",
                header.header_size
            ));
        }
        let Some(kind) = Kind::from_code(header.kind) else {
            return corrupted(format!("unknown channel kind {}", header.kind));
        };
        let spec = ChannelSpec {
            kind,
            elem_size: header.elem_size,
            elem_align: header.elem_align,
            capacity: header.capacity,
            type_tag: header.type_tag,
        };
        let layout = match Layout::compute(spec) {
            Ok(layout) => layout,
            Err(e) => return corrupted(format!("recorded channel shape is invalid: {e}")),
        };
        // v1.0 readers compute offsets exactly; a minor version that moved them would
        // have had to bump the major version.
        if header.control_offset != layout.control_offset
            || header.data_offset != layout.data_offset
            || header.segment_size != layout.segment_size
        {
            return corrupted(format!(
                "recorded offsets (control {}, data {}, size {}) differ from the ones the shape implies (control {}, data {}, size {})",
                header.control_offset,
                header.data_offset,
                header.segment_size,
                layout.control_offset,
                layout.data_offset,
                layout.segment_size
            ));
        }
        if layout.segment_size > file_size {
            return corrupted(format!(
                "the header claims {} B but the segment has only {file_size} B",
                layout.segment_size
            ));
        }
        Ok(layout)
    }
}

/// Packs a role-slot owner: pid in the high half, start ticks truncated to the low half
/// (32 bits of USER_HZ ticks wrap after ~497 days; a pid reused at exactly that offset
/// is the only false "alive").
pub fn pack_owner(pid: u32, start_ticks: u64) -> u64 {
    (u64::from(pid) << 32) | (start_ticks & 0xffff_ffff)
}

/// The inverse of [`pack_owner`]: (pid, low 32 bits of start ticks).
pub fn unpack_owner(owner: u64) -> (u32, u32) {
    ((owner >> 32) as u32, owner as u32)
}

/// A 32-bit tag of a packed owner, so a namespace word written for one holder is not
/// taken for the next one's (a Fibonacci hash of all 64 bits; never 0 for an owner).
fn owner_tag(owner: u64) -> u32 {
    ((owner.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32).max(1)
}

/// The namespace word of a role slot: `pid_ns << 32 | tag(owner)`.
pub fn pack_peer_ns(owner: u64, pid_ns: u32) -> u64 {
    (u64::from(pid_ns) << 32) | u64::from(owner_tag(owner))
}

/// The pid namespace recorded for `owner` in namespace word `word`; 0 when the word
/// belongs to another owner (written for an earlier holder, or not yet written).
pub fn peer_ns_of(owner: u64, word: u64) -> u32 {
    if owner == 0 || word as u32 != owner_tag(owner) {
        return 0;
    }
    (word >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_for(spec: ChannelSpec) -> (Layout, RawHeader) {
        let layout = Layout::compute(spec).unwrap();
        (layout, layout.header(1, 2, 3))
    }

    #[test]
    fn ring_layout_separates_indices_and_aligns_data() {
        let layout = Layout::compute(ChannelSpec::ring::<u64>(1024)).unwrap();
        assert_eq!(layout.control_offset, 128);
        assert_eq!(layout.data_offset, 128 + 256);
        // 8 B element + 8 B sequence word.
        assert_eq!(layout.stride, 16);
        assert_eq!(layout.data_size, 16384);
        assert_eq!(layout.segment_size, 20480);
        let odd = Layout::compute(ChannelSpec::raw(Kind::Ring, 3, 4, 4)).unwrap();
        assert_eq!(odd.stride, 16);
        let page_aligned = Layout::compute(ChannelSpec::raw(Kind::Ring, 4096, 4096, 2)).unwrap();
        assert_eq!(page_aligned.stride, 8192);
        assert_eq!(page_aligned.data_offset % 4096, 0);
    }

    #[test]
    fn ring_slots_keep_to_cache_lines() {
        // (element size, alignment) → (sequence word offset, stride)
        for (size, align, seq, stride) in [
            (1, 1, 8, 16),
            (8, 8, 8, 16),
            (24, 8, 24, 32),
            (40, 8, 40, 64),
            (56, 8, 56, 64),
            (64, 8, 64, 128),
            (256, 8, 256, 320),
            (1024, 8, 1024, 1088),
            (8, 64, 8, 64),
            (100, 128, 104, 128),
        ] {
            assert_eq!(ring_seq_offset(size), seq, "{size} B");
            assert_eq!(
                ring_slot_stride(size, align),
                Some(stride),
                "{size} B align {align}"
            );
            // A slot within one line never straddles two; a larger one starts a line.
            if stride <= CACHE_LINE {
                assert_eq!(CACHE_LINE % stride, 0);
            } else {
                assert_eq!(stride % CACHE_LINE, 0);
            }
        }
    }

    #[test]
    fn bad_specs_are_refused_with_reasons() {
        for (spec, needle) in [
            (ChannelSpec::ring::<u64>(0), "power of two"),
            (ChannelSpec::ring::<u64>(3), "power of two"),
            (ChannelSpec::ring::<u64>(1 << 31), "exceeds"),
            (ChannelSpec::raw(Kind::Ring, 0, 1, 4), "size 0"),
            (
                ChannelSpec::raw(Kind::Ring, MAX_ELEM_SIZE + 1, 1, 4),
                "exceeds",
            ),
            (ChannelSpec::raw(Kind::Ring, 8, 3, 4), "alignment"),
            (
                ChannelSpec::raw(Kind::Ring, MAX_ELEM_SIZE, 1, MAX_CAPACITY),
                "limit",
            ),
            (ChannelSpec::raw(Kind::Register, 8, 8, 2), "one value"),
            (ChannelSpec::raw(Kind::Event, 8, 1, 0), "no elements"),
        ] {
            let e = Layout::compute(spec).unwrap_err();
            assert!(e.0.contains(needle), "{spec:?}: {e}");
        }
    }

    #[test]
    fn header_round_trips_and_accepts_newer_minor() {
        for spec in [
            ChannelSpec::ring::<[u8; 64]>(8).with_type_tag(7),
            ChannelSpec::register::<u32>(),
            ChannelSpec::event(),
        ] {
            let (layout, mut header) = header_for(spec);
            assert_eq!(
                Layout::from_header(&header, layout.segment_size),
                Ok(layout)
            );
            header.layout_minor = LAYOUT_MINOR + 3;
            assert_eq!(
                Layout::from_header(&header, layout.segment_size),
                Ok(layout)
            );
        }
    }

    #[test]
    fn header_refusals_are_distinct() {
        let (layout, header) = header_for(ChannelSpec::ring::<u64>(16));
        let size = layout.segment_size;
        let refuse = |h: RawHeader, size| Layout::from_header(&h, size).unwrap_err();
        assert_eq!(
            refuse(RawHeader { magic: 0, ..header }, size),
            HeaderError::NotReady
        );
        assert!(matches!(
            refuse(RawHeader { magic: 1, ..header }, size),
            HeaderError::BadMagic(1)
        ));
        assert!(matches!(
            refuse(
                RawHeader {
                    layout_major: 1,
                    ..header
                },
                size
            ),
            HeaderError::IncompatibleVersion { found_major: 1, .. }
        ));
        assert!(matches!(
            refuse(header, size - 1),
            HeaderError::Corrupted(_)
        ));
        assert!(matches!(
            refuse(RawHeader { kind: 9, ..header }, size),
            HeaderError::Corrupted(_)
        ));
        assert!(matches!(
            refuse(
                RawHeader {
                    capacity: 17,
                    ..header
                },
                size
            ),
            HeaderError::Corrupted(_)
        ));
        assert!(matches!(
            refuse(
                RawHeader {
                    data_offset: 0,
                    ..header
                },
                size
            ),
            HeaderError::Corrupted(_)
        ));
        assert!(matches!(
            refuse(
                RawHeader {
                    header_size: 8,
                    ..header
                },
                size
            ),
            HeaderError::Corrupted(_)
        ));
    }

    #[test]
    fn owner_packing_round_trips() {
        let packed = pack_owner(4242, 0x1_2345_6789);
        assert_eq!(unpack_owner(packed), (4242, 0x2345_6789));
    }

    #[test]
    fn peer_namespace_counts_only_for_its_owner() {
        let owner = pack_owner(4242, 77);
        let word = pack_peer_ns(owner, 4_026_531_836);
        assert_eq!(peer_ns_of(owner, word), 4_026_531_836);
        // Written for an earlier holder, never written, or no holder: not recorded.
        assert_eq!(peer_ns_of(pack_owner(4243, 77), word), 0);
        assert_eq!(peer_ns_of(owner, 0), 0);
        assert_eq!(peer_ns_of(0, word), 0);
        let mut header = Layout::compute(ChannelSpec::ring::<u64>(4))
            .unwrap()
            .header(1, 2, 3);
        header.peers = [owner, 0];
        let header = header.with_pid_ns(9);
        assert_eq!(
            (
                header.creator_pid_ns,
                header.peer_pid_ns(0),
                header.peer_pid_ns(1)
            ),
            (9, 9, 0)
        );
    }
}
