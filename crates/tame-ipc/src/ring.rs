//! Single-producer single-consumer ring of fixed-size slots.
//!
//! Each slot is the element followed by its own 8-byte sequence word (layout 2.0). The
//! producer writes the element, then stores `index + 1` into the slot's sequence word
//! (release); the consumer polls the sequence word of the slot at its head (acquire)
//! and reads the element when it says "written for this index". So a message moves the
//! slot's cache line(s) and nothing else: no index line travels per message (slots of
//! up to 56 B fit one line; see [`crate::layout::ring_slot_stride`]).
//!
//! The indices are free-running 64-bit counters, each side's kept privately; the
//! consumer publishes its head (on its own 128-byte block) after every pop, which the
//! producer reads only when its cached copy says the ring is full — once per lap when
//! the consumer keeps up. The producer publishes its tail too, for `len`, inspection and
//! a producer that takes the role over; the consumer never waits on it. Push and pop are
//! wait-free: a bounded number of instructions, no system calls, no locks.
//!
//! Robustness: a sequence word is either "written for this index" (`index + 1`), "free"
//! (what the previous lap wrote, `index + 1 − capacity`, or 0 on the first lap) or
//! impossible, and then the operation returns `Corrupted`; so is a published head more
//! than `capacity` away from the tail. Slot addresses are always masked by the private
//! copy of the capacity, so nothing is read or written out of bounds.

use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::layout::{ring_seq_offset, ChannelSpec, Kind, CACHE_LINE, CONTROL_BLOCK};
use crate::segment::{Expect, PeerState, RoleClaim, Segment, SegmentName, DEFAULT_MODE};
use crate::slots;

/// Role slot of the producer in the segment header.
pub const PRODUCER_SLOT: usize = 0;
/// Role slot of the consumer in the segment header.
pub const CONSUMER_SLOT: usize = 1;

/// Why a push did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// No free slot; retry later.
    Full,
    /// The consumer's published index is impossible; the ring cannot be trusted.
    Corrupted,
    /// The byte slice is not exactly one element long (raw API only).
    WrongSize,
}

/// Why a pop returned nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopError {
    /// Nothing to read; retry later.
    Empty,
    /// The producer's published index is impossible; the ring cannot be trusted.
    Corrupted,
    /// The byte slice is not exactly one element long (raw API only).
    WrongSize,
}

/// The published index is impossible (batch operations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupted;

/// A ring segment; attach a [`Producer`] and a [`Consumer`] to it (in this process or
/// in another one that opened the same segment).
#[derive(Clone, Debug)]
pub struct Ring {
    segment: Segment,
}

fn ring_spec(spec: ChannelSpec) -> Result<ChannelSpec> {
    if spec.kind != Kind::Ring {
        return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
            "a ring needs a ring spec, got {spec}"
        ))));
    }
    Ok(spec)
}

impl Ring {
    /// Creates `/dev/shm/tame.NAME` (mode 0600); refused if it exists.
    pub fn create(name: &str, spec: ChannelSpec) -> Result<Ring> {
        Ring::create_with_mode(name, spec, DEFAULT_MODE)
    }

    pub fn create_with_mode(name: &str, spec: ChannelSpec, mode: u32) -> Result<Ring> {
        let name = SegmentName::new(name)?;
        Segment::create(&name, ring_spec(spec)?, mode).map(|segment| Ring { segment })
    }

    /// Opens an existing named ring that must have exactly this shape.
    pub fn open(name: &str, spec: ChannelSpec) -> Result<Ring> {
        let name = SegmentName::new(name)?;
        Segment::open(&name, Expect::Exact(ring_spec(spec)?)).map(|segment| Ring { segment })
    }

    /// Opens an existing named ring of any shape (inspect [`Ring::spec`]). The segment
    /// chooses the shape, and so how much is mapped and populated (up to
    /// `MAX_SEGMENT_SIZE`): with an untrusted creator, open the exact shape instead.
    pub fn open_any(name: &str) -> Result<Ring> {
        let name = SegmentName::new(name)?;
        Segment::open(&name, Expect::Kind(Kind::Ring)).map(|segment| Ring { segment })
    }

    pub fn open_or_create(name: &str, spec: ChannelSpec) -> Result<Ring> {
        let name = SegmentName::new(name)?;
        Segment::open_or_create(&name, ring_spec(spec)?, DEFAULT_MODE)
            .map(|segment| Ring { segment })
    }

    /// An anonymous ring (memfd); share it with [`crate::fdpass::send_fd`].
    pub fn create_anonymous(spec: ChannelSpec) -> Result<Ring> {
        Segment::create_anonymous(ring_spec(spec)?).map(|segment| Ring { segment })
    }

