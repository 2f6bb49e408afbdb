"""Rings in one process: the API, the buffer rules, and refusals of bad input."""

from __future__ import annotations

import ctypes
import gc
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import tame_ipc
from conftest import PYTHON
from stamps import CHECK, STAMP


def make(shm, capacity=8):
    ring = tame_ipc.Ring.create(shm(), STAMP.itemsize, capacity, elem_align=STAMP.alignment)
    return ring, ring.producer(), ring.consumer()


def stamps(seqs):
    out = np.zeros(len(seqs), dtype=STAMP)
    out["seq"] = seqs
    out["check"] = np.asarray(seqs, dtype=np.uint64) ^ CHECK
    return out


def test_push_pop_bytes_full_and_empty(shm):
    ring, tx, rx = make(shm, capacity=4)
    assert rx.pop() is None and len(rx) == 0
    for i in range(4):
        assert tx.push(bytes([i]) * 32)
    assert tx.push(b"x" * 32) is False, "a full ring refuses, it does not wait"
    assert tx.free_slots() == 0 and len(rx) == 4
    assert [rx.pop()[0] for _ in range(4)] == [0, 1, 2, 3]
    assert rx.pop() is None
    with pytest.raises(ValueError, match="32 B"):
        tx.push(b"short")


def test_push_many_and_pop_into_numpy_without_copies_in_between(shm):
    ring, tx, rx = make(shm, capacity=8)
    assert tx.push_many(stamps(range(10))) == 8, "only what fits"
    out = np.zeros(5, dtype=STAMP)
    assert rx.pop_into(out) == 5
    assert out["seq"].tolist() == [0, 1, 2, 3, 4]
    assert rx.pop_into(out) == 3
    assert out["seq"][:3].tolist() == [5, 6, 7]
    assert rx.pop_into(out) == 0
    with pytest.raises(ValueError, match="whole number"):
        rx.pop_into(np.zeros(33, dtype=np.uint8))
    with pytest.raises((BufferError, TypeError, ValueError)):
        rx.pop_into(b"\0" * 32)  # read-only
    with pytest.raises((BufferError, TypeError, ValueError)):
        rx.pop_into(np.zeros((4, 2), dtype=STAMP)[:, 0])  # not contiguous


def test_peek_is_a_read_only_view_held_until_release(shm):
    ring, tx, rx = make(shm)
    assert rx.peek() is None
    tx.push(stamps([41]))
    tx.push(stamps([42]))
    view = rx.peek()
    assert view.readonly and len(view) == 32
    with pytest.raises(TypeError):
        view[0] = 1
    record = np.frombuffer(view, dtype=STAMP)
    assert record["seq"][0] == 41
    with pytest.raises(BufferError, match="still in use"):
        rx.release()
    with pytest.raises(BufferError):
        rx.pop()
    with pytest.raises(BufferError):
        rx.close()
    again = rx.peek()
    assert bytes(again) == bytes(view), "a second peek sees the same slot"
    del record, again
    slot = view.obj
    view.release()
    rx.release()
    with pytest.raises(BufferError, match="released"):
        memoryview(slot)  # the slot is the producer's again: no new view of it
    assert np.frombuffer(rx.pop(), dtype=STAMP)["seq"][0] == 42
    with pytest.raises(ValueError, match="nothing is peeked"):
        rx.release()


def test_reserve_builds_in_place_and_commit_waits_for_the_view(shm):
    ring, tx, rx = make(shm, capacity=2)
    with tx.reserve() as view:
        record = np.frombuffer(view, dtype=STAMP)
        record[0] = (7, 8, 9, np.uint64(7) ^ CHECK)
        assert rx.pop() is None, "nothing is visible before commit"
        with pytest.raises(BufferError):
            tx.commit()
        with pytest.raises(BufferError):
            tx.push(stamps([0]))
        del record
    tx.commit()
    got = np.zeros(1, dtype=STAMP)
    assert rx.pop_into(got) == 1 and tuple(got[0])[:3] == (7, 8, 9)
    with pytest.raises(ValueError, match="nothing is reserved"):
        tx.commit()
    tx.push(stamps([1]))
    tx.push(stamps([2]))
    assert tx.reserve() is None, "full"


