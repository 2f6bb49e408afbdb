#!/usr/bin/env bash
# The tame-ipc Python bindings' tests (crates/tame-ipc-py/tests), run by `make test`:
# builds the venv (scripts/python-venv.sh: the package from this checkout, pytest,
# numpy), then pytest. Under CI=true a test that lacks a tool fails instead of skipping
# (conftest.require, as tame_testing::require does for the Rust tests).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/python-venv.sh | tail -n 1)
# The cargo features make test builds the workspace with (Makefile TEST_FEATURES): the
# tests' own cargo build then reuses what `cargo test` built instead of rebuilding
# tame-ipc, and every crate above it, with other features (conftest.rust_examples).
if [ -z "${TAME_CARGO_FEATURES+set}" ]; then
    TAME_CARGO_FEATURES=$(make -s --no-print-directory -f Makefile --eval 'print-test-features: ; @echo $(TEST_FEATURES)' print-test-features)
    export TAME_CARGO_FEATURES
fi
exec "$python" -m pytest crates/tame-ipc-py/tests -q -p no:cacheprovider "$@"
