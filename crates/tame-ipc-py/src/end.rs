//! What a ring's two ends share: the raw end (gone once closed), the slot held as a
//! view (a producer's reservation, a consumer's peek), and the checks of a caller's
//! buffer of whole elements.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use tame_ipc::{Corrupted, Segment};

use crate::buffer::{with_buffer, HeldSlot, SlotView};
use crate::errors::{closed, corrupted, exported};
use crate::handle::Attached;

/// An end's state, behind its handle's lock.
pub struct EndState<R> {
    raw: Option<R>,
    /// The held slot (reserved or peeked), while it is held. Shared with its views,
    /// which hold the end's Python object; the end never holds theirs (no cycle).
    held: Option<Arc<HeldSlot>>,
    what: &'static str,
    /// The process that attached the role: a fork()ed child inherits the handle but
    /// not the role (see [`Attached`]).
    attached: Attached,
}

impl<R> EndState<R> {
    pub fn new(raw: R, what: &'static str) -> EndState<R> {
        EndState {
            raw: Some(raw),
            held: None,
            what,
            attached: Attached::now(),
        }
    }

    /// The raw end: refused once closed, and in a process other than the one that
    /// attached it.
    pub fn raw(&mut self) -> PyResult<&mut R> {
        self.attached.check(self.what)?;
        self.raw.as_mut().ok_or_else(|| closed(self.what))
    }

    /// A new memoryview of the held slot, or, when none is held, of the slot `take`
    /// holds in the raw end (None from `take`: nothing to hold, a full or empty ring).
    /// `len` is the slot's size.
    pub fn held_or_take<'py>(
        &mut self,
        owner: &Bound<'py, PyAny>,
        segment: &Segment,
        (len, readonly): (usize, bool),
        take: impl FnOnce(&mut R) -> PyResult<Option<*mut u8>>,
    ) -> PyResult<Option<Bound<'py, PyMemoryView>>> {
        self.raw()?; // refused when closed, or inherited through fork()
        if let Some(slot) = &self.held {
            return SlotView::memoryview(owner, slot).map(Some);
        }
        let Some(ptr) = take(self.raw()?)? else {
            return Ok(None);
        };
        let slot = Arc::new(HeldSlot::new(segment.clone(), ptr, len, readonly));
        let memoryview = SlotView::memoryview(owner, &slot)?;
        self.held = Some(slot);
        Ok(Some(memoryview))
    }

    /// Lets the held slot go through the raw end (`go`, false when the raw end holds
    /// none: our bookkeeping and tame-ipc's disagree, which only a bug makes happen).
    /// `nothing` is the error when no slot is held.
    pub fn let_go(
        &mut self,
        op: &'static str,
        nothing: &'static str,
        go: impl FnOnce(&mut R) -> bool,
    ) -> PyResult<()> {
        self.raw()?;
        if self.held.is_none() {
            return Err(PyValueError::new_err(nothing));
        }
        self.moving(
            op,
            |_| true,
            |state| {
                if go(state.raw()?) {
                    Ok(())
                } else {
                    Err(corrupted(op))
                }
            },
        )
    }

    /// Runs `op`, which may let the held slot go (`consumed` says whether it did, from
    /// its result). The slot is closed to new buffers first — refused while Python
    /// holds one — so that Python code `op` runs (a caller's `__buffer__`) cannot take
    /// a view of it that outlives the move; it is opened again if `op` kept it.
    pub fn moving<T>(
        &mut self,
        op: &str,
        consumed: impl FnOnce(&T) -> bool,
        run: impl FnOnce(&mut Self) -> PyResult<T>,
    ) -> PyResult<T> {
        self.attached.check(self.what)?;
        if let Some(slot) = &self.held {
            slot.close().map_err(|exports| exported(op, exports))?;
        }
        let result = run(self);
        match &result {
            Ok(value) if consumed(value) => self.held = None,
            _ => {
                if let Some(slot) = &self.held {
                    slot.reopen();
                }
            }
        }
        result
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
        let elem_size = segment.spec().elem_size as usize;
        self.moving(
            op,
            |moved| *moved > 0,
            |state| {
                let raw = state.raw()?;
                with_buffer(obj, writable, |ptr, len| {
                    let count = whole_elements(segment, ptr, len, elem_size)?;
                    copy(raw, ptr, count).map_err(|_| corrupted(op))
                })
            },
        )
    }

    /// Gives the role up (refused while the held slot's view is in use).
    pub fn close(&mut self) -> PyResult<()> {
        self.moving(
            "close",
            |_| true,
            |state| {
                state.raw = None;
                Ok(())
            },
        )
    }
}

impl<R> Drop for EndState<R> {
    fn drop(&mut self) {
        self.attached.forget_if_inherited(&mut self.raw);
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
