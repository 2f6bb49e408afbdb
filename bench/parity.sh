#!/usr/bin/env bash
# Side by side, interleaved: tame bench cycle vs cyclictest, and tame bench fwq vs oslat,
# on the same CPU, with and without the same stress-ng load. Prints distributions and ratios.
#
#   bench/parity.sh [--cpu N] [--rounds R] [--seconds S] [--out DIR] [--only cycle|fwq]
#
# Both cycle tools: SCHED_FIFO 95, memory locked, /dev/cpu_dma_latency held at 0 (cyclictest's
# default), intervals 200 µs and 1 ms. Rounds alternate which tool goes first. Needs root.
# cyclictest's main thread (a 10 ms sleep loop) runs on another CPU (--mainaffinity), as tame's
# waiting thread does: on the measured CPU its timer interrupts would serve the deadlines that
# fall inside them and lower cyclictest's minimum (docs/benchmarks.md, parity).
set -euo pipefail
cd "$(dirname "$0")/.."

cpu=0 rounds=3 seconds=20 out="" only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu) cpu=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) echo "unknown option $1 — see the usage at the top of $0" >&2; exit 2 ;;
    esac
done
case "$only" in
    "" | cycle | fwq) ;;
    *) echo "--only takes cycle or fwq, not '$only' — see the usage at the top of $0" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "parity.sh needs root (SCHED_FIFO, mlock, /dev/cpu_dma_latency)" >&2; exit 2; }
main_cpu=""
for c in $(seq 0 $(($(nproc) - 1))); do
    [ "$c" != "$cpu" ] && { main_cpu=$c; break; }
done
out=${out:-$(mktemp -d /tmp/tame-parity.XXXXXX)}
mkdir -p "$out"
scripts/install-deps.sh
cargo build --release -q -p tame-cli
tame=${CARGO_TARGET_DIR:-target}/release/tame

load_pid=""
stop_load() {
    if [ -n "$load_pid" ]; then
        kill -TERM -- "-$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
        load_pid=""
    fi
}
trap stop_load EXIT INT TERM
start_load() {
    # The same mixed load for both tools, on every CPU, in its own process group.
    setsid stress-ng --cpu 2 --io 1 --hdd 1 --hdd-bytes 64M --sock 1 --temp-path /tmp \
        --timeout $((seconds * 8 + 30))s --quiet &
    load_pid=$!
    sleep 1
}

run_cycle_pair() { # interval_us load round
    local i=$1 l=$2 r=$3 tag="cycle-$1us-$2-r$3"
    local tame_cmd=("$tame" bench cycle --cpus "$cpu" --interval "${i}us" --duration "${seconds}s"
        --policy fifo --priority 95 --dma-latency 0 --json "$out/tame-$tag.json")
    local ct_cmd=(cyclictest -t1 -a "$cpu" ${main_cpu:+--mainaffinity="$main_cpu"} -p 95 -i "$i" -d 0 -m -D "${seconds}s" -q -v -N)
    echo "${tame_cmd[*]}" > "$out/tame-$tag.cmd"
    echo "${ct_cmd[*]}" > "$out/ct-$tag.cmd"
    if [ $((r % 2)) -eq 1 ]; then
        "${tame_cmd[@]}" > /dev/null
        "${ct_cmd[@]}" > "$out/ct-$tag.txt"
    else
        "${ct_cmd[@]}" > "$out/ct-$tag.txt"
        "${tame_cmd[@]}" > /dev/null
    fi
}

run_fwq_pair() { # load round
    local l=$1 r=$2 tag="fwq-$1-r$2"
    local quanta=$((seconds * 10000))   # 100 µs quanta: the same wall time as oslat's run
    local fwq_cmd=("$tame" bench fwq --cpus "$cpu" --quantum 100us --quanta "$quanta"
        --policy fifo --priority 95 --json "$out/tame-$tag.json")
    local os_cmd=(oslat -c "$cpu" -f 95 -D "${seconds}" -b 1024 -q "--json=$out/oslat-$tag.json")
    echo "${fwq_cmd[*]}" > "$out/tame-$tag.cmd"
    echo "${os_cmd[*]}" > "$out/oslat-$tag.cmd"
    if [ $((r % 2)) -eq 1 ]; then
        "${fwq_cmd[@]}" > /dev/null
        "${os_cmd[@]}" > /dev/null
    else
        "${os_cmd[@]}" > /dev/null
        "${fwq_cmd[@]}" > /dev/null
    fi
}

for load in idle stress; do
    [ "$load" = stress ] && start_load
    for round in $(seq 1 "$rounds"); do
        if [ "$only" != fwq ]; then
            for interval in 200 1000; do
                run_cycle_pair "$interval" "$load" "$round"
            done
        fi
        [ "$only" = cycle ] || run_fwq_pair "$load" "$round"
    done
    stop_load
done
python3 bench/parity_report.py "$out"
echo "raw results: $out"
