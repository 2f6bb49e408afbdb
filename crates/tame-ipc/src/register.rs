//! Latest-value register: one writer, any number of readers (a seqlock).
//!
//! The writer never waits: it makes the sequence odd, stores the value, makes it even
//! again. A reader copies the value between two loads of the sequence and keeps the
//! copy only if both are the same even number, so it never returns a torn value. The
//! value is stored as 8-byte words read and written atomically (relaxed), with the
//! fences of Boehm's "Can seqlocks get along with programming language memory
//! models?", so the race is defined behaviour. A reader gives up after a bounded
//! number of attempts (`Contended`) instead of spinning forever behind a writer that
//! died mid-write or writes without pause.

use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::layout::{ChannelSpec, Kind};
use crate::ring::check_type;
use crate::segment::{Expect, PeerState, RoleClaim, Segment, SegmentName, DEFAULT_MODE};

/// Role slot of the writer in the segment header.
pub const WRITER_SLOT: usize = 0;
/// Default number of attempts a read makes before reporting `Contended`.
pub const DEFAULT_READ_ATTEMPTS: u32 = 256;

/// A value read from the register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample<T> {
    pub value: T,
    /// True if the value was written since this reader's previous successful read.
    pub fresh: bool,
    /// Number of writes so far (as published by the writer).
    pub version: u64,
}

/// Why a read returned no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Nothing has been written yet.
    Empty,
    /// Every attempt overlapped a write; retry later.
    Contended,
    /// The byte slice is not exactly one value long (raw API only).
    WrongSize,
}

/// The byte slice is not exactly one value long (raw API only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongSize;

/// A register segment.
#[derive(Clone, Debug)]
pub struct Register {
    segment: Segment,
}

fn register_spec(spec: ChannelSpec) -> Result<ChannelSpec> {
    if spec.kind != Kind::Register {
        return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
            "a register needs a register spec, got {spec}"
        ))));
    }
    Ok(spec)
}

impl Register {
    pub fn create(name: &str, spec: ChannelSpec) -> Result<Register> {
        Register::create_with_mode(name, spec, DEFAULT_MODE)
    }

    pub fn create_with_mode(name: &str, spec: ChannelSpec, mode: u32) -> Result<Register> {
        let name = SegmentName::new(name)?;
        Segment::create(&name, register_spec(spec)?, mode).map(|segment| Register { segment })
    }

    pub fn open(name: &str, spec: ChannelSpec) -> Result<Register> {
        let name = SegmentName::new(name)?;
        Segment::open(&name, Expect::Exact(register_spec(spec)?))
            .map(|segment| Register { segment })
    }

    /// Opens an existing named register read-only (mapped `PROT_READ`; read
    /// permission on the segment suffices). Readers work; [`Register::writer`] is
    /// refused with `ReadOnly`.
    pub fn open_read_only(name: &str, spec: ChannelSpec) -> Result<Register> {
        let name = SegmentName::new(name)?;
        Segment::open_read_only(&name, Expect::Exact(register_spec(spec)?))
            .map(|segment| Register { segment })
    }

    /// Opens an existing named register of any shape (the segment chooses how much is
    /// mapped: with an untrusted creator, open the exact shape instead).
    pub fn open_any(name: &str) -> Result<Register> {
        let name = SegmentName::new(name)?;
        Segment::open(&name, Expect::Kind(Kind::Register)).map(|segment| Register { segment })
    }

    pub fn open_or_create(name: &str, spec: ChannelSpec) -> Result<Register> {
        let name = SegmentName::new(name)?;
        Segment::open_or_create(&name, register_spec(spec)?, DEFAULT_MODE)
            .map(|segment| Register { segment })
    }

    pub fn create_anonymous(spec: ChannelSpec) -> Result<Register> {
        Segment::create_anonymous(register_spec(spec)?).map(|segment| Register { segment })
    }

    /// Maps a register received as a descriptor (sealed against shrinking, else
    /// `Untrusted`); it must have exactly this shape.
    pub fn from_fd(fd: OwnedFd, spec: ChannelSpec) -> Result<Register> {
        Segment::from_fd(fd, Expect::Exact(register_spec(spec)?))
            .map(|segment| Register { segment })
    }

    pub fn from_segment(segment: Segment) -> Result<Register> {
        register_spec(segment.spec())?;
        Ok(Register { segment })
    }

    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    pub fn spec(&self) -> ChannelSpec {
        self.segment.spec()
    }

    /// Attaches the writer role (one per register; taken over if its holder died).
    pub fn raw_writer(&self) -> Result<RawWriter> {
        let claim = self.segment.claim(WRITER_SLOT, "writer")?;
        let cells = Cells::new(&self.segment)?;
        let published = cells.seq().load(Ordering::Acquire);
        // A writer that died mid-write left the sequence odd: keep it odd (readers keep
        // refusing the torn value) until our first write completes.
        let seq = published & !1;
        Ok(RawWriter {
            cells,
            seq,
            _claim: claim,
        })
    }

