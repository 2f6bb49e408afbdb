#!/usr/bin/env bash
# Every headline experiment of the five papers behind tame, as tame commands, on this
# machine: shared (the machine as it is, under load) and partitioned (inside the isolated
# partition of SPEC, the load outside it). docs/reproductions.md puts each beside the paper.
#
#   bench/reproduce.sh [--quick] [--only ID,ID…] [--out DIR] [--doc FILE]
#
#   --quick   seconds per run (about 6 minutes in all); without it the papers' scale where
#             this machine allows (about 50 minutes)
#   --only    run only these experiments (ids below; default all)
#   --out     where the results go (default a fresh /tmp/tame-reproduce.XXXXXX): per
#             experiment ID-shared.json, ID-partitioned.json (or ID.json), ID-compare.json,
#             ID-report/index.html (`tame report`) and ID.mode (quick or full); a directory
#             of an earlier run is reused, so `--only` can rerun some experiments in it
#   --doc     rewrite the measured blocks of this document from the results
#             (bench/reproductions.py; default docs/reproductions.md; --doc none skips it)
#
# Experiments: drops-cycle drops-cache drops-cost detach-fwq detach-loop detach-noise
# baremetal-mem baremetal-ipc rtrf-sleep rtrf-tasks sonic-reserve
#
# Root (apply/revert, real-time policies), a release build of tame (TAME=path to override),
# stress-ng and gcc. SPEC (default examples/isolate-cpu0.toml) names one isolated partition;
# everything applied is reverted, also when interrupted or on error.
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
SPEC=${SPEC:-examples/isolate-cpu0.toml}
QUICK=0
ONLY=
OUT=
DOC=docs/reproductions.md
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --only) ONLY=,$2,; shift ;;
        --out) OUT=$2; shift ;;
        --doc) DOC=$2; shift ;;
        *) echo "unknown argument $1 (use --quick, --only ID,…, --out DIR, --doc FILE|none)" >&2; exit 2 ;;
    esac
    shift
done

[ "$(id -u)" = 0 ] || { echo "bench/reproduce.sh needs root: it applies and reverts a partition and runs real-time threads" >&2; exit 2; }
[ -x "$TAME" ] || { echo "no $TAME: run cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }
for tool in stress-ng gcc python3; do
    command -v "$tool" >/dev/null || { echo "bench/reproduce.sh needs $tool (apt-get install $tool)" >&2; exit 2; }
done
# The isolated partition of SPEC: its name and first CPU.
PART=$(awk -F'"' '/^name/ {n=$2} /role *= *"isolated"/ {print n; exit}' "$SPEC")
CPU=$(awk -F'"' '/^cpus/ {c=$2} /role *= *"isolated"/ {print c; exit}' "$SPEC" | cut -d, -f1 | cut -d- -f1)
[ -n "$PART" ] && [ -n "$CPU" ] || { echo "$SPEC names no isolated partition" >&2; exit 2; }
"$TAME" plan "$SPEC" >/dev/null || { echo "$SPEC does not plan on this machine (see tame plan $SPEC)" >&2; exit 2; }

OUT=${OUT:-$(mktemp -d /tmp/tame-reproduce.XXXXXX)}
mkdir -p "$OUT"
JOURNAL=$(mktemp -d /tmp/tame-reproduce-journal.XXXXXX)
cleanup() {
    "$TAME" revert --journal-dir "$JOURNAL" >/dev/null 2>&1 || "$TAME" revert --journal-dir "$JOURNAL" || true
    rm -rf "$JOURNAL"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$QUICK" = 1 ]; then
    D=5s; QUANTA=3000; SLEEPS=(--duration 5s); STEPS=(--duration 1s); ROUND_TRIPS=50000; MESSAGES=500000
    RESERVE=(--quick); COST=(--duration 3s --rounds 1); BATCHES=200
else
    # The papers' counts where this machine allows: 10,000 quanta and loop periods (detaching),
    # 1,000,000 sleeps (of McKenney's 10,000,000: 100 s at 100 µs), 20,000 sleeps per task count.
    # ipc keeps its own defaults: a million round trips through pipes and sockets under load
    # took over 14 minutes for one configuration.
    D=60s; QUANTA=10000; SLEEPS=(--loops 1000000); STEPS=(--loops 20000); ROUND_TRIPS=200000; MESSAGES=2000000
    RESERVE=(); COST=(--duration 20s --rounds 3); BATCHES=1000
fi
LOAD=cpu,io,hdd,sock

MODE=$([ "$QUICK" = 1 ] && echo quick || echo full)
wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *",$1,"* ]]; }
say() { printf '\n== %s: %s\n' "$1" "$2" >&2; }