    /// Maps a ring received as a descriptor; it must have exactly this shape and be
    /// sealed against shrinking (an anonymous segment's), else `Untrusted`.
    pub fn from_fd(fd: OwnedFd, spec: ChannelSpec) -> Result<Ring> {
        Segment::from_fd(fd, Expect::Exact(ring_spec(spec)?)).map(|segment| Ring { segment })
    }

    pub fn from_segment(segment: Segment) -> Result<Ring> {
        ring_spec(segment.spec())?;
        Ok(Ring { segment })
    }

    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    pub fn spec(&self) -> ChannelSpec {
        self.segment.spec()
    }

    /// Attaches the producer role (one per ring; taken over if its holder died).
    pub fn raw_producer(&self) -> Result<RawProducer> {
        let claim = self.segment.claim(PRODUCER_SLOT, "producer")?;
        let core = Core::new(&self.segment)?;
        let head = core.head_cell().load(Ordering::Acquire);
        let tail = core.recover_tail(core.tail_cell().load(Ordering::Acquire), head);
        core.check_distance(head, tail)?;
        Ok(RawProducer {
            core,
            tail,
            cached_head: head,
            reserved: false,
            _claim: claim,
        })
    }

    /// Attaches the consumer role (one per ring; taken over if its holder died).
    pub fn raw_consumer(&self) -> Result<RawConsumer> {
        let claim = self.segment.claim(CONSUMER_SLOT, "consumer")?;
        let core = Core::new(&self.segment)?;
        let head = core.head_cell().load(Ordering::Acquire);
        if core.slot_state(head) == SlotState::Corrupted {
            return Err(Error::Corrupted {
                what: self.segment.describe().to_string(),
                detail: format!("the slot at head {head} holds an impossible sequence word"),
            });
        }
        Ok(RawConsumer {
            core,
            head,
            peeked: false,
            _claim: claim,
        })
    }

    /// A typed producer; `T` must have exactly the segment's element size and alignment.
    pub fn producer<T: Pod>(&self) -> Result<Producer<T>> {
        check_type::<T>(self.spec())?;
        Ok(Producer {
            raw: self.raw_producer()?,
            _type: PhantomData,
        })
    }

    /// A typed consumer; `T` must have exactly the segment's element size and alignment.
    pub fn consumer<T: Pod>(&self) -> Result<Consumer<T>> {
        check_type::<T>(self.spec())?;
        Ok(Consumer {
            raw: self.raw_consumer()?,
            _type: PhantomData,
        })
    }
}

pub(crate) fn check_type<T>(spec: ChannelSpec) -> Result<()> {
    let (size, align) = (std::mem::size_of::<T>(), std::mem::align_of::<T>());
    if size != spec.elem_size as usize || align != spec.elem_align as usize {
        return Err(Error::TypeMismatch {
            size,
            align,
            spec_size: spec.elem_size,
            spec_align: spec.elem_align,
        });
    }
    Ok(())
}

/// How many of a waited-for element's cache lines an empty pop touches (bounds the
/// work of a pop on large elements; 1 KiB).
const TOUCHED_LINES: usize = 16;

/// What the consumer finds in the slot for an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// Written for this index: readable.
    Ready,
    /// Not written yet (it still holds the previous lap's sequence word).
    Empty,
    /// Neither: the producer (or someone else) wrote an impossible sequence word.
    Corrupted,
}

/// Private copies of everything the hot path needs, taken from the validated layout.
#[derive(Debug)]
struct Core {
    segment: Segment,
    tail: *const AtomicU64,
    head: *const AtomicU64,
    data: *mut u8,
    capacity: u64,
    mask: u64,
    stride: usize,
    elem_size: usize,
    /// Offset of the sequence word in a slot (8-aligned, after the element).
    seq_offset: usize,
}

// SAFETY: the raw pointers point into the segment mapping, which `segment` (an
// Arc<Mapping>) keeps alive wherever the Core goes; Mapping itself is Send, and the
// role claim makes the owning end the only user of its private pointers.
unsafe impl Send for Core {}

