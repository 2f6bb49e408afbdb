#!/usr/bin/env bash
# Install what tame needs to build, run and test, only where it is missing.
# Debian packages: rt-tests (cyclictest, oslat: the reference tools), stress-ng
# (background load), gcc (the `build` load and the C ABI examples), python3 and
# python3-dev (the workspace includes the Python bindings, crates/tame-ipc-py: pyo3's
# build script runs python3 and links against its headers and library, so a plain
# `cargo build --workspace` or clippy needs them). What only the tests need is in
# scripts/install-test-deps.sh.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        echo "cargo is in $HOME/.cargo/bin but not on PATH: run 'export PATH=\$HOME/.cargo/bin:\$PATH'" >&2
    else
        echo "cargo not found: install a Rust toolchain (https://rustup.rs) and run make again" >&2
    fi
    exit 2
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done

"$(dirname "$0")/install-debian-packages.sh" "" rt-tests stress-ng gcc python3 python3-dev
