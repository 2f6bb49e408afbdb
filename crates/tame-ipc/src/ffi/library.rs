//! Calls that take no handle: the layout version, result names, the last error
//! message and removing a named segment.

use std::ffi::{c_char, CStr};
use std::panic::catch_unwind;

use super::*;

/// The layout version this library writes: major << 16 | minor.
#[no_mangle]
pub extern "C" fn tame_ipc_layout_version() -> u32 {
    (u32::from(LAYOUT_MAJOR) << 16) | u32::from(LAYOUT_MINOR)
}

/// The symbolic name of a result code ("TAME_IPC_OK", ...); a static string.
#[no_mangle]
pub extern "C" fn tame_ipc_result_name(result: tame_ipc_result) -> *const c_char {
    let name: &'static CStr = match result {
        TAME_IPC_OK => c"TAME_IPC_OK",
        TAME_IPC_FULL => c"TAME_IPC_FULL",
        TAME_IPC_EMPTY => c"TAME_IPC_EMPTY",
        TAME_IPC_CONTENDED => c"TAME_IPC_CONTENDED",
        TAME_IPC_TIMEOUT => c"TAME_IPC_TIMEOUT",
        TAME_IPC_ERR_INVALID_ARGUMENT => c"TAME_IPC_ERR_INVALID_ARGUMENT",
        TAME_IPC_ERR_NOT_FOUND => c"TAME_IPC_ERR_NOT_FOUND",
        TAME_IPC_ERR_EXISTS => c"TAME_IPC_ERR_EXISTS",
        TAME_IPC_ERR_PERMISSION => c"TAME_IPC_ERR_PERMISSION",
        TAME_IPC_ERR_LAYOUT_MISMATCH => c"TAME_IPC_ERR_LAYOUT_MISMATCH",
        TAME_IPC_ERR_INCOMPATIBLE_VERSION => c"TAME_IPC_ERR_INCOMPATIBLE_VERSION",
        TAME_IPC_ERR_NOT_A_SEGMENT => c"TAME_IPC_ERR_NOT_A_SEGMENT",
        TAME_IPC_ERR_NOT_READY => c"TAME_IPC_ERR_NOT_READY",
        TAME_IPC_ERR_ROLE_TAKEN => c"TAME_IPC_ERR_ROLE_TAKEN",
        TAME_IPC_ERR_CORRUPTED => c"TAME_IPC_ERR_CORRUPTED",
        TAME_IPC_ERR_OS => c"TAME_IPC_ERR_OS",
        TAME_IPC_ERR_PANIC => c"TAME_IPC_ERR_PANIC",
        TAME_IPC_ERR_UNTRUSTED => c"TAME_IPC_ERR_UNTRUSTED",
        _ => c"TAME_IPC_UNKNOWN_RESULT",
    };
    name.as_ptr()
}

/// Copies the message of this thread's last failed call into `buf` (NUL-terminated,
/// truncated to `len`); returns the message length without the NUL. `buf` may be
/// NULL to ask for the length.
///
/// # Safety
/// `buf` is NULL or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_last_error(buf: *mut c_char, len: usize) -> usize {
    catch_unwind(|| {
        LAST_ERROR.with(|last| {
            let message = last.borrow();
            if !buf.is_null() && len > 0 {
                let n = message.len().min(len - 1);
                // SAFETY: `buf` is non-NULL and writable for `len` > n bytes (the
                // caller's contract), so bytes 0..=n fit; the message is our own
                // allocation and cannot overlap the caller's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
                    buf.add(n).write(0);
                }
            }
            message.len()
        })
    })
    .unwrap_or(0)
}

/// Removes the named segment `/dev/shm/tame.NAME` (open handles stay valid).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_unlink(name: *const c_char) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        crate::segment::unlink(&name).map_err(fail)?;
        Ok(TAME_IPC_OK)
    })
}
