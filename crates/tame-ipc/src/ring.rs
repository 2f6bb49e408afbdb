//! Single-producer single-consumer ring of fixed-size slots.
//!
//! Head (consumer) and tail (producer) are free-running 64-bit counters on separate
//! 128-byte blocks; slot = counter & mask. Each side keeps its own counter privately
//! (the shared copy is only published) and caches the other side's, so the common
//! case touches one foreign cache line per batch. Push and pop are wait-free: a
//! bounded number of instructions, no system calls, no locks.
//!
//! Robustness: the only foreign value a side reads is the other's counter. If it is
//! inconsistent (more than `capacity` apart from ours, or behind) the operation
//! returns `Corrupted` instead of trusting it; slot addresses are always masked by
//! the private copy of the capacity, so nothing is read or written out of bounds.

use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::layout::{ChannelSpec, Kind, CONTROL_BLOCK};
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
        let tail = core.tail_cell().load(Ordering::Acquire);
        let head = core.head_cell().load(Ordering::Acquire);
        core.check_distance(head, tail)?;
        Ok(RawProducer {
            core,
            tail,
            cached_head: head,
            _claim: claim,
        })
    }

    /// Attaches the consumer role (one per ring; taken over if its holder died).
    pub fn raw_consumer(&self) -> Result<RawConsumer> {
        let claim = self.segment.claim(CONSUMER_SLOT, "consumer")?;
        let core = Core::new(&self.segment)?;
        let head = core.head_cell().load(Ordering::Acquire);
        let tail = core.tail_cell().load(Ordering::Acquire);
        core.check_distance(head, tail)?;
        Ok(RawConsumer {
            core,
            head,
            cached_tail: tail,
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
}

// SAFETY: the raw pointers point into the segment mapping, which `segment` (an
// Arc<Mapping>) keeps alive wherever the Core goes; Mapping itself is Send, and the
// role claim makes the owning end the only user of its private pointers.
unsafe impl Send for Core {}

impl Core {
    fn new(segment: &Segment) -> Result<Core> {
        let layout = *segment.layout();
        let map_len = segment.map.len() as u64;
        // Validated on open; re-checked here because the hot path relies on it.
        let data_end = layout.data_offset.checked_add(layout.data_size);
        if data_end.is_none_or(|end| end > map_len)
            || layout.control_offset + 2 * CONTROL_BLOCK > map_len
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

    /// The slot for `index` as a `T`. Only for the typed ends, whose `T` has exactly
    /// the element size and alignment, so the stride is `size_of::<T>()`.
    #[inline(always)]
    fn typed_slot<T>(&self, index: u64) -> *mut T {
        debug_assert_eq!(self.stride, std::mem::size_of::<T>());
        // SAFETY: (index & mask) < capacity, and with stride == size_of::<T>() slot k
        // of T starts at data + k × stride, inside data_size (checked in `new`).
        unsafe { (self.data as *mut T).add((index & self.mask) as usize) }
    }

    /// Address of the slot for counter value `index`; in bounds for any index.
    #[inline]
    fn slot(&self, index: u64) -> *mut u8 {
        // SAFETY: (index & mask) < capacity and capacity * stride = data_size, which
        // lies inside the mapping (checked in `new`).
        unsafe { self.data.add((index & self.mask) as usize * self.stride) }
    }
}

/// The producer end, element type erased (the C ABI and tools use it).
#[derive(Debug)]
pub struct RawProducer {
    core: Core,
    /// Our tail: the truth; the shared copy is only published.
    tail: u64,
    cached_head: u64,
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

    /// Publishes `n` elements written after the current tail.
    #[inline(always)]
    fn publish(&mut self, n: u64) {
        self.tail = self.tail.wrapping_add(n);
        self.core.tail_cell().store(self.tail, Ordering::Release);
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
        match self.free(1) {
            Ok(0) => return Err(PushError::Full),
            Ok(_) => {}
            Err(Corrupted) => return Err(PushError::Corrupted),
        }
        // SAFETY: the caller guarantees `src` is readable for elem_size bytes outside
        // the slots; `slot` is in bounds for elem_size (≤ stride) bytes of the mapping,
        // which is only accessed atomically (or by other processes).
        unsafe { slots::store(src, self.core.slot(self.tail), self.core.elem_size) };
        self.publish(1);
        Ok(())
    }

    /// Pushes up to `count` elements laid out back to back (element size apart) at
    /// `src`; publishes them with one store. Returns how many were pushed.
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
            // SAFETY: i < n ≤ count, so `src + i × elem_size` starts an element the
            // caller guarantees readable; `slot` is in bounds for elem_size bytes of
            // the mapping, which is only accessed atomically (or by other processes).
            unsafe {
                slots::store(
                    src.add(i * self.core.elem_size),
                    self.core.slot(self.tail.wrapping_add(i as u64)),
                    self.core.elem_size,
                )
            };
        }
        if n > 0 {
            self.publish(n as u64);
        }
        Ok(n)
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

/// The consumer end, element type erased.
#[derive(Debug)]
pub struct RawConsumer {
    core: Core,
    head: u64,
    cached_tail: u64,
    _claim: RoleClaim,
}

impl RawConsumer {
    #[inline]
    fn available(&mut self, wanted: u64) -> std::result::Result<u64, Corrupted> {
        let available = self.cached_tail.wrapping_sub(self.head);
        if available >= wanted {
            return Ok(available);
        }
        let tail = self.core.tail_cell().load(Ordering::Acquire);
        let available = tail.wrapping_sub(self.head);
        if available > self.core.capacity {
            return Err(Corrupted);
        }
        self.cached_tail = tail;
        Ok(available)
    }

    /// Frees `n` elements read from the current head.
    #[inline(always)]
    fn release(&mut self, n: u64) {
        self.head = self.head.wrapping_add(n);
        self.core.head_cell().store(self.head, Ordering::Release);
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
        match self.available(1) {
            Ok(0) => return Err(PopError::Empty),
            Ok(_) => {}
            Err(Corrupted) => return Err(PopError::Corrupted),
        }
        // SAFETY: the caller guarantees `dst` is writable for elem_size bytes outside
        // the slots; the slot at our head is in bounds for elem_size bytes of the
        // mapping, which is only accessed atomically (a producer racing with us makes
        // the value wrong, not the read undefined).
        unsafe { slots::load(self.core.slot(self.head), dst, self.core.elem_size) };
        self.release(1);
        Ok(())
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
        let n = (self.available(count as u64)? as usize).min(count);
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

    /// Elements waiting now (refreshes the producer's index).
    pub fn len(&mut self) -> std::result::Result<u64, Corrupted> {
        self.available(self.core.capacity + 1)
    }

    pub fn is_empty(&mut self) -> std::result::Result<bool, Corrupted> {
        self.len().map(|n| n == 0)
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
        self.raw.publish(1);
        Ok(())
    }

    /// Pushes as many of `values` as fit; returns how many.
    #[inline]
    pub fn push_slice(&mut self, values: &[T]) -> std::result::Result<usize, Corrupted> {
        let n = (self.raw.free(values.len() as u64)? as usize).min(values.len());
        let start = (self.raw.tail & self.raw.core.mask) as usize;
        // At most two contiguous runs: up to the end of the slots, then from slot 0.
        let first = n.min(self.raw.core.capacity as usize - start);
        // Element by element (each copy has a size known at compile time), in the
        // two runs: from `start` to the end of the slots, then from slot 0.
        let base = self.raw.core.typed_slot::<T>(0);
        let (run1, run2) = values[..n].split_at(first);
        for (i, value) in run1.iter().enumerate() {
            // SAFETY: start + i < start + first ≤ capacity: a typed slot of T in
            // bounds; the mapping is only accessed atomically.
            unsafe { slots::store_value(base.add(start + i), value) };
        }
        for (i, value) in run2.iter().enumerate() {
            // SAFETY: i < n - first ≤ start < capacity, as above.
            unsafe { slots::store_value(base.add(i), value) };
        }
        if n > 0 {
            self.raw.publish(n as u64);
        }
        Ok(n)
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
        match self.raw.available(1) {
            Ok(0) => return Err(PopError::Empty),
            Ok(_) => {}
            Err(Corrupted) => return Err(PopError::Corrupted),
        }
        // SAFETY: the slot is in bounds and a typed slot of T; it is read atomically,
        // and any bit pattern is a valid T (Pod).
        let value = unsafe { slots::load_value(self.raw.core.typed_slot::<T>(self.raw.head)) };
        self.raw.release(1);
        Ok(value)
    }

    /// Pops into `out` as many as are waiting (up to its length); returns how many.
    #[inline]
    pub fn pop_into(&mut self, out: &mut [T]) -> std::result::Result<usize, Corrupted> {
        let n = (self.raw.available(out.len() as u64)? as usize).min(out.len());
        let start = (self.raw.head & self.raw.core.mask) as usize;
        let first = n.min(self.raw.core.capacity as usize - start);
        let base = self.raw.core.typed_slot::<T>(0);
        let (run1, run2) = out[..n].split_at_mut(first);
        for (i, value) in run1.iter_mut().enumerate() {
            // SAFETY: start + i < capacity (as in push_slice): a typed slot of T in
            // bounds, read atomically; any bit pattern is a valid T (Pod).
            *value = unsafe { slots::load_value(base.add(start + i)) };
        }
        for (i, value) in run2.iter_mut().enumerate() {
            // SAFETY: i < start < capacity, as above.
            *value = unsafe { slots::load_value(base.add(i)) };
        }
        if n > 0 {
            self.raw.release(n as u64);
        }
        Ok(n)
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
