#!/usr/bin/env bash
# Reservations (docs/benchmarks.md, "## Reservations"): the scheduling-server study
# (overhead O_I/O_E for shares 10…90 %, stability S unloaded and with 0…10 background
# processes of computational and disk-I/O load) for the server, deadline and cgroup backends.
#
#   bench/reserve.sh [--quick] [--append]
#
# Root. Needs a release build of the kit (work kernel, server, harness):
#   cargo build --release -p tame-reserve --bin tame-reserve-kit   (KIT overrides the path)
# and stress-ng. Runs about 8 minutes (--quick: about 1.5). Uses CPU 1 (CPU=… to change);
# BACKENDS=server,deadline,cgroup (the default) chooses the backends.
# Everything it starts is stopped and every reservation released on exit; cgroups it made
# are named tame-reserve-PID and removed. With --append the tables go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

KIT=${KIT:-${CARGO_TARGET_DIR:-target}/release/tame-reserve-kit}
CPU=${CPU:-1}
[ "$(id -u)" = 0 ] || { echo "bench/reserve.sh needs root (real-time policies, cgroups)" >&2; exit 2; }
[ -x "$KIT" ] || { echo "no $KIT: cargo build --release -p tame-reserve --bin tame-reserve-kit (or set KIT)" >&2; exit 2; }
command -v stress-ng >/dev/null || { echo "stress-ng is needed for the background load (apt-get install stress-ng)" >&2; exit 2; }

QUICK=()
APPEND=0
for a in "$@"; do
    case "$a" in
        --quick) QUICK=(--quick) ;;
        --append) APPEND=1 ;;
        *) echo "unknown argument $a (use --quick, --append)" >&2; exit 2 ;;
    esac
done

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT INT TERM
"$KIT" bench "${QUICK[@]}" --cpu "$CPU" --backends "${BACKENDS:-server,deadline,cgroup}" --json "$OUT/reserve.json" --md "$OUT/reserve.md"
cat "$OUT/reserve.md"
if [ "$APPEND" = 1 ]; then
    {
        echo
        echo "## Reservations"
        echo
        echo "Script: \`bench/reserve.sh\` ($(date -u +%Y-%m-%d), $(uname -r)). The work kernel is a 48×48"
        echo "double matrix multiply counted in shared memory and read by wall clock (never rusage)."
        echo
        cat "$OUT/reserve.md"
    } >> docs/benchmarks.md
fi
cp "$OUT/reserve.json" "${RESULT:-/dev/null}" 2>/dev/null || true
# Leftovers would be a bug: say so loudly.
if ls /sys/fs/cgroup/cpu 2>/dev/null | grep -q '^tame-reserve-'; then
    echo "WARNING: tame-reserve-* cgroups left under /sys/fs/cgroup/cpu" >&2
fi
