"""The rule of conftest.py that under CI=true no test passes by being skipped."""

from __future__ import annotations

import os
import subprocess

from conftest import HERE, PYTHON

SKIPPING = """
import sys
import pytest

@pytest.mark.skipif(sys.version_info > (3,), reason="a skipif mark")
def test_marked():
    pass

def test_skipped_inside():
    pytest.skip("a skip in the body")

@pytest.mark.xfail(reason="an expected failure stays one", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
"""


def run_pytest(tmp_path, ci: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(HERE)}
    args = [PYTHON, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rA"]
    args += ["--rootdir", str(tmp_path), "--confcutdir", str(tmp_path), str(tmp_path)]
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_skip_fails_under_ci_and_is_a_skip_outside(tmp_path):
    outside = run_pytest(tmp_path, "")
    assert outside.returncode == 0, outside.stdout + outside.stderr
    assert "1 passed, 2 skipped, 1 xfailed" in outside.stdout, outside.stdout
    under_ci = run_pytest(tmp_path, "true")
    assert under_ci.returncode == 1, under_ci.stdout + under_ci.stderr
    summary = under_ci.stdout.splitlines()[-1]
    assert "skipped" not in summary and "1 passed" in summary and "1 xfailed" in summary, summary
    for test, reason in (("test_marked", "a skipif mark"), ("test_skipped_inside", "a skip in the body")):
        line = f"test_skipping.py::{test} - skipped (Skipped: {reason}), and CI=true: a skipped test must not pass there"
        assert line in under_ci.stdout, under_ci.stdout
