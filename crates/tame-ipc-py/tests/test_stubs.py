"""The type hints (_native.pyi) match the extension: mypy's stubtest compares every
class, method, signature and constant of the stub with the built module, so a binding
added or changed without its hint fails here."""

from __future__ import annotations

import subprocess

from conftest import PYTHON, require


def test_the_stub_matches_the_extension():
    have_mypy = subprocess.run([PYTHON, "-c", "import mypy.stubtest"], capture_output=True).returncode == 0
    require(have_mypy, "mypy in the test venv (scripts/python-venv.sh installs it)")
    # PEP 800's @disjoint_base is too new for the type checkers of Python 3.9–3.11.
    out = subprocess.run(
        [PYTHON, "-m", "mypy.stubtest", "tame_ipc._native", "--ignore-disjoint-bases"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