def test_buffers_inside_the_ring_are_refused(shm):
    ring, tx, rx = make(shm)
    slot = tx.reserve()
    with pytest.raises(ValueError, match="own shared memory"):
        rx.pop_into(slot)
    slot.release()
    tx.commit()
    peeked = rx.peek()
    with pytest.raises(ValueError, match="own shared memory"):
        tx.push(peeked)
    assert tx.push(bytes(peeked)), "a copy is fine"


def test_a_view_keeps_the_mapping_and_its_end_until_it_is_dropped(shm):
    ring, tx, rx = make(shm)
    name = ring.name
    tx.push(stamps([5]))
    tx.push(stamps([6]))
    view = rx.peek()
    del ring, tx, rx
    gc.collect()
    assert np.frombuffer(view, dtype=STAMP)["seq"][0] == 5
    again = tame_ipc.Ring.open(name, STAMP.itemsize, 8, elem_align=STAMP.alignment)
    with pytest.raises(tame_ipc.RoleTakenError):
        again.consumer()  # the view holds its end, which holds the role
    del view
    # Freed by reference counting alone (no cycle between the end and its view): the
    # role is free again, and the unreleased message is still the oldest.
    rx = again.consumer()
    assert rx.peek() is not None, "an end dropped with a slot held"
    del rx
    rx = again.consumer()
    assert np.frombuffer(rx.pop(), dtype=STAMP)["seq"][0] == 5


def test_views_block_every_move_of_their_slot(shm):
    ring, tx, rx = make(shm)
    view = tx.reserve()
    with pytest.raises(BufferError, match="push_many"):
        tx.push_many(stamps([1]))
    with pytest.raises(BufferError, match="close"):
        tx.close()
    slot = view.obj
    view.release()
    tx.commit()
    with pytest.raises(BufferError, match="committed"):
        memoryview(slot)  # the consumer's now
    view = rx.peek()
    with pytest.raises(BufferError, match="pop_into"):
        rx.pop_into(np.zeros(1, dtype=STAMP))
    assert len(rx) == 1, "nothing moved"
    view.release()
    assert rx.pop_into(np.zeros(1, dtype=STAMP)) == 1
    tx.reserve().release()
    tx.close()  # a reservation whose views are gone is given up with the role
    with pytest.raises(ValueError, match="closed"):
        tx.commit()


class _TypeSlot(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_int), ("pfunc", ctypes.c_void_p)]


class _TypeSpec(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("basicsize", ctypes.c_int),
        ("itemsize", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("slots", ctypes.POINTER(_TypeSlot)),
    ]


_PY_BF_GETBUFFER = 1  # Include/typeslots.h
_PY_TPFLAGS = (1 << 18) | (1 << 10)  # Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE
_GETBUFFER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_int)
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = (ctypes.py_object, ctypes.c_void_p, ctypes.c_int)
_get_buffer.restype = ctypes.c_int
_from_spec = ctypes.pythonapi.PyType_FromSpec
_from_spec.argtypes = (ctypes.POINTER(_TypeSpec),)
_from_spec.restype = ctypes.py_object
_HOOK_ERRORS: list = []


@_GETBUFFER
def _hooked_getbuffer(obj, view, flags):
    # A ctypes callback that raised would return 0 with the view unfilled: whatever
    # fails is recorded (the test asserts there is nothing) and an empty buffer given.
    try:
        obj.hook()
        return _get_buffer(obj.data, view, flags)
    except BaseException as error:  # noqa: BLE001
        _HOOK_ERRORS.append(error)
        return _get_buffer(bytearray(), view, flags)


_HOOK_SLOTS = (_TypeSlot * 2)(
    _TypeSlot(_PY_BF_GETBUFFER, ctypes.cast(_hooked_getbuffer, ctypes.c_void_p)), _TypeSlot(0, None)
)
_HOOK_SPEC = _TypeSpec(b"tame_ipc_tests.HookedBuffer", 2 * ctypes.sizeof(ctypes.c_void_p), 0, _PY_TPFLAGS, _HOOK_SLOTS)


