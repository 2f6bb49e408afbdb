"""Fixtures of the tame-ipc Python tests (run by `make test` through scripts/python-test.sh).

- ``require(ok, what)`` mirrors tame_testing::require (docs/testing.md): a test that
  cannot run here is skipped, except under CI=true, where it fails. Under CI=true any
  other skip (a skipif mark, pytest.skip) fails too (``pytest_runtest_makereport``).
- ``shm``: unique segment names; every one is removed after the test, also when it
  fails, and the test fails if any /dev/shm/tame.<its prefix>* is left.
- ``rust_examples``: the stamp producer and consumer of crates/tame-ipc/examples,
  built with cargo (debug) for the whole workspace with make test's features
  (TAME_CARGO_FEATURES, set by scripts/python-test.sh): the units `cargo test` built,
  so nothing is compiled. `-p tame-ipc` alone resolved other features and rebuilt
  tame-ipc, and with it every crate above it at the next `make test` (38 s).
- ``children``: child processes, read line by line; killed (and continued, if
  stopped) after the test whatever happened.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

import tame_ipc

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
REPO = HERE.parents[2]
SHM = Path("/dev/shm")

sys.path.insert(0, str(EXAMPLES))


def _skip_fails_under_ci(report) -> None:
    """Under CI=true a skip from anywhere (a skipif mark, pytest.skip, importorskip)
    becomes a failure, as `require` does: a run that passes there ran every test."""
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CI") == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped ({reason}), and CI=true: a skipped test must not pass there"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _skip_fails_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _skip_fails_under_ci(outcome.get_result())


def require(ok: bool, what: str) -> None:
    """Skip without `what`; under CI=true fail instead (a skipped test must not pass there)."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"needs {what}, and CI=true: a skipped test must not pass there")
    pytest.skip(f"skipped: needs {what}")


class Names:
    """Unique segment names for one test; all removed at its end."""

    _counter = itertools.count()

    def __init__(self) -> None:
        self.prefix = f"pytest-{os.getpid()}-{next(self._counter)}"
        self.made: List[str] = []

    def __call__(self, what: str = "ring") -> str:
        name = f"{self.prefix}.{what}"
        self.made.append(name)
        return name

    def path(self, name: str) -> Path:
        return SHM / f"tame.{name}"

    def cleanup(self) -> List[str]:
        for name in self.made:
            try:
                tame_ipc.unlink(name)
            except tame_ipc.NotFoundError:
                pass
        return sorted(p.name for p in SHM.glob(f"tame.{self.prefix}.*"))


@pytest.fixture
def shm() -> Iterator[Names]:
    names = Names()
    try:
        yield names
    finally:
        left = names.cleanup()
    assert not left, f"segments left in /dev/shm: {left}"


@pytest.fixture(scope="session")
def rust_examples() -> Path:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo/bin/cargo")
    require(Path(cargo).exists(), "cargo (to build the tame-ipc stamp examples)")
    features = os.environ.get("TAME_CARGO_FEATURES", "").split()
    build = [cargo, "build", "-q", "--workspace", *features, "--example", "stamp_producer", "--example", "stamp_consumer"]
    subprocess.run(build, cwd=REPO, check=True)
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"], cwd=REPO, check=True, capture_output=True
    )
    return Path(json.loads(meta.stdout)["target_directory"]) / "debug" / "examples"


class Child:
    """A child process whose stdout is read line by line in the background."""

    def __init__(self, args: List[str], **kwargs) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, **kwargs
        )
        self.lines: List[str] = []
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def expect(self, prefix: str, timeout: float = 20) -> str:
        """The next line starting with `prefix` (fails on exit or timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"{self.args[0]}: no line {prefix!r} within {timeout} s; output: {self.lines}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                pytest.fail(f"{self.args[0]} exited {self.proc.returncode} before {prefix!r}; output: {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def finish(self, timeout: float = 30) -> int:
        """Waits for the exit; the rest of the output is in `lines`."""
        rc = self.proc.wait(timeout=timeout)
        while True:
            line = self._queue.get(timeout=5)
            if line is None:
                return rc
            self.lines.append(line)

    def state(self) -> str:
        """The process state letter of /proc/PID/stat (T: stopped)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        return stat[stat.rindex(")") + 2]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.send_signal(signal.SIGCONT)
            self.proc.wait()


@pytest.fixture
def children() -> Iterator:
    started: List[Child] = []

    def start(args: List[str], **kwargs) -> Child:
        child = Child([str(a) for a in args], **kwargs)
        started.append(child)
        return child

    try:
        yield start
    finally:
        for child in started:
            child.kill()


PYTHON = sys.executable