impl Core {
    fn new(segment: &Segment) -> Result<Core> {
        let layout = *segment.layout();
        let map_len = segment.map.len() as u64;
        let seq_offset = ring_seq_offset(layout.spec.elem_size);
        // Validated on open; re-checked here because the hot path relies on it: every
        // slot (element and sequence word) lies inside the data, and the data inside
        // the mapping.
        let data_end = layout.data_offset.checked_add(layout.data_size);
        if data_end.is_none_or(|end| end > map_len)
            || layout.control_offset + 2 * CONTROL_BLOCK > map_len
            || seq_offset + 8 > layout.stride
            || !layout.stride.is_multiple_of(8)
            || !layout.data_offset.is_multiple_of(8)
            || layout.stride.checked_mul(layout.spec.capacity) != Some(layout.data_size)
        {
            return Err(Error::Corrupted {
                what: segment.describe().to_string(),
                detail: "ring data lies outside the mapping".into(),
            });
        }
        Ok(Core {
            segment: segment.clone(),
            tail: segment.map.atomic_u64(layout.control_offset),
            head: segment
                .map
                .atomic_u64(layout.control_offset + CONTROL_BLOCK),
            // SAFETY: data_offset + data_size ≤ mapping length (checked above).
            data: unsafe { segment.map.base().add(layout.data_offset as usize) },
            capacity: layout.spec.capacity,
            mask: layout.spec.capacity - 1,
            stride: layout.stride as usize,
            elem_size: layout.spec.elem_size as usize,
            seq_offset: seq_offset as usize,
        })
    }

    #[inline]
    fn tail_cell(&self) -> &AtomicU64 {
        // SAFETY: `tail` was obtained from `Mapping::atomic_u64` (in bounds, 8-aligned)
        // and points into the mapping that `self.segment` keeps alive for `&self`.
        unsafe { &*self.tail }
    }

    #[inline]
    fn head_cell(&self) -> &AtomicU64 {
        // SAFETY: `head` was obtained from `Mapping::atomic_u64` (in bounds, 8-aligned)
        // and points into the mapping that `self.segment` keeps alive for `&self`.
        unsafe { &*self.head }
    }

    fn check_distance(&self, head: u64, tail: u64) -> Result<()> {
        if tail.wrapping_sub(head) > self.capacity {
            return Err(Error::Corrupted {
                what: self.segment.describe().to_string(),
                detail: format!(
                    "head {head} and tail {tail} are more than the capacity {} apart",
                    self.capacity
                ),
            });
        }
        Ok(())
    }

    /// Address of the element in the slot for counter value `index`; in bounds for
    /// any index.
    #[inline(always)]
    fn slot(&self, index: u64) -> *mut u8 {
        // SAFETY: (index & mask) < capacity and capacity × stride = data_size, which
        // lies inside the mapping (checked in `new`).
        unsafe { self.data.add((index & self.mask) as usize * self.stride) }
    }

    /// The slot for `index` as a `T`. Only for the typed ends, whose `T` has exactly
    /// the element size and alignment (the slot is aligned to both).
    #[inline(always)]
    fn typed_slot<T>(&self, index: u64) -> *mut T {
        debug_assert_eq!(self.elem_size, std::mem::size_of::<T>());
        self.slot(index).cast()
    }

    /// The sequence word of the slot for `index`.
    #[inline(always)]
    fn seq_cell(&self, index: u64) -> &AtomicU64 {
        // SAFETY: seq_offset + 8 ≤ stride and the slot is in bounds (checked in `new`);
        // slot starts and seq_offset are multiples of 8, so the word is aligned; the
        // mapping outlives `&self` and is only accessed atomically.
        unsafe { AtomicU64::from_ptr(self.slot(index).add(self.seq_offset).cast()) }
    }

    /// Reads one word of each of the element's cache lines (up to [`TOUCHED_LINES`]) for
    /// `index` and drops them: while a consumer waits on a slot whose element lies on
    /// other lines than its sequence word, this keeps fetching them, so they travel
    /// while the producer is still to write the sequence word, not one after the other
    /// after it (measured: a 64-byte message at 1.2–1.3 × the one-line floor instead of
    /// 1.5 ×, 1 KiB in about two thirds of the time; docs/benchmarks.md).
    #[inline(always)]
    fn touch_element(&self, index: u64) {
        let slot = self.slot(index);
        let end = self.seq_offset.min(TOUCHED_LINES * CACHE_LINE as usize);
        let mut offset = 0;
        while offset < end {
            // SAFETY: offset < seq_offset, a multiple of 8 inside the element of an
            // in-bounds, 8-aligned slot; shared memory accessed atomically.
            let word = unsafe { AtomicU64::from_ptr(slot.add(offset).cast()) };
            std::hint::black_box(word.load(Ordering::Relaxed));
            offset += CACHE_LINE as usize;
        }
    }

    /// Publishes the element written into the slot for `index`.
    #[inline(always)]
    fn mark_written(&self, index: u64) {
        self.seq_cell(index)
            .store(index.wrapping_add(1), Ordering::Release);
    }