    /// A reader (any number; readers hold no role).
    pub fn raw_reader(&self) -> Result<RawReader> {
        Ok(RawReader {
            cells: Cells::new(&self.segment)?,
            last_seen: 0,
            max_attempts: DEFAULT_READ_ATTEMPTS,
        })
    }

    pub fn writer<T: Pod>(&self) -> Result<Writer<T>> {
        check_type::<T>(self.spec())?;
        Ok(Writer {
            raw: self.raw_writer()?,
            _type: PhantomData,
        })
    }

    pub fn reader<T: Pod>(&self) -> Result<Reader<T>> {
        check_type::<T>(self.spec())?;
        Ok(Reader {
            raw: self.raw_reader()?,
            _type: PhantomData,
        })
    }
}

#[derive(Debug)]
struct Cells {
    segment: Segment,
    seq: *const AtomicU64,
    words: *const AtomicU64,
    word_count: usize,
    elem_size: usize,
}

// SAFETY: the pointers point into the mapping that `segment` (an Arc<Mapping>)
// keeps alive wherever the Cells go; they are only dereferenced as atomics.
unsafe impl Send for Cells {}

impl Cells {
    fn new(segment: &Segment) -> Result<Cells> {
        let layout = *segment.layout();
        let map_len = segment.map.len() as u64;
        if layout.data_offset + layout.stride > map_len || !layout.stride.is_multiple_of(8) {
            return Err(Error::Corrupted {
                what: segment.describe().to_string(),
                detail: "register data lies outside the mapping".into(),
            });
        }
        Ok(Cells {
            segment: segment.clone(),
            seq: segment.map.atomic_u64(layout.control_offset),
            words: segment.map.atomic_u64(layout.data_offset),
            word_count: (layout.stride / 8) as usize,
            elem_size: layout.spec.elem_size as usize,
        })
    }

    #[inline]
    fn seq(&self) -> &AtomicU64 {
        // SAFETY: `seq` came from `Mapping::atomic_u64` (in bounds, 8-aligned) and the
        // mapping is kept alive by `self.segment` for as long as `&self` lives.
        unsafe { &*self.seq }
    }

    #[inline]
    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.word_count);
        // SAFETY: callers pass i < word_count, and the word_count 8-aligned words from
        // data_offset lie inside the mapping (checked in `new`), which `self.segment`
        // keeps alive for as long as `&self` lives.
        unsafe { &*self.words.add(i) }
    }
}

/// The writer end, type erased.
#[derive(Debug)]
pub struct RawWriter {
    cells: Cells,
    seq: u64,
    _claim: RoleClaim,
}

