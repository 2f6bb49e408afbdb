//! Rings, registers and events in one process, across threads and across processes.

use crate::common;

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::common::{child_env, spawn_child, spawn_child_as, test_name, NameGuard};
use tame_ipc::{
    fdpass, ChannelSpec, Error, Event, PeerState, PopError, PushError, ReadError, Register, Ring,
};

#[test]
fn ring_fills_wraps_and_drains_in_order() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(8)).unwrap();
    let mut producer = ring.producer::<u64>().unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    assert_eq!(consumer.pop(), Err(PopError::Empty));
    let mut next_in = 0u64;
    let mut next_out = 0u64;
    // Several laps so indices wrap around the slots many times.
    for round in 0..50 {
        let burst = 1 + round % 8;
        for _ in 0..burst {
            producer.push(next_in).unwrap();
            next_in += 1;
        }
        for _ in 0..burst {
            assert_eq!(consumer.pop(), Ok(next_out));
            next_out += 1;
        }
    }
    for i in 0..8 {
        producer.push(i).unwrap();
    }
    assert_eq!(producer.push(99), Err(PushError::Full));
    assert_eq!(consumer.len(), Ok(8));
    for i in 0..8 {
        assert_eq!(consumer.pop(), Ok(i));
    }
    assert_eq!(consumer.pop(), Err(PopError::Empty));
}

#[test]
fn batches_move_what_fits() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<[u8; 64]>(16)).unwrap();
    let mut producer = ring.producer::<[u8; 64]>().unwrap();
    let mut consumer = ring.consumer::<[u8; 64]>().unwrap();
    let input: Vec<[u8; 64]> = (0..20u8).map(|i| [i; 64]).collect();
    assert_eq!(producer.push_slice(&input[..10]), Ok(10));
    let mut out = vec![[0u8; 64]; 4];
    assert_eq!(consumer.pop_into(&mut out), Ok(4));
    assert_eq!(out[3], [3; 64]);
    // 6 waiting, 10 free: only 10 of the next 10 fit, then nothing.
    assert_eq!(producer.push_slice(&input[10..20]), Ok(10));
    assert_eq!(producer.push_slice(&input[..1]), Ok(0));
    let mut out = vec![[0u8; 64]; 32];
    assert_eq!(consumer.pop_into(&mut out), Ok(16));
    for (i, value) in out[..16].iter().enumerate() {
        assert_eq!(*value, [(i + 4) as u8; 64]);
    }
}

#[test]
fn messages_are_built_and_read_in_place() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<[u64; 8]>(4)).unwrap();
    let mut producer = ring.producer::<[u64; 8]>().unwrap();
    let mut consumer = ring.consumer::<[u64; 8]>().unwrap();
    {
        let mut slot = producer.reserve().unwrap();
        assert_eq!(slot.len(), 64);
        assert_eq!(slot.as_mut_ptr() as usize % 8, 0);
        slot.write(0, &[1u64; 8]).unwrap();
        slot.write(8, &7u64).unwrap();
        slot.write_bytes(60, &[9, 9, 9, 9]).unwrap();
        assert_eq!(slot.write_bytes(61, &[0; 4]), Err(tame_ipc::OutOfBounds));
        assert_eq!(slot.write(usize::MAX, &0u8), Err(tame_ipc::OutOfBounds));
        // Nothing is visible before the commit.
        assert_eq!(consumer.is_empty(), Ok(true));
        slot.commit();
    }
    // A reservation dropped uncommitted publishes nothing and frees nothing.
    producer.reserve().unwrap().write(0, &5u64).unwrap();
    assert_eq!(consumer.len(), Ok(1));
    {
        let peeked = consumer.peek().unwrap();
        assert_eq!(peeked.read::<u64>(8), Ok(7));
        let mut tail = [0u8; 4];
        peeked.read_bytes(60, &mut tail).unwrap();
        assert_eq!(tail, [9; 4]);
        assert_eq!(peeked.read::<u64>(60), Err(tame_ipc::OutOfBounds));
        // Dropped unreleased: still the oldest message.
    }
    let peeked = consumer.peek().unwrap();
    assert_eq!(peeked.read::<u64>(0), Ok(1));
    peeked.release();
    assert_eq!(consumer.peek().unwrap_err(), PopError::Empty);
    // Full rings reserve nothing.
    for _ in 0..4 {
        producer.reserve().unwrap().commit();
    }
    assert_eq!(producer.reserve().unwrap_err(), PushError::Full);
}

