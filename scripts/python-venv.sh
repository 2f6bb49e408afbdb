#!/usr/bin/env bash
# The Python environment of the tame-ipc bindings' tests and bench: a venv in
# target/python (ignored by git; TAME_PYTHON_VENV to put it elsewhere) with maturin,
# pytest, numpy and mypy (its stubtest checks the type hints), pinned in
# crates/tame-ipc-py/requirements-dev.txt and installed from PyPI once (again only
# when that file changes), and the package built from this checkout with the venv's
# maturin (`pip install --no-build-isolation`: no download per build; cargo, release
# build). Run again after changing the bindings: the package is rebuilt and
# reinstalled each time (cargo only rebuilds what changed). Prints the venv's python
# on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TAME_PYTHON_VENV:-target/python}"
python="${PYTHON:-python3}"
requirements=crates/tame-ipc-py/requirements-dev.txt

if ! command -v "$python" >/dev/null; then
    echo "python-venv: $python not found — install python3 (scripts/install-test-deps.sh does)" >&2
    exit 2
fi
# rustup installs cargo in ~/.cargo/bin, which a non-login shell (make, CI) may not
# have on PATH.
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
    echo "python-venv: cargo not found — install a Rust toolchain (scripts/install-deps.sh does)" >&2
    exit 2
fi
# A venv whose pip no longer runs (its python was upgraded or removed, a half-made
# venv) is made again rather than patched.
if [ -d "$venv" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "python-venv: $venv is broken (its pip does not run) — making it again" >&2
    rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        echo "python-venv: '$python -m venv' failed — install python3-venv (scripts/install-test-deps.sh does)" >&2
        exit 2
    fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
# Only when the pinned set changed: a second run costs no download.
stamp="$venv/.requirements-dev.txt"
if ! cmp -s "$requirements" "$stamp"; then
    "${pip[@]}" install -r "$requirements"
    cp "$requirements" "$stamp"
fi
# maturin's build backend runs the `maturin` command: the venv's, on PATH.
PATH="$(cd "$venv/bin" && pwd):$PATH" \
    "${pip[@]}" install --no-build-isolation --force-reinstall --no-deps ./crates/tame-ipc-py
"$venv/bin/python" -c 'import tame_ipc' >/dev/null
echo "$venv/bin/python"
