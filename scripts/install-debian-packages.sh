#!/usr/bin/env bash
# Install the Debian packages given that are missing; nothing when all are there.
#   scripts/install-debian-packages.sh [--no-recommends] WHAT PKG…
# WHAT names them in messages ("for the tests", or ""). --no-recommends leaves out the
# packages' recommendations (the tests' chromium needs none of its desktop helpers; gcc
# must keep its, libc6-dev among them). Without root it names the apt-get command to run
# and exits 2.
set -euo pipefail

options=()
if [ "${1:-}" = --no-recommends ]; then
    options=(--no-install-recommends)
    shift
fi
what=$1
shift
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages${what:+ $what}: ${missing[*]}; run 'sudo apt-get install ${missing[*]}' and make again" >&2
    exit 2
fi
echo "installing Debian packages${what:+ $what}: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${options[@]}" "${missing[@]}" >/dev/null