class GetbufferHook(_from_spec(ctypes.byref(_HOOK_SPEC))):
    """A buffer exporter whose C-level bf_getbuffer runs Python code (`hook`) before it
    exports `data`'s memory: what a class with `__buffer__` is from Python 3.12 on,
    built with ctypes so that the same attack runs on every Python."""

    def __init__(self, hook, data):
        self.hook, self.data = hook, data


class DunderBuffer:
    """The same with the `__buffer__` protocol of Python 3.12+."""

    def __init__(self, hook, data):
        self.hook, self.data = hook, data

    def __buffer__(self, flags):
        self.hook()
        return memoryview(self.data)


# `__buffer__` does not exist before 3.12 (no code calls it: no attack to test there);
# the ctypes exporter is the same attack on every version, so the test always runs.
EXPORTERS = [GetbufferHook] + ([DunderBuffer] if sys.version_info >= (3, 12) else [])


@pytest.mark.parametrize("exporter", EXPORTERS, ids=lambda e: e.__name__)
def test_a_callers_buffer_method_cannot_take_the_slot_being_moved(shm, exporter):
    ring, tx, rx = make(shm)
    taken = []

    def sneaky(slot, data):
        """A buffer whose export runs Python code while the end moves its slot."""

        def take():
            try:
                taken.append(memoryview(slot))
            except BufferError as error:
                taken.append(error)

        return exporter(take, data)

    view = tx.reserve()
    slot = view.obj
    view.release()
    with pytest.raises(ValueError, match="32 B"):
        tx.push(sneaky(slot, bytearray(8)))
    assert isinstance(taken.pop(), BufferError), "the slot was closed before the export ran"
    memoryview(slot).release()  # a failed push keeps the reservation, open again
    assert tx.push(sneaky(slot, bytearray(stamps([1]).tobytes())))
    assert isinstance(taken.pop(), BufferError)
    with pytest.raises(BufferError, match="committed"):
        memoryview(slot)
    view = rx.peek()
    slot = view.obj
    view.release()
    out = bytearray(32)
    assert rx.pop_into(sneaky(slot, out)) == 1
    assert isinstance(taken.pop(), BufferError)
    assert np.frombuffer(bytes(out), dtype=STAMP)["seq"][0] == 1
    assert not taken and not _HOOK_ERRORS, (taken, _HOOK_ERRORS)


def test_a_forked_child_cannot_use_the_parents_ends(shm):
    ring, tx, rx = make(shm)
    reg = tame_ipc.Register.create(shm("reg"), 8)
    ends = {"tx": tx, "rx": rx, "writer": reg.writer()}
    calls = [
        lambda: ends["tx"].push(bytes(32)),
        lambda: ends["tx"].push_many(bytes(32)),
        lambda: ends["tx"].reserve(),
        lambda: ends["tx"].commit(),
        lambda: ends["tx"].close(),
        lambda: ends["rx"].pop(),
        lambda: ends["rx"].pop_into(bytearray(32)),
        lambda: ends["rx"].peek(),
        lambda: ends["rx"].release(),
        lambda: ends["writer"].write(bytes(8)),
        lambda: ends["writer"].close(),
    ]
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never return into pytest
        code = 0
        try:
            for i, call in enumerate(calls):
                try:
                    call()
                    code = code or 10 + i
                except tame_ipc.InheritedError:
                    pass
            ends.clear()  # the child's copies are dropped: the roles must stay the parent's
            gc.collect()
        except BaseException:
            code = 99
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "10+i: call i was not refused"
    assert tx.consumer_state().pid == os.getpid() and rx.producer_state().pid == os.getpid()
    assert reg.reader().writer_state().pid == os.getpid()
    assert tx.push(stamps([3])) and np.frombuffer(rx.pop(), dtype=STAMP)["seq"][0] == 3


