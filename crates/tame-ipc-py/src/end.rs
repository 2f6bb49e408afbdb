//! What a ring's two ends share: the raw end (gone once closed), the slot held as a
//! view (a producer's reservation, a consumer's peek), and the checks of a caller's
//! buffer of whole elements.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use tame_ipc::{Corrupted, Segment};

use crate::buffer::{with_buffer, SlotView};
use crate::errors::{closed, corrupted, exported};

/// An end's state, behind its handle's lock.
pub struct EndState<R> {
    raw: Option<R>,
    /// The held slot (reserved or peeked), while it is held.
    view: Option<Py<SlotView>>,
    what: &'static str,
}

impl<R> EndState<R> {
    pub fn new(raw: R, what: &'static str) -> EndState<R> {
        EndState {
            raw: Some(raw),
            view: None,
            what,
        }
    }

    pub fn raw(&mut self) -> PyResult<&mut R> {
        self.raw.as_mut().ok_or_else(|| closed(self.what))
    }

    /// The held slot's address, if one is held.
    pub fn held(&self) -> Option<*mut u8> {
        self.view.as_ref().map(|view| view.get().ptr())
    }

    /// A new memoryview of the held slot, if one is held.
    pub fn held_view<'py>(&self, py: Python<'py>) -> Option<PyResult<Bound<'py, PyMemoryView>>> {
        self.view
            .as_ref()
            .map(|view| SlotView::memoryview(view.bind(py)))
    }

    /// Holds the slot at `ptr` (`len` bytes) for `owner` and returns a memoryview of it.
    pub fn hold<'py>(
        &mut self,
        owner: &Bound<'py, PyAny>,
        segment: &Segment,
        (ptr, len): (*mut u8, usize),
        readonly: bool,
    ) -> PyResult<Bound<'py, PyMemoryView>> {
        let slot = SlotView::new(owner.clone().unbind(), segment.clone(), ptr, len, readonly);
        let view = Bound::new(owner.py(), slot)?;
        let memoryview = SlotView::memoryview(&view)?;
        self.view = Some(view.unbind());
        Ok(memoryview)
    }

    /// Forgets the held slot, so that no new buffer of it can be made.
    pub fn end_view(&mut self) {
        if let Some(view) = self.view.take() {
            view.get().invalidate();
        }
    }

    /// Refuses to give up the held slot while Python still holds a view of it.
    pub fn check_unexported(&self, op: &str) -> PyResult<()> {
        match &self.view {
            Some(view) if view.get().exports() > 0 => Err(exported(op, view.get().exports())),
            _ => Ok(()),
        }
    }

    /// Copies whole elements between `obj`'s buffer (writable when `writable`) and
    /// the ring: `copy` gets the raw end, the buffer's address (checked by
    /// [`whole_elements`]) and its element count, and returns how many it moved. A
    /// move ends the held slot (it was the first of them).
    pub fn copy_elements(
        &mut self,
        segment: &Segment,
        obj: &Bound<'_, PyAny>,
        writable: bool,
        op: &'static str,
        copy: impl FnOnce(&mut R, *mut u8, usize) -> Result<usize, Corrupted>,
    ) -> PyResult<usize> {
        self.check_unexported(op)?;
        let elem_size = segment.spec().elem_size as usize;
        let raw = self.raw()?;
        let moved = with_buffer(obj, writable, |ptr, len| {
            let count = whole_elements(segment, ptr, len, elem_size)?;
            copy(raw, ptr, count).map_err(|_| corrupted(op))
        })?;
        if moved > 0 {
            self.end_view();
        }
        Ok(moved)
    }

    /// Gives the role up (refused while the held slot's view is in use).
    pub fn close(&mut self) -> PyResult<()> {
        self.check_unexported("close")?;
        self.end_view();
        self.raw = None;
        Ok(())
    }
}

/// How many elements a caller's buffer of `len` bytes at `ptr` holds: it must be a
/// whole number of them, and must not lie in the ring's own mapping (a view from
/// this ring's `peek` or `reserve` passed back in), which the raw copies forbid.
pub fn whole_elements(
    segment: &Segment,
    ptr: *const u8,
    len: usize,
    elem_size: usize,
) -> PyResult<usize> {
    if !len.is_multiple_of(elem_size) {
        return Err(PyValueError::new_err(format!(
            "the buffer of {len} B is not a whole number of {elem_size}-byte elements"
        )));
    }
    if segment.overlaps(ptr, len) {
        return Err(PyValueError::new_err(
            "the buffer lies inside this ring's own shared memory (a view from peek() or reserve()) — copy it first (bytes(view))",
        ));
    }
    Ok(len / elem_size)
}
