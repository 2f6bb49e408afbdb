#!/usr/bin/env bash
# Every benchmark of docs/benchmarks.md, one after the other, on a machine checked to be quiet
# (docs/benchmarks.md, "## Regression gate and run-all"), optionally gated against earlier runs.
#
#   bench/run-all.sh [--out DIR] [--only LIST] [--quick] [--max-load X] [--wait S] [--flag-busy]
#                    [--baseline DIR]… [--threshold FIGURE=RATIO]… [--dry-run]
#
#   --out DIR        results (default a fresh /tmp/tame-run-all.XXXXXX): DIR/BENCH/ holds each
#                    benchmark's JSON results and its output (output.txt); DIR/run-all.json
#                    records, per benchmark, start/end (UTC), 1-minute load average before and
#                    after, whether it ran busy, its exit status and its JSON results
#   --only LIST      comma-separated benchmarks (default all, in this order):
#                    reproduce parity partition-timing partition-effect check noise watch guard ipc python-ipc
#                    reserve assess report
#   --quick          the short counts the scripts have (--quick, fewer rounds and seconds)
#   --max-load X     the 1-minute load average (/proc/loadavg) above which the machine is busy;
#                    default 0.5 per online CPU (1.0 on 2 CPUs): an idle guest shows 0.0–0.3, a
#                    cargo build beside it 2+ per CPU, and a benchmark's own load (stress-ng)
#                    decays below it within about 2 minutes of stopping
#   --wait S         how long to wait for a busy machine to calm before each benchmark (default
#                    300 s: the 1-minute average falls by e in 60 s, from 6 to 0.5 in about 2.5 min)
#   --flag-busy      when it does not calm: run anyway and flag the benchmark busy (default:
#                    refuse — stop, exit 3)
#   --baseline DIR   an earlier run-all DIR; repeat it for several runs. Afterwards every result
#                    JSON with a counterpart of the same name in the baselines is judged by
#                    `tame compare --gate` (verdicts in DIR/gate/BENCH/); exit 1 if one fails
#   --threshold F=R  passed on to every gate (see docs/bench.md, "compare --gate")
#   --dry-run        check the arguments and the load, write DIR/run-all.json, print each
#                    command; run no benchmark (the gates, read-only, still judge results
#                    already in DIR)
#
# Exit: 0 all ran (and every gate passed), 1 a benchmark or a gate failed, 2 bad arguments,
# 3 refused: the machine stayed busy, 130 interrupted. Root, a release build of tame (TAME
# overrides target/release/tame) and what each script needs (stress-ng, rt-tests, gcc). Ctrl-C
# or TERM stops the running benchmark's process group; its own trap reverts what it applied.
# TAME_LOADAVG (a file in /proc/loadavg's format) and TAME_LOAD_POLL (seconds between
# readings, default 10) are for tests.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(reproduce parity partition-timing partition-effect check noise watch guard ipc python-ipc reserve assess report)
TAME=${TAME:-target/release/tame}
LOADAVG=${TAME_LOADAVG:-/proc/loadavg}
POLL=${TAME_LOAD_POLL:-10}

usage() { echo "$1 — see the usage at the top of $0" >&2; exit 2; }
is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }

OUT="" ONLY="" QUICK=0 MAX_LOAD="" WAIT=300 FLAG_BUSY=0 DRY=0
BASELINES=() THRESHOLDS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out|--only|--max-load|--wait|--baseline|--threshold)
            [ $# -ge 2 ] || usage "$1 needs a value"
            case "$1" in
                --out) OUT=$2 ;;
                --only) ONLY=$2 ;;
                --max-load) is_number "$2" || usage "--max-load $2 is not a number (e.g. 1.0)"; MAX_LOAD=$2 ;;
                --wait) [[ $2 =~ ^[0-9]+$ ]] || usage "--wait $2 is not whole seconds"; WAIT=$2 ;;
                --baseline) [ -d "$2" ] || usage "--baseline $2 is not a directory (an earlier run-all --out)"; BASELINES+=("$2") ;;
                --threshold) THRESHOLDS+=(--threshold "$2") ;;
            esac
            shift 2 ;;
        --quick) QUICK=1; shift ;;
        --flag-busy) FLAG_BUSY=1; shift ;;
        --dry-run) DRY=1; shift ;;
        *) usage "unknown argument $1" ;;
    esac
done

if [ -z "$MAX_LOAD" ]; then
    MAX_LOAD=$(awk -v n="$(getconf _NPROCESSORS_ONLN)" 'BEGIN { printf "%.2f", n * 0.5 }')
