#!/usr/bin/env bash
# Install what `make unit` needs beyond scripts/install-deps.sh, only where it is missing.
# Debian packages: chromium (the browser tests of crates/tame-testing open pages in it,
# headless, and check their console, requests and pixels: docs/testing.md) and
# fonts-dejavu-core (a font for the text of the pages they draw); man-db, zsh and fish
# (the install test renders each man page and has each shell parse and run its
# completions); python3 (the reproductions test runs bench/reproductions.py, which
# bench/reproduce.sh uses to write docs/reproductions.md; with python3-venv, the venv of the
# tame-ipc Python bindings' tests, scripts/python-venv.sh). `make run` needs none of them and
# does not install them.
set -euo pipefail

"$(dirname "$0")/install-debian-packages.sh" --no-recommends "for the tests" chromium fonts-dejavu-core man-db zsh fish python3 python3-venv
