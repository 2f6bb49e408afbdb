#!/usr/bin/env bash
# Noise attribution benchmark (docs/benchmarks.md, "## Noise attribution").
#
#   bench/noise.sh [SECONDS]   tame bench noise on the CPU a partition isolates, under
#                              stress-ng cpu/io/hdd/sock load: first with the CPU shared
#                              (no partition), then shielded (tame apply SPEC); both
#                              reports, then `tame compare shared partitioned`.
#
# Needs root (tracefs, apply/revert), a release build of tame (TAME=path to
# override) and stress-ng. Everything it applies it reverts, also when interrupted;
# results are kept in OUT (default a fresh /tmp/tame-noise.XXXXXX).
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
SPEC=${SPEC:-examples/isolate-cpu0.toml}
SECS=${1:-10}
OUT=${OUT:-$(mktemp -d /tmp/tame-noise.XXXXXX)}
JOURNAL=$(mktemp -d /tmp/tame-noise-journal.XXXXXX)
# stress-ng --hdd writes here: on disk, so the load makes disk interrupts.
DISK=$(mktemp -d /var/tmp/noisebench-hdd.XXXXXX)
LOAD_PID=

cleanup() {
    [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null && wait "$LOAD_PID" 2>/dev/null
    "$TAME" revert --journal-dir "$JOURNAL" >/dev/null 2>&1 || "$TAME" revert --journal-dir "$JOURNAL"
    rm -rf "$JOURNAL" "$DISK"
}
trap cleanup EXIT INT TERM

[ -x "$TAME" ] || { echo "no $TAME: run cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root: tracefs, apply and revert" >&2; exit 2; }
command -v stress-ng >/dev/null || { echo "needs stress-ng" >&2; exit 2; }

# The isolated CPU of the spec (one CPU).
cpu=$(awk -F'"' '/^cpus/ {c=$2} /role *= *"isolated"/ {print c; exit}' "$SPEC")

for config in shared partitioned; do
    if [ "$config" = partitioned ]; then
        # This shell lands in the system partition; so does the load it starts.
        "$TAME" apply "$SPEC" --journal-dir "$JOURNAL" >/dev/null
    fi
    (cd "$DISK" && exec stress-ng --cpu 1 --io 1 --hdd 1 --hdd-bytes 64M --sock 1 --timeout "$((SECS + 10))s") >/dev/null 2>&1 &
    LOAD_PID=$!
    sleep 1
    # tame runs from the root cpuset (all CPUs): its detector pins itself to the
    # isolated CPU, its trace reader to the others.
    sh -c "echo \$\$ > /sys/fs/cgroup/cpuset/tasks 2>/dev/null; exec \"$TAME\" bench noise --cpus $cpu --duration ${SECS}s --json $OUT/$config.json --gaps $OUT/$config.csv" \
        >"$OUT/$config.txt"
    kill "$LOAD_PID" 2>/dev/null || true
    wait "$LOAD_PID" 2>/dev/null || true
    LOAD_PID=
    if [ "$config" = partitioned ]; then
        "$TAME" revert --journal-dir "$JOURNAL" >/dev/null
    fi
    echo "== $config: $(head -1 "$OUT/$config.txt")"
    sed -n '/^cpu[0-9]*: noise/,$p' "$OUT/$config.txt"
    echo
done
echo "== tame compare $OUT/shared.json $OUT/partitioned.json (classes and sources)"
"$TAME" compare "$OUT/shared.json" "$OUT/partitioned.json" | awk 'NR <= 2 || /noise_share_percent|cpu_available|total/'
echo "results in $OUT"