    /// Whether the slot for `index` was written for it (acquire: its element is then
    /// visible), still free, or impossible.
    #[inline(always)]
    fn slot_state(&self, index: u64) -> SlotState {
        let seq = self.seq_cell(index).load(Ordering::Acquire);
        let written = index.wrapping_add(1);
        if seq == written {
            SlotState::Ready
        } else if seq == written.wrapping_sub(self.capacity) || (seq == 0 && index < self.capacity)
        {
            SlotState::Empty
        } else {
            SlotState::Corrupted
        }
    }

    /// The producer's true tail from its published one: a producer that died between
    /// marking a slot written and publishing its tail left written slots beyond it.
    /// Bounded by the capacity.
    fn recover_tail(&self, published: u64, head: u64) -> u64 {
        let mut tail = published;
        for _ in 0..self.capacity {
            // Full; a tail behind the head (the consumer read unpublished messages)
            // is more than a lap "ahead" in wrapping terms and walks on.
            if tail.wrapping_sub(head) == self.capacity || self.slot_state(tail) != SlotState::Ready
            {
                break;
            }
            tail = tail.wrapping_add(1);
        }
        tail
    }
}

/// The producer end, element type erased (the C ABI and tools use it).
#[derive(Debug)]
pub struct RawProducer {
    core: Core,
    /// Our tail: the truth; the shared copy is only published.
    tail: u64,
    cached_head: u64,
    /// A slot is reserved for writing in place (the C ABI's reserve/commit).
    reserved: bool,
    _claim: RoleClaim,
}

impl RawProducer {
    /// Free slots, refreshing the consumer's index only when the cached one says
    /// there are fewer than `wanted`.
    #[inline]
    fn free(&mut self, wanted: u64) -> std::result::Result<u64, Corrupted> {
        let free = self.core.capacity - self.tail.wrapping_sub(self.cached_head);
        if free >= wanted {
            return Ok(free);
        }
        let head = self.core.head_cell().load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(head);
        if used > self.core.capacity {
            return Err(Corrupted);
        }
        self.cached_head = head;
        Ok(self.core.capacity - used)
    }

    /// Marks the slot at the tail written and moves the tail past it.
    #[inline(always)]
    fn commit_one(&mut self) {
        self.core.mark_written(self.tail);
        self.advance(1);
    }

    /// Moves the tail past `n` slots already marked written.
    #[inline(always)]
    fn advance(&mut self, n: u64) {
        // Whatever was reserved was the first of them: a later commit must not publish
        // the slot after.
        self.reserved = false;
        self.tail = self.tail.wrapping_add(n);
        // For len, inspection and takeover only; nobody waits on it.
        self.core.tail_cell().store(self.tail, Ordering::Release);
    }

    /// The element of the slot at the tail, if there is a free one.
    #[inline]
    fn next_slot(&mut self) -> std::result::Result<*mut u8, PushError> {
        match self.free(1) {
            Ok(0) => Err(PushError::Full),
            Ok(_) => Ok(self.core.slot(self.tail)),
            Err(Corrupted) => Err(PushError::Corrupted),
        }
    }

    /// Copies one element from `src` (exactly the element size) into the ring.
    #[inline]
    pub fn push_bytes(&mut self, src: &[u8]) -> std::result::Result<(), PushError> {
        if src.len() != self.core.elem_size {
            return Err(PushError::WrongSize);
        }
        // SAFETY: `src` is a slice of exactly elem_size bytes (checked above), and a
        // safe slice never points into the private mapping's slots.
        unsafe { self.push_ptr(src.as_ptr()) }
    }

    /// Copies one element from `src` into the ring.
    ///
    /// # Safety
    /// `src` must be valid for reading the element size and must not point into the
    /// ring's own slots.
    #[inline]
    pub unsafe fn push_ptr(&mut self, src: *const u8) -> std::result::Result<(), PushError> {
        let slot = self.next_slot()?;
        // SAFETY: the caller guarantees `src` is readable for elem_size bytes outside
        // the slots; `slot` is in bounds for elem_size bytes of the mapping, which is
        // only accessed atomically (or by other processes).
        unsafe { slots::store(src, slot, self.core.elem_size) };
        self.commit_one();
        Ok(())
    }

    /// Pushes as many whole elements of `src` (a multiple of the element size long) as
    /// fit; returns how many.
    pub fn push_many_bytes(&mut self, src: &[u8]) -> std::result::Result<usize, PushError> {
        if !src.len().is_multiple_of(self.core.elem_size) {
            return Err(PushError::WrongSize);
        }
        let count = src.len() / self.core.elem_size;
        // SAFETY: `src` holds exactly `count` elements and is private memory.
        unsafe { self.push_many_ptr(src.as_ptr(), count) }.map_err(|Corrupted| PushError::Corrupted)
    }

