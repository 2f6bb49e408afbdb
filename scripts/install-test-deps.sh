#!/usr/bin/env bash
# Install what `make unit` needs beyond scripts/install-deps.sh, only where it is missing.
# Debian packages: chromium (the browser tests of crates/tame-testing open pages in it,
# headless, and check their console, requests and pixels: docs/testing.md) and
# fonts-dejavu-core (a font for the text of the pages they draw); man-db, zsh and fish
# (the install test renders each man page and has each shell parse and run its
# completions); python3 (the reproductions test runs bench/reproductions.py, which
# bench/reproduce.sh uses to write docs/reproductions.md; with python3-venv, the venv of the
# tame-ipc Python bindings' tests, scripts/python-venv.sh); prometheus (its promtool checks
# every `tame export prometheus` and `tame serve --metrics` output) and
# prometheus-node-exporter (a test scrapes tame's series from its textfile collector).
# `make run` needs none of them and does not install them.
set -euo pipefail

# The two Prometheus packages start and enable their services on install; the tests start
# their own node_exporter on a loopback port. Those installed here are stopped and disabled
# again, so nothing of theirs stays running (a machine that had them keeps them as they were).
fresh=()
for pkg in prometheus prometheus-node-exporter; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || fresh+=("$pkg")
done
"$(dirname "$0")/install-debian-packages.sh" --no-recommends "for the tests" chromium fonts-dejavu-core man-db zsh fish python3 python3-venv prometheus prometheus-node-exporter
if [ ${#fresh[@]} -gt 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now "${fresh[@]}" >/dev/null 2>&1 || true
fi
