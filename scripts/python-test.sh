#!/usr/bin/env bash
# The tame-ipc Python bindings' tests (crates/tame-ipc-py/tests), run by `make test`:
# builds the venv (scripts/python-venv.sh: the package from this checkout, pytest,
# numpy), then pytest. Under CI=true a test that lacks a tool fails instead of skipping
# (conftest.require, as tame_testing::require does for the Rust tests).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/python-venv.sh | tail -n 1)
exec "$python" -m pytest crates/tame-ipc-py/tests -q -p no:cacheprovider "$@"