    /// Pushes up to `count` elements laid out back to back (element size apart) at
    /// `src`. Each is visible to the consumer as soon as it is written. Returns how
    /// many were pushed.
    ///
    /// # Safety
    /// `src` must be valid for reading `count` × element size bytes and must not
    /// point into the ring's own slots.
    pub unsafe fn push_many_ptr(
        &mut self,
        src: *const u8,
        count: usize,
    ) -> std::result::Result<usize, Corrupted> {
        let n = (self.free(count as u64)? as usize).min(count);
        for i in 0..n {
            let index = self.tail.wrapping_add(i as u64);
            // SAFETY: i < n ≤ count, so `src + i × elem_size` starts an element the
            // caller guarantees readable; `slot` is in bounds for elem_size bytes of
            // the mapping, which is only accessed atomically (or by other processes).
            unsafe {
                slots::store(
                    src.add(i * self.core.elem_size),
                    self.core.slot(index),
                    self.core.elem_size,
                )
            };
            self.core.mark_written(index);
        }
        if n > 0 {
            self.advance(n as u64);
        }
        Ok(n)
    }

    /// Reserves the next slot to build a message in place (no copy); publish it with
    /// [`SlotWriter::commit`]. Dropping the writer uncommitted publishes nothing.
    #[inline]
    pub fn reserve(&mut self) -> std::result::Result<SlotWriter<'_>, PushError> {
        let slot = self.next_slot()?;
        Ok(SlotWriter {
            slot,
            producer: self,
        })
    }

    /// Reserves the next free slot without a borrow (the C ABI's and the Python
    /// bindings' reserve): the element's address, writable for the element size. The
    /// slot stays this producer's until [`RawProducer::commit_reserved`] publishes it,
    /// a push publishes it (a push writes the reserved slot first), or the producer is
    /// dropped; the mapping stays mapped while any [`Segment`] of it lives. Reserving
    /// again before that returns the same slot. The slot is shared memory a hostile
    /// consumer could write too: build the message with plain stores only where that
    /// risk is accepted (C does).
    pub fn reserve_raw(&mut self) -> std::result::Result<*mut u8, PushError> {
        let slot = self.next_slot()?;
        self.reserved = true;
        Ok(slot)
    }

    /// Publishes the slot [`RawProducer::reserve_raw`] returned; false when nothing
    /// is reserved (never reserved, or already published by a commit or a push).
    pub fn commit_reserved(&mut self) -> bool {
        if !std::mem::take(&mut self.reserved) {
            return false;
        }
        self.commit_one();
        true
    }

    /// Free slots as of now (refreshes the consumer's index).
    pub fn free_slots(&mut self) -> std::result::Result<u64, Corrupted> {
        self.free(self.core.capacity)
    }

    pub fn capacity(&self) -> u64 {
        self.core.capacity
    }

    pub fn elem_size(&self) -> usize {
        self.core.elem_size
    }

    /// The consumer's liveness, checked on demand (reads /proc; never waits).
    pub fn consumer_state(&self) -> PeerState {
        self.core.segment.peer_state(CONSUMER_SLOT)
    }
}

/// A field written or read would not fit in the element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds;

/// `len` bytes at `offset` lie inside an element of `elem_size` bytes.
fn within_element(
    offset: usize,
    len: usize,
    elem_size: usize,
) -> std::result::Result<(), OutOfBounds> {
    match offset.checked_add(len) {
        Some(end) if end <= elem_size => Ok(()),
        _ => Err(OutOfBounds),
    }
}

/// A ring slot reserved for building one message in place ([`RawProducer::reserve`],
/// [`Producer::reserve`]). The consumer sees nothing of it until [`SlotWriter::commit`].
///
/// The slot lies in shared memory that a hostile consumer could write too, so the safe
/// writes are atomic word copies ([`SlotWriter::write_bytes`], [`SlotWriter::write`]);
/// [`SlotWriter::as_mut_ptr`] is for code that builds the message with plain stores
/// (C, or `unsafe` Rust that accepts that risk).
#[derive(Debug)]
pub struct SlotWriter<'a> {
    producer: &'a mut RawProducer,
    slot: *mut u8,
}