#[test]
fn raw_batches_take_whole_elements() {
    let ring = Ring::create_anonymous(ChannelSpec::raw(tame_ipc::Kind::Ring, 12, 4, 4)).unwrap();
    let mut producer = ring.raw_producer().unwrap();
    let mut consumer = ring.raw_consumer().unwrap();
    let input: Vec<u8> = (0..60).collect();
    assert_eq!(
        producer.push_many_bytes(&input[..13]),
        Err(PushError::WrongSize)
    );
    // Five elements offered, four slots.
    assert_eq!(producer.push_many_bytes(&input), Ok(4));
    let mut out = vec![0u8; 36];
    assert_eq!(
        consumer.pop_many_bytes(&mut out[..5]),
        Err(PopError::WrongSize)
    );
    assert_eq!(consumer.pop_many_bytes(&mut out), Ok(3));
    assert_eq!(out, input[..36]);
    assert_eq!(consumer.pop_many_bytes(&mut out), Ok(1));
    assert_eq!(out[..12], input[36..48]);
}

#[test]
fn every_size_crosses_threads_intact() {
    // Sizes around one cache line and beyond, so elements and sequence words share a
    // line, fill it, and span several.
    fn carry<const N: usize>() {
        let ring = Ring::create_anonymous(ChannelSpec::ring::<[u64; N]>(64)).unwrap();
        let mut producer = ring.producer::<[u64; N]>().unwrap();
        let mut consumer = ring.consumer::<[u64; N]>().unwrap();
        const COUNT: u64 = 20_000;
        let sender = std::thread::spawn(move || {
            let mut i = 0;
            while i < COUNT {
                let mut slot = match producer.reserve() {
                    Ok(slot) => slot,
                    Err(PushError::Full) => {
                        std::hint::spin_loop();
                        continue;
                    }
                    Err(e) => panic!("reserve: {e:?}"),
                };
                slot.write(0, &[i; N]).unwrap();
                slot.commit();
                i += 1;
            }
        });
        let mut expected = 0;
        while expected < COUNT {
            match consumer.pop() {
                Ok(value) => {
                    assert_eq!(value, [expected; N], "{} B", N * 8);
                    expected += 1;
                }
                Err(PopError::Empty) => std::hint::spin_loop(),
                Err(e) => panic!("pop: {e:?}"),
            }
        }
        sender.join().unwrap();
    }
    carry::<1>();
    carry::<7>();
    carry::<8>();
    carry::<32>();
    carry::<128>();
}

#[test]
fn ring_carries_a_million_messages_across_threads_in_order() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(256)).unwrap();
    let mut producer = ring.producer::<u64>().unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    const N: u64 = 1_000_000;
    let sender = std::thread::spawn(move || {
        let mut i = 0;
        while i < N {
            match producer.push(i) {
                Ok(()) => i += 1,
                Err(PushError::Full) => std::hint::spin_loop(),
                Err(e) => panic!("push: {e:?}"),
            }
        }
    });
    let mut expected = 0;
    let mut batch = [0u64; 32];
    while expected < N {
        let n = consumer.pop_into(&mut batch).unwrap();
        for value in &batch[..n] {
            assert_eq!(*value, expected);
            expected += 1;
        }
    }
    sender.join().unwrap();
}

#[test]
fn roles_are_exclusive_and_freed_on_drop() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u32>(4)).unwrap();
    let producer = ring.producer::<u32>().unwrap();
    let err = ring.producer::<u32>().unwrap_err();
    assert!(
        matches!(
            err,
            Error::RoleTaken {
                role: "producer",
                ..
            }
        ),
        "{err}"
    );
    drop(producer);
    let _again = ring.producer::<u32>().unwrap();
    let err = ring.consumer::<u64>().unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
}

#[test]
fn peer_states_report_absent_and_alive() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u32>(4)).unwrap();
    let producer = ring.producer::<u32>().unwrap();
    assert_eq!(producer.consumer_state(), PeerState::Absent);
    let consumer = ring.consumer::<u32>().unwrap();
    let me = std::process::id();
    assert_eq!(producer.consumer_state(), PeerState::Alive { pid: me });
    assert_eq!(consumer.producer_state(), PeerState::Alive { pid: me });
}

