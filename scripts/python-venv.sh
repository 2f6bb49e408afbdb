#!/usr/bin/env bash
# The Python environment of the tame-ipc bindings' tests and bench: a venv in
# target/python (ignored by git; TAME_PYTHON_VENV to put it elsewhere) with pytest, numpy
# and mypy (its stubtest checks the type hints) from PyPI and the package built from this checkout (`pip install
# ./crates/tame-ipc-py`: maturin and cargo, release build). Run again after changing
# the bindings: the package is rebuilt and reinstalled each time (cargo only rebuilds
# what changed). Prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TAME_PYTHON_VENV:-target/python}"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null; then
    echo "python-venv: $python not found — install python3 (scripts/install-test-deps.sh does)" >&2
    exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        echo "python-venv: '$python -m venv' failed — install python3-venv (scripts/install-test-deps.sh does)" >&2
        exit 2
    fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
# Only what is missing: a second run costs no download.
if ! "$venv/bin/python" -c 'import pytest, numpy, mypy' 2>/dev/null; then
    "${pip[@]}" install pytest numpy mypy
fi
"${pip[@]}" install --force-reinstall --no-deps ./crates/tame-ipc-py
"$venv/bin/python" -c 'import tame_ipc' >/dev/null
echo "$venv/bin/python"