impl SlotWriter<'_> {
    /// The element's size in bytes.
    pub fn len(&self) -> usize {
        self.producer.core.elem_size
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start of the element (aligned to the ring's element alignment and to 8 bytes),
    /// valid for writing [`SlotWriter::len`] bytes until commit or drop.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.slot
    }

    /// Copies `bytes` into the element at byte `offset`.
    pub fn write_bytes(
        &mut self,
        offset: usize,
        bytes: &[u8],
    ) -> std::result::Result<(), OutOfBounds> {
        within_element(offset, bytes.len(), self.len())?;
        // SAFETY: offset + len ≤ elem_size: inside the reserved slot's element, shared
        // memory accessed only atomically; `bytes` is a private slice.
        unsafe { slots::store(bytes.as_ptr(), self.slot.add(offset), bytes.len()) };
        Ok(())
    }

    /// Writes `value` into the element at byte `offset`.
    pub fn write<U: Pod>(
        &mut self,
        offset: usize,
        value: &U,
    ) -> std::result::Result<(), OutOfBounds> {
        self.write_bytes(offset, bytemuck::bytes_of(value))
    }

    /// Publishes the message.
    pub fn commit(self) {
        self.producer.commit_one();
    }
}

/// The consumer end, element type erased.
#[derive(Debug)]
pub struct RawConsumer {
    core: Core,
    head: u64,
    /// The slot at the head is being read in place (the C ABI's peek/release).
    peeked: bool,
    _claim: RoleClaim,
}

impl RawConsumer {
    /// Frees `n` elements read from the current head.
    #[inline(always)]
    fn release(&mut self, n: u64) {
        // A held peek was of the first of these: a later release must not free another.
        self.peeked = false;
        self.head = self.head.wrapping_add(n);
        self.core.head_cell().store(self.head, Ordering::Release);
    }

    /// The element of the slot at the head, if one was written.
    #[inline(always)]
    fn next_slot(&self) -> std::result::Result<*mut u8, PopError> {
        match self.core.slot_state(self.head) {
            SlotState::Ready => Ok(self.core.slot(self.head)),
            SlotState::Empty => {
                if self.core.stride > CACHE_LINE as usize {
                    self.core.touch_element(self.head);
                }
                Err(PopError::Empty)
            }
            SlotState::Corrupted => Err(PopError::Corrupted),
        }
    }

    /// How many of the next `wanted` slots were written, up to the first that was not;
    /// an impossible sequence word in the first one is an error.
    #[inline]
    fn ready(&self, wanted: usize) -> std::result::Result<usize, Corrupted> {
        for i in 0..wanted {
            match self.core.slot_state(self.head.wrapping_add(i as u64)) {
                SlotState::Ready => {}
                SlotState::Empty => return Ok(i),
                SlotState::Corrupted if i == 0 => return Err(Corrupted),
                // Reported by the next call, which starts there.
                SlotState::Corrupted => return Ok(i),
            }
        }
        Ok(wanted)
    }

