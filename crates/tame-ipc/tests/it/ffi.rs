//! The C ABI used from Rust: NULL handles and bad arguments give stable codes (never a
//! crash), and a handle pair works end to end.

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

use tame_ipc::ffi::*;

fn last_error() -> String {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: `buf` is writable for the `buf.len()` bytes passed.
    let len = unsafe { tame_ipc_last_error(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: tame_ipc_last_error NUL-terminates within `buf` since its length is > 0.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    assert_eq!(len.min(255), text.len());
    text
}

#[test]
fn null_and_bad_arguments_are_refused_with_codes() {
    // SAFETY: every pointer passed is NULL (which each call must refuse cleanly), a
    // string literal, or a local that outlives the call; no handle is ever opened.
    unsafe {
        let mut ring = null_mut();
        assert_eq!(
            tame_ipc_ring_open(null(), 8, 8, 8, &mut ring),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_ring_create(c"a/b".as_ptr(), 8, 8, 8, 0, &mut ring),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains("'/'"), "{}", last_error());
        assert_eq!(
            tame_ipc_ring_create_anonymous(8, 8, 6, &mut ring),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains("power of two"));
        assert_eq!(
            tame_ipc_ring_create_anonymous(0, 1, 8, &mut ring),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_ring_create_anonymous(8, 8, 8, null_mut()),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert!(ring.is_null());
        assert_eq!(
            tame_ipc_ring_open(c"tame-ipc-surely-missing".as_ptr(), 8, 8, 8, &mut ring),
            TAME_IPC_ERR_NOT_FOUND
        );
        assert_eq!(
            tame_ipc_producer_push(null_mut(), null()),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_consumer_pop(null_mut(), null_mut()),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_reader_read(null_mut(), null_mut(), null_mut(), null_mut()),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(tame_ipc_event_signal(null()), TAME_IPC_ERR_INVALID_ARGUMENT);
        assert_eq!(tame_ipc_ring_close(null_mut()), TAME_IPC_OK);
        assert_eq!(
            tame_ipc_producer_peer_state(null(), null_mut()),
            TAME_IPC_PEER_UNKNOWN
        );
        assert_eq!(tame_ipc_ring_fd(null()), -1);
        let name = CStr::from_ptr(tame_ipc_result_name(TAME_IPC_ERR_ROLE_TAKEN));
        assert_eq!(name.to_str().unwrap(), "TAME_IPC_ERR_ROLE_TAKEN");
        assert_eq!(
            tame_ipc_layout_version(),
            (TAME_IPC_LAYOUT_MAJOR << 16) | TAME_IPC_LAYOUT_MINOR
        );
    }
}

#[test]
fn ring_slots_are_reserved_and_peeked_in_place_through_the_c_abi() {
    // SAFETY: handles are used between their open and their single close on this
    // thread; slot pointers are used only between reserve/peek and commit/release, for
    // the element size (16 B); out-parameters are live locals.
    unsafe {
        let mut ring = null_mut();
        assert_eq!(
            tame_ipc_ring_create_anonymous(16, 8, 2, &mut ring),
            TAME_IPC_OK
        );
        let (mut producer, mut consumer) = (null_mut(), null_mut());
        assert_eq!(tame_ipc_producer_open(ring, &mut producer), TAME_IPC_OK);
        assert_eq!(tame_ipc_consumer_open(ring, &mut consumer), TAME_IPC_OK);
        assert_eq!(tame_ipc_ring_close(ring), TAME_IPC_OK);
        // Commit and release without a reservation are refused.
        assert_eq!(
            tame_ipc_producer_commit(producer),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_consumer_release(consumer),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_producer_reserve(producer, null_mut()),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        let mut slot: *mut c_void = null_mut();
        for value in [11u64, 12] {
            assert_eq!(tame_ipc_producer_reserve(producer, &mut slot), TAME_IPC_OK);
            assert_eq!(slot as usize % 8, 0);
            slot.cast::<[u64; 2]>().write([value, value + 100]);
            let mut peeked: *const c_void = null();
            if value == 11 {
                // Not visible before the commit.
                assert_eq!(
                    tame_ipc_consumer_peek(consumer, &mut peeked),
                    TAME_IPC_EMPTY
                );
            }
            assert_eq!(tame_ipc_producer_commit(producer), TAME_IPC_OK);
        }
        assert_eq!(
            tame_ipc_producer_commit(producer),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_producer_reserve(producer, &mut slot),
            TAME_IPC_FULL
        );
        let mut peeked: *const c_void = null();
        assert_eq!(tame_ipc_consumer_peek(consumer, &mut peeked), TAME_IPC_OK);
        assert_eq!(peeked.cast::<[u64; 2]>().read(), [11, 111]);
        assert_eq!(tame_ipc_consumer_release(consumer), TAME_IPC_OK);
        assert_eq!(
            tame_ipc_consumer_release(consumer),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        // A pop after a peek takes the peeked element and ends the hold.
        assert_eq!(tame_ipc_consumer_peek(consumer, &mut peeked), TAME_IPC_OK);
        let mut out = [0u64; 2];
        assert_eq!(
            tame_ipc_consumer_pop(consumer, out.as_mut_ptr() as *mut c_void),
            TAME_IPC_OK
        );
        assert_eq!(out, [12, 112]);
        assert_eq!(
            tame_ipc_consumer_release(consumer),
            TAME_IPC_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tame_ipc_consumer_peek(consumer, &mut peeked),
            TAME_IPC_EMPTY
        );
        assert_eq!(tame_ipc_producer_close(producer), TAME_IPC_OK);
        assert_eq!(tame_ipc_consumer_close(consumer), TAME_IPC_OK);
    }
}

#[test]
fn ring_register_and_event_through_the_c_abi() {
    // SAFETY: each handle is used only between its successful open and its single
    // close, on this thread; element buffers are locals of the element size (u64 for
    // the 8-byte ring, u32 for the 4-byte register); out-parameters are live locals.
    unsafe {
        let mut ring = null_mut();
        assert_eq!(
            tame_ipc_ring_create_anonymous(8, 8, 2, &mut ring),
            TAME_IPC_OK
        );
        // Share by descriptor: a second handle on the same memory.
        let mut other = null_mut();
        assert_eq!(
            tame_ipc_ring_open_fd(tame_ipc_ring_fd(ring), 8, 8, 2, &mut other),
            TAME_IPC_OK
        );
        let (mut producer, mut consumer) = (null_mut(), null_mut());
        assert_eq!(tame_ipc_producer_open(ring, &mut producer), TAME_IPC_OK);
        assert_eq!(
            tame_ipc_producer_open(other, &mut null_mut()),
            TAME_IPC_ERR_ROLE_TAKEN
        );
        assert_eq!(tame_ipc_consumer_open(other, &mut consumer), TAME_IPC_OK);
        // Closing the segment handles first is allowed: the ends keep the mapping.
        assert_eq!(tame_ipc_ring_close(ring), TAME_IPC_OK);
        assert_eq!(tame_ipc_ring_close(other), TAME_IPC_OK);
        let values = [1u64, 2, 3];
        let mut pushed = 0;
        assert_eq!(
            tame_ipc_producer_push_many(producer, values.as_ptr() as *const c_void, 3, &mut pushed),
            TAME_IPC_OK
        );
        assert_eq!(pushed, 2);
        assert_eq!(
            tame_ipc_producer_push(producer, &values[2] as *const u64 as *const c_void),
            TAME_IPC_FULL
        );
        let mut out = 0u64;
        assert_eq!(
            tame_ipc_consumer_pop(consumer, &mut out as *mut u64 as *mut c_void),
            TAME_IPC_OK
        );
        assert_eq!(out, 1);
        let mut pid = 0;
        assert_eq!(
            tame_ipc_consumer_peer_state(consumer, &mut pid),
            TAME_IPC_PEER_ALIVE
        );
        assert_eq!(pid, std::process::id());
        assert_eq!(tame_ipc_producer_close(producer), TAME_IPC_OK);
        assert_eq!(
            tame_ipc_consumer_peer_state(consumer, &mut pid),
            TAME_IPC_PEER_ABSENT
        );
        assert_eq!(tame_ipc_consumer_close(consumer), TAME_IPC_OK);

        let mut register = null_mut();
        assert_eq!(
            tame_ipc_register_create_anonymous(4, 4, &mut register),
            TAME_IPC_OK
        );
        let (mut writer, mut reader) = (null_mut(), null_mut());
        assert_eq!(tame_ipc_writer_open(register, &mut writer), TAME_IPC_OK);
        assert_eq!(tame_ipc_reader_open(register, &mut reader), TAME_IPC_OK);
        let mut value = 0u32;
        let (mut fresh, mut version) = (0, 0);
        assert_eq!(
            tame_ipc_reader_read(
                reader,
                &mut value as *mut u32 as *mut c_void,
                &mut fresh,
                &mut version
            ),
            TAME_IPC_EMPTY
        );
        let written = 77u32;
        assert_eq!(
            tame_ipc_writer_write(writer, &written as *const u32 as *const c_void),
            TAME_IPC_OK
        );
        assert_eq!(
            tame_ipc_reader_read(
                reader,
                &mut value as *mut u32 as *mut c_void,
                &mut fresh,
                &mut version
            ),
            TAME_IPC_OK
        );
        assert_eq!((value, fresh, version), (77, 1, 1));
        tame_ipc_writer_close(writer);
        tame_ipc_reader_close(reader);
        tame_ipc_register_close(register);

        let mut event = null_mut();
        assert_eq!(tame_ipc_event_create_anonymous(&mut event), TAME_IPC_OK);
        let mut listener = null_mut();
        assert_eq!(tame_ipc_listener_open(event, &mut listener), TAME_IPC_OK);
        let mut count = 9;
        assert_eq!(
            tame_ipc_listener_wait(listener, 1_000_000, &mut count),
            TAME_IPC_TIMEOUT
        );
        assert_eq!(count, 0);
        assert_eq!(tame_ipc_event_signal(event), TAME_IPC_OK);
        assert_eq!(tame_ipc_listener_poll(listener, &mut count), TAME_IPC_OK);
        assert_eq!(count, 1);
        tame_ipc_listener_close(listener);
        tame_ipc_event_close(event);
    }
}

/// Removes the named segments of a test even if it fails.
struct Unlink(Vec<String>);

impl Drop for Unlink {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = std::fs::remove_file(format!("/dev/shm/tame.{name}"));
        }
    }
}

#[test]
fn read_only_opens_unsealed_descriptors_and_lost_segments_through_the_c_abi() {
    let base = format!("test-{}-ffi-ro", std::process::id());
    let register_name = std::ffi::CString::new(base.clone()).unwrap();
    let event_name = std::ffi::CString::new(format!("{base}.event")).unwrap();
    let ring_name = std::ffi::CString::new(format!("{base}.ring")).unwrap();
    let _unlink = Unlink(vec![
        base.clone(),
        format!("{base}.event"),
        format!("{base}.ring"),
    ]);
    // SAFETY: as in ring_register_and_event_through_the_c_abi: each handle is used
    // between its successful open and its single close, on this thread; buffers are
    // locals of the element size (u64); names are NUL-terminated CStrings.
    unsafe {
        let (mut register, mut read_only) = (null_mut(), null_mut());
        assert_eq!(
            tame_ipc_register_create(register_name.as_ptr(), 8, 8, 0o640, &mut register),
            TAME_IPC_OK
        );
        assert_eq!(
            tame_ipc_register_open_read_only(register_name.as_ptr(), 8, 8, &mut read_only),
            TAME_IPC_OK
        );
        let (mut writer, mut reader, mut refused) = (null_mut(), null_mut(), null_mut());
        assert_eq!(tame_ipc_writer_open(register, &mut writer), TAME_IPC_OK);
        assert_eq!(
            tame_ipc_writer_open(read_only, &mut refused),
            TAME_IPC_ERR_PERMISSION
        );
        assert!(refused.is_null());
        assert!(last_error().contains("read-only"), "{}", last_error());
        assert_eq!(tame_ipc_reader_open(read_only, &mut reader), TAME_IPC_OK);
        let written = 5u64;
        assert_eq!(
            tame_ipc_writer_write(writer, &written as *const u64 as *const c_void),
            TAME_IPC_OK
        );
        let (mut value, mut fresh, mut version) = (0u64, 0, 0);
        assert_eq!(
            tame_ipc_reader_read(
                reader,
                &mut value as *mut u64 as *mut c_void,
                &mut fresh,
                &mut version
            ),
            TAME_IPC_OK
        );
        assert_eq!(value, 5);
        assert_eq!(tame_ipc_register_lost(read_only), 0);
        assert_eq!(tame_ipc_register_lost(null()), 0);
        tame_ipc_reader_close(reader);
        tame_ipc_writer_close(writer);
        tame_ipc_register_close(read_only);
        tame_ipc_register_close(register);

        let (mut event, mut listening, mut listener) = (null_mut(), null_mut(), null_mut());
        assert_eq!(
            tame_ipc_event_create(event_name.as_ptr(), 0, &mut event),
            TAME_IPC_OK
        );
        assert_eq!(
            tame_ipc_event_open_read_only(event_name.as_ptr(), &mut listening),
            TAME_IPC_OK
        );
        assert_eq!(tame_ipc_event_signal(listening), TAME_IPC_ERR_PERMISSION);
        assert_eq!(
            tame_ipc_event_signal_and_wake(listening),
            TAME_IPC_ERR_PERMISSION
        );
        assert_eq!(
            tame_ipc_listener_open(listening, &mut listener),
            TAME_IPC_OK
        );
        assert_eq!(tame_ipc_event_signal(event), TAME_IPC_OK);
        let mut count = 0;
        assert_eq!(tame_ipc_listener_poll(listener, &mut count), TAME_IPC_OK);
        assert_eq!(count, 1);
        assert_eq!(tame_ipc_event_lost(event), 0);
        tame_ipc_listener_close(listener);
        tame_ipc_event_close(listening);
        tame_ipc_event_close(event);

        // A named segment's descriptor cannot be sealed: refused by _open_fd.
        let (mut ring, mut by_fd) = (null_mut(), null_mut());
        assert_eq!(
            tame_ipc_ring_create(ring_name.as_ptr(), 8, 8, 4, 0, &mut ring),
            TAME_IPC_OK
        );
        assert_eq!(
            tame_ipc_ring_open_fd(tame_ipc_ring_fd(ring), 8, 8, 4, &mut by_fd),
            TAME_IPC_ERR_UNTRUSTED
        );
        assert!(by_fd.is_null());
        assert!(last_error().contains("shrink"), "{}", last_error());
        let name = CStr::from_ptr(tame_ipc_result_name(TAME_IPC_ERR_UNTRUSTED));
        assert_eq!(name.to_str().unwrap(), "TAME_IPC_ERR_UNTRUSTED");
        assert_eq!(tame_ipc_ring_lost(ring), 0);
        tame_ipc_ring_close(ring);
    }
}

/// A FIFO planted under the name: both read-only opens return TAME_IPC_ERR_UNTRUSTED at
/// once (they blocked in open(2) for a writer that never came).
#[test]
fn read_only_opens_refuse_a_planted_fifo_without_blocking_through_the_c_abi() {
    let name = format!("test-{}-ffi-fifo", std::process::id());
    let _unlink = Unlink(vec![name.clone()]);
    let path = std::path::PathBuf::from(format!("/dev/shm/tame.{name}"));
    crate::common::plant_fifo(&path);
    let c_name = std::ffi::CString::new(name).unwrap();
    for what in [
        "tame_ipc_register_open_read_only",
        "tame_ipc_event_open_read_only",
    ] {
        let c_name = c_name.clone();
        // The code, whether a handle came back, and this thread's last error (the
        // message is per thread, so it is read on the thread that failed).
        let (code, opened, message) = crate::common::opens_promptly(&path, move || {
            // SAFETY: the name is a NUL-terminated CString alive for the call; `out`
            // is a local; a handle that came back (none should) is closed once.
            unsafe {
                if what == "tame_ipc_register_open_read_only" {
                    let mut out = null_mut();
                    let code = tame_ipc_register_open_read_only(c_name.as_ptr(), 8, 8, &mut out);
                    let opened = !out.is_null();
                    tame_ipc_register_close(out);
                    (code, opened, last_error())
                } else {
                    let mut out = null_mut();
                    let code = tame_ipc_event_open_read_only(c_name.as_ptr(), &mut out);
                    let opened = !out.is_null();
                    tame_ipc_event_close(out);
                    (code, opened, last_error())
                }
            }
        });
        assert_eq!(code, TAME_IPC_ERR_UNTRUSTED, "{what}: {message}");
        assert!(!opened, "{what} gave a handle");
        assert!(message.contains("not a regular file"), "{what}: {message}");
    }
}
