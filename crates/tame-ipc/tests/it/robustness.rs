//! Garbage in shared memory (a buggy or malicious peer) never makes this side read or
//! write out of bounds, loop forever or panic. The "peer" here is a second, independent
//! mapping of the same memfd through which the tests scribble on headers and indices,
//! exactly as another process could.
//!
//! Out-of-bounds access would crash the test (SIGSEGV/SIGBUS: the segment is followed by
//! unmapped or foreign memory) or, for the heap, be caught by the checks below; an
//! endless loop would hang it; a panic fails it.

use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use tame_ipc::layout::{Layout, RawHeader, HEADER_SIZE};
use tame_ipc::{
    ChannelSpec, Error, Expect, Kind, PopError, PushError, ReadError, Register, Ring, Segment,
};

/// A second shared mapping of a segment: the hostile peer's view.
struct PeerView {
    ptr: NonNull<u8>,
    len: usize,
}

impl PeerView {
    fn of(segment: &Segment) -> PeerView {
        let len = segment.layout().segment_size as usize;
        // SAFETY: a new mapping at an address the kernel chooses, so it aliases no Rust
        // object; `len` is the segment's size and the fd is open for the call.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                segment.fd().as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        PeerView {
            ptr: NonNull::new(ptr as *mut u8).unwrap(),
            len,
        }
    }

    fn word(&self, offset: u64) -> &AtomicU64 {
        assert!(offset as usize + 8 <= self.len);
        // SAFETY: offset + 8 ≤ len (asserted) and layout offsets are 8-aligned from a
        // page-aligned base; both sides access these words only atomically.
        unsafe { &*(self.ptr.as_ptr().add(offset as usize) as *const AtomicU64) }
    }

    fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            let at = offset + i;
            if at < self.len {
                // SAFETY: at < len (checked), so the byte lies in the mapping; the test is
                // single-threaded, so no other access races with this write.
                unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(at), *b) };
            }
        }
    }
}