    /// Copies the oldest element into `dst` (exactly the element size).
    #[inline]
    pub fn pop_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), PopError> {
        if dst.len() != self.core.elem_size {
            return Err(PopError::WrongSize);
        }
        // SAFETY: `dst` is a slice of exactly elem_size bytes (checked above), and a
        // safe slice never points into the private mapping's slots.
        unsafe { self.pop_ptr(dst.as_mut_ptr()) }
    }

    /// Copies the oldest element into `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writing the element size and must not point into the
    /// ring's own slots.
    #[inline]
    pub unsafe fn pop_ptr(&mut self, dst: *mut u8) -> std::result::Result<(), PopError> {
        let slot = self.next_slot()?;
        // SAFETY: the caller guarantees `dst` is writable for elem_size bytes outside
        // the slots; the slot at our head is in bounds for elem_size bytes of the
        // mapping, which is only accessed atomically (a producer racing with us makes
        // the value wrong, not the read undefined).
        unsafe { slots::load(slot, dst, self.core.elem_size) };
        self.release(1);
        Ok(())
    }

    /// Pops as many whole elements as are waiting into `dst` (a multiple of the
    /// element size long); returns how many.
    pub fn pop_many_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<usize, PopError> {
        if !dst.len().is_multiple_of(self.core.elem_size) {
            return Err(PopError::WrongSize);
        }
        let count = dst.len() / self.core.elem_size;
        // SAFETY: `dst` holds exactly `count` elements and is private memory.
        unsafe { self.pop_many_ptr(dst.as_mut_ptr(), count) }
            .map_err(|Corrupted| PopError::Corrupted)
    }

    /// Pops up to `count` elements into `dst` back to back; frees them with one store.
    ///
    /// # Safety
    /// `dst` must be valid for writing `count` × element size bytes and must not
    /// point into the ring's own slots.
    pub unsafe fn pop_many_ptr(
        &mut self,
        dst: *mut u8,
        count: usize,
    ) -> std::result::Result<usize, Corrupted> {
        let n = self.ready(count)?;
        for i in 0..n {
            // SAFETY: i < n ≤ count, so `dst + i × elem_size` starts an element the
            // caller guarantees writable; `slot` is in bounds for elem_size bytes of
            // the mapping, which is only accessed atomically.
            unsafe {
                slots::load(
                    self.core.slot(self.head.wrapping_add(i as u64)),
                    dst.add(i * self.core.elem_size),
                    self.core.elem_size,
                )
            };
        }
        if n > 0 {
            self.release(n as u64);
        }
        Ok(n)
    }

    /// Looks at the oldest element in place (no copy); [`SlotReader::release`] frees
    /// it, dropping the reader leaves it for the next pop or peek.
    #[inline]
    pub fn peek(&mut self) -> std::result::Result<SlotReader<'_>, PopError> {
        let slot = self.next_slot()?;
        Ok(SlotReader {
            slot,
            consumer: self,
        })
    }

    /// Holds the oldest element without a borrow (the C ABI's and the Python
    /// bindings' peek): its address, readable for the element size. The slot stays
    /// this consumer's (the producer cannot reuse it) until
    /// [`RawConsumer::release_peeked`] frees it, a pop frees it (a pop takes the peeked
    /// element first), or the consumer is dropped; the mapping stays mapped while any
    /// [`Segment`] of it lives. Peeking again before that returns the same slot. A
    /// hostile producer may still change it: copy what you validate.
    pub fn peek_raw(&mut self) -> std::result::Result<*const u8, PopError> {
        let slot = self.next_slot()?;
        self.peeked = true;
        Ok(slot)
    }

    /// Frees the slot [`RawConsumer::peek_raw`] returned; false when none is held
    /// (never peeked, or already freed by a release or a pop).
    pub fn release_peeked(&mut self) -> bool {
        if !std::mem::take(&mut self.peeked) {
            return false;
        }
        self.release(1);
        true
    }

    /// Elements waiting now: the producer's published tail, plus any it wrote but has
    /// not published yet.
    pub fn len(&mut self) -> std::result::Result<u64, Corrupted> {
        let tail = self.core.tail_cell().load(Ordering::Acquire);
        let published = tail.wrapping_sub(self.head);
        if published > self.core.capacity {
            // Behind our head by less than a lap: the producer wrote slots we read
            // before it published them; otherwise the index is impossible.
            if self.head.wrapping_sub(tail) > self.core.capacity {
                return Err(Corrupted);
            }
            return Ok(self.ready(self.core.capacity as usize)? as u64);
        }
        let mut waiting = published;
        while waiting < self.core.capacity
            && self.core.slot_state(self.head.wrapping_add(waiting)) == SlotState::Ready
        {
            waiting += 1;
        }
        Ok(waiting)
    }

    pub fn is_empty(&mut self) -> std::result::Result<bool, Corrupted> {
        match self.core.slot_state(self.head) {
            SlotState::Ready => Ok(false),
            SlotState::Empty => Ok(true),
            SlotState::Corrupted => Err(Corrupted),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.core.capacity
    }

    pub fn elem_size(&self) -> usize {
        self.core.elem_size
    }

    /// The producer's liveness, checked on demand (reads /proc; never waits).
    pub fn producer_state(&self) -> PeerState {
        self.core.segment.peer_state(PRODUCER_SLOT)
    }
}

/// The oldest message, read in place ([`RawConsumer::peek`], [`Consumer::peek`]); the
/// producer cannot reuse its slot until [`SlotReader::release`].
///
/// A hostile producer may write the slot while it is read, so the safe reads are
/// atomic word copies ([`SlotReader::read_bytes`], [`SlotReader::read`]);
/// [`SlotReader::as_ptr`] is for code that reads with plain loads.
#[derive(Debug)]
pub struct SlotReader<'a> {
    consumer: &'a mut RawConsumer,
    slot: *const u8,
}