impl RawWriter {
    /// Publishes `src` (exactly the element size). Never waits.
    #[inline]
    // The slice loop, not write_ptr: the compiler unrolls it over the element's words
    // (callgrind: 92 instructions per register write+read [u64; 8] against 124 through
    // the pointer path), and this is the real-time side's call.
    pub fn write_bytes(&mut self, src: &[u8]) -> std::result::Result<(), WrongSize> {
        if src.len() != self.cells.elem_size {
            return Err(WrongSize);
        }
        let cells = &self.cells;
        cells
            .seq()
            .store(self.seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let mut chunks = src.chunks_exact(8);
        let mut i = 0;
        for chunk in &mut chunks {
            let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            cells.word(i).store(word, Ordering::Relaxed);
            i += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            cells
                .word(i)
                .store(u64::from_ne_bytes(last), Ordering::Relaxed);
        }
        self.seq = self.seq.wrapping_add(2);
        cells.seq().store(self.seq, Ordering::Release);
        Ok(())
    }

    /// Publishes the element at `src` without forming a slice of it (for memory a
    /// `&[u8]` may not cover, such as a buffer other processes may change: the Python
    /// bindings' caller buffers). Never waits.
    ///
    /// # Safety
    /// `src` is valid for reading the element size ([`RawWriter::elem_size`]) bytes and
    /// does not lie in this register's segment.
    #[inline]
    pub unsafe fn write_ptr(&mut self, src: *const u8) {
        let cells = &self.cells;
        cells
            .seq()
            .store(self.seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        // Whole words as unaligned u64 reads, the tail through a zeroed word: a copy of
        // variable length per word costs a memcpy call each (3.6 × the instructions).
        let whole = cells.elem_size / 8;
        for i in 0..whole {
            // SAFETY: bytes i*8 .. i*8+8 lie within the element at `src` (the contract);
            // read_unaligned asks no alignment of the caller's buffer.
            let word = unsafe { src.add(i * 8).cast::<u64>().read_unaligned() };
            cells.word(i).store(word, Ordering::Relaxed);
        }
        let rest = cells.elem_size % 8;
        if rest != 0 {
            let mut last = [0u8; 8];
            // SAFETY: bytes whole*8 .. whole*8+rest are the element's last (the contract),
            // and `last` is a private local that cannot overlap them.
            unsafe { std::ptr::copy_nonoverlapping(src.add(whole * 8), last.as_mut_ptr(), rest) };
            cells
                .word(whole)
                .store(u64::from_ne_bytes(last), Ordering::Relaxed);
        }
        self.seq = self.seq.wrapping_add(2);
        cells.seq().store(self.seq, Ordering::Release);
    }

    pub fn elem_size(&self) -> usize {
        self.cells.elem_size
    }
}

/// A reader, type erased.
#[derive(Debug)]
pub struct RawReader {
    cells: Cells,
    last_seen: u64,
    max_attempts: u32,
}

impl RawReader {
    /// Attempts per read before `Contended` (at least 1).
    pub fn set_max_attempts(&mut self, attempts: u32) {
        self.max_attempts = attempts.max(1);
    }

    /// Copies the latest value into `dst` (exactly the element size). Returns
    /// (fresh, version).
    #[inline]
    // The slice loop, not read_ptr, for the same reason as write_bytes.
    pub fn read_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(bool, u64), ReadError> {
        if dst.len() != self.cells.elem_size {
            return Err(ReadError::WrongSize);
        }
        let cells = &self.cells;
        for _ in 0..self.max_attempts {
            // Relaxed load + acquire fence (the same ordering as an acquire load): a
            // relaxed load of a word is what works on a read-only mapping.
            let before = cells.seq().load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if before == 0 {
                return Err(ReadError::Empty);
            }
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut chunks = dst.chunks_mut(8);
            for (i, chunk) in (&mut chunks).enumerate() {
                let word = cells.word(i).load(Ordering::Relaxed).to_ne_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            fence(Ordering::Acquire);
            if cells.seq().load(Ordering::Relaxed) == before {
                let fresh = before != self.last_seen;
                self.last_seen = before;
                return Ok((fresh, before / 2));
            }
            std::hint::spin_loop();
        }
        Err(ReadError::Contended)
    }

    /// Copies the latest value to `dst` without forming a slice of it (for memory a
    /// `&mut [u8]` may not cover, such as a buffer other processes may change: the
    /// Python bindings' caller buffers). Returns (fresh, version); never
    /// [`ReadError::WrongSize`].
    ///
    /// # Safety
    /// `dst` is valid for writing the element size ([`RawReader::elem_size`]) bytes and
    /// does not lie in this register's segment.
    #[inline]
    pub unsafe fn read_ptr(&mut self, dst: *mut u8) -> std::result::Result<(bool, u64), ReadError> {
        let cells = &self.cells;
        for _ in 0..self.max_attempts {
            // Relaxed load + acquire fence (the same ordering as an acquire load): a
            // relaxed load of a word is what works on a read-only mapping.
            let before = cells.seq().load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if before == 0 {
                return Err(ReadError::Empty);
            }
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let whole = cells.elem_size / 8;
            for i in 0..whole {
                let word = cells.word(i).load(Ordering::Relaxed);
                // SAFETY: bytes i*8 .. i*8+8 lie within the element at `dst` (the
                // contract); write_unaligned asks no alignment of the caller's buffer.
                unsafe { dst.add(i * 8).cast::<u64>().write_unaligned(word) };
            }
            let rest = cells.elem_size % 8;
            if rest != 0 {
                let last = cells.word(whole).load(Ordering::Relaxed).to_ne_bytes();
                // SAFETY: bytes whole*8 .. whole*8+rest are the element's last (the
                // contract); `last` is a private local that cannot overlap them.
                unsafe { std::ptr::copy_nonoverlapping(last.as_ptr(), dst.add(whole * 8), rest) };
            }
            fence(Ordering::Acquire);
            if cells.seq().load(Ordering::Relaxed) == before {
                let fresh = before != self.last_seen;
                self.last_seen = before;
                return Ok((fresh, before / 2));
            }
            std::hint::spin_loop();
        }
        Err(ReadError::Contended)
    }

    /// The writer's liveness, checked on demand (reads /proc; never waits).
    pub fn writer_state(&self) -> PeerState {
        self.cells.segment.peer_state(WRITER_SLOT)
    }

    pub fn elem_size(&self) -> usize {
        self.cells.elem_size
    }
}

/// Typed writer.
#[derive(Debug)]
pub struct Writer<T: Pod> {
    raw: RawWriter,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> Writer<T> {
    #[inline]
    pub fn write(&mut self, value: &T) {
        // The size matches (checked on attach), so this cannot fail.
        let _ = self.raw.write_bytes(bytemuck::bytes_of(value));
    }
}

/// Typed reader.
#[derive(Debug)]
pub struct Reader<T: Pod> {
    raw: RawReader,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> Reader<T> {
    #[inline]
    pub fn read(&mut self) -> std::result::Result<Sample<T>, ReadError> {
        let mut value = T::zeroed();
        let (fresh, version) = self.raw.read_bytes(bytemuck::bytes_of_mut(&mut value))?;
        Ok(Sample {
            value,
            fresh,
            version,
        })
    }

    pub fn set_max_attempts(&mut self, attempts: u32) {
        self.raw.set_max_attempts(attempts);
    }

    pub fn writer_state(&self) -> PeerState {
        self.raw.writer_state()
    }
}
