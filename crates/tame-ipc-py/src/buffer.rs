//! Buffers without copies: a caller's object (numpy array, bytearray, bytes,
//! memoryview) borrowed through the buffer protocol for the length of one copy, and
//! [`SlotView`], which exports a ring slot itself (a consumer's `peek`, a producer's
//! `reserve`) and counts its exports, so that the slot is never released or committed
//! while Python can still reach it.

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use tame_ipc::Segment;

/// Calls `f` with the address and length of `obj`'s memory, which must be
/// C-contiguous (and writable when `writable`); the buffer is released afterwards.
/// The view lives on the stack: borrowing costs no allocation.
pub fn with_buffer<R>(
    obj: &Bound<'_, PyAny>,
    writable: bool,
    f: impl FnOnce(*mut u8, usize) -> PyResult<R>,
) -> PyResult<R> {
    /// Releases the borrowed buffer however `f` ends.
    struct Release(*mut ffi::Py_buffer);
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: `self.0` was filled by a successful PyObject_GetBuffer and is
            // released exactly once, here, while the GIL is held (we are inside a
            // Python call).
            unsafe { ffi::PyBuffer_Release(self.0) }
        }
    }
    let mut view = MaybeUninit::<ffi::Py_buffer>::uninit();
    let flags = ffi::PyBUF_C_CONTIGUOUS | if writable { ffi::PyBUF_WRITABLE } else { 0 };
    // SAFETY: `obj` is a live object (the Bound holds a reference and the GIL); `view`
    // is storage for one Py_buffer that stays in place until released.
    if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), flags) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let guard = Release(view.as_mut_ptr());
    // SAFETY: GetBuffer succeeded, so the view is initialised; `len` is never negative.
    let (buf, len) = unsafe { ((*guard.0).buf.cast::<u8>(), (*guard.0).len as usize) };
    f(buf, len)
}

/// Set in [`HeldSlot::state`] once the end lets the slot go (or is about to try):
/// no new buffer of the slot is exported from then on.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// A slot an end holds (a consumer's peek, a producer's reservation), shared by the
/// end and every [`SlotView`] of it through an `Arc`: neither holds the other's Python
/// object through it, so no reference cycle keeps a dropped end (and its role) alive.
pub struct HeldSlot {
    ptr: *mut u8,
    len: usize,
    readonly: bool,
    /// Buffers of the slot Python holds (memoryviews, numpy arrays…), with [`CLOSED`]
    /// set once the end lets the slot go. One word, so that closing (only when no
    /// buffer is held) and exporting (only while not closed) cannot interleave.
    state: AtomicUsize,
    /// Keeps the mapping mapped while the end or any view of the slot lives.
    _segment: Segment,
}

// SAFETY: `ptr` points into the mapping that `_segment` (an Arc of it) keeps mapped
// for the HeldSlot's whole life; it is never read or written through here, only handed
// to Python's buffer protocol, which any thread holding the GIL may use. The rest is
// one atomic word.
unsafe impl Send for HeldSlot {}
// SAFETY: as above.
unsafe impl Sync for HeldSlot {}

impl HeldSlot {
    pub fn new(segment: Segment, ptr: *mut u8, len: usize, readonly: bool) -> HeldSlot {
        HeldSlot {
            ptr,
            len,
            readonly,
            state: AtomicUsize::new(0),
            _segment: segment,
        }
    }

    /// Closes the slot to new buffers before the end lets it go; refused (with the
    /// number of buffers held) while Python holds one. Atomic, so a buffer cannot be
    /// taken between the check and the close — Python code the end calls afterwards
    /// (a caller's `__buffer__`) finds the slot closed.
    pub fn close(&self) -> Result<(), usize> {
        self.state
            .compare_exchange(0, CLOSED, Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
            .map_err(|state| state & !CLOSED)
    }

    /// Opens the slot again after a [`HeldSlot::close`] whose operation kept the slot
    /// (a full ring, a bad buffer): no buffer was exported while it was closed.
    pub fn reopen(&self) {
        self.state.store(0, Ordering::SeqCst);
    }

    /// Counts one more buffer, unless the slot is closed.
    fn export(&self) -> bool {
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            if state & CLOSED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    fn unexport(&self) {
        self.state.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One ring slot exported through the buffer protocol: the element of the slot a
/// consumer peeked at (read-only) or a producer reserved (writable). It holds the end
/// that made it (so the role is not given up while Python can reach the slot; the end
/// does not hold the view back) and the [`HeldSlot`], which counts the buffers
/// exported and which the end closes before it lets the slot go.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct SlotView {
    slot: Arc<HeldSlot>,
    _owner: Py<PyAny>,
}

impl SlotView {
    /// A new memoryview of `slot`, whose end is `owner`.
    pub fn memoryview<'py>(
        owner: &Bound<'py, PyAny>,
        slot: &Arc<HeldSlot>,
    ) -> PyResult<Bound<'py, PyMemoryView>> {
        let view = SlotView {
            slot: Arc::clone(slot),
            _owner: owner.clone().unbind(),
        };
        PyMemoryView::from(Bound::new(owner.py(), view)?.as_any())
    }
}

#[pymethods]
impl SlotView {
    /// # Safety
    /// Called by Python's buffer protocol with a `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let slot = &slf.get().slot;
        if slot.readonly && flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(PyBufferError::new_err(
                "a peeked slot is read-only: the producer owns its content (copy it to change it)",
            ));
        }
        if !slot.export() {
            return Err(PyBufferError::new_err(
                "this slot was released or committed: it belongs to the other side now — peek() or reserve() again",
            ));
        }
        // SAFETY: `view` is the caller's Py_buffer to fill; `ptr` is valid for `len`
        // bytes while the HeldSlot lives (its segment), which this object keeps alive,
        // and FillInfo takes a reference to this object (view->obj) for as long as the
        // buffer is held.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                slot.ptr.cast(),
                slot.len as ffi::Py_ssize_t,
                c_int::from(slot.readonly),
                flags,
            )
        };
        if rc != 0 {
            slot.unexport();
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    /// # Safety
    /// Called by Python's buffer protocol once per successful `__getbuffer__`.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.slot.unexport();
    }
}
