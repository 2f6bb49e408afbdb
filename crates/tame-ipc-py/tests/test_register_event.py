"""Registers and event counters, in one process and across processes."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import tame_ipc
from conftest import PYTHON


def test_register_reads_latest_value_with_freshness(shm):
    reg = tame_ipc.Register.create(shm("reg"), 16)
    reader = reg.reader()
    assert reader.read() is None, "never written"
    with reg.writer() as writer:
        writer.write(np.array([1, 2], dtype=np.uint64))
        sample = reader.read()
        assert np.frombuffer(sample.value, dtype=np.uint64).tolist() == [1, 2]
        assert sample.fresh and sample.version == 1
        assert not reader.read().fresh
        writer.write(b"\x03" * 16)
        out = np.zeros(2, dtype=np.uint64)
        assert reader.read_into(out) == (True, 2) and out[0] == 0x0303030303030303
        with pytest.raises(ValueError, match="16 B"):
            writer.write(b"x")
        with pytest.raises(tame_ipc.RoleTakenError):
            reg.writer()
        assert reader.writer_state() == "alive"
    assert reader.writer_state() == "absent"
    read_only = tame_ipc.Register.open(reg.name, 16, read_only=True)
    assert read_only.reader().read().version == 2
    with pytest.raises(tame_ipc.PermissionDeniedError, match="read-only"):
        read_only.writer()


def test_event_wait_releases_the_gil(shm):
    event = tame_ipc.Event.create(shm("event"))
    listener, signaller = event.listener(), event.signaller()
    assert listener.poll() == 0 and listener.wait(0.001) == 0
    signaller.signal()
    signaller.signal()
    assert listener.poll() == 2
    woke = threading.Timer(0.05, signaller.signal_and_wake)
    start = time.monotonic()
    woke.start()
    assert listener.wait(10) == 1, "woken by the other thread, which ran while we slept"
    assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="timeout"):
        listener.wait(-1)


WRITER = """
import sys, numpy as np, tame_ipc
reg = tame_ipc.Register.open(sys.argv[1], 16)
event = tame_ipc.Event.from_fd(int(sys.argv[2]))
writer, signaller = reg.writer(), event.signaller()
print("READY", flush=True)
for i in range(1, 201):
    writer.write(np.array([i, i * i], dtype=np.uint64))
    signaller.signal_and_wake()
print("done", flush=True)
"""


def test_register_and_event_across_processes(shm, children):
    reg = tame_ipc.Register.create(shm("reg"), 16)
    event = tame_ipc.Event.create_anonymous()
    listener, reader = event.listener(), reg.reader()
    fd = event.fileno()
    child = children([PYTHON, "-c", WRITER, reg.name, fd], pass_fds=(fd,))
    child.expect("READY")
    events, last = 0, 0
    deadline = time.monotonic() + 20
    while last < 200 and time.monotonic() < deadline:
        events += listener.wait(1)
        sample = reader.read()
        if sample is not None:
            i, square = np.frombuffer(sample.value, dtype=np.uint64).tolist()
            assert square == i * i, "never a torn value"
            assert i >= last, "never older than what was read before"
            last = i
    assert last == 200 and events >= 1
    assert child.finish() == 0
    assert reader.writer_state() in ("absent", "dead")


def test_wait_takes_any_timeout_and_ctrl_c_interrupts_it():
    event = tame_ipc.Event.create_anonymous()
    listener = event.listener()
    event.signaller().signal()
    assert listener.wait(1e18) == 1, "a huge timeout neither overflows nor waits for nothing"
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="non-negative"):
            listener.wait(bad)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            listener.wait(math.inf)
    finally:
        timer.join()
    assert 0.25 < time.monotonic() - start < 2, "interrupted within a slice of the signal"


def test_register_buffers_of_the_wrong_size_are_refused_before_use(shm):
    reg = tame_ipc.Register.create(shm("reg"), 16)
    reader = reg.reader()
    with reg.writer() as writer:
        for empty in (b"", bytearray(), np.zeros(0, dtype=np.uint8)):
            with pytest.raises(ValueError, match="0 B"):
                writer.write(empty)
            with pytest.raises((ValueError, BufferError, TypeError)):
                reader.read_into(empty)
        writer.write(bytes(range(16)))
    out = bytearray(16)
    assert reader.read_into(out) == (True, 1) and bytes(out) == bytes(range(16))
    with pytest.raises(ValueError, match="0 B"):
        reader.read_into(bytearray())


# Each read-only open of the name (a FIFO), in a child: a hang there cannot hang pytest.
FIFO_OPENS = """
import sys, tame_ipc
for label, open_ in (
    ("Register", lambda: tame_ipc.Register.open(sys.argv[1], 8, read_only=True)),
    ("Event", lambda: tame_ipc.Event.open(sys.argv[1], read_only=True)),
):
    try:
        open_()
        print(label, "opened", flush=True)
    except tame_ipc.TameIpcError as e:
        print(label, type(e).__name__, e, flush=True)
"""


def test_read_only_opens_refuse_a_planted_fifo_without_blocking(shm):
    # Any local user can make a FIFO in /dev/shm under a segment's name: a read-only
    # open blocked in open(2) for a writer that never came.
    name = shm("fifo")
    os.mkfifo(shm.path(name), 0o600)
    try:
        done = subprocess.run([PYTHON, "-c", FIFO_OPENS, name], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("a read-only open of a planted FIFO still blocked after 10 s")
    finally:
        shm.path(name).unlink()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["Register", "UntrustedError"], ["Event", "UntrustedError"]], lines
    assert all("not a regular file" in line for line in lines), lines
