//! Registers: the segment handle `tame_ipc_register`, its one `tame_ipc_writer` and
//! any number of `tame_ipc_reader`s.

use std::ffi::{c_char, c_int, c_void};

use super::*;
use crate::layout::{ChannelSpec, Kind};
use crate::{RawReader, RawWriter, ReadError, Register};

/// A latest-value register segment.
pub struct tame_ipc_register {
    register: Register,
}
/// The writer of a register (one thread at a time).
pub struct tame_ipc_writer {
    raw: RawWriter,
}
/// A reader of a register (one thread at a time; open one per thread).
pub struct tame_ipc_reader {
    raw: RawReader,
}

impl SegmentHandle for tame_ipc_register {
    fn segment(&self) -> &Segment {
        self.register.segment()
    }
}

fn register_spec(elem_size: u32, elem_align: u32) -> ChannelSpec {
    ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1)
}

// ---- register --------------------------------------------------------------------

/// Creates the named register `/dev/shm/tame.NAME` (mode 0 means 0600).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_register *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_create(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    mode: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let spec = register_spec(elem_size, elem_align);
        let register =
            Register::create_with_mode(name.as_str(), spec, mode_or_default(mode)).map_err(fail)?;
        Ok(tame_ipc_register { register })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Opens an existing named register, which must have exactly this shape.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_register *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_open(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let spec = register_spec(elem_size, elem_align);
        let register = Register::open(name.as_str(), spec).map_err(fail)?;
        Ok(tame_ipc_register { register })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Opens an existing named register read-only (mapped `PROT_READ`; the caller needs
/// only read permission). Readers work; `tame_ipc_writer_open` on it fails with
/// `TAME_IPC_ERR_PERMISSION`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_register *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_open_read_only(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let spec = register_spec(elem_size, elem_align);
        let register = Register::open_read_only(name.as_str(), spec).map_err(fail)?;
        Ok(tame_ipc_register { register })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Creates an anonymous register (memfd).
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_register *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_create_anonymous(
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    let open = || {
        let spec = register_spec(elem_size, elem_align);
        let register = Register::create_anonymous(spec).map_err(fail)?;
        Ok(tame_ipc_register { register })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Maps a register from a descriptor (duplicated; the caller keeps its own).
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_register *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_open_fd(
    fd: c_int,
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    let open = || {
        let spec = register_spec(elem_size, elem_align);
        let register = Register::from_fd(dup_fd(fd)?, spec).map_err(fail)?;
        Ok(tame_ipc_register { register })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// The register's descriptor, owned by the handle; -1 for NULL.
///
/// # Safety
/// `register` is NULL or a live register handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_fd(register: *const tame_ipc_register) -> c_int {
    // SAFETY: `register` is NULL or live (this function's contract).
    unsafe { segment_fd(register) }
}

/// 1 when someone shrank this named register and the SIGBUS guard replaced its mapping
/// by private memory: this side no longer shares anything with its peers (recreate
/// the channel). 0 otherwise, always for anonymous segments, and for NULL.
///
/// # Safety
/// `register` is NULL or a live register handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_lost(register: *const tame_ipc_register) -> c_int {
    // SAFETY: `register` is NULL or live (this function's contract).
    unsafe { segment_lost(register) }
}

/// Releases a register handle; NULL is a no-op. Its ends keep the mapping alive.
///
/// # Safety
/// `register` is NULL or a live register handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_close(
    register: *mut tame_ipc_register,
) -> tame_ipc_result {
    // SAFETY: `register` is NULL or live and not used again (this function's contract).
    unsafe { close(register) }
}

// ---- writer ----------------------------------------------------------------------

/// Attaches the writer role.
///
/// # Safety
/// `register` is NULL or a live register handle; `out` is NULL or valid for writing a
/// `tame_ipc_writer *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_open(
    register: *const tame_ipc_register,
    out: *mut *mut tame_ipc_writer,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `register` is NULL or live (this function's contract); segment
        // handles are only read, so sharing them between threads is fine.
        let register = unsafe { handle(register, "register") }?;
        let raw = register.register.raw_writer().map_err(fail)?;
        Ok(tame_ipc_writer { raw })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Publishes one value (the register's element size) from `value`. Never waits.
///
/// # Safety
/// `writer` is NULL or a live writer handle that no other thread uses during the
/// call; `value` is NULL or valid for reading the register's element size.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_write(
    writer: *mut tame_ipc_writer,
    value: *const c_void,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `writer` is NULL or live and used by this thread only (this
        // function's contract).
        let writer = unsafe { handle_mut(writer, "writer") }?;
        if value.is_null() {
            return Err(invalid("value is NULL"));
        }
        // SAFETY: `value` is non-NULL (checked above) and readable for the element
        // size (this function's contract); the slice lives only for this call.
        let bytes =
            unsafe { std::slice::from_raw_parts(value.cast::<u8>(), writer.raw.elem_size()) };
        writer
            .raw
            .write_bytes(bytes)
            .map_err(|_| invalid("wrong element size"))?;
        Ok(TAME_IPC_OK)
    })
}

/// Releases the writer role and its handle; NULL is a no-op.
///
/// # Safety
/// `writer` is NULL or a live writer handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_close(writer: *mut tame_ipc_writer) -> tame_ipc_result {
    // SAFETY: `writer` is NULL or live and not used again (this function's contract).
    unsafe { close(writer) }
}

// ---- reader ----------------------------------------------------------------------

/// Opens a reader (any number per register).
///
/// # Safety
/// `register` is NULL or a live register handle; `out` is NULL or valid for writing a
/// `tame_ipc_reader *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_open(
    register: *const tame_ipc_register,
    out: *mut *mut tame_ipc_reader,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `register` is NULL or live (this function's contract); segment
        // handles are only read, so sharing them between threads is fine.
        let register = unsafe { handle(register, "register") }?;
        let raw = register.register.raw_reader().map_err(fail)?;
        Ok(tame_ipc_reader { raw })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Copies the latest value into `value`. TAME_IPC_OK, TAME_IPC_EMPTY (never
/// written) or TAME_IPC_CONTENDED. `fresh` (may be NULL) receives 1 if the value is
/// new since this reader's previous read; `version` (may be NULL) the write count.
///
/// # Safety
/// `reader` is NULL or a live reader handle that no other thread uses during the
/// call; `value` is NULL or valid for writing the register's element size; `fresh`
/// and `version` are each NULL or valid for writing an `int` / a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_read(
    reader: *mut tame_ipc_reader,
    value: *mut c_void,
    fresh: *mut c_int,
    version: *mut u64,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `reader` is NULL or live and used by this thread only (this
        // function's contract).
        let reader = unsafe { handle_mut(reader, "reader") }?;
        if value.is_null() {
            return Err(invalid("value is NULL"));
        }
        // SAFETY: `value` is non-NULL (checked above) and writable for the element
        // size (this function's contract); nothing else refers to it during the call.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(value.cast::<u8>(), reader.raw.elem_size()) };
        match reader.raw.read_bytes(bytes) {
            Ok((is_fresh, count)) => {
                if !fresh.is_null() {
                    // SAFETY: non-NULL (checked) and writable (this function's contract).
                    unsafe { fresh.write(c_int::from(is_fresh)) };
                }
                if !version.is_null() {
                    // SAFETY: non-NULL (checked) and writable (this function's contract).
                    unsafe { version.write(count) };
                }
                Ok(TAME_IPC_OK)
            }
            Err(ReadError::Empty) => Ok(TAME_IPC_EMPTY),
            Err(ReadError::Contended) => Ok(TAME_IPC_CONTENDED),
            Err(ReadError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// The writer's state (TAME_IPC_PEER_*), checked on demand.
///
/// # Safety
/// `reader` is NULL or a live reader handle; `pid` is NULL or valid for writing a
/// `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_peer_state(
    reader: *const tame_ipc_reader,
    pid: *mut u32,
) -> c_int {
    // SAFETY: `reader` is NULL or live and `pid` NULL or writable (this function's
    // contract).
    unsafe { peer_state(reader, pid, |r| r.raw.writer_state()) }
}

/// Releases a reader handle; NULL is a no-op.
///
/// # Safety
/// `reader` is NULL or a live reader handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_close(reader: *mut tame_ipc_reader) -> tame_ipc_result {
    // SAFETY: `reader` is NULL or live and not used again (this function's contract).
    unsafe { close(reader) }
}