def test_roles_are_exclusive_and_closing_gives_them_up(shm):
    ring, tx, rx = make(shm)
    with pytest.raises(tame_ipc.RoleTakenError, match="consumer role"):
        ring.consumer()
    assert rx.producer_state() == "alive" and rx.producer_state().pid == os.getpid()
    assert hash(rx.producer_state()) == hash("alive")
    rx.close()
    with pytest.raises(ValueError, match="closed"):
        rx.pop()
    assert tx.consumer_state() == "absent"
    with ring.consumer() as again:
        assert again.pop() is None
    assert tx.consumer_state().state == "absent"


def test_opening_refuses_what_does_not_match(shm):
    name = shm()
    with pytest.raises(tame_ipc.NotFoundError):
        tame_ipc.Ring.open(name, 32, 8)
    tame_ipc.Ring.create(name, 32, 8)
    with pytest.raises(tame_ipc.AlreadyExistsError):
        tame_ipc.Ring.create(name, 32, 8)
    with pytest.raises(tame_ipc.LayoutMismatchError, match="16 × 32 B"):
        tame_ipc.Ring.open(name, 32, 16)
    assert tame_ipc.Ring.open_any(name).capacity == 8
    with pytest.raises(ValueError, match="invalid segment name"):
        tame_ipc.Ring.create("a/b", 32, 8)
    with pytest.raises(ValueError, match="power of two"):
        tame_ipc.Ring.create(shm("odd"), 32, 6)
    with pytest.raises(ValueError, match="every local user"):
        tame_ipc.Ring.create(shm("open"), 32, 8, mode=0o666)
    with pytest.raises(ValueError, match="negative"):
        tame_ipc.Ring.from_fd(-1, 32, 8)


def test_anonymous_rings_travel_by_descriptor_and_unsealed_ones_are_refused(tmp_path):
    ring = tame_ipc.Ring.create_anonymous(32, 8)
    assert ring.name is None
    other = tame_ipc.Ring.from_fd(ring.fileno(), 32, 8)
    tx, rx = other.producer(), ring.consumer()
    assert tx.push(b"z" * 32) and rx.pop() == b"z" * 32
    plain = tmp_path / "plain"
    plain.write_bytes(b"\0" * 8192)
    with open(plain, "rb+") as f, pytest.raises(tame_ipc.UntrustedError, match="shrink"):
        tame_ipc.Ring.from_fd(f.fileno(), 32, 8)


def test_garbage_from_a_peer_is_reported_not_followed(shm):
    ring, tx, rx = make(shm, capacity=4)
    path = f"/dev/shm/tame.{ring.name}"
    tx.push(stamps([1]))
    data = bytearray(open(path, "rb").read())
    # The first slot's sequence word (after the 32-byte element, slots from 384).
    with open(path, "rb+") as f:
        f.seek(384 + 32)
        f.write((0xDEADBEEF).to_bytes(8, "little"))
    with pytest.raises(tame_ipc.CorruptedError):
        rx.pop()
    with open(path, "rb+") as f:
        f.write(b"garbage!" * 16)
    with pytest.raises(tame_ipc.TameIpcError):
        tame_ipc.Ring.open(ring.name, 32, 4)
    assert data  # the segment was readable as a file: the test wrote where a peer can


def test_a_shrunk_named_ring_cuts_python_off_without_a_crash(shm):
    # In a child: if the SIGBUS guard failed, the child would die, not pytest.
    name = shm()
    script = f"""
import os, tame_ipc
ring = tame_ipc.Ring.create({name!r}, 32, 1024)
tx, rx = ring.producer(), ring.consumer()
tx.push(b"a" * 32)
view = rx.peek()
os.truncate("/dev/shm/tame.{name}", 0)
print("bytes", bytes(view)[:1], "lost", ring.lost)
view.release()
rx.release()  # moves the head only: the zeros that replaced the mapping are not read
print("push", tx.push(b"b" * 32), "pop", rx.pop())
"""
    out = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # The cut-off side goes on in the private memory that replaced the mapping.
    assert "lost True" in out.stdout and "push True pop b'bbbb" in out.stdout, out.stdout
