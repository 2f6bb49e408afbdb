#!/usr/bin/env bash
# `tame check` timing (docs/benchmarks.md, "## tame check timing"): the whole audit —
# reading the host model and running every check — on this machine and on the
# generated 256-CPU, 2000-IRQ host. Goal: under 300 ms each.
#
#   bench/check.sh
#
# Needs a release build of tame and of the fixture generator:
#   cargo build --release -p tame-cli && cargo build --release -p tame-testing --example synthetic_host
# (TAME and GEN override the paths). Uses hyperfine when installed, else a timing loop.
# Read-only: it changes nothing on the machine; the generated tree is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
GEN=${GEN:-target/release/examples/synthetic_host}
RUNS=${RUNS:-30}
[ -x "$TAME" ] || { echo "no $TAME: cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }
[ -x "$GEN" ] || { echo "no $GEN: cargo build --release -p tame-testing --example synthetic_host (or set GEN)" >&2; exit 2; }

# tmpfs when available: writing ~23k small files to a VM disk takes seconds, reading is from the page cache either way.
BIG=$(mktemp -d /dev/shm/check-bench.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$BIG"' EXIT INT TERM
"$GEN" big-256 "$BIG"

if command -v hyperfine >/dev/null; then
    hyperfine -N --warmup 3 --runs "$RUNS" \
        -n "tame check (this machine)" "$TAME check" \
        -n "tame check (256 CPUs, 2000 IRQs)" "$TAME --root $BIG check"
else
    for cmd in "$TAME check" "$TAME --root $BIG check"; do
        for _ in 1 2 3; do $cmd >/dev/null; done
        ts=()
        for _ in $(seq "$RUNS"); do
            t0=$(date +%s%N); $cmd >/dev/null; t1=$(date +%s%N)
            ts+=($(( (t1 - t0) / 1000 )))
        done
        printf '%s\n' "${ts[@]}" | sort -n | awk -v c="$cmd" '{a[NR]=$1} END {printf "%s: median %.1f ms, min %.1f ms, max %.1f ms (%d runs)\n", c, a[int((NR+1)/2)]/1000, a[1]/1000, a[NR]/1000, NR}'
    done
fi
