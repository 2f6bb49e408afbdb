#!/usr/bin/env bash
# One-way latency from a periodic real-time-style Rust producer to a Python consumer,
# beside the same producer to a Rust consumer (the floor), interleaved round by round.
#
#   bench/python-ipc.sh [--rounds 3] [--count 2000] [--period-us 1000] [--sleep-us 0]
#                       [--producer-cpu 0] [--consumer-cpu 1] [--producer-fifo 80] [--out DIR]
#
# The producer (crates/tame-ipc/examples/stamp_producer.rs, release) sleeps to absolute
# deadlines (clock_nanosleep; the real-time side: SCHED_FIFO PRIO as root, no busy loop,
# --producer-fifo 0 for SCHED_OTHER) on its own CPU, the consumer on another (taskset; an
# empty CPU list leaves either unpinned: two unpinned threads on two vCPUs often share one,
# and the tail then measures the scheduler's time slice, not the channel) and stamps
# CLOCK_MONOTONIC into each 32-byte message of a named ring; the consumer subtracts that
# from its own clock reading after popping (Python: stamp_consumer.py, numpy batches
# with pop_into; Rust: stamp_consumer.rs, typed pops). Between empty polls each consumer
# spins (--sleep-us 0, at normal priority) or sleeps SLEEP_US. Every message is checked
# (in order, intact, lost only where the producer reported the ring full).
# Prints a table of p50, p90, p99, p99.9 and max (µs) per consumer over all rounds, and
# the per-round medians; DIR keeps the raw latencies (ns, one per line). Every segment
# it creates is removed, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 count=2000 period_us=1000 sleep_us=0 out="" producer_cpu=0 consumer_cpu=1
producer_fifo=$([ "$(id -u)" = 0 ] && echo 80 || echo 0)
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --period-us) period_us=$2; shift 2 ;;
        --sleep-us) sleep_us=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --producer-cpu) producer_cpu=$2; shift 2 ;;
        --consumer-cpu) consumer_cpu=$2; shift 2 ;;
        --producer-fifo) producer_fifo=$2; shift 2 ;;
        *) echo "unknown option $1 — see the usage at the top of $0" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/tame-python-ipc.XXXXXX)}
mkdir -p "$out"

cargo build --release -q -p tame-ipc --example stamp_producer --example stamp_consumer
examples="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/examples"
python=$(scripts/python-venv.sh | tail -n 1)

name="bench-python-ipc-$$"
consumer_pid=
cleanup() {
    # A consumer still running (the bench failed or was interrupted) goes first.
    if [ -n "$consumer_pid" ]; then kill "$consumer_pid" 2>/dev/null || true; wait "$consumer_pid" 2>/dev/null || true; consumer_pid=; fi
    "$python" -c "import tame_ipc, sys
try: tame_ipc.unlink(sys.argv[1])
except tame_ipc.NotFoundError: pass" "$name"
}
trap cleanup EXIT
trap "exit 130" INT TERM  # exits through the EXIT trap (cleanup once)

# Placement prefixes: taskset when a CPU is given, chrt for a real-time producer.
on_cpu() { if [ -n "$1" ]; then echo taskset -c "$1"; fi; }
read -ra producer_place <<< "$(on_cpu "$producer_cpu") $([ "$producer_fifo" != 0 ] && echo chrt -f "$producer_fifo")"
read -ra consumer_place <<< "$(on_cpu "$consumer_cpu")"
echo "producer: ${producer_place[*]:-unpinned, SCHED_OTHER}; consumer: ${consumer_place[*]:-unpinned}"

run() { # consumer round
    local consumer=$1 round=$2 file="$out/$1-$2.ns"
    "$python" -c "import tame_ipc, sys; tame_ipc.Ring.create(sys.argv[1], 32, 1024)" "$name"
    local common=(--name "$name" --capacity 1024 --count "$count" --sleep-us "$sleep_us" --latency-out "$file")
    if [ "$consumer" = python ]; then
        "${consumer_place[@]}" "$python" crates/tame-ipc-py/examples/stamp_consumer.py "${common[@]}" > "$out/$consumer-$round.log" &
    else
        "${consumer_place[@]}" "$examples/stamp_consumer" "${common[@]}" > "$out/$consumer-$round.log" &
    fi
    consumer_pid=$!
    local pid=$consumer_pid log="$out/$consumer-$round.log" deadline=$((SECONDS + 60))
    # The consumer says READY once attached; one that exits first (a bad argument, a
    # missing module) or hangs fails the bench instead of stalling it.
    until grep -q READY "$log" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "python-ipc: the $consumer consumer exited before it was ready — its log ($log):" >&2
            cat "$log" >&2
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "python-ipc: the $consumer consumer was not ready after 60 s — see $log" >&2
            exit 1
        fi
        sleep 0.05
    done
    "${producer_place[@]}" "$examples/stamp_producer" --name "$name" --capacity 1024 --count "$count" --period-us "$period_us" \
        --wait-consumer | grep '^sent' | sed "s/^/$consumer round $round producer: /"
    wait "$pid"
    consumer_pid=
    sed -n 's/^received/'"$consumer round $round"': received/p' "$out/$consumer-$round.log"
    cleanup
}

for round in $(seq 1 "$rounds"); do
    # Alternate which consumer goes first, so drift in the machine's load favours neither.
    if [ $((round % 2)) -eq 1 ]; then order="python rust"; else order="rust python"; fi
    for consumer in $order; do run "$consumer" "$round"; done
done

"$python" - "$out" "$rounds" <<'PY'
import sys
from pathlib import Path
import numpy as np
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
qs = [("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)]
print(f"\none-way latency (µs), {rounds} rounds pooled")
print("| consumer | messages | " + " | ".join(q for q, _ in qs) + " | max | round medians |")
print("|---|---:|" + "---:|" * (len(qs) + 1) + "---|")
for consumer in ("rust", "python"):
    per_round = [np.loadtxt(out / f"{consumer}-{r}.ns", dtype=np.int64, ndmin=1) for r in range(1, rounds + 1)]
    ns = np.concatenate(per_round) / 1000
    cells = " | ".join(f"{np.percentile(ns, q):.1f}" for _, q in qs)
    medians = ", ".join(f"{np.median(r) / 1000:.1f}" for r in per_round)
    print(f"| {consumer} | {len(ns)} | {cells} | {ns.max():.1f} | {medians} |")
print(f"\nraw latencies in {out}")
PY