fi
BENCHES=()
if [ -n "$ONLY" ]; then
    IFS=, read -r -a wanted <<<"$ONLY"
    for b in "${wanted[@]}"; do
        [[ " ${ALL[*]} " == *" $b "* ]] || usage "--only: no benchmark $b (one of: ${ALL[*]})"
    done
    # In the canonical order, each once.
    for b in "${ALL[@]}"; do
        [[ ",$ONLY," == *",$b,"* ]] && BENCHES+=("$b")
    done
else
    BENCHES=("${ALL[@]}")
fi
[ -r "$LOADAVG" ] || usage "cannot read the load average from $LOADAVG"
if [ "$DRY" = 0 ] || [ ${#BASELINES[@]} -gt 0 ]; then
    [ -x "$TAME" ] || usage "no $TAME: cargo build --release -p tame-cli (or set TAME)"
fi
OUT=${OUT:-$(mktemp -d /tmp/tame-run-all.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The command of benchmark $1 (its results go to $2), one word per line for `mapfile`.
command_of() {
    local b=$1 d=$2 q=$QUICK
    case "$b" in
        reproduce) echo bench/reproduce.sh; [ "$q" = 1 ] && echo --quick; printf '%s\n' --out "$d" --doc none ;;
        parity) echo bench/parity.sh; [ "$q" = 1 ] && printf '%s\n' --rounds 1 --seconds 5; printf '%s\n' --out "$d" ;;
        partition-timing) printf '%s\n' env "RUNS=$([ "$q" = 1 ] && echo 3 || echo 7)" bench/partition.sh timing ;;
        partition-effect)
            if [ "$q" = 1 ]; then printf '%s\n' env ROUNDS=1 bench/partition.sh effect 5
            else printf '%s\n' bench/partition.sh effect 30; fi ;;
        check) printf '%s\n' env "RUNS=$([ "$q" = 1 ] && echo 5 || echo 30)" bench/check.sh ;;
        noise) printf '%s\n' env "OUT=$d" bench/noise.sh "$([ "$q" = 1 ] && echo 3 || echo 10)" ;;
        watch) echo bench/watch.sh; [ "$q" = 1 ] && echo --quick; printf '%s\n' --out "$d" ;;
        guard) printf '%s\n' env "DURATION=$([ "$q" = 1 ] && echo 10 || echo 60)" bench/guard.sh "$TAME" ;;
        ipc) echo bench/ipc.sh; [ "$q" = 1 ] && printf '%s\n' --rounds 2 --round-trips 20000 --messages 200000; printf '%s\n' --out "$d" ;;
        python-ipc) echo bench/python-ipc.sh; [ "$q" = 1 ] && printf '%s\n' --rounds 1 --count 1000; printf '%s\n' --out "$d" ;;
        reserve) printf '%s\n' env "RESULT=$d/reserve.json" bench/reserve.sh; [ "$q" = 1 ] && echo --quick; true ;;
        assess) printf '%s\n' "$TAME" assess --out "$d/assess" --json "$d/assess.json"; [ "$q" = 1 ] && printf '%s\n' --duration 3s; true ;;
        report) printf '%s\n' "$TAME" report crates/tame-report/tests/fixtures/recorded/assess.json --out "$d/report" ;;
    esac
}

load_now() { awk '{ print $1 }' "$LOADAVG"; }
busy() { awk -v l="$1" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; }
utc() { date -u +%Y-%m-%dT%H:%M:%SZ; }
json_str() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }

ENTRIES=()
write_record() {
    local i
    {
        printf '{\n  "schema": "tame.run-all/1",\n  "out": %s,\n  "quick": %s,\n  "dry_run": %s,\n' \
            "$(json_str "$OUT")" "$([ "$QUICK" = 1 ] && echo true || echo false)" "$([ "$DRY" = 1 ] && echo true || echo false)"
        printf '  "max_load": %s,\n  "wait_s": %s,\n  "benchmarks": [' "$MAX_LOAD" "$WAIT"
        for i in "${!ENTRIES[@]}"; do
            printf '%s\n    %s' "$([ "$i" -gt 0 ] && echo ,)" "${ENTRIES[$i]}"
        done
        printf '\n  ]\n}\n'
    } >"$OUT/run-all.json.tmp"
    mv "$OUT/run-all.json.tmp" "$OUT/run-all.json"
}

# The result files (common schema, not comparisons or sweeps) below $1, relative to it.
results_in() {
    [ -d "$1" ] || return 0
    (cd "$1" && find . -name '*.json' -type f | sed 's|^\./||' | sort | while read -r f; do
        # A result opens with its schema_version (a sweep or comparison with `schema`).
        head -c 100 "$f" | tr -d ' \n' | grep -q '^{"schema_version"' && echo "$f"
    done) || true
}