impl Drop for PeerView {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `of` mapped; references from `word` borrow `self`,
        // so none outlives this drop.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

fn reopen(segment: &Segment, expect: Expect) -> Result<Segment, Error> {
    Segment::from_fd(segment.fd().try_clone_to_owned().unwrap(), expect)
}

#[derive(Clone, Debug)]
enum Op {
    Push(u64),
    PushMany(usize),
    Pop,
    PopMany(usize),
    Len,
    CorruptTail(u64),
    CorruptHead(u64),
    /// A sequence word of slot (index) := value.
    CorruptSeq(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u64>().prop_map(Op::Push),
        (0usize..40).prop_map(Op::PushMany),
        Just(Op::Pop),
        (0usize..40).prop_map(Op::PopMany),
        Just(Op::Len),
        prop_oneof![any::<u64>(), 0u64..64].prop_map(Op::CorruptTail),
        prop_oneof![any::<u64>(), 0u64..64].prop_map(Op::CorruptHead),
        (0u64..16, prop_oneof![any::<u64>(), 0u64..64]).prop_map(|(s, v)| Op::CorruptSeq(s, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any header bytes: validation never panics, and whatever it accepts lies inside
    /// the file.
    #[test]
    fn any_header_is_validated_or_refused(words in proptest::array::uniform16(any::<u64>()), file_size in 0u64..(1 << 40)) {
        let header: RawHeader = bytemuck::cast(words);
        if let Ok(layout) = Layout::from_header(&header, file_size) {
            prop_assert!(layout.data_offset + layout.data_size <= layout.segment_size);
            prop_assert!(layout.segment_size <= file_size);
        }
    }

    /// A valid header with a few fields changed: validation never panics and accepts
    /// only layouts inside the file.
    #[test]
    fn mutated_header_is_validated_or_refused(
        capacity_log in 0u32..12,
        elem_size in 1u32..300,
        align_log in 0u32..7,
        mutations in proptest::collection::vec((0usize..16, any::<u64>()), 1..4),
    ) {
        let spec = ChannelSpec::raw(Kind::Ring, elem_size, 1 << align_log, 1 << capacity_log);
        let layout = Layout::compute(spec).unwrap();
        let mut words: [u64; 16] = bytemuck::cast(layout.header(1, 1, 1));
        for (index, value) in mutations {
            words[index] = value;
        }
        let header: RawHeader = bytemuck::cast(words);
        if let Ok(found) = Layout::from_header(&header, layout.segment_size) {
            prop_assert!(found.data_offset + found.data_size <= layout.segment_size);
        }
    }

    /// Garbage written over a live segment's header: opening it again never panics and
    /// either refuses it or yields a layout that fits the mapping.
    #[test]
    fn corrupted_live_header_is_refused_or_safe(offset in 0usize..(HEADER_SIZE as usize), garbage in proptest::collection::vec(any::<u8>(), 1..24)) {
        let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(16)).unwrap();
        let peer = PeerView::of(ring.segment());
        peer.write_bytes(offset, &garbage);
        match reopen(ring.segment(), Expect::Any) {
            Ok(segment) => {
                let layout = segment.layout();
                prop_assert!(layout.segment_size <= ring.segment().layout().segment_size);
                // Attaching uses only the validated copy; pushing must stay in bounds.
                if let Ok(reopened) = Ring::from_segment(segment) {
                    if let Ok(mut producer) = reopened.raw_producer() {
                        let elem = vec![0xa5u8; producer.elem_size()];
                        let _ = producer.push_bytes(&elem);
                    }
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    /// Ring operations interleaved with arbitrary head, tail and slot sequence values
    /// written by the peer:
    /// every operation returns (bounded work), nothing panics, values only come out of
    /// the ring's own slots, and `Corrupted` is reported whenever the indices are
    /// impossible.
    #[test]
    fn ring_survives_garbage_indices(ops in proptest::collection::vec(op(), 1..120)) {
        let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(16)).unwrap();
        let control = ring.segment().layout().control_offset;
        let peer = PeerView::of(ring.segment());
        let mut producer = ring.producer::<u64>().unwrap();
        let mut consumer = ring.consumer::<u64>().unwrap();
        let mut pushed = std::collections::HashSet::new();
        let mut buffer = [0u64; 40];
        for op in ops {
            match op {
                Op::Push(value) => match producer.push(value) {
                    Ok(()) => { pushed.insert(value); }
                    Err(PushError::Full) | Err(PushError::Corrupted) => {}
                    Err(PushError::WrongSize) => prop_assert!(false, "typed push cannot have the wrong size"),
                },
                Op::PushMany(n) => {
                    let values: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
                    if let Ok(done) = producer.push_slice(&values) {
                        prop_assert!(done <= n);
                        pushed.extend(&values[..done]);
                    }
                }
                Op::Pop => match consumer.pop() {
                    // Zeroed slots are what a slot never written holds.
                    Ok(value) => prop_assert!(value == 0 || pushed.contains(&value)),
                    Err(PopError::Empty) | Err(PopError::Corrupted) => {}
                    Err(PopError::WrongSize) => prop_assert!(false),
                },
                Op::PopMany(n) => {
                    if let Ok(done) = consumer.pop_into(&mut buffer[..n]) {
                        prop_assert!(done <= n);
                        for value in &buffer[..done] {
                            prop_assert!(*value == 0 || pushed.contains(value));
                        }
                    }
                }
                Op::Len => {
                    if let Ok(len) = consumer.len() {
                        prop_assert!(len <= 16);
                    }
                }
                Op::CorruptTail(value) => peer.word(control).store(value, Ordering::Release),
                Op::CorruptHead(value) => peer.word(control + 128).store(value, Ordering::Release),
                Op::CorruptSeq(slot, value) => {
                    let layout = ring.segment().layout();
                    peer.word(layout.data_offset + slot * layout.stride + 8).store(value, Ordering::Release)
                }
            }
        }
    }

    /// Garbage in a register's sequence or data: a read returns a value, `Empty` or
    /// `Contended` after a bounded number of attempts, never hangs.
    #[test]
    fn register_survives_garbage(seq in any::<u64>(), data in any::<u64>()) {
        let register = Register::create_anonymous(ChannelSpec::register::<[u64; 4]>()).unwrap();
        let layout = *register.segment().layout();
        let peer = PeerView::of(register.segment());
        let mut reader = register.reader::<[u64; 4]>().unwrap();
        reader.set_max_attempts(16);
        peer.word(layout.control_offset).store(seq, Ordering::Release);
        peer.word(layout.data_offset).store(data, Ordering::Release);
        match reader.read() {
            Ok(sample) => prop_assert_eq!(sample.value[0], data),
            Err(ReadError::Empty) => prop_assert_eq!(seq, 0),
            Err(ReadError::Contended) => prop_assert!(seq & 1 == 1),
            Err(ReadError::WrongSize) => prop_assert!(false),
        }
        // A writer attaching afterwards recovers a consistent sequence.
        let mut writer = register.writer::<[u64; 4]>().unwrap();
        writer.write(&[9; 4]);
        prop_assert_eq!(reader.read().map(|s| s.value), Ok([9; 4]));
    }

    /// Garbage in the role slots: attaching never panics; it either takes the role
    /// (the recorded holder is dead) or reports who holds it.
    #[test]
    fn role_slots_survive_garbage(owner in any::<u64>()) {
        let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(4)).unwrap();
        let peer = PeerView::of(ring.segment());
        peer.word(tame_ipc::layout::HEADER_SIZE - 32).store(owner, Ordering::Release);
        match ring.producer::<u64>() {
            Ok(_) => {}
            Err(Error::RoleTaken { pid, .. }) => prop_assert_eq!(u64::from(pid), owner >> 32),
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }
}

#[test]
fn dead_writer_mid_write_is_not_read_as_valid() {
    let register = Register::create_anonymous(ChannelSpec::register::<u64>()).unwrap();
    let layout = *register.segment().layout();
    let peer = PeerView::of(register.segment());
    {
        let mut writer = register.writer::<u64>().unwrap();
        writer.write(&1);
    }
    // A writer that died between its two sequence stores leaves it odd.
    peer.word(layout.control_offset).store(3, Ordering::Release);
    let mut reader = register.reader::<u64>().unwrap();
    assert_eq!(reader.read().unwrap_err(), ReadError::Contended);
    let mut writer = register.writer::<u64>().unwrap();
    writer.write(&2);
    let sample = reader.read().unwrap();
    assert_eq!(sample.value, 2);
}

#[test]
fn impossible_sequence_words_and_indices_are_reported_as_corrupted() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(8)).unwrap();
    let layout = *ring.segment().layout();
    let control = layout.control_offset;
    // The sequence word of slot 0 (a u64 element, then its word).
    let seq0 = layout.data_offset + 8;
    let peer = PeerView::of(ring.segment());
    let mut producer = ring.producer::<u64>().unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    producer.push(1).unwrap();
    assert_eq!(
        peer.word(seq0).load(Ordering::Acquire),
        1,
        "index 0 written"
    );
    // The producer writes a sequence word no lap of index 0 can have.
    peer.word(seq0).store(5, Ordering::Release);
    assert_eq!(consumer.pop(), Err(PopError::Corrupted));
    assert_eq!(consumer.is_empty(), Err(tame_ipc::Corrupted));
    assert_eq!(consumer.pop_into(&mut [0; 4]), Err(tame_ipc::Corrupted));
    // Restoring a possible value makes the ring usable again.
    peer.word(seq0).store(1, Ordering::Release);
    assert_eq!(consumer.pop(), Ok(1));
    // A published tail more than a lap away from the head.
    peer.word(control).store(1 << 40, Ordering::Release);
    assert_eq!(consumer.len(), Err(tame_ipc::Corrupted));
    peer.word(control).store(1, Ordering::Release);
    assert_eq!(consumer.len(), Ok(0));
    // The consumer claims to have read more than was ever written.
    for i in 0..8 {
        producer.push(i).unwrap();
    }
    peer.word(control + 128).store(u64::MAX, Ordering::Release);
    assert_eq!(producer.push(0), Err(PushError::Corrupted));
    // Attaching to a ring whose indices are impossible is refused.
    drop(producer);
    let err = ring.producer::<u64>().unwrap_err();
    assert!(matches!(err, Error::Corrupted { .. }), "{err}");
    // And a consumer whose head slot holds an impossible sequence word.
    drop(consumer);
    peer.word(control + 128).store(1, Ordering::Release);
    peer.word(layout.data_offset + layout.stride + 8)
        .store(77, Ordering::Release);
    let err = ring.consumer::<u64>().unwrap_err();
    assert!(matches!(err, Error::Corrupted { .. }), "{err}");
}

#[test]
fn producer_that_died_before_publishing_its_tail_is_taken_over_without_loss() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(8)).unwrap();
    let control = ring.segment().layout().control_offset;
    let peer = PeerView::of(ring.segment());
    let mut consumer = ring.consumer::<u64>().unwrap();
    {
        let mut producer = ring.producer::<u64>().unwrap();
        for i in 10..13 {
            producer.push(i).unwrap();
        }
    }
    // It died after marking index 2 written but before publishing tail 3; and the
    // consumer already read everything, so the published tail is behind its head.
    peer.word(control).store(2, Ordering::Release);
    assert_eq!(consumer.pop_into(&mut [0; 8]), Ok(3));
    let mut producer = ring.producer::<u64>().unwrap();
    producer.push(13).unwrap();
    assert_eq!(
        consumer.pop(),
        Ok(13),
        "the new producer continued at index 3"
    );
    assert_eq!(consumer.len(), Ok(0));
    // Unread unpublished messages are kept too.
    producer.push(14).unwrap();
    producer.push(15).unwrap();
    drop(producer);
    peer.word(control).store(4, Ordering::Release);
    let mut producer = ring.producer::<u64>().unwrap();
    assert_eq!(consumer.len(), Ok(2));
    producer.push(16).unwrap();
    let mut out = [0; 8];
    assert_eq!(consumer.pop_into(&mut out), Ok(3));
    assert_eq!(out[..3], [14, 15, 16]);
}