impl SlotReader<'_> {
    /// The element's size in bytes.
    pub fn len(&self) -> usize {
        self.consumer.core.elem_size
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start of the element, valid for reading [`SlotReader::len`] bytes until
    /// release or drop.
    pub fn as_ptr(&self) -> *const u8 {
        self.slot
    }

    /// Copies bytes of the element from byte `offset` into `dst`.
    pub fn read_bytes(
        &self,
        offset: usize,
        dst: &mut [u8],
    ) -> std::result::Result<(), OutOfBounds> {
        within_element(offset, dst.len(), self.len())?;
        // SAFETY: offset + len ≤ elem_size: inside the held slot's element, shared
        // memory accessed only atomically; `dst` is a private slice.
        unsafe { slots::load(self.slot.add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Reads a `U` from the element at byte `offset`.
    pub fn read<U: Pod>(&self, offset: usize) -> std::result::Result<U, OutOfBounds> {
        let mut value = U::zeroed();
        self.read_bytes(offset, bytemuck::bytes_of_mut(&mut value))?;
        Ok(value)
    }

    /// Frees the slot for the producer.
    pub fn release(self) {
        self.consumer.release(1);
    }
}

/// Typed producer end.
#[derive(Debug)]
pub struct Producer<T: Pod> {
    raw: RawProducer,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> Producer<T> {
    // The typed paths move whole `T`s at compile-time size (a fixed number of word
    // accesses) instead of looping over the run-time element size.
    #[inline]
    pub fn push(&mut self, value: T) -> std::result::Result<(), PushError> {
        match self.raw.free(1) {
            Ok(0) => return Err(PushError::Full),
            Ok(_) => {}
            Err(Corrupted) => return Err(PushError::Corrupted),
        }
        // SAFETY: the slot is in bounds and T matches the element, so it is a typed
        // slot of T; the mapping is only accessed atomically.
        unsafe { slots::store_value(self.raw.core.typed_slot::<T>(self.raw.tail), &value) };
        self.raw.commit_one();
        Ok(())
    }

    /// Pushes as many of `values` as fit; returns how many. Each is visible to the
    /// consumer as soon as it is written.
    #[inline]
    pub fn push_slice(&mut self, values: &[T]) -> std::result::Result<usize, Corrupted> {
        let n = (self.raw.free(values.len() as u64)? as usize).min(values.len());
        let core = &self.raw.core;
        for (i, value) in values[..n].iter().enumerate() {
            let index = self.raw.tail.wrapping_add(i as u64);
            // SAFETY: a typed slot of T in bounds (masked index); the mapping is only
            // accessed atomically.
            unsafe { slots::store_value(core.typed_slot::<T>(index), value) };
            core.mark_written(index);
        }
        if n > 0 {
            self.raw.advance(n as u64);
        }
        Ok(n)
    }

    /// Reserves the next slot to build a message in place (see [`SlotWriter`]).
    #[inline]
    pub fn reserve(&mut self) -> std::result::Result<SlotWriter<'_>, PushError> {
        self.raw.reserve()
    }

    pub fn free_slots(&mut self) -> std::result::Result<u64, Corrupted> {
        self.raw.free_slots()
    }

    pub fn capacity(&self) -> u64 {
        self.raw.capacity()
    }

    pub fn consumer_state(&self) -> PeerState {
        self.raw.consumer_state()
    }
}

/// Typed consumer end.
#[derive(Debug)]
pub struct Consumer<T: Pod> {
    raw: RawConsumer,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> Consumer<T> {
    #[inline]
    pub fn pop(&mut self) -> std::result::Result<T, PopError> {
        let slot = self.raw.next_slot()?;
        // SAFETY: the slot is in bounds and a typed slot of T; it is read atomically,
        // and any bit pattern is a valid T (Pod).
        let value = unsafe { slots::load_value(slot.cast::<T>()) };
        self.raw.release(1);
        Ok(value)
    }

    /// Pops into `out` as many as are waiting (up to its length); returns how many.
    #[inline]
    pub fn pop_into(&mut self, out: &mut [T]) -> std::result::Result<usize, Corrupted> {
        let n = self.raw.ready(out.len())?;
        let core = &self.raw.core;
        for (i, value) in out[..n].iter_mut().enumerate() {
            // SAFETY: a typed slot of T in bounds (masked index), read atomically; any
            // bit pattern is a valid T (Pod).
            *value = unsafe {
                slots::load_value(core.typed_slot::<T>(self.raw.head.wrapping_add(i as u64)))
            };
        }
        if n > 0 {
            self.raw.release(n as u64);
        }
        Ok(n)
    }

    /// Looks at the oldest element in place (see [`SlotReader`]).
    #[inline]
    pub fn peek(&mut self) -> std::result::Result<SlotReader<'_>, PopError> {
        self.raw.peek()
    }

    pub fn len(&mut self) -> std::result::Result<u64, Corrupted> {
        self.raw.len()
    }

    pub fn is_empty(&mut self) -> std::result::Result<bool, Corrupted> {
        self.raw.is_empty()
    }

    pub fn capacity(&self) -> u64 {
        self.raw.capacity()
    }

    pub fn producer_state(&self) -> PeerState {
        self.raw.producer_state()
    }
}