# Wait until the load is at most MAX_LOAD, WAIT seconds at most. Sets LOAD and WAITED;
# fails when it stayed busy.
calm() {
    local start=$SECONDS
    LOAD=$(load_now)
    while busy "$LOAD"; do
        if [ $((SECONDS - start)) -ge "$WAIT" ]; then
            WAITED=$((SECONDS - start))
            return 1
        fi
        echo "load average $LOAD > $MAX_LOAD: waiting for the machine to calm ($((SECONDS - start)) of $WAIT s)" >&2
        sleep "$POLL"
        LOAD=$(load_now)
    done
    WAITED=$((SECONDS - start))
}

# Add benchmark $1's entry: load after $2, interrupted $3 (true/false), exit status $4
# (null in a dry run); the command, start, load before and flags from the loop below.
record_bench() {
    local r list="" results=()
    mapfile -t results < <(results_in "$OUT/$1")
    for r in "${results[@]}"; do list+="${list:+, }$(json_str "$1/$r")"; done
    ENTRIES+=("{\"bench\": \"$1\", \"command\": $(json_str "${cmd[*]}"), \"started_utc\": \"$started\", \"ended_utc\": \"$(utc)\", \"load_before\": $before, \"load_after\": $2, \"waited_s\": $WAITED, \"refused\": false, \"busy\": $flag, \"interrupted\": $3, \"exit\": $4, \"dir\": $(json_str "$OUT/$1"), \"results\": [$list]}")
}

CHILD=""
stop() {
    if [ -n "$CHILD" ]; then
        kill -TERM -- "-$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
        CHILD=""
    fi
}
# The benchmark running now: recorded as interrupted when a signal cuts it short.
RUNNING=""
interrupted() {
    stop
    if [ -n "$RUNNING" ]; then
        record_bench "$RUNNING" "$(load_now)" true 130
    fi
    write_record
    echo "interrupted: record in $OUT/run-all.json" >&2
    exit 130
}
trap interrupted INT TERM
trap stop EXIT

STATUS=0
for b in "${BENCHES[@]}"; do
    dir=$OUT/$b
    mapfile -t cmd < <(command_of "$b" "$dir")
    flag=false
    if ! calm; then
        if [ "$FLAG_BUSY" = 1 ]; then
            flag=true
            echo "== $b: load average $LOAD > $MAX_LOAD after $WAITED s: running it flagged busy" >&2
        else
            ENTRIES+=("{\"bench\": \"$b\", \"command\": $(json_str "${cmd[*]}"), \"refused\": true, \"load_before\": $LOAD, \"waited_s\": $WAITED}")
            write_record
            echo "== $b: refused — load average $LOAD > $MAX_LOAD after waiting $WAITED s (--wait, --max-load, or --flag-busy to run anyway); record in $OUT/run-all.json" >&2
            exit 3
        fi
    fi
    before=$LOAD started=$(utc) RUNNING=$b
    echo "== $b: ${cmd[*]} (load $before)"
    rc=0
    if [ "$DRY" = 0 ]; then
        mkdir -p "$dir"
        # Its own process group, so that an interrupt stops all of it (the scripts' traps clean up).
        setsid "${cmd[@]}" >"$dir/output.txt" 2>&1 &
        CHILD=$!
        wait "$CHILD" || rc=$?
        CHILD=""
        [ "$rc" = 0 ] || { STATUS=1; echo "== $b: exit $rc (output in $dir/output.txt)" >&2; }
    fi
    RUNNING=""
    record_bench "$b" "$(load_now)" false "$([ "$DRY" = 1 ] && echo null || echo "$rc")"
    write_record
done

if [ ${#BASELINES[@]} -gt 0 ]; then
    for b in "${BENCHES[@]}"; do
        mapfile -t results < <(results_in "$OUT/$b")
        for r in "${results[@]}"; do
            base=()
            for d in "${BASELINES[@]}"; do
                [ -f "$d/$b/$r" ] && base+=("$d/$b/$r")
            done
            if [ ${#base[@]} = 0 ]; then
                echo "gate $b/$r: no baseline counterpart — not judged"
                continue
            fi
            verdict=$OUT/gate/$b/${r%.json}
            mkdir -p "$(dirname "$verdict")"
            grc=0
            "$TAME" compare --gate "${base[@]}" "$OUT/$b/$r" "${THRESHOLDS[@]}" \
                --json "$verdict.json" >"$verdict.txt" 2>&1 || grc=$?
            case "$grc" in
                0) echo "gate $b/$r: passed" ;;
                1) echo "gate $b/$r: FAILED — $verdict.txt"; STATUS=1 ;;
                *) echo "gate $b/$r: could not judge (exit $grc) — $verdict.txt"; STATUS=1 ;;
            esac
        done
    done
fi
echo "record: $OUT/run-all.json"
exit "$STATUS"
