#!/usr/bin/env bash
# Install what `make unit` needs beyond scripts/install-deps.sh, only where it is missing.
# Debian packages: chromium (the browser tests of crates/tame-testing open pages in it,
# headless, and check their console, requests and pixels: docs/testing.md) and
# fonts-dejavu-core (a font for the text of the pages they draw); man-db, zsh and fish
# (the install test renders each man page and has each shell parse and run its
# completions). `make run` needs none of them and does not install them.
set -euo pipefail

wanted=(chromium fonts-dejavu-core man-db zsh fish)
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing Debian packages for the tests: ${missing[*]}; run 'sudo apt-get install ${missing[*]}' and make again" >&2
        exit 2
    fi
    echo "installing Debian packages for the tests: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