#[test]
fn named_ring_create_open_and_refusals() {
    let name = NameGuard::new("named");
    let spec = ChannelSpec::ring::<u64>(16);
    let ring = Ring::create(name.as_str(), spec).unwrap();
    let meta = std::fs::metadata(name.path()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let mut producer = ring.producer::<u64>().unwrap();
    producer.push(41).unwrap();

    // Creating again is refused and leaves the segment as it was.
    let err = Ring::create(name.as_str(), spec).unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    // Another shape is refused on open, with both shapes in the message.
    let err = Ring::open(name.as_str(), ChannelSpec::ring::<u64>(32)).unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains("16 × 8 B") && err.to_string().contains("32 × 8 B"),
        "{err}"
    );
    let err = Register::open(name.as_str(), ChannelSpec::register::<u64>()).unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");
    let err = Ring::open_or_create(name.as_str(), ChannelSpec::ring::<u32>(16)).unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");

    let reopened = Ring::open(name.as_str(), spec).unwrap();
    let mut consumer = reopened.consumer::<u64>().unwrap();
    assert_eq!(consumer.pop(), Ok(41));
    assert_eq!(Ring::open_any(name.as_str()).unwrap().spec(), spec);

    ring.segment().unlink().unwrap();
    let err = Ring::open(name.as_str(), spec).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

#[test]
fn bad_input_creates_nothing() {
    let name = NameGuard::new("bad");
    for spec in [
        ChannelSpec::ring::<u64>(0),
        ChannelSpec::ring::<u64>(12),
        ChannelSpec::raw(tame_ipc::Kind::Ring, 0, 1, 8),
        ChannelSpec::raw(tame_ipc::Kind::Ring, u32::MAX, 1, 8),
    ] {
        let err = Ring::create(name.as_str(), spec).unwrap_err();
        assert!(matches!(err, Error::InvalidSpec(_)), "{err}");
        assert!(!name.path().exists(), "{spec:?} left a segment behind");
    }
    for bad_name in ["a/b", "", ".x", "with space"] {
        let err = Ring::create(bad_name, ChannelSpec::ring::<u64>(8)).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err}");
    }
    let err =
        Ring::create_with_mode(name.as_str(), ChannelSpec::ring::<u64>(8), 0o400).unwrap_err();
    assert!(matches!(err, Error::InvalidSpec(_)), "{err}");
    assert!(!name.path().exists());
    let err = Ring::create(name.as_str(), ChannelSpec::register::<u64>()).unwrap_err();
    assert!(matches!(err, Error::InvalidSpec(_)), "{err}");
    assert!(!name.path().exists());
}

#[test]
fn memfd_segment_travels_over_a_unix_socket() {
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(4)).unwrap();
    let (left, right) = UnixStream::pair().unwrap();
    fdpass::send_fd(&left, ring.segment().fd()).unwrap();
    let fd = fdpass::recv_fd(&right).unwrap();
    let received = Ring::from_fd(fd, ChannelSpec::ring::<u64>(4)).unwrap();
    let mut producer = ring.producer::<u64>().unwrap();
    let mut consumer = received.consumer::<u64>().unwrap();
    producer.push(7).unwrap();
    assert_eq!(consumer.pop(), Ok(7));
    // A memfd segment is sealed: nobody can shrink it under a mapping.
    let file = std::fs::File::from(ring.segment().fd().try_clone_to_owned().unwrap());
    assert!(file.set_len(0).is_err());
}

