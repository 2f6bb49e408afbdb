//! Fuzzing what a peer controls before anything is mapped: the header bytes and the
//! file size. Arbitrary bytes, and valid headers with fields mutated, against arbitrary
//! sizes, through the pure validation, the tool's description and the real open path
//! (a sealed memfd holding the bytes, opened with `from_fd`, then used). Nothing may
//! panic, crash or hang; whatever is accepted lies inside the file; the mapping is
//! exactly the layout, never the file.
//!
//! TAME_FUZZ_CASES sets the cases per property (default 10 000, the share of the
//! normal test run). The long run:
//!
//!     TAME_FUZZ_CASES=1000000 cargo test --release -p tame-ipc --test it fuzz_header::

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;

use proptest::prelude::*;
use tame_ipc::inspect::{self, SegmentState};
use tame_ipc::layout::{Layout, RawHeader, HEADER_SIZE, MAX_SEGMENT_SIZE};
use tame_ipc::{ChannelSpec, Event, Expect, Kind, ProcFs, Register, Ring, Segment};

fn cases() -> u32 {
    std::env::var("TAME_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// Files larger than this are only validated, not opened: an accepted layout may be as
/// large as the file, and opening populates it.
const OPEN_LIMIT: u64 = 4 << 20;

/// Shapes, mostly valid, biased towards small ones.
fn spec() -> impl Strategy<Value = ChannelSpec> {
    let small_pow2 = |max: u32| (0..=max).prop_map(|log| 1u64 << log);
    prop_oneof![
        (1u32..=4096, small_pow2(12), small_pow2(12)).prop_map(|(size, align, capacity)| {
            ChannelSpec::raw(Kind::Ring, size, align as u32, capacity)
        }),
        (1u32..=(1 << 20), small_pow2(30), small_pow2(12)).prop_map(|(size, capacity, align)| {
            ChannelSpec::raw(Kind::Ring, size, align as u32, capacity)
        }),
        (1u32..=4096, small_pow2(12)).prop_map(|(size, align)| ChannelSpec::raw(
            Kind::Register,
            size,
            align as u32,
            1
        )),
        Just(ChannelSpec::event()),
        any::<u64>().prop_map(|tag| ChannelSpec::ring::<u64>(8).with_type_tag(tag)),
    ]
}

/// One change to a header word: replaced, a bit flipped, nudged, or zeroed.
fn mutation() -> impl Strategy<Value = (usize, u8, u64)> {
    (0usize..16, 0u8..4, any::<u64>())
}

fn mutate(words: &mut [u64; 16], (index, how, value): (usize, u8, u64)) {
    let word = &mut words[index];
    *word = match how {
        0 => value,
        1 => *word ^ (1 << (value % 64)),
        2 => word.wrapping_add(value % 9).wrapping_sub(4),
        _ => 0,
    };
}

/// Header bytes: arbitrary, or a valid header with a few fields mutated.
fn header() -> impl Strategy<Value = RawHeader> {
    prop_oneof![
        1 => proptest::array::uniform16(any::<u64>()).prop_map(bytemuck::cast::<[u64; 16], RawHeader>),
        4 => (spec(), proptest::collection::vec(mutation(), 0..4), any::<[u64; 2]>()).prop_map(
            |(spec, mutations, peers)| {
                let layout = Layout::compute(spec).unwrap_or_else(|_| {
                    Layout::compute(ChannelSpec::ring::<u64>(8)).expect("valid")
                });
                let mut header = layout.header(1, 2, 3);
                header.peers = peers;
                let mut words: [u64; 16] = bytemuck::cast(header);
                for m in mutations {
                    mutate(&mut words, m);
                }
                bytemuck::cast(words)
            }
        ),
    ]
}

/// File sizes: exactly what the header claims, near it, small, or anything.
fn file_size(header: &RawHeader) -> impl Strategy<Value = u64> {
    let claimed = header.segment_size;
    prop_oneof![
        Just(claimed),
        (0u64..=16384).prop_map(move |d| claimed.saturating_add(d).saturating_sub(8192)),
        0u64..=65536,
        0u64..=MAX_SEGMENT_SIZE * 2,
        any::<u64>(),
    ]
}

fn header_and_size() -> impl Strategy<Value = (RawHeader, u64)> {
    header().prop_flat_map(|h| (Just(h), file_size(&h)))
}

/// A sealed memfd of `size` bytes starting with `header`, as a peer would hand over.
fn sealed_memfd(header: &RawHeader, size: u64) -> OwnedFd {
    // SAFETY: memfd_create reads the NUL-terminated literal and returns a new fd.
    let raw = unsafe {
        libc::memfd_create(
            c"fuzz".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    assert!(
        raw >= 0,
        "memfd_create: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.set_len(size).unwrap();
    let bytes = header.as_bytes();
    let n = bytes.len().min(size as usize);
    file.write_all_at(&bytes[..n], 0).unwrap();
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: F_ADD_SEALS takes an integer and touches no memory of ours.
    let added = unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) };
    assert_eq!(added, 0);
    file.into()
}

/// Uses whatever was opened, as a peer of each kind would.
fn exercise(segment: Segment) {
    match segment.spec().kind {
        Kind::Ring => {
            let ring = Ring::from_segment(segment).unwrap();
            if let Ok(mut producer) = ring.raw_producer() {
                let element = vec![0x5a; producer.elem_size()];
                let _ = producer.push_bytes(&element);
            }
            if let Ok(mut consumer) = ring.raw_consumer() {
                let mut element = vec![0; consumer.elem_size()];
                let _ = consumer.pop_bytes(&mut element);
                let _ = consumer.producer_state();
            }
        }
        Kind::Register => {
            let register = Register::from_segment(segment).unwrap();
            if let Ok(mut reader) = register.raw_reader() {
                reader.set_max_attempts(4);
                let mut value = vec![0; reader.elem_size()];
                let _ = reader.read_bytes(&mut value);
                let _ = reader.writer_state();
            }
        }
        Kind::Event => {
            let event = Event::from_segment(segment).unwrap();
            let _ = event.listener().poll();
            event.signaller().unwrap().signal();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Validation never panics; an accepted layout is the one its shape implies and
    /// lies inside the file.
    #[test]
    fn validation_accepts_only_layouts_inside_the_file((header, size) in header_and_size()) {
        if let Ok(layout) = Layout::from_header(&header, size) {
            prop_assert!(layout.segment_size <= size);
            prop_assert!(layout.segment_size >= HEADER_SIZE);
            prop_assert!(layout.data_offset.checked_add(layout.data_size).is_some_and(|end| end <= layout.segment_size));
            prop_assert!(layout.control_offset >= HEADER_SIZE && layout.control_offset < layout.data_offset);
            prop_assert_eq!(Layout::compute(layout.spec), Ok(layout));
        }
        // What the tool shows rests on the same validation.
        if let SegmentState::Valid(d) = inspect::describe(&header, size, &ProcFs::new("/nonexistent")) {
            prop_assert!(d.layout.segment_size <= size);
        }
    }

    /// The real open path: from a sealed memfd holding the bytes. Never panics, maps
    /// exactly the validated layout (never the file), and using the ends stays inside.
    #[test]
    fn open_maps_exactly_the_layout((header, size) in header_and_size()) {
        let size = size % (OPEN_LIMIT + 1);
        let fd = sealed_memfd(&header, size);
        match Segment::from_fd(fd, Expect::Any) {
            Ok(segment) => {
                let layout = *segment.layout();
                prop_assert_eq!(Layout::from_header(&header, size), Ok(layout));
                prop_assert_eq!(segment.mapped_len() as u64, layout.segment_size);
                prop_assert!(layout.segment_size <= size);
                exercise(segment);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