# pair ID ARGS…: the bench shared, then inside the applied partition (-p), then both compared
# and drawn. The partition is applied only for the partitioned run.
pair() {
    local id=$1; shift
    "$TAME" "$@" --json "$OUT/$id-shared.json" >/dev/null
    "$TAME" apply "$SPEC" --journal-dir "$JOURNAL" >/dev/null
    "$TAME" "$@" -p "$PART" --journal-dir "$JOURNAL" --json "$OUT/$id-partitioned.json" >/dev/null
    "$TAME" revert --journal-dir "$JOURNAL" >/dev/null
    # tame compare reads single results; a sweep (--tasks 1..12) is compared step by step on the page.
    if ! grep -q '"schema": "tame.sweep/' "$OUT/$id-shared.json"; then
        "$TAME" compare "$OUT/$id-shared.json" "$OUT/$id-partitioned.json" --json "$OUT/$id-compare.json" >/dev/null
    fi
    "$TAME" report "$OUT/$id-shared.json" "$OUT/$id-partitioned.json" -o "$OUT/$id-report" >/dev/null
    echo "$MODE" > "$OUT/$id.mode"
}

# single ID ARGS…: a bench that runs both configurations itself (or has no partitioned one).
single() {
    local id=$1; shift
    "$TAME" "$@" --json "$OUT/$id.json" >/dev/null
    "$TAME" report "$OUT/$id.json" -o "$OUT/$id-report" >/dev/null
    echo "$MODE" > "$OUT/$id.mode"
}

if wanted drops-cycle; then
    say drops-cycle "a 100 µs periodic task beside loaded Linux (DROPS)"
    pair drops-cycle bench cycle --cpus "$CPU" --interval 100us --duration "$D" --load "$LOAD"
fi
if wanted drops-cache; then
    say drops-cache "a 64×64 matrix multiply beside a cache-thrashing competitor (DROPS)"
    pair drops-cache bench cache --cpu "$CPU" --duration "$D"
fi
if wanted drops-cost; then
    say drops-cost "what the partition costs the time-sharing side's throughput (DROPS, real time vs real fast)"
    single drops-cost bench cost --spec "$SPEC" --journal-dir "$JOURNAL" --rt-load "${COST[@]}"
fi
if wanted detach-fwq; then
    say detach-fwq "fixed work quantum, loaded vs isolated (detaching)"
    pair detach-fwq bench fwq --cpus "$CPU" --quantum 1400us --quanta "$QUANTA" --priority 10 --load "$LOAD"
fi
if wanted detach-loop; then
    say detach-loop "a 1 ms control loop with absolute timeouts (detaching)"
    pair detach-loop bench cycle --cpus "$CPU" --interval 1ms --loops "$QUANTA" --priority 10 --load "$LOAD"
fi
if wanted detach-noise; then
    say detach-noise "every gap on the CPU and its cause (detaching)"
    pair detach-noise bench noise --cpus "$CPU" --duration "$D" --load "$LOAD"
fi
if wanted baremetal-mem; then
    say baremetal-mem "memory-access time per buffer size under memory load (bare-metal tasks)"
    pair baremetal-mem bench mem --cpu "$CPU" --batches "$BATCHES" --load vm,cache,stream
fi
if wanted baremetal-ipc; then
    say baremetal-ipc "shared-memory channels between an isolated task and an ordinary process (bare-metal tasks)"
    pair baremetal-ipc bench ipc --round-trips "$ROUND_TRIPS" --messages "$MESSAGES" --rounds 3 --load cpu
fi
if wanted rtrf-sleep; then
    say rtrf-sleep "nanosleep jitter of one task under load (real time vs real fast)"
    pair rtrf-sleep bench sleep --cpus "$CPU" --sleep 100us "${SLEEPS[@]}" --priority 99 --load "$LOAD"
fi
if wanted rtrf-tasks; then
    say rtrf-tasks "nanosleep jitter against 1…12 parallel tasks (real time vs real fast, figure 8)"
    pair rtrf-tasks bench sleep --cpus "$CPU" --tasks 1..12 --sleep 1ms "${STEPS[@]}" --priority 99 --load "$LOAD"
fi
if wanted sonic-reserve; then
    say sonic-reserve "the scheduling server's overhead, stability and periodic client (SONiC)"
    single sonic-reserve bench reserve "${RESERVE[@]}"
fi

echo "results: $OUT" >&2
if [ "$DOC" != none ]; then
    python3 bench/reproductions.py "$OUT" "$DOC" "$MODE"
    echo "updated $DOC" >&2
fi
