#!/usr/bin/env bash
# The cost of watching (docs/benchmarks.md, "## tame watch: what watching costs the program").
#
#   bench/watch.sh [--rounds N] [--loops N] [--cpu N] [--load] [--quick] [--out DIR]
#
#   Runs cyclictest (-m -p 90 -i 1000, pinned to --cpu, default the last online CPU)
#   --rounds times (default 5) alone and under `tame watch`, interleaved (alone 1,
#   watched 1, alone 2, …), --loops activations each (default 10000), and reads
#   cyclictest's own histogram: the watched program's latency is the judge of what
#   watching costs it. With --load, stress-ng cpu/io/vm runs on every CPU throughout.
#   Prints per round p50/p99/max and tame's own median for the same thread, then
#   the medians over rounds of alone vs watched (difference and ratio) and the median
#   of the rounds' paired differences; writes
#   DIR/summary.json with every figure and DIR/watch-N.json (tame's results).
#   --quick: 3 rounds of 3000.
#
# Needs root (tracefs), a release build of tame (TAME=path to override), cyclictest
# (rt-tests) and python3; stress-ng with --load. Nothing is applied; tracing is
# restored by tame itself.
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
ROUNDS=5 LOOPS=10000 CPU="" LOAD=0 OUT=""
usage() { echo "$1 — see the usage at the top of $0" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage "--rounds needs a count"; ROUNDS=$2; shift ;;
        --loops) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage "--loops needs a count"; LOOPS=$2; shift ;;
        --cpu) [[ ${2:-} =~ ^[0-9]+$ ]] || usage "--cpu needs a CPU number"; CPU=$2; shift ;;
        --out) [ -n "${2:-}" ] || usage "--out needs a directory"; OUT=$2; shift ;;
        --load) LOAD=1 ;;
        --quick) ROUNDS=3 LOOPS=3000 ;;
        *) usage "unknown argument $1" ;;
    esac
    shift
done
[ -x "$TAME" ] || { echo "no $TAME: run cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root: tame watch traces the scheduler" >&2; exit 2; }
command -v cyclictest >/dev/null || { echo "needs cyclictest (apt-get install rt-tests)" >&2; exit 2; }
[ "$LOAD" = 0 ] || command -v stress-ng >/dev/null || { echo "--load needs stress-ng" >&2; exit 2; }
CPU=${CPU:-$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)}
OUT=${OUT:-$(mktemp -d /tmp/tame-watch-bench.XXXXXX)}
mkdir -p "$OUT"
LOAD_PID=
cleanup() { [ -z "$LOAD_PID" ] || { kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null; } || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# -N: latencies, and the histogram's buckets, in ns (200 µs of them; beyond counts as overflow).
CT=(cyclictest -m -q -N -p 90 -i 1000 -a "$CPU" -l "$LOOPS" -h 200000)
if [ "$LOAD" = 1 ]; then
    # Ended by the trap; the timeout only bounds it should this shell be killed.
    stress-ng --cpu 0 --io 1 --vm 1 --vm-bytes 64M --timeout $((ROUNDS * LOOPS / 100 + 120))s >/dev/null 2>&1 &
    LOAD_PID=$!
    sleep 2
fi
for i in $(seq 1 "$ROUNDS"); do
    "${CT[@]}" --histfile "$OUT/alone-$i.hist" >/dev/null
    "$TAME" watch --json "$OUT/watch-$i.json" -- "${CT[@]}" --histfile "$OUT/watched-$i.hist" >"$OUT/watch-$i.txt"
done
python3 - "$OUT" "$ROUNDS" "$LOOPS" "$CPU" "$LOAD" <<'EOF'
import json, statistics, sys
out, rounds, loops, cpu, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"

def hist(path):
    """cyclictest's histogram (-N: one bucket per ns): count, p50, p99 and max in µs."""
    buckets, maximum, overflows = [], None, 0
    for line in open(path):
        if line.startswith("# Max Latencies:"):
            maximum = int(line.split()[-1]) / 1000
        if line.startswith("# Histogram Overflows:"):
            overflows = int(line.split()[-1])
        if line.startswith("#") or not line.strip():
            continue
        ns, n = line.split()[:2]
        if int(n):
            buckets.append((int(ns), int(n)))
    total = sum(n for _, n in buckets) + overflows
    def q(p):
        seen = 0
        for ns, n in buckets:
            seen += n
            if seen >= p * total:
                return round(ns / 1000, 2)
        return None  # beyond the histogram
    return {"count": total, "p50_us": q(0.5), "p99_us": q(0.99), "max_us": maximum}

def tame_p50(path):
    r = json.load(open(path))
    for g in r["groups"]:
        if abs(g["derived"].get("period_ns", 0) - 1e6) < 5e4:
            m = next(m for m in g["metrics"] if m["name"] == "wake_latency")["summary"]
            return {"count": m["count"], "p50_us": m["p50"] / 1000, "p99_us": m["p99"] / 1000}

def f(v, width):
    """A percentile, or where it lies beyond the histogram's 200 µs."""
    return f"{v:>{width}}" if v is not None else f"{'>200':>{width}}"

rows = []
print(f"cyclictest -p 90 -i 1000 on CPU {cpu}, {loops} loops per run, {rounds} rounds{' under stress-ng load' if load else ''}")
print(f"{'round':>5} {'alone p50':>10} {'p99':>7} {'max':>7} | {'watched p50':>11} {'p99':>7} {'max':>7} | {'tame p50':>9}")
for i in range(1, rounds + 1):
    a, w, t = hist(f"{out}/alone-{i}.hist"), hist(f"{out}/watched-{i}.hist"), tame_p50(f"{out}/watch-{i}.json")
    rows.append({"round": i, "alone": a, "watched": w, "tame": t})
    print(f"{i:>5} {f(a['p50_us'], 10)} {f(a['p99_us'], 7)} {a['max_us']:>7} | {f(w['p50_us'], 11)} {f(w['p99_us'], 7)} {w['max_us']:>7} | {t['p50_us']:>9.2f}")
def med(side, key):
    known = [r[side][key] for r in rows if r[side][key] is not None]
    return statistics.median(known) if len(known) == len(rows) else None
summary = {"cpu": cpu, "loops": loops, "rounds": rounds, "load": load, "runs": rows}
for key in ("p50_us", "p99_us"):
    a, w = med("alone", key), med("watched", key)
    if a is None or w is None:
        summary[key] = None
        print(f"median over rounds, {key[:-3]}: beyond the histogram's 200 µs in some round")
        continue
    summary[key] = {"alone": a, "watched": w, "difference": w - a, "ratio": w / a}
    print(f"median over rounds, {key[:-3]}: alone {a:.2f} µs, watched {w:.2f} µs: {w - a:+.2f} µs ({w / a:.2f}×)")
paired = statistics.median(r["watched"]["p50_us"] - r["alone"]["p50_us"] for r in rows)
summary["p50_paired_difference_us"] = paired
print(f"median of the rounds' own differences (each watched run against the alone run before it), p50: {paired:+.2f} µs")
t = statistics.median(r["tame"]["p50_us"] for r in rows)
print(f"tame's own median for the watched thread, median over rounds: {t:.2f} µs (cyclictest says {f(med('watched', 'p50_us'), 0)} µs)")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(f"results in {out}")
EOF
