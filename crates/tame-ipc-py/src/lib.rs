//! Python bindings for tame-ipc, built with pyo3 (the extension module
//! `tame_ipc._native`; the Python package around it is in `python/tame_ipc`, and
//! docs/python.md documents both).
//!
//! pyo3 rather than the C ABI through cffi/ctypes: the checks and lifetimes stay in
//! Rust. A view of a slot keeps the mapping and the end that made it alive and counts
//! its exports, so a slot is never released or committed while Python can reach it;
//! buffers are borrowed through the buffer protocol and checked (size, contiguity,
//! not aliasing the ring) before one raw copy; errors become Python exceptions with
//! the library's message. With ctypes each of these would be Python code re-checking
//! what the C caller must guarantee by hand, and a mistake there is a crash.

mod buffer;
mod end;
mod errors;
mod event;
mod handle;
mod register;
mod ring;

use pyo3::prelude::*;

// gil_used: on a free-threaded Python (3.13t) the module keeps the GIL on, so the
// checks that a slot is not exported and the moves that let it go (end.rs) never
// run in parallel with another thread's Python code taking a buffer of the slot.
#[pymodule(gil_used = true)]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<ring::Ring>()?;
    module.add_class::<ring::Producer>()?;
    module.add_class::<ring::Consumer>()?;
    module.add_class::<register::Register>()?;
    module.add_class::<register::Writer>()?;
    module.add_class::<register::Reader>()?;
    module.add_class::<register::Sample>()?;
    module.add_class::<event::Event>()?;
    module.add_class::<event::Signaller>()?;
    module.add_class::<event::Listener>()?;
    module.add_class::<handle::PeerState>()?;
    module.add_class::<buffer::SlotView>()?;
    module.add_function(wrap_pyfunction!(unlink, module)?)?;
    module.add("LAYOUT_MAJOR", tame_ipc::LAYOUT_MAJOR)?;
    module.add("LAYOUT_MINOR", tame_ipc::LAYOUT_MINOR)?;
    module.add("DEFAULT_MODE", tame_ipc::DEFAULT_MODE)?;
    errors::register(module)
}

/// Removes /dev/shm/tame.NAME (existing mappings stay valid); NotFoundError if absent.
#[pyfunction]
fn unlink(name: &str) -> PyResult<()> {
    let name = tame_ipc::SegmentName::new(name).map_err(errors::to_py)?;
    tame_ipc::unlink(&name).map_err(errors::to_py)
}
