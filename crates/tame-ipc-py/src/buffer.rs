//! Buffers without copies: a caller's object (numpy array, bytearray, bytes,
//! memoryview) borrowed through the buffer protocol for the length of one copy, and
//! [`SlotView`], which exports a ring slot itself (a consumer's `peek`, a producer's
//! `reserve`) and counts its exports, so that the slot is never released or committed
//! while Python can still reach it.

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

/// One ring slot exported through the buffer protocol: the element of the slot a
/// consumer peeked at (read-only) or a producer reserved (writable). It holds the
/// segment (so the mapping stays mapped while any view exists) and the end that made
/// it (so the role is not given up under it), and counts the buffers exported, which
/// the end checks before it lets the slot go.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct SlotView {
    ptr: *mut u8,
    len: usize,
    readonly: bool,
    exports: AtomicUsize,
    /// False once the end let the slot go: a new buffer of it (`memoryview(view.obj)`)
    /// is refused from then on.
    valid: AtomicBool,
    _owner: Py<PyAny>,
    _segment: Segment,
}

// SAFETY: `ptr` points into the mapping that `_segment` (an Arc of it) keeps mapped
// for the SlotView's whole life; the SlotView never reads or writes through it, it
// only hands it to Python's buffer protocol, which any thread holding the GIL may use.
unsafe impl Send for SlotView {}
// SAFETY: as above; the only shared state besides the pointer is an atomic counter.
unsafe impl Sync for SlotView {}

impl SlotView {
    pub fn new(
        owner: Py<PyAny>,
        segment: Segment,
        ptr: *mut u8,
        len: usize,
        readonly: bool,
    ) -> SlotView {
        SlotView {
            ptr,
            len,
            readonly,
            exports: AtomicUsize::new(0),
            valid: AtomicBool::new(true),
            _owner: owner,
            _segment: segment,
        }
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Buffers of this slot Python still holds (memoryviews, numpy arrays…).
    pub fn exports(&self) -> usize {
        self.exports.load(Ordering::SeqCst)
    }

    /// The end let the slot go (only once no buffer of it is exported).
    pub fn invalidate(&self) {
        self.valid.store(false, Ordering::SeqCst);
    }

    /// A new memoryview of the slot.
    pub fn memoryview<'py>(view: &Bound<'py, SlotView>) -> PyResult<Bound<'py, PyMemoryView>> {
        PyMemoryView::from(view.as_any())
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
        let me = slf.get();
        if !me.valid.load(Ordering::SeqCst) {
            return Err(PyBufferError::new_err(
                "this slot was released or committed: it belongs to the other side now — peek() or reserve() again",
            ));
        }
        if me.readonly && flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(PyBufferError::new_err(
                "a peeked slot is read-only: the producer owns its content (copy it to change it)",
            ));
        }
        // SAFETY: `view` is the caller's Py_buffer to fill; `ptr` is valid for `len`
        // bytes while this object lives, and FillInfo takes a reference to it
        // (view->obj) for as long as the buffer is held.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                me.ptr.cast(),
                me.len as ffi::Py_ssize_t,
                c_int::from(me.readonly),
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        me.exports.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// # Safety
    /// Called by Python's buffer protocol once per successful `__getbuffer__`.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::SeqCst);
    }
}
