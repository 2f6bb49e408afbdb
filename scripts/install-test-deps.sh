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
# prometheus-node-exporter (a test scrapes tame's series from its textfile collector);
# kubernetes-client (kubectl: the Kubernetes manifests test decodes every manifest with it and
# dry-runs them against a stand-in API server), only where no kubectl is on PATH — a newer one
# (e.g. the Google Cloud SDK's) is used as it is, and its package would clash with Debian's.
# `make run` needs none of them and does not install them.
set -euo pipefail

# The two Prometheus packages start and enable their services on install (through
# invoke-rc.d, which asks /usr/sbin/policy-rc.d first); the tests start their own
# node_exporter on a loopback port. Where no policy-rc.d exists, one that answers 101
# ("action forbidden") is put there for the install and removed after it, on failure or
# interrupt too, so neither service ever starts. A machine with its own policy-rc.d keeps it.
fresh=()
for pkg in prometheus prometheus-node-exporter; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || fresh+=("$pkg")
done
policy=/usr/sbin/policy-rc.d
if [ ${#fresh[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ] && [ ! -e "$policy" ] && [ ! -L "$policy" ]; then
    trap 'rm -f "$policy"' EXIT
    trap 'exit 130' INT TERM HUP
    printf '#!/bin/sh\n# Put here by tame scripts/install-test-deps.sh for one install; removed after it.\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
fi
kubectl=()
command -v kubectl >/dev/null 2>&1 || kubectl=(kubernetes-client)
"$(dirname "$0")/install-debian-packages.sh" --no-recommends "for the tests" chromium fonts-dejavu-core man-db zsh fish python3 python3-venv prometheus prometheus-node-exporter "${kubectl[@]}"
# Where an existing policy-rc.d allowed them to start (or on a host where they started before
# tame's policy existed): stop and disable the ones installed here; any installed before
# are left as they were.
if [ ${#fresh[@]} -gt 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now "${fresh[@]}" >/dev/null 2>&1 || true
fi