#[test]
fn register_never_tears_and_reports_freshness() {
    let register = Register::create_anonymous(ChannelSpec::register::<[u64; 8]>()).unwrap();
    let mut writer = register.writer::<[u64; 8]>().unwrap();
    let mut reader = register.reader::<[u64; 8]>().unwrap();
    assert_eq!(reader.read().unwrap_err(), ReadError::Empty);
    writer.write(&[5; 8]);
    let sample = reader.read().unwrap();
    assert_eq!(
        (sample.value, sample.fresh, sample.version),
        ([5; 8], true, 1)
    );
    assert!(!reader.read().unwrap().fresh);

    let err = register.writer::<[u64; 8]>().unwrap_err();
    assert!(
        matches!(err, Error::RoleTaken { role: "writer", .. }),
        "{err}"
    );

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_writer = stop.clone();
    let writing = std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop_writer.load(std::sync::atomic::Ordering::Relaxed) {
            i += 1;
            writer.write(&[i; 8]);
        }
        i
    });
    let mut readers: Vec<_> = (0..2)
        .map(|_| register.reader::<[u64; 8]>().unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_millis(300);
    let (mut good, mut contended, mut last) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline {
        for reader in &mut readers {
            match reader.read() {
                Ok(sample) => {
                    let first = sample.value[0];
                    assert!(
                        sample.value.iter().all(|&w| w == first),
                        "torn read {:?}",
                        sample.value
                    );
                    good += 1;
                    last = last.max(first);
                }
                Err(ReadError::Contended) => contended += 1,
                Err(e) => panic!("read: {e:?}"),
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writing.join().unwrap();
    assert!(good > 0, "no successful read ({contended} contended)");
    assert!(last <= written);
}

#[test]
fn event_counts_and_wakes() {
    let event = Event::create_anonymous().unwrap();
    let signaller = event.signaller().unwrap();
    let mut listener = event.listener();
    assert_eq!(listener.poll(), 0);
    signaller.signal();
    signaller.signal();
    assert_eq!(listener.poll(), 2);
    let started = Instant::now();
    assert_eq!(listener.wait(Duration::from_millis(20)), 0);
    assert!(started.elapsed() >= Duration::from_millis(20));

    let waker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        signaller.signal_and_wake();
    });
    let started = Instant::now();
    assert_eq!(listener.wait(Duration::from_secs(10)), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the futex, not the timeout"
    );
    waker.join().unwrap();
}

// ---- across processes --------------------------------------------------------------

/// Child side of `ring_across_processes`: opens the named ring and produces.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_ring_producer() {
    let name = child_env("RING_NAME");
    let count: u64 = child_env("COUNT").parse().unwrap();
    let ring = Ring::open(&name, ChannelSpec::ring::<u64>(64)).unwrap();
    let mut producer = ring.producer::<u64>().unwrap();
    let mut i = 0;
    while i < count {
        match producer.push(i * 3) {
            Ok(()) => i += 1,
            Err(PushError::Full) => std::hint::spin_loop(),
            Err(e) => panic!("{e:?}"),
        }
    }
    if std::env::var_os("DIE_ATTACHED").is_some() {
        // Leave without releasing the role, like a crash.
        std::process::exit(0);
    }
}

#[test]
fn ring_across_processes() {
    let name = NameGuard::new("xproc");
    let ring = Ring::create(name.as_str(), ChannelSpec::ring::<u64>(64)).unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    const COUNT: u64 = 200_000;
    let child = spawn_child(
        &test_name(module_path!(), "child_ring_producer"),
        &[("RING_NAME", name.0.clone()), ("COUNT", COUNT.to_string())],
    );
    let mut expected = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while expected < COUNT {
        match consumer.pop() {
            Ok(value) => {
                assert_eq!(value, expected * 3);
                expected += 1;
            }
            Err(PopError::Empty) => assert!(Instant::now() < deadline, "producer stalled"),
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(child.wait().success());
}

#[test]
fn dead_producer_is_reported_and_replaced() {
    let name = NameGuard::new("dead");
    let ring = Ring::create(name.as_str(), ChannelSpec::ring::<u64>(64)).unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    let child = spawn_child(
        &test_name(module_path!(), "child_ring_producer"),
        &[
            ("RING_NAME", name.0.clone()),
            ("COUNT", "5".into()),
            ("DIE_ATTACHED", "1".into()),
        ],
    );
    let pid = child.id();
    assert!(child.wait().success());
    assert_eq!(consumer.producer_state(), PeerState::Dead { pid });
    // What it produced before dying is still there.
    for i in 0..5 {
        assert_eq!(consumer.pop(), Ok(i * 3));
    }
    // The dead holder's role can be taken over.
    let mut producer = ring.producer::<u64>().unwrap();
    assert_eq!(
        consumer.producer_state(),
        PeerState::Alive {
            pid: std::process::id()
        }
    );
    producer.push(1).unwrap();
    assert_eq!(consumer.pop(), Ok(1));
}

/// Child side of `permission_denied_is_reported`: runs as an unprivileged user.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_open_without_permission() {
    let name = child_env("RING_NAME");
    let err = Ring::open(&name, ChannelSpec::ring::<u64>(8)).unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert!(err.to_string().contains("mode 0o600, owner uid 0"), "{err}");
}

#[test]
fn permission_denied_is_reported() {
    if !common::privileged("running the opener as another user") {
        return;
    }
    let name = NameGuard::new("perm");
    let _ring = Ring::create(name.as_str(), ChannelSpec::ring::<u64>(8)).unwrap();
    let child = spawn_child_as(
        &test_name(module_path!(), "child_open_without_permission"),
        &[("RING_NAME", name.0.clone())],
        Some(65534),
    );
    assert!(
        child.wait().success(),
        "the unprivileged opener was not refused as expected"
    );
}
